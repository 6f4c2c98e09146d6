"""Calendars: sets of days on a time zone's wall clock, and a schedule kept off them
("not on these days") or on them only ("only on these days").

A calendar's days are whole local days of its own zone: listed dates, ranges of dates
(both ends included), and patterns of cron's three day fields (``day-of-month month
day-of-week``, read as cron reads them: ``* * sat,sun`` is every weekend, ``25 12 *``
every Christmas Day, and with both day fields restricted a day matching either). A run
is kept when no calendar it must stay off holds its instant's local day, and every
calendar it must stay on does.

:class:`OnDays` answers the questions every schedule answers. A run on a day a
calendar rules out is passed over with the rest of that day at once, so a question
costs one step per day ruled out in a row, not one per run; a schedule whose calendars
leave no day within :data:`HORIZON_DAYS` has no next (or last) run. Counting the runs
of a window walks them, up to :data:`~tickwork.core.schedule_set.COUNT_LIMIT`, past
which the schedule's own count stands (an upper bound).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass

from tickwork.core import civil
from tickwork.core.cron import CronExpression, parse_cron
from tickwork.core.errors import InvalidSpecError
from tickwork.core.schedule import Schedule
from tickwork.core.schedule_set import COUNT_LIMIT

#: How many days in a row the calendars may rule out before a schedule has no run.
HORIZON_DAYS = 4000
_EPSILON = dt.timedelta(microseconds=1)


def day_pattern(text: str) -> CronExpression:
    """Cron's three day fields (``day-of-month month day-of-week``), parsed as cron
    parses them, or an InvalidSpecError saying what to fix."""
    if len(text.split()) != 3:  # noqa: PLR2004 - cron's three day fields
        raise InvalidSpecError(
            f"{text!r} is not three fields: day-of-month month day-of-week, "
            "as in cron (like '* * sat,sun' or '25 12 *')",
            field="days",
        )
    try:
        return parse_cron(f"0 0 {text}")
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"{text!r}: {exc.args[0]}", field="days") from None


@dataclass(frozen=True, slots=True)
class DaySet:
    """The days of a calendar on the wall clock of ``zone``."""

    name: str
    zone: zoneinfo.ZoneInfo
    dates: frozenset[int] = frozenset()
    """Day numbers (:func:`tickwork.core.civil.days_from_civil`)."""
    ranges: tuple[tuple[int, int], ...] = ()
    """First and last day numbers, both included."""
    patterns: tuple[CronExpression, ...] = ()

    def holds(self, day: int) -> bool:
        if day in self.dates or any(first <= day <= last for first, last in self.ranges):
            return True
        _, month, day_of_month = civil.civil_from_days(day)
        return any(month in p.months and p.matches_day(day, day_of_month) for p in self.patterns)

    def day_of(self, moment: dt.datetime) -> int:
        """The local day of ``moment`` (aware)."""
        local = moment.astimezone(self.zone)
        return civil.days_from_civil(local.year, local.month, local.day)

    def start_of(self, day: int) -> dt.datetime:
        """The first instant of the local ``day``, in UTC (where the day starts in a
        gap of the clock, the instant the gap starts)."""
        year, month, day_of_month = civil.civil_from_days(day)
        return dt.datetime(year, month, day_of_month, tzinfo=self.zone).astimezone(dt.UTC)


@dataclass(frozen=True, slots=True)
class CalendarRule:
    """Keep a schedule off the days of ``days``, or (``only``) on them only."""

    days: DaySet
    only: bool = False

    def allows(self, moment: dt.datetime) -> bool:
        return self.days.holds(self.days.day_of(moment)) == self.only


@dataclass(frozen=True, slots=True)
class OnDays:
    """``schedule`` with the runs its calendars rule out taken away."""

    schedule: Schedule
    rules: tuple[CalendarRule, ...]

    def ruled_out_by(self, moment: dt.datetime) -> CalendarRule | None:
        """The first rule that takes the run at ``moment`` away, if any."""
        for rule in self.rules:
            if not rule.allows(moment):
                return rule
        return None

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        return self._first_kept(self.schedule.next_run_after(moment), self._after_its_day)

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        return self._first_kept(self.schedule.last_run_at_or_before(moment), self._before_its_day)

    def _first_kept(
        self, run: dt.datetime | None, past: Callable[[DaySet, dt.datetime], dt.datetime | None]
    ) -> dt.datetime | None:
        """From ``run`` on, the first run no rule takes away; ``past`` gives the run to look
        at next, past the day of the calendar that took one away."""
        for _ in range(HORIZON_DAYS):
            if run is None:
                return None
            rule = self.ruled_out_by(run)
            if rule is None:
                return run
            run = past(rule.days, run)
        return None

    def _after_its_day(self, days: DaySet, run: dt.datetime) -> dt.datetime | None:
        following = days.start_of(days.day_of(run) + 1)
        return self.schedule.next_run_after(max(following - _EPSILON, run))

    def _before_its_day(self, days: DaySet, run: dt.datetime) -> dt.datetime | None:
        begins = days.start_of(days.day_of(run))
        return self.schedule.last_run_at_or_before(min(begins, run) - _EPSILON)

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        """Runs in ``(after, until]`` (the schedule's own count past the walk's limit)."""
        most = self.schedule.count_runs_between(after, until)
        if most == 0 or most > COUNT_LIMIT:
            return most
        count = 0
        run = self.next_run_after(after)
        while run is not None and run <= until:
            count += 1
            run = self.next_run_after(run)
        return count


def on_days(schedule: Schedule, rules: list[CalendarRule]) -> Schedule:
    """``schedule`` kept by ``rules``, or ``schedule`` itself when there are none."""
    return OnDays(schedule, tuple(rules)) if rules else schedule
