"""Runs that fail in a row, and the pause they lead to (``spec.failurePolicy.pauseAfter``).

The operator folds the finished runs that status shows into a :class:`Streak`
each time it sees the job. A run that failed for good adds one, a run that
succeeded sets the count back to zero; a Skipped or Cancelled run did not try
the task, so it tells nothing either way and leaves the count alone. Runs are
taken in the order they finished, each once: the streak remembers up to where it
has counted (``counted_until``, an instant the workers wrote, so every replica
of the operator counts alike) and the IDs of the runs in the streak (a dead run
requeued by hand that fails again is the same run, not one more).

When the count reaches ``pauseAfter`` the job pauses: no run is published until
a person resumes it (the ``tickwork.dev/resume`` annotation) or changes the
spec; both start a new streak, from the runs that finished after. While paused
the streak stands still, naming the runs that paused the job: a run that was
already under way and ends meanwhile (it may even succeed) changes nothing, as
a person decides when the job runs again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tickwork.core.annotations import RESUME_ANNOTATION
from tickwork.core.states import RunState

#: Run IDs a streak keeps (the newest): what its condition and Event name.
STREAK_RUN_IDS = 10


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """A run as status shows it once it ended."""

    run_id: str
    outcome: RunState
    finished_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Streak:
    """Runs in a row that failed for good, counted up to ``counted_until``."""

    count: int = 0
    run_ids: tuple[str, ...] = ()
    """The newest failed runs of the streak (at most :data:`STREAK_RUN_IDS`), oldest first."""
    counted_until: dt.datetime | None = None
    """Runs that finished at or before this instant are counted already."""
    paused_at: dt.datetime | None = None
    """When the run that made the count reach ``pauseAfter`` finished."""

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


def follow(streak: Streak, finished: Iterable[FinishedRun], *, pause_after: int) -> Streak:
    """``streak`` with the runs finished since it last counted; paused once the count
    reaches ``pause_after``, and then it stands still (see :func:`restart`)."""
    if streak.paused:
        return streak
    since = streak.counted_until
    latest: dict[str, FinishedRun] = {}  # status shows a run twice: lastRun and runs
    for run in finished:
        if run.run_id not in latest or run.finished_at > latest[run.run_id].finished_at:
            latest[run.run_id] = run
    fresh = sorted(
        (run for run in latest.values() if since is None or run.finished_at > since),
        key=lambda run: (run.finished_at, run.run_id),
    )
    for run in fresh:
        if run.outcome is RunState.SUCCEEDED and streak.count > 0:
            streak = replace(streak, count=0, run_ids=(), counted_until=run.finished_at)
        elif run.outcome is RunState.FAILED and run.run_id not in streak.run_ids:
            streak = replace(
                streak,
                count=streak.count + 1,
                run_ids=(*streak.run_ids, run.run_id)[-STREAK_RUN_IDS:],
                counted_until=run.finished_at,
            )
            if streak.count >= pause_after:
                return replace(streak, paused_at=run.finished_at)
        # Otherwise nothing changes (a success with no streak, a skip): nor need the
        # instant, which keeps status still while the job runs well.
    return streak


def restart(finished: Iterable[FinishedRun]) -> Streak:
    """A new streak, after every run finished so far: for a new spec or a resume."""
    return Streak(counted_until=max((run.finished_at for run in finished), default=None))


def describe_pause(streak: Streak, pause_after: int) -> str:
    """Why the job is paused and how to go on, for its condition and its Event."""
    named = ", ".join(streak.run_ids)
    which = (
        f"the last {len(streak.run_ids)}: {named}" if streak.count > len(streak.run_ids) else named
    )
    return (
        f"paused after {streak.count} consecutive failed runs (failurePolicy.pauseAfter "
        f"{pause_after}; {which}): no run is published until the job is resumed "
        f"(kubectl tickwork resume, or a new {RESUME_ANNOTATION} token) or its spec changes"
    )
