"""Properties of the schedule arithmetic on random cron expressions in random zones.

Each runs for every daylight-saving choice: none (Debian cron's rules) and
each of the six ``spec.daylightSaving`` combinations. The oracles step one
minute at a time and read each minute's UTC offset straight from zoneinfo:
:func:`tickwork_dev.reference.vixie_fires`, a port of Vixie cron's main loop,
for the default, and :func:`tickwork_dev.reference.chosen_fires`, the
choices by their definition, for the rest. Windows are anchored near real
transitions half of the time, so the daylight-saving paths are exercised,
not just the quiet weeks between them.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.core import civil
from tickwork.core.daylight import DaylightSavingChoice, RepeatedTime, SkippedTime
from tickwork.core.schedule import CronSchedule, cron_schedule
from tickwork.core.zones import Transition
from tickwork_dev.reference import chosen_fires, vixie_fires

INTERESTING_ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Lord_Howe",  # 30-minute shift
    "Pacific/Chatham",  # 45-minute offset
    "Asia/Kolkata",  # half-hour offset, no DST
    "America/St_Johns",  # half-hour offset with DST
    "America/Santiago",  # southern hemisphere, midnight transitions
    "Australia/Sydney",  # southern hemisphere
    "Africa/Casablanca",  # DST suspended during Ramadan
    "Asia/Tehran",
    "Antarctica/Troll",  # two-hour DST shift
    "Antarctica/Casey",  # three-hour jumps: cron's "large" class
    "Pacific/Apia",  # skipped a whole day in 2011
]
ALL_ZONES = sorted(zoneinfo.available_timezones())

CHOICES = [None] + [
    DaylightSavingChoice(repeated, skipped) for repeated in RepeatedTime for skipped in SkippedTime
]
CHOICE_IDS = ["debian"] + [f"{c.repeated}-{c.skipped}" for c in CHOICES if c is not None]
every_choice = pytest.mark.parametrize("choice", CHOICES, ids=CHOICE_IDS)


def _cron_field(low: int, high: int, *, star_weight: int) -> st.SearchStrategy[str]:
    values = st.integers(low, high)
    choices = [
        st.integers(1, max(1, (high - low) // 2)).map(lambda step: f"*/{step}"),
        values.map(str),
        st.tuples(values, values).map(sorted).map(lambda pair: f"{pair[0]}-{pair[1]}"),
        st.tuples(values, values, st.integers(1, 20)).map(
            lambda t: f"{min(t[0], t[1])}-{max(t[0], t[1])}/{t[2]}"
        ),
        st.lists(values, min_size=2, max_size=4, unique=True).map(
            lambda xs: ",".join(map(str, sorted(xs)))
        ),
    ]
    return st.one_of(*([st.just("*")] * star_weight), *choices)


cron_expressions = st.tuples(
    _cron_field(0, 59, star_weight=1),
    _cron_field(0, 23, star_weight=2),
    _cron_field(1, 31, star_weight=6),
    _cron_field(1, 12, star_weight=6),
    _cron_field(0, 7, star_weight=4),
).map(" ".join)

zones = st.one_of(st.sampled_from(INTERESTING_ZONES), st.sampled_from(ALL_ZONES))
# 2000-01-01 .. 2037-12-31 in minutes
anchors = st.integers(
    civil.days_from_civil(2000, 1, 1) * 1440, civil.days_from_civil(2037, 12, 31) * 1440
)
WINDOW = 2 * 24 * 60


def _schedule_or_none(
    expression: str, zone: str, choice: DaylightSavingChoice | None
) -> CronSchedule | None:
    try:
        return cron_schedule(expression, zone, choice)
    except ValueError:
        return None  # a random expression that names no existing day


def _reference(schedule: CronSchedule, first: int, last: int) -> list[int]:
    cron, zone, choice = schedule.cron, schedule.timeline.zone, schedule.daylight_saving
    if choice is None:
        return vixie_fires(cron, zone, first, last)
    return chosen_fires(cron, zone, first, last, choice)


def _near_transition(schedule: CronSchedule, anchor: int, shift: int) -> int:
    transition = schedule.timeline.next_transition(anchor, anchor + 400 * 1440)
    return anchor if transition is None else transition.at - shift


def _check_against_the_reference(schedule: CronSchedule, first: int) -> None:
    last = first + WINDOW
    expected = _reference(schedule, first, last)
    runs, moment = [], first - 1
    while (moment := schedule.next_fire_minute(moment)) is not None and moment <= last:
        runs.append(moment)
    assert runs == expected
    assert schedule.count_fires_minutes(first - 1, last) == len(expected)
    for index, fire in enumerate(expected):
        assert schedule.prev_fire_minute(fire) == fire
        if index:
            assert schedule.prev_fire_minute(fire - 1) == expected[index - 1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expression=cron_expressions,
    zone=zones,
    anchor=anchors,
    snap=st.booleans(),
    shift=st.integers(0, 36 * 60),
)
def test_runs_agree_with_the_minute_by_minute_reference(
    expression: str, zone: str, anchor: int, snap: bool, shift: int
) -> None:
    schedule = _schedule_or_none(expression, zone, None)
    if schedule is None:
        return
    _check_against_the_reference(
        schedule, _near_transition(schedule, anchor, shift) if snap else anchor
    )


def _aimed_at(transition: Transition, expression: str, data: st.DataObject) -> str:
    """``expression`` with its hour (and maybe its minute and date) moved onto a
    wall-clock time the transition skips or repeats, so that the choice matters."""
    minute, _, day, month, weekday = expression.split()
    first_affected = transition.at + min(transition.before, transition.after)
    offset = data.draw(st.integers(0, abs(transition.shift) - 1), label="affected minute")
    moment = civil.naive_from_minute(first_affected + offset)
    if data.draw(st.booleans(), label="exact minute"):
        minute = str(moment.minute)
    if data.draw(st.booleans(), label="exact date"):
        day, month, weekday = str(moment.day), str(moment.month), "*"
    else:
        day, month, weekday = "*", "*", "*"
    return f"{minute} {moment.hour} {day} {month} {weekday}"


@pytest.mark.parametrize("choice", CHOICES[1:], ids=CHOICE_IDS[1:])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    expression=cron_expressions,
    zone=zones,
    anchor=anchors,
    shift=st.integers(0, 36 * 60),
)
def test_each_daylight_saving_choice_agrees_with_its_definition(
    choice: DaylightSavingChoice,
    data: st.DataObject,
    expression: str,
    zone: str,
    anchor: int,
    shift: int,
) -> None:
    timeline = cron_schedule("* * * * *", zone).timeline
    transition = timeline.next_transition(anchor, anchor + 400 * 1440)
    first = anchor
    # Three windows in four hold a transition, and a job aimed at it: the choice
    # matters only there; the rest check that it changes nothing elsewhere.
    if transition is not None and data.draw(st.integers(0, 3), label="aim") > 0:
        expression = _aimed_at(transition, expression, data)
        first = transition.at - shift
    schedule = _schedule_or_none(expression, zone, choice)
    if schedule is None:
        return
    _check_against_the_reference(schedule, first)


@every_choice
@settings(max_examples=100, deadline=None)
@given(expression=cron_expressions, zone=zones, anchor=anchors)
def test_successive_runs_strictly_increase(
    choice: DaylightSavingChoice | None, expression: str, zone: str, anchor: int
) -> None:
    schedule = _schedule_or_none(expression, zone, choice)
    if schedule is None:
        return
    moment = anchor
    for _ in range(25):
        following = schedule.next_fire_minute(moment)
        assert following is not None, "a valid schedule always fires again"
        assert following > moment
        moment = following


@every_choice
@settings(max_examples=50, deadline=None)
@given(expression=cron_expressions, zone=zones, anchor=anchors, days=st.integers(0, 60))
def test_count_equals_the_number_of_successive_runs(
    choice: DaylightSavingChoice | None, expression: str, zone: str, anchor: int, days: int
) -> None:
    schedule = _schedule_or_none(expression, zone, choice)
    if schedule is None:
        return
    until = anchor + days * 1440
    counted, moment = 0, anchor
    while (moment := schedule.next_fire_minute(moment)) is not None and moment <= until:
        counted += 1
        if counted > 5000:
            return  # too dense to walk; the reference test covers dense schedules
    assert schedule.count_fires_minutes(anchor, until) == counted


def test_jobs_on_the_same_minutes_share_their_run_instants() -> None:
    """Each job keeps its next runs (status.nextRuns): schedules that fire at the same
    minute hand out one datetime for it, in any zone, and the one of the minute before
    a run is the run's own."""
    start = civil.from_minute(29_000_000)
    hourly = cron_schedule("0 * * * *", "UTC")
    daily = cron_schedule("0 9 * * *", "Europe/Berlin")
    first = daily.next_run_after(start)
    assert first is not None
    assert hourly.next_run_after(first - dt.timedelta(minutes=1)) is first
    assert daily.last_run_at_or_before(first) is first
    assert first == civil.from_minute(civil.to_minute(first))
