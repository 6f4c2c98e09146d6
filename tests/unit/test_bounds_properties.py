"""Properties of ``@every`` intervals and of ``notBefore``/``notAfter`` bounds, against
brute-force references (:func:`tickwork_dev.reference.interval_fires`, one step per
second; :func:`tickwork_dev.reference.vixie_fires`, one step per minute; and
:func:`tickwork_dev.reference.within_bounds`, one check per run).

Bounds fall anywhere, to the microsecond: on a run, just before or after one, in
the middle of a gap, outside the window looked at. Whatever they are, the
next-run chain, the counts (missed runs) and the last-run answers agree with the
references, and ``status.nextRuns`` lists the same runs in order.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.core import civil
from tickwork.core.bounds import bounded
from tickwork.core.interval import IntervalSchedule, interval_anchor
from tickwork.core.planning import NEXT_RUNS, upcoming
from tickwork.core.schedule import Schedule, cron_schedule
from tickwork_dev.reference import interval_fires, vixie_fires, within_bounds

pytestmark = pytest.mark.unit

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MICRO = dt.timedelta(microseconds=1)
# 2000-01-01 .. 2037-12-31, in seconds
instants = st.integers(
    civil.days_from_civil(2000, 1, 1) * 86400, civil.days_from_civil(2037, 12, 31) * 86400
)
WINDOW = 3 * 3600


def at(seconds: int, micro: int = 0) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds, microseconds=micro)


def bound(first: int, last: int, fires: list[dt.datetime]) -> st.SearchStrategy[dt.datetime | None]:
    """None; or a run's instant, or just before or after it; or any instant in or around
    ``[first, last]``, whole or to the microsecond."""
    anywhere = st.builds(
        at,
        st.integers(first - 3600, last + 3600),
        st.one_of(st.just(0), st.just(999_999), st.integers(1, 999_998)),
    )
    choices = [st.none(), anywhere]
    if fires:
        nudges = st.sampled_from([-MICRO, dt.timedelta(0), MICRO])
        runs = st.integers(0, len(fires) - 1).map(lambda index: fires[index])
        choices.append(st.builds(lambda fire, nudge: fire + nudge, runs, nudges))
    return st.one_of(*choices)


def bounds(
    first: int, last: int, fires: list[dt.datetime]
) -> st.SearchStrategy[tuple[dt.datetime | None, dt.datetime | None]]:
    return st.tuples(bound(first, last, fires), bound(first, last, fires)).filter(
        lambda pair: pair[0] is None or pair[1] is None or pair[0] < pair[1]
    )


def walk(schedule: Schedule, first: dt.datetime, last: dt.datetime) -> list[dt.datetime]:
    """The runs in ``[first, last]``, by asking for the next run again and again."""
    runs, moment = [], first - MICRO
    while (moment := schedule.next_run_after(moment)) is not None and moment <= last:
        runs.append(moment)
    return runs


def agrees(schedule: Schedule, expected: list[dt.datetime], first: int, last: int) -> None:
    start, end = at(first), at(last)
    assert walk(schedule, start, end) == expected
    assert schedule.count_runs_between(start - MICRO, end) == len(expected)
    for index, run in enumerate(expected):
        assert schedule.last_run_at_or_before(run) == run
        assert schedule.last_run_at_or_before(run + dt.timedelta(milliseconds=999)) == run
        before = schedule.last_run_at_or_before(run - MICRO)
        if index:
            assert before == expected[index - 1]
        elif before is not None:
            assert before < start
    listed = upcoming(schedule, expected[0] if expected else None)
    assert listed[: len(expected)] == expected[:NEXT_RUNS]
    assert listed == sorted(set(listed))
    for following in expected[1:3]:  # moving on reuses the list, and finds the same
        assert upcoming(schedule, following, known=listed) == upcoming(schedule, following)


@settings(max_examples=200, deadline=None)
@given(
    anchor=instants,
    seconds=st.one_of(st.integers(10, 600), st.sampled_from([3600, 5400, 86400])),
    offset=st.integers(-10 * 86400, 10 * 86400),
    data=st.data(),
)
def test_interval_runs_agree_with_the_second_by_second_reference(
    anchor: int, seconds: int, offset: int, data: st.DataObject
) -> None:
    first = anchor + offset
    last = first + WINDOW
    fires = [at(s) for s in interval_fires(anchor, seconds, first, last)]
    not_before, not_after = data.draw(bounds(first, last, fires))
    schedule = bounded(
        IntervalSchedule(anchor=at(anchor), seconds=seconds),
        not_before=not_before,
        not_after=not_after,
    )
    agrees(schedule, within_bounds(fires, not_before, not_after), first, last)


@settings(max_examples=200, deadline=None)
@given(
    expression=st.sampled_from(
        [
            "* * * * *",
            "*/7 * * * *",
            "30 * * * *",
            "15,45 2-4 * * *",
            "0 0 * * *",
            "*/20 1 * * 0",
            "59 23 31 12 *",
        ]
    ),
    zone=st.sampled_from(
        ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham"]
    ),
    first_minute=instants.map(lambda s: s // 60),
    data=st.data(),
)
def test_bounded_cron_runs_agree_with_the_minute_by_minute_reference(
    expression: str, zone: str, first_minute: int, data: st.DataObject
) -> None:
    last_minute = first_minute + WINDOW // 60
    plain = cron_schedule(expression, zone)
    fires = [
        at(m * 60) for m in vixie_fires(plain.cron, plain.timeline.zone, first_minute, last_minute)
    ]
    not_before, not_after = data.draw(bounds(first_minute * 60, last_minute * 60, fires))
    schedule = bounded(plain, not_before=not_before, not_after=not_after)
    agrees(
        schedule, within_bounds(fires, not_before, not_after), first_minute * 60, last_minute * 60
    )


@settings(max_examples=200, deadline=None)
@given(
    anchor=instants,
    micro=st.integers(0, 999_999),
    seconds=st.integers(10, 100_000),
    moment=instants,
    days=st.integers(0, 4000),
)
def test_an_interval_counts_in_constant_time_what_a_walk_would_find(
    anchor: int, micro: int, seconds: int, moment: int, days: int
) -> None:
    """Counting the runs a watcher missed (years of them) needs no walk: the count is
    the difference of two slot numbers, and each run is on the anchor's grid."""
    schedule = IntervalSchedule(anchor=interval_anchor(at(anchor, micro)), seconds=seconds)
    assert schedule.anchor.microsecond == 0
    assert schedule.anchor >= at(anchor, micro)
    after, until = at(moment), at(moment) + dt.timedelta(days=days)
    following = schedule.next_run_after(after)
    assert following is not None
    assert after < following <= after + dt.timedelta(seconds=seconds)
    assert (following - schedule.anchor).total_seconds() % seconds == 0
    latest = schedule.last_run_at_or_before(until)
    assert latest is not None
    counted = schedule.count_runs_between(after, until)
    if latest <= after:
        assert counted == 0
    else:
        assert counted == (latest - following) // dt.timedelta(seconds=seconds) + 1
