"""Several schedules on one job (``spec.schedules``): the job runs at every instant any
entry names, once per instant, each cron entry in its own zone and across its zone's
clock changes, against the brute-force references of one entry
(:func:`tickwork_dev.reference.vixie_fires`, :func:`~tickwork_dev.reference.interval_fires`)
merged; and the spec that asks for them."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.unit.test_bounds_properties import agrees, at, bounds
from tickwork.api import rules
from tickwork.api.models import ScheduledJobSpec
from tickwork.core import civil
from tickwork.core.bounds import bounded
from tickwork.core.interval import IntervalSchedule
from tickwork.core.runs import scheduled_run_id
from tickwork.core.schedule import Schedule, cron_schedule
from tickwork.core.schedule_set import COUNT_LIMIT, ScheduleSet, union
from tickwork_dev.reference import interval_fires, vixie_fires, within_bounds

pytestmark = pytest.mark.unit

UTC = dt.UTC
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=UTC)
ECHO = {"echo": {"message": "hi"}}
#: Days with a clock change in one of the zones below, and one without.
CHANGES = [
    (2026, 3, 8),  # America/New_York springs forward
    (2026, 3, 29),  # Europe/Berlin springs forward
    (2026, 10, 25),  # Europe/Berlin falls back
    (2026, 11, 1),  # America/New_York falls back
    (2026, 4, 5),  # Australia/Lord_Howe falls back half an hour
    (2026, 6, 15),  # none
]
CRONS = ["* * * * *", "*/7 * * * *", "30 * * * *", "15,45 1-3 * * *", "0 2 * * *", "*/20 1 * * 0"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]
WINDOW_MINUTES = 6 * 60


def entry_fires(entry: tuple[str, str] | int, first: int, last: int) -> list[int]:
    """An entry's runs in ``[first, last]`` (UTC minutes), brute force: a cron in a
    zone minute by minute, or an interval (minutes, anchored at the epoch) second by
    second."""
    if isinstance(entry, int):
        seconds = entry * 60
        return [s // 60 for s in interval_fires(0, seconds, first * 60, last * 60)]
    expression, zone = entry
    plain = cron_schedule(expression, zone)
    return vixie_fires(plain.cron, plain.timeline.zone, first, last)


def entry_schedule(entry: tuple[str, str] | int) -> Schedule:
    if isinstance(entry, int):
        return IntervalSchedule(anchor=at(0), seconds=entry * 60)
    return cron_schedule(*entry)


entries = st.one_of(
    st.tuples(st.sampled_from(CRONS), st.sampled_from(ZONES)),
    st.sampled_from([1, 5, 13, 60, 90]),  # @every, in minutes
)


@settings(max_examples=150, deadline=None)
@given(
    chosen=st.lists(entries, min_size=2, max_size=3),
    day=st.sampled_from(CHANGES),
    start_hour=st.integers(-6, 20),
    data=st.data(),
)
def test_the_runs_of_several_schedules_are_every_entrys_runs_once_each(
    chosen: list[tuple[str, str] | int],
    day: tuple[int, int, int],
    start_hour: int,
    data: st.DataObject,
) -> None:
    first = civil.days_from_civil(*day) * civil.MINUTES_PER_DAY + start_hour * 60
    last = first + WINDOW_MINUTES
    merged = sorted({m for entry in chosen for m in entry_fires(entry, first, last)})
    fires = [at(m * 60) for m in merged]
    not_before, not_after = data.draw(bounds(first * 60, last * 60, fires))
    schedule = bounded(
        union([entry_schedule(e) for e in chosen]), not_before=not_before, not_after=not_after
    )
    agrees(schedule, within_bounds(fires, not_before, not_after), first * 60, last * 60)


def test_an_instant_two_entries_name_is_one_run_with_one_id() -> None:
    spec = ScheduledJobSpec.model_validate(
        {
            "schedules": [{"schedule": "0 9 * * *"}, {"schedule": "0 9 * * 1"}],
            "task": ECHO,
        }
    )
    schedule = spec.schedule_of(T0)
    monday = dt.datetime(2026, 12, 7, 9, tzinfo=UTC)  # both entries name it
    runs = []
    moment = dt.datetime(2026, 12, 6, 10, tzinfo=UTC)
    for _ in range(3):
        moment = schedule.next_run_after(moment)
        runs.append(moment)
    assert runs == [monday, monday + dt.timedelta(days=1), monday + dt.timedelta(days=2)]
    assert schedule.count_runs_between(monday - dt.timedelta(seconds=1), monday) == 1
    ids = {scheduled_run_id("uid-1", run) for run in runs}
    assert len(ids) == 3  # distinct per instant, whichever entry named it


def test_each_entry_is_read_in_its_own_zone_or_the_jobs() -> None:
    spec = ScheduledJobSpec.model_validate(
        {
            "timeZone": "Europe/Berlin",
            "schedules": [
                {"schedule": "0 9 * * *"},
                {"schedule": "0 9 * * *", "timeZone": "America/New_York"},
                {"schedule": "@every 5h"},
            ],
            "notBefore": "2026-12-01T00:00:00Z",
            "task": ECHO,
        }
    )
    schedule = spec.schedule_of(T0)
    day = dt.datetime(2026, 12, 2, tzinfo=UTC)
    runs = []
    moment = day
    while (moment := schedule.next_run_after(moment)) < day + dt.timedelta(days=1):
        runs.append(moment.strftime("%H:%M"))
    # 08:00 is 09:00 in Berlin; 14:00 is 09:00 in New York; every 5 h from notBefore
    # (Dec 1, 00:00): 01:00, 06:00, 11:00, 16:00, 21:00 on Dec 2.
    assert runs == ["01:00", "06:00", "08:00", "11:00", "14:00", "16:00", "21:00"]
    assert spec.schedule_texts == ("0 9 * * *", "0 9 * * *", "@every 5h")
    assert spec.recurring
    assert not spec.one_shot


def test_past_the_count_limit_the_count_is_the_sum_of_the_entries() -> None:
    every_minute = IntervalSchedule(anchor=at(0), seconds=60)
    set_ = ScheduleSet((every_minute, IntervalSchedule(anchor=at(0), seconds=120)))
    hour = dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert set_.count_runs_between(hour, hour + dt.timedelta(hours=1)) == 60  # exact
    far = hour + dt.timedelta(minutes=COUNT_LIMIT)
    assert set_.count_runs_between(hour, far) == COUNT_LIMIT + COUNT_LIMIT // 2  # summed


def test_a_single_entry_is_that_schedule_itself() -> None:
    alone = cron_schedule("0 9 * * *", "UTC")
    assert union([alone]) is alone
    with pytest.raises(ValueError, match="at least one"):
        union([])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schedule": "@daily", "schedules": [{"schedule": "@hourly"}]}, "exactly one of"),
        ({"runAt": "2027-01-01T00:00:00Z", "schedules": [{"schedule": "@hourly"}]}, "exactly one"),
        ({"schedules": []}, "at least 1 item"),
        ({"schedules": [{"schedule": "@hourly"}] * 11}, "at most 10 items"),
        ({"schedules": [{"schedule": "61 * * * *"}]}, "minute"),
        ({"schedules": [{"schedule": "@hourly", "timeZone": "Mars/Base"}]}, "Mars/Base"),
        (
            {
                "schedules": [{"schedule": "@hourly"}, {"schedule": "@every 30s"}],
                "jitterSeconds": 30,
            },
            rules.JITTER_WITHIN_INTERVALS.message,
        ),
    ],
)
def test_a_bad_list_of_schedules_is_refused_with_what_to_fix(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ScheduledJobSpec.model_validate({**spec, "task": ECHO})


def test_the_recurring_only_fields_take_several_schedules_too() -> None:
    spec = ScheduledJobSpec.model_validate(
        {
            "schedules": [{"schedule": "0 9 * * 1-5"}, {"schedule": "0 12 * * 6"}],
            "notBefore": "2026-12-01T00:00:00Z",
            "notAfter": "2027-12-01T00:00:00Z",
            "daylightSaving": {"repeated": "First", "skipped": "Shift"},
            "failurePolicy": {"pauseAfter": 3},
            "catchup": {"policy": "All"},
            "backfills": [
                {"name": "nov", "from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"}
            ],
            "task": ECHO,
        }
    )
    assert spec.recurring
