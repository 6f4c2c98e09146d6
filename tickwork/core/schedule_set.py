"""Several schedules as one (``spec.schedules``): a job runs at every instant any of
them names, once per instant.

Two entries that name the same instant (``0 9 * * *`` and ``0 9 * * 1``, or a cron
and an interval that meet) make one run: run IDs name the job and the instant only
(:func:`tickwork.core.runs.scheduled_run_id`), so the run is the same whichever entry
named it, and reordering the list changes no run.

Counting the runs of a range walks the instants of every entry, merged, which costs
one step a run; past :data:`COUNT_LIMIT` runs the count is their sum (an instant that
two entries share is counted twice there). A count that large is a missed-run figure
after a long outage, or a backfill that is refused for being far over its limit.
"""

from __future__ import annotations

import datetime as dt
import heapq
from dataclasses import dataclass

from tickwork.core.schedule import Schedule

#: The most runs :meth:`ScheduleSet.count_runs_between` merges one by one.
COUNT_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class ScheduleSet:
    """The union of ``schedules`` (two or more)."""

    schedules: tuple[Schedule, ...]

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        found = [s.next_run_after(moment) for s in self.schedules]
        return min((f for f in found if f is not None), default=None)

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        found = [s.last_run_at_or_before(moment) for s in self.schedules]
        return max((f for f in found if f is not None), default=None)

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        """Distinct instants in ``(after, until]`` (see the module's text past
        :data:`COUNT_LIMIT`)."""
        counts = [s.count_runs_between(after, until) for s in self.schedules]
        total = sum(counts)
        if total > COUNT_LIMIT or sum(1 for c in counts if c) < 2:  # noqa: PLR2004
            return total
        return self._distinct(after, until)

    def _distinct(self, after: dt.datetime, until: dt.datetime) -> int:
        """How many distinct instants ``(after, until]`` holds, the entries' runs merged."""
        heads: list[tuple[dt.datetime, int]] = []
        for number, schedule in enumerate(self.schedules):
            first = schedule.next_run_after(after)
            if first is not None and first <= until:
                heads.append((first, number))
        heapq.heapify(heads)
        count, last = 0, None
        while heads:
            moment, number = heapq.heappop(heads)
            if moment != last:
                count, last = count + 1, moment
            following = self.schedules[number].next_run_after(moment)
            if following is not None and following <= until:
                heapq.heappush(heads, (following, number))
        return count


def union(schedules: list[Schedule]) -> Schedule:
    """One schedule of ``schedules``: the only one, or their :class:`ScheduleSet`."""
    if not schedules:
        raise ValueError("a union needs at least one schedule")
    return schedules[0] if len(schedules) == 1 else ScheduleSet(tuple(schedules))
