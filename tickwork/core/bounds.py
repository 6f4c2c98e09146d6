"""A schedule within bounds: ``spec.notBefore`` and ``spec.notAfter``.

No run is due before ``not_before`` or after ``not_after`` (both inclusive: a
run due exactly at either bound happens). Any schedule can be bounded — cron
in its zone, or an interval — because the bounds only clip the questions the
watcher asks (:class:`~tickwork.core.schedule.Schedule`), in O(1) on top of
the schedule's own answers: the next run, the last run, and how many runs fall
in a window (missed runs are still counted in O(days), never per run).

A run due before ``not_after`` that could not start in time (no watcher ran)
may still start late, within ``startingDeadlineSeconds``, like any late run;
once the schedule has no run left, the job's lifecycle is ``Completed``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tickwork.core.schedule import Schedule

_EPSILON = dt.timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class BoundedSchedule:
    """``schedule`` with its runs before ``not_before`` and after ``not_after`` removed."""

    schedule: Schedule
    not_before: dt.datetime | None = None
    not_after: dt.datetime | None = None

    def __post_init__(self) -> None:
        for bound in (self.not_before, self.not_after):
            if bound is not None and bound.tzinfo is None:
                raise ValueError("bounds must be timezone-aware")
        if self.not_before and self.not_after and self.not_after <= self.not_before:
            raise ValueError("not_after must be later than not_before")

    def _within(self, moment: dt.datetime | None) -> dt.datetime | None:
        if moment is None:
            return None
        if self.not_before is not None and moment < self.not_before:
            return None
        if self.not_after is not None and moment > self.not_after:
            return None
        return moment

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        if self.not_before is not None and moment < self.not_before:
            moment = self.not_before - _EPSILON  # the first run at or after the bound
        if self.not_after is not None and moment >= self.not_after:
            return None
        return self._within(self.schedule.next_run_after(moment))

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        if self.not_after is not None and moment > self.not_after:
            moment = self.not_after
        if self.not_before is not None and moment < self.not_before:
            return None
        return self._within(self.schedule.last_run_at_or_before(moment))

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        """Runs in ``(after, until]`` that are within the bounds."""
        if self.not_before is not None and after < self.not_before:
            after = self.not_before - _EPSILON
        if self.not_after is not None and until > self.not_after:
            until = self.not_after
        if until <= after:
            return 0
        return self.schedule.count_runs_between(after, until)


def bounded(
    schedule: Schedule, *, not_before: dt.datetime | None, not_after: dt.datetime | None
) -> Schedule:
    """``schedule`` within the bounds, or ``schedule`` itself when there are none."""
    if not_before is None and not_after is None:
        return schedule
    return BoundedSchedule(schedule, not_before=not_before, not_after=not_after)
