"""What to do with a job's buffered runs (``concurrencyPolicy`` BufferOne, BufferAll,
CancelOther): a decision from the buffer and the job's state, with no effect.
``WaitingRuns._act_on_waiting`` (waiting.py) carries it out (publishes,
writes status, posts the Event); tests/unit/test_buffer_plan.py drives it by a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.api.models import BufferedRun


@dataclass(frozen=True, slots=True)
class DropAll:
    """The job will not run them: each is counted missed, and an Event says why."""

    runs: tuple[BufferedRun, ...]
    why: str


@dataclass(frozen=True, slots=True)
class PublishHead:
    """No run is active: publish the oldest; the rest keep waiting."""

    head: BufferedRun
    rest: tuple[BufferedRun, ...]


def buffer_plan(
    waiting: Sequence[BufferedRun], *, valid: bool, suspended: bool, paused: bool, active: bool
) -> DropAll | PublishHead | None:
    """None: nothing waits, or a run is active (the head is published when status shows
    it ended). An invalid, suspended or paused job drops them all."""
    if not waiting:
        return None
    if not valid or suspended or paused:
        why = (
            "the spec is invalid"
            if not valid
            else "the job is suspended"
            if suspended
            else "the job is paused after failed runs"
        )
        return DropAll(tuple(waiting), why)
    if active:
        return None
    return PublishHead(waiting[0], tuple(waiting[1:]))
