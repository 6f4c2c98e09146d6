"""Calendars (issue 50, item 2, its core): days on a zone's wall clock, and a schedule
kept off them or on them only. Against a brute-force reference (every run of the
schedule, one check of its local day each) across clock changes, midnight ones too,
and with several schedules; and ``tickwork explain --calendar`` marking the runs
that fall on a calendar's days."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.unit.test_bounds_properties import agrees, at, walk
from tickwork.api.calendar import CalendarSpec
from tickwork.cli.commands import main
from tickwork.core import civil
from tickwork.core.calendar import (
    HORIZON_DAYS,
    CalendarRule,
    DaySet,
    OnDays,
    day_pattern,
    on_days,
)
from tickwork.core.errors import InvalidSpecError
from tickwork.core.interval import IntervalSchedule
from tickwork.core.schedule import cron_schedule
from tickwork.core.schedule_set import union

pytestmark = pytest.mark.unit

UTC = dt.UTC
#: Zones with daylight saving, two of them changing their clocks at midnight.
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "America/Santiago", "Asia/Beirut"]
PATTERNS = ["* * sat,sun", "25 12 *", "1-7 * mon", "*/3 * *", "* 4,9 *"]
#: Days with a clock change in one of the zones (Santiago and Beirut at midnight).
CHANGES = [(2026, 3, 8), (2026, 3, 29), (2026, 4, 5), (2026, 9, 6), (2026, 10, 25), (2026, 11, 1)]


def naive_days(spec: CalendarSpec) -> set[dt.date]:
    """Every day of ``spec`` in 2025 .. 2027, one check per day (cron's day fields as
    Vixie reads them: both restricted, either matches)."""
    days = set(spec.dates)
    for r in spec.ranges:
        days |= {r.from_ + dt.timedelta(n) for n in range((r.to - r.from_).days + 1)}
    day = dt.date(2025, 1, 1)
    while day < dt.date(2028, 1, 1):
        for text in spec.days:
            p = day_pattern(text)
            dom, dow = day.day in p.days, (day.isoweekday() % 7) in p.weekdays
            if day.month in p.months and ((dom or dow) if p.day_or_weekday else (dom and dow)):
                days.add(day)
        day += dt.timedelta(1)
    return days


calendars = st.builds(
    lambda zone, dates, ranges, patterns: CalendarSpec(
        time_zone=zone, dates=dates, ranges=ranges, days=patterns
    ),
    st.sampled_from(ZONES),
    st.lists(st.dates(dt.date(2026, 1, 1), dt.date(2026, 12, 31)), max_size=6),
    st.lists(
        st.tuples(st.dates(dt.date(2026, 1, 1), dt.date(2026, 12, 31)), st.integers(0, 4)).map(
            lambda pair: {"from": pair[0], "to": pair[0] + dt.timedelta(pair[1])}
        ),
        max_size=3,
    ),
    st.lists(st.sampled_from(PATTERNS), max_size=2),
)
schedules = st.one_of(
    st.tuples(
        st.sampled_from(["*/7 * * * *", "30 * * * *", "0 0 * * *", "15 23,0,1 * * *"]),
        st.sampled_from(ZONES),
    ).map(lambda pair: cron_schedule(*pair)),
    st.sampled_from([600, 3600, 5400]).map(lambda s: IntervalSchedule(anchor=at(0), seconds=s)),
)


@settings(max_examples=150, deadline=None)
@given(
    chosen=st.lists(schedules, min_size=1, max_size=2),
    rules=st.lists(st.tuples(calendars, st.booleans()), min_size=1, max_size=2),
    day=st.sampled_from(CHANGES),
    hours=st.integers(-30, 10),
)
def test_a_schedule_on_calendars_keeps_exactly_the_runs_the_reference_keeps(
    chosen: list[IntervalSchedule],
    rules: list[tuple[CalendarSpec, bool]],
    day: tuple[int, int, int],
    hours: int,
) -> None:
    first = (civil.days_from_civil(*day) * 24 + hours) * 3600
    last = first + 3 * 86400
    base = union(list(chosen))
    kept = OnDays(
        base,
        tuple(
            CalendarRule(spec.day_set(f"c{i}"), only=only) for i, (spec, only) in enumerate(rules)
        ),
    )
    held = [(naive_days(spec), zoneinfo.ZoneInfo(spec.time_zone), only) for spec, only in rules]
    expected = [
        run
        for run in walk(base, at(first), at(last))
        if all((run.astimezone(zone).date() in days) == only for days, zone, only in held)
    ]
    agrees(kept, expected, first, last)


def test_a_calendars_days_are_whole_local_days_of_its_zone() -> None:
    berlin = CalendarSpec.model_validate(
        {"timeZone": "Europe/Berlin", "dates": ["2026-12-25"], "days": ["* * sun"]}
    ).day_set("holidays")
    rule = CalendarRule(berlin)
    # Dec 24, 23:30 UTC is already the 25th in Berlin; Dec 25, 23:30 UTC is the 26th.
    assert not rule.allows(dt.datetime(2026, 12, 24, 23, 30, tzinfo=UTC))
    assert rule.allows(dt.datetime(2026, 12, 25, 23, 30, tzinfo=UTC))
    assert not rule.allows(dt.datetime(2026, 12, 27, 12, tzinfo=UTC))  # a Sunday
    assert CalendarRule(berlin, only=True).allows(dt.datetime(2026, 12, 27, 12, tzinfo=UTC))


def test_a_whole_day_ruled_out_is_passed_over_at_once() -> None:
    asked: list[dt.datetime] = []
    every_minute = IntervalSchedule(anchor=at(0), seconds=60)

    class Counting:
        def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
            asked.append(moment)
            return every_minute.next_run_after(moment)

        def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
            return every_minute.last_run_at_or_before(moment)

        def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
            return every_minute.count_runs_between(after, until)

    week = DaySet(
        "week",
        zoneinfo.ZoneInfo("UTC"),
        ranges=((civil.days_from_civil(2026, 12, 1), civil.days_from_civil(2026, 12, 7)),),
    )
    kept = OnDays(Counting(), (CalendarRule(week),))
    assert kept.next_run_after(dt.datetime(2026, 11, 30, 23, 59, tzinfo=UTC)) == dt.datetime(
        2026, 12, 8, tzinfo=UTC
    )
    # One run looked at on each day of the week, then the day after it: not the
    # week's 10,080 minutes one by one.
    assert len(asked) == 8


def test_a_job_with_no_calendar_keeps_its_own_schedule_object() -> None:
    """No calendar, no wrapper: such a job pays nothing new per question."""
    daily = cron_schedule("0 9 * * *", "UTC")
    assert on_days(daily, []) is daily
    assert isinstance(on_days(daily, [CalendarRule(DaySet("x", zoneinfo.ZoneInfo("UTC")))]), OnDays)


def test_calendars_that_leave_no_day_leave_no_run() -> None:
    never = DaySet("never", zoneinfo.ZoneInfo("UTC"))
    kept = OnDays(cron_schedule("0 9 * * *", "UTC"), (CalendarRule(never, only=True),))
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert kept.next_run_after(start) is None
    assert kept.last_run_at_or_before(start) is None
    assert HORIZON_DAYS >= 3650  # ten years of days ruled out in a row, at least


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"ranges": [{"from": "2026-12-31", "to": "2026-12-24"}]}, "must not be before"),
        ({"days": ["32 * *"]}, "day of month"),
        ({"days": ["* * * *"]}, "is not three fields"),
        ({"timeZone": "Mars/Base"}, "Mars/Base"),
        ({"dates": ["2026-13-01"]}, "month"),
        ({"dates": ["2026-01-01"] * 1001}, "at most 1000"),
    ],
)
def test_a_bad_calendar_is_refused_with_what_to_fix(spec: dict[str, object], says: str) -> None:
    with pytest.raises((ValidationError, InvalidSpecError), match=says):
        CalendarSpec.model_validate(spec)


HOLIDAYS = """
apiVersion: tickwork.dev/v1alpha1
kind: Calendar
metadata: {name: holidays}
spec:
  timeZone: America/New_York
  dates: ["2026-12-25"]
  days: ["* * sat,sun"]
"""
DAILY = """
apiVersion: tickwork.dev/v1alpha1
kind: ScheduledJob
metadata: {name: daily}
spec:
  schedule: "0 9 * * *"
  timeZone: America/New_York
  task: {echo: {message: hi}}
"""


def test_explain_marks_the_runs_on_a_calendars_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job, calendar = tmp_path / "job.yaml", tmp_path / "holidays.yaml"
    job.write_text(DAILY)
    calendar.write_text(HOLIDAYS)
    args = ["explain", "-f", str(job), "--from", "2026-12-23T00:00:00Z", "--count", "5"]
    assert main([*args, "--calendar", str(calendar)]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    marked = [line.split()[1] for line in lines if "excluded: a day of calendar holidays" in line]
    assert marked == ["2026-12-25", "2026-12-26", "2026-12-27"]  # Friday, the weekend
    assert len(lines) == 5
    assert main(args) == 0
    assert "excluded" not in capsys.readouterr().out
    calendar.write_text(HOLIDAYS.replace("sat,sun", "sat,holiday"))
    assert main([*args, "--calendar", str(calendar)]) == 1
    assert "calendar holidays: spec.days.0" in capsys.readouterr().err
    calendar.write_text(DAILY)
    assert main([*args, "--calendar", str(calendar)]) == 1
    assert "no Calendar in the file" in capsys.readouterr().err


def test_explain_follows_the_calendars_a_job_names_as_it_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that names Calendars: only those count, notOn as days off and onlyOn as
    the only days on; one it names and no file gives is an error that says so."""
    job, calendar = tmp_path / "job.yaml", tmp_path / "holidays.yaml"
    calendar.write_text(HOLIDAYS)
    args = ["explain", "-f", str(job), "--from", "2026-12-23T00:00:00Z", "--count", "5"]
    job.write_text(DAILY.replace("  task:", "  calendars: {onlyOn: [holidays]}\n  task:"))
    assert main([*args, "--calendar", str(calendar)]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    marked = [line.split()[1] for line in lines if "excluded: not a day of calendar" in line]
    assert marked == ["2026-12-23", "2026-12-24"]  # the days before the holidays
    job.write_text(DAILY.replace("  task:", "  calendars: {notOn: [other]}\n  task:"))
    assert main([*args, "--calendar", str(calendar)]) == 1
    assert "names Calendar 'other': give the file" in capsys.readouterr().err
