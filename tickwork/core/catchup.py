"""Runs missed while nobody was watching, and which one (if any) to start late.

When the watcher comes back after a pause (restart, leader change, resume of
a suspended job is *not* one: resume starts from now), several runs may have
fallen due. Like CronJob, Tickwork starts at most one of them — the latest —
and only if it is still within ``startingDeadlineSeconds``; the rest are
counted as missed and reported. The count uses the schedule's arithmetic
(O(days)), never a walk over every missed slot.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tickwork.core.schedule import Schedule


@dataclass(frozen=True)
class CatchUp:
    """What to do about the runs due in ``(last_scheduled, now]``."""

    run: dt.datetime | None
    """The scheduled instant to start now, or None."""
    missed: int
    """Runs that will not happen."""
    latest_missed: dt.datetime | None
    """The latest of the missed runs, for status and the Event."""


NOTHING_DUE = CatchUp(run=None, missed=0, latest_missed=None)


def catch_up(
    schedule: Schedule,
    *,
    last_scheduled: dt.datetime,
    now: dt.datetime,
    starting_deadline_seconds: int | None,
) -> CatchUp:
    """Decide about the runs due after ``last_scheduled`` up to ``now``."""
    due = schedule.count_runs_between(last_scheduled, now)
    if due == 0:
        return NOTHING_DUE
    latest = schedule.last_run_at_or_before(now)
    assert latest is not None  # noqa: S101 - due > 0 guarantees a run at or before now
    within_deadline = (
        starting_deadline_seconds is None
        or (now - latest).total_seconds() <= starting_deadline_seconds
    )
    if within_deadline:
        previous = None
        if due > 1:
            previous = schedule.last_run_at_or_before(latest - dt.timedelta(microseconds=1))
        return CatchUp(run=latest, missed=due - 1, latest_missed=previous)
    return CatchUp(run=None, missed=due, latest_missed=latest)
