"""Properties of the schedule arithmetic on random cron expressions in random zones.

The oracle is :func:`tickwork_dev.reference.vixie_fires`, a port of Vixie
cron's main loop that steps one minute at a time and reads each minute's UTC
offset straight from zoneinfo. Windows are anchored near real transitions
half of the time, so the daylight-saving paths are exercised, not just the
quiet weeks between them.
"""

from __future__ import annotations

import zoneinfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.core import civil
from tickwork.core.schedule import CronSchedule, cron_schedule
from tickwork_dev.reference import vixie_fires

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
    "Africa/Casablanca",  # DST suspended during Ramadan
    "Asia/Tehran",
    "Antarctica/Troll",  # two-hour DST shift
    "Antarctica/Casey",  # three-hour jumps: cron's "large" class
    "Pacific/Apia",  # skipped a whole day in 2011
]
ALL_ZONES = sorted(zoneinfo.available_timezones())


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


def _schedule_or_none(expression: str, zone: str) -> CronSchedule | None:
    try:
        return cron_schedule(expression, zone)
    except ValueError:
        return None  # a random expression that names no existing day


def _near_transition(schedule: CronSchedule, anchor: int, shift: int) -> int:
    transition = schedule.timeline.next_transition(anchor, anchor + 400 * 1440)
    return anchor if transition is None else transition.at - shift


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
    schedule = _schedule_or_none(expression, zone)
    if schedule is None:
        return
    first = _near_transition(schedule, anchor, shift) if snap else anchor
    last = first + WINDOW
    expected = vixie_fires(schedule.cron, schedule.timeline.zone, first, last)

    runs, moment = [], first - 1
    while (moment := schedule.next_fire_minute(moment)) is not None and moment <= last:
        runs.append(moment)
    assert runs == expected
    assert schedule.count_fires_minutes(first - 1, last) == len(expected)
    for index, fire in enumerate(expected):
        assert schedule.prev_fire_minute(fire) == fire
        if index:
            assert schedule.prev_fire_minute(fire - 1) == expected[index - 1]


@settings(max_examples=200, deadline=None)
@given(expression=cron_expressions, zone=zones, anchor=anchors)
def test_successive_runs_strictly_increase(expression: str, zone: str, anchor: int) -> None:
    schedule = _schedule_or_none(expression, zone)
    if schedule is None:
        return
    moment = anchor
    for _ in range(25):
        following = schedule.next_fire_minute(moment)
        assert following is not None, "a valid schedule always fires again"
        assert following > moment
        moment = following


@settings(max_examples=100, deadline=None)
@given(expression=cron_expressions, zone=zones, anchor=anchors, days=st.integers(0, 60))
def test_count_equals_the_number_of_successive_runs(
    expression: str, zone: str, anchor: int, days: int
) -> None:
    schedule = _schedule_or_none(expression, zone)
    if schedule is None:
        return
    until = anchor + days * 1440
    counted, moment = 0, anchor
    while (moment := schedule.next_fire_minute(moment)) is not None and moment <= until:
        counted += 1
        if counted > 5000:
            return  # too dense to walk; the reference test covers dense schedules
    assert schedule.count_fires_minutes(anchor, until) == counted
