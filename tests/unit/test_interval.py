"""``@every`` intervals: what parses, what is refused and why, and where the runs fall."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from tickwork.api import rules
from tickwork.core.errors import InvalidSpecError
from tickwork.core.interval import (
    MAX_INTERVAL_SECONDS,
    MIN_INTERVAL_SECONDS,
    IntervalSchedule,
    interval_anchor,
    interval_schedule,
    is_interval,
    parse_interval,
)

pytestmark = pytest.mark.unit
T0 = dt.datetime(2026, 12, 1, 9, 0, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("@every 10s", 10),
        ("@every 90s", 90),
        ("@every 15m", 900),
        ("@every 2h", 7200),
        ("@every 1h30m", 5400),
        ("@every 1h30m15s", 5415),
        ("@every 1m30s", 90),
        ("@every 0h0m10s", 10),
        ("@every 8784h", MAX_INTERVAL_SECONDS),
        ("  @every 90s  ", 90),  # as cron expressions, surrounding blanks are ignored
    ],
)
def test_intervals_parse_to_seconds(text: str, seconds: int) -> None:
    assert is_interval(text)
    assert parse_interval(text) == seconds
    assert re.match(rules.CRON_PATTERN, text.strip())  # the CRD's shape agrees


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("@every 9s", "at least 10s"),
        ("@every 0s", "at least 10s"),
        ("@every 8784h1s", "at most 8784h"),
        ("@every 90", "like '@every 90s'"),
        ("@every 30m1h", "in that order"),
        ("@every 1h1h", "in that order"),
        ("@every 1.5h", "like '@every 90s'"),
        ("@every 2d", "like '@every 90s'"),
        ("@every 90S", "lower case"),
        ("@EVERY 90s", "lower case"),
        ("@every  90s", "like '@every 90s'"),
        ("@every", "like '@every 90s'"),
        ("@every -10s", "like '@every 90s'"),
    ],
)
def test_bad_intervals_are_refused_with_what_to_write(text: str, why: str) -> None:
    assert is_interval(text)  # meant as an interval, so the message is about intervals
    with pytest.raises(InvalidSpecError, match=re.escape(why)):
        parse_interval(text)


def test_the_shortest_interval_is_ten_seconds() -> None:
    assert MIN_INTERVAL_SECONDS == 10


@pytest.mark.parametrize(
    ("moment", "anchor"),
    [
        (T0, T0),
        (T0.replace(microsecond=1), T0 + dt.timedelta(seconds=1)),
        (T0.replace(microsecond=999_999), T0 + dt.timedelta(seconds=1)),
        (T0.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=45))), T0),
    ],
)
def test_the_anchor_is_the_next_whole_second_in_utc(
    moment: dt.datetime, anchor: dt.datetime
) -> None:
    assert interval_anchor(moment) == anchor
    assert interval_anchor(moment).utcoffset() == dt.timedelta(0)


def test_runs_fall_on_the_anchors_grid_before_and_after_it() -> None:
    schedule = interval_schedule("@every 90s", anchor=T0)
    step = dt.timedelta(seconds=90)
    assert schedule.next_run_after(T0) == T0 + step
    assert schedule.next_run_after(T0 - dt.timedelta(microseconds=1)) == T0
    assert schedule.next_run_after(T0 + step) == T0 + 2 * step
    assert schedule.last_run_at_or_before(T0 + step) == T0 + step
    assert schedule.last_run_at_or_before(T0 + step - dt.timedelta(microseconds=1)) == T0
    assert schedule.last_run_at_or_before(T0 - dt.timedelta(seconds=1)) == T0 - step
    assert schedule.count_runs_between(T0, T0 + 10 * step) == 10
    assert schedule.count_runs_between(T0 + step, T0) == 0
    # A year of a ten-second job is counted, not walked.
    ten = IntervalSchedule(anchor=T0, seconds=10)
    assert ten.count_runs_between(T0, T0 + dt.timedelta(days=365)) == 365 * 8640


def test_a_run_past_the_last_representable_instant_does_not_exist() -> None:
    schedule = IntervalSchedule(anchor=T0, seconds=MAX_INTERVAL_SECONDS)
    end = dt.datetime.max.replace(tzinfo=dt.UTC) - dt.timedelta(days=1)
    assert schedule.next_run_after(end) is None
    assert schedule.last_run_at_or_before(end) is not None


def test_cron_is_not_an_interval() -> None:
    for text in ("@hourly", "*/5 * * * *", "@daily"):
        assert not is_interval(text)
