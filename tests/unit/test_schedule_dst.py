"""Schedules in real time zones, across daylight-saving transitions.

Each row gives the runs after a start instant as local wall-clock times with
their UTC offsets, as a cron user would check them by hand. The default rules
are Debian cron's: fixed-time jobs run once when the clock goes back and right
after the jump when it goes forward; wildcard jobs follow the clock. A job's
``spec.daylightSaving`` choice overrides them (the second table).
"""

from __future__ import annotations

import datetime as dt

import pytest

from tickwork.core import civil
from tickwork.core.daylight import DaylightSavingChoice, RepeatedTime, SkippedTime
from tickwork.core.errors import InvalidSpecError
from tickwork.core.schedule import OneShotSchedule, cron_schedule
from tickwork_dev.reference import chosen_fires, vixie_fires


def _runs(
    expression: str, zone: str, start: str, count: int, choice: DaylightSavingChoice | None = None
) -> list[str]:
    schedule = cron_schedule(expression, zone, choice)
    moment = dt.datetime.fromisoformat(start)
    runs = []
    for _ in range(count):
        found = schedule.next_run_after(moment)
        assert found is not None
        runs.append(found.astimezone(schedule.timeline.zone).strftime("%m-%d %H:%M%z"))
        moment = found
    return runs


CASES = [
    # --- America/New_York: 02:00 -> 03:00 on 2026-03-08, 02:00 -> 01:00 on 2026-11-01
    pytest.param(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00+00:00",
        ["03-08 03:00-0400", "03-09 02:30-0400", "03-10 02:30-0400"],
        id="new-york-spring-fixed-time-in-gap-runs-after-jump",
    ),
    pytest.param(
        "15,45 2 * * *",
        "America/New_York",
        "2026-03-08T00:00:00-05:00",
        ["03-08 03:00-0400", "03-09 02:15-0400", "03-09 02:45-0400"],
        id="new-york-spring-two-skipped-times-collapse-into-one-run",
    ),
    pytest.param(
        "*/30 * * * *",
        "America/New_York",
        "2026-03-08T01:00:00-05:00",
        ["03-08 01:30-0500", "03-08 03:00-0400", "03-08 03:30-0400"],
        id="new-york-spring-wildcard-skips-the-gap",
    ),
    pytest.param(
        "0 3 * * *",
        "America/New_York",
        "2026-03-07T12:00:00+00:00",
        ["03-08 03:00-0400", "03-09 03:00-0400"],
        id="new-york-spring-time-right-after-gap-runs-once",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00+00:00",
        ["11-01 01:30-0400", "11-02 01:30-0500", "11-03 01:30-0500"],
        id="new-york-fall-fixed-time-runs-once-in-first-pass",
    ),
    pytest.param(
        "30 * * * *",
        "America/New_York",
        "2026-11-01T00:00:00-04:00",
        ["11-01 00:30-0400", "11-01 01:30-0400", "11-01 01:30-0500", "11-01 02:30-0500"],
        id="new-york-fall-wildcard-runs-in-both-passes",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-11-01T01:40:00-04:00",
        ["11-02 01:30-0500"],
        id="new-york-fall-asked-during-first-pass-skips-second-occurrence",
    ),
    pytest.param(
        "*/20 1 * * *",
        "America/New_York",
        "2026-11-01T01:50:00-04:00",
        ["11-01 01:00-0500", "11-01 01:20-0500", "11-01 01:40-0500", "11-02 01:00-0500"],
        id="new-york-fall-wildcard-asked-during-first-pass-gets-second-pass",
    ),
    # --- Europe/London: 01:00 -> 02:00 on 2026-03-29, 02:00 -> 01:00 on 2026-10-25
    pytest.param(
        "30 1 * * *",
        "Europe/London",
        "2026-03-28T12:00:00+00:00",
        ["03-29 02:00+0100", "03-30 01:30+0100"],
        id="london-spring-fixed-time-in-gap",
    ),
    pytest.param(
        "0 1 * * sun",
        "Europe/London",
        "2026-10-24T12:00:00+00:00",
        ["10-25 01:00+0100", "11-01 01:00+0000"],
        id="london-fall-weekly-job-runs-once",
    ),
    pytest.param(
        "@hourly",
        "Europe/London",
        "2026-10-25T00:30:00+01:00",
        ["10-25 01:00+0100", "10-25 01:00+0000", "10-25 02:00+0000"],
        id="london-fall-hourly-runs-twice-in-repeated-hour",
    ),
    # --- Australia/Lord_Howe: 30-minute shifts. 02:00 -> 02:30 on 2026-10-04,
    #     02:00 -> 01:30 on 2026-04-05
    pytest.param(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00+00:00",
        ["10-04 02:30+1100", "10-05 02:15+1100"],
        id="lord-howe-spring-fixed-time-in-30-minute-gap",
    ),
    pytest.param(
        "*/10 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-04T01:55:00+10:30",
        ["10-04 02:30+1100", "10-04 02:40+1100", "10-04 02:50+1100", "10-05 02:00+1100"],
        id="lord-howe-spring-wildcard-skips-half-hour",
    ),
    pytest.param(
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00:00+00:00",
        ["04-05 01:45+1100", "04-06 01:45+1030"],
        id="lord-howe-fall-fixed-time-once",
    ),
    pytest.param(
        "*/20 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T14:00:00+00:00",
        ["04-05 01:20+1100", "04-05 01:40+1100", "04-05 01:40+1030", "04-06 01:00+1030"],
        id="lord-howe-fall-wildcard-repeats-only-the-repeated-half-hour",
    ),
    # --- Pacific/Chatham: +12:45 / +13:45. 02:45 -> 03:45 on 2026-09-27,
    #     03:45 -> 02:45 on 2026-04-05
    pytest.param(
        "0 * * * *",
        "Pacific/Chatham",
        "2026-09-26T13:00:00+00:00",
        ["09-27 02:00+1245", "09-27 04:00+1345", "09-27 05:00+1345"],
        id="chatham-spring-hourly-skips-3am",
    ),
    pytest.param(
        "0 3 * * *",
        "Pacific/Chatham",
        "2026-09-26T00:00:00+00:00",
        ["09-27 03:45+1345", "09-28 03:00+1345"],
        id="chatham-spring-fixed-3am-runs-at-345",
    ),
    pytest.param(
        "0 3 * * *",
        "Pacific/Chatham",
        "2026-04-04T00:00:00+00:00",
        ["04-05 03:00+1345", "04-06 03:00+1245"],
        id="chatham-fall-fixed-time-once",
    ),
    pytest.param(
        "15 * * * *",
        "Pacific/Chatham",
        "2026-04-05T02:00:00+13:45",
        ["04-05 02:15+1345", "04-05 03:15+1345", "04-05 03:15+1245", "04-05 04:15+1245"],
        id="chatham-fall-wildcard-repeats-only-the-repeated-hour-0245-0344",
    ),
    # --- zones without daylight saving
    pytest.param(
        "0 9 * * *",
        "Asia/Kolkata",
        "2026-03-08T00:00:00+00:00",
        ["03-08 09:00+0530", "03-09 09:00+0530"],
        id="kolkata-half-hour-offset-no-dst",
    ),
    pytest.param(
        "*/45 * * * *",
        "UTC",
        "2026-01-01T00:00:00+00:00",
        ["01-01 00:45+0000", "01-01 01:00+0000", "01-01 01:45+0000"],
        id="utc-step-restarts-each-hour",
    ),
]


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), CASES)
def test_runs_across_transitions(
    expression: str, zone: str, start: str, expected: list[str]
) -> None:
    assert _runs(expression, zone, start, len(expected)) == expected


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), CASES)
def test_table_agrees_with_the_vixie_reference(
    expression: str, zone: str, start: str, expected: list[str]
) -> None:
    schedule = cron_schedule(expression, zone)
    first = civil.to_minute(dt.datetime.fromisoformat(start)) + 1
    last = first + 3 * 24 * 60
    reference = vixie_fires(schedule.cron, schedule.timeline.zone, first, last)
    ours, moment = [], first - 1
    while (moment := schedule.next_fire_minute(moment)) is not None and moment <= last:
        ours.append(moment)
    assert ours == reference
    assert schedule.count_fires_minutes(first - 1, last) == len(reference)


def _choice(text: str) -> DaylightSavingChoice:
    repeated, skipped = text.split("/")
    return DaylightSavingChoice(RepeatedTime(repeated), SkippedTime(skipped))


# Rows: expression, zone, start, {choices ("repeated/skipped", or a tuple of them): runs}.
CHOICE_CASES = [
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00+00:00",
        {
            ("First/Shift", "First/Skip"): ["11-01 01:30-0400", "11-02 01:30-0500"],
            ("Last/Shift", "Last/Skip"): ["11-01 01:30-0500", "11-02 01:30-0500"],
            ("Both/Shift", "Both/Skip"): ["11-01 01:30-0400", "11-01 01:30-0500"],
        },
        id="new-york-fall-fixed-time-first-last-or-both",
    ),
    pytest.param(
        "30 * * * *",
        "America/New_York",
        "2026-11-01T00:00:00-04:00",
        {
            "First/Skip": ["11-01 00:30-0400", "11-01 01:30-0400", "11-01 02:30-0500"],
            "Last/Skip": ["11-01 00:30-0400", "11-01 01:30-0500", "11-01 02:30-0500"],
            "Both/Skip": ["11-01 00:30-0400", "11-01 01:30-0400", "11-01 01:30-0500"],
        },
        id="new-york-fall-wildcard-too",
    ),
    pytest.param(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00+00:00",
        {
            "First/Shift": ["03-08 03:00-0400", "03-09 02:30-0400"],
            "Last/Skip": ["03-09 02:30-0400", "03-10 02:30-0400"],
        },
        id="new-york-spring-fixed-time-shift-or-skip",
    ),
    pytest.param(
        "15,45 * * * *",
        "America/New_York",
        "2026-03-08T01:30:00-05:00",
        {
            "Both/Shift": ["03-08 01:45-0500", "03-08 03:00-0400", "03-08 03:15-0400"],
            "Both/Skip": ["03-08 01:45-0500", "03-08 03:15-0400", "03-08 03:45-0400"],
        },
        id="new-york-spring-wildcard-skipped-times-collapse-into-one-shifted-run",
    ),
    pytest.param(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00+00:00",
        {
            "Both/Shift": ["10-04 02:30+1100", "10-05 02:15+1100"],
            "Both/Skip": ["10-05 02:15+1100", "10-06 02:15+1100"],
        },
        id="lord-howe-spring-30-minute-gap",
    ),
    pytest.param(
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00:00+00:00",
        {
            "First/Skip": ["04-05 01:45+1100", "04-06 01:45+1030"],
            "Last/Skip": ["04-05 01:45+1030", "04-06 01:45+1030"],
            "Both/Skip": ["04-05 01:45+1100", "04-05 01:45+1030"],
        },
        id="lord-howe-fall-30-minute-repeat",
    ),
    pytest.param(
        "30 23 * * *",
        "America/Santiago",
        "2026-04-04T12:00:00+00:00",
        {
            "First/Shift": ["04-04 23:30-0300", "04-05 23:30-0400"],
            "Last/Shift": ["04-04 23:30-0400", "04-05 23:30-0400"],
            "Both/Shift": ["04-04 23:30-0300", "04-04 23:30-0400"],
        },
        id="santiago-fall-repeats-the-hour-before-midnight",
    ),
    pytest.param(
        "@daily",
        "America/Santiago",
        "2026-09-05T12:00:00+00:00",
        {
            "First/Shift": ["09-06 01:00-0300", "09-07 00:00-0300"],
            "First/Skip": ["09-07 00:00-0300", "09-08 00:00-0300"],
        },
        id="santiago-spring-midnight-does-not-occur",
    ),
    pytest.param(
        "0 3 * * *",
        "Pacific/Chatham",
        "2026-04-04T00:00:00+00:00",
        {
            "Last/Skip": ["04-05 03:00+1245", "04-06 03:00+1245"],
            "Both/Skip": ["04-05 03:00+1345", "04-05 03:00+1245"],
        },
        id="chatham-fall-45-minute-offset",
    ),
    # A choice applies whatever the size of the change, unlike Debian cron's rules,
    # which let a jump of 3 hours or more skip every job's times.
    pytest.param(
        "30 5 * * *",
        "Antarctica/Casey",
        "2018-10-06T00:00:00+00:00",
        {
            "First/Shift": ["10-07 07:00+1100", "10-08 05:30+1100"],
            "First/Skip": ["10-08 05:30+1100", "10-09 05:30+1100"],
        },
        id="casey-three-hour-jump",
    ),
    pytest.param(
        "0 12 * * *",
        "Pacific/Apia",
        "2011-12-29T00:00:00+00:00",
        {
            "First/Shift": ["12-29 12:00-1000", "12-31 00:00+1400"],
            "First/Skip": ["12-29 12:00-1000", "12-31 12:00+1400"],
        },
        id="apia-skipped-a-whole-day",
    ),
]


def _by_choice(table: dict[str | tuple[str, ...], list[str]]) -> list[tuple[str, list[str]]]:
    return [
        (choice, runs)
        for choices, runs in table.items()
        for choice in ((choices,) if isinstance(choices, str) else choices)
    ]


@pytest.mark.parametrize(("expression", "zone", "start", "table"), CHOICE_CASES)
def test_a_daylight_saving_choice_picks_the_runs(
    expression: str, zone: str, start: str, table: dict[str | tuple[str, ...], list[str]]
) -> None:
    for choice, expected in _by_choice(table):
        assert _runs(expression, zone, start, len(expected), _choice(choice)) == expected, choice


@pytest.mark.parametrize(("expression", "zone", "start", "table"), CHOICE_CASES)
def test_choice_table_agrees_with_the_reference(
    expression: str, zone: str, start: str, table: dict[str | tuple[str, ...], list[str]]
) -> None:
    first = civil.to_minute(dt.datetime.fromisoformat(start)) + 1
    last = first + 3 * 24 * 60
    for text, _ in _by_choice(table):
        schedule = cron_schedule(expression, zone, _choice(text))
        reference = chosen_fires(schedule.cron, schedule.timeline.zone, first, last, _choice(text))
        ours, moment = [], first - 1
        while (moment := schedule.next_fire_minute(moment)) is not None and moment <= last:
            ours.append(moment)
        assert ours == reference, text
        assert schedule.count_fires_minutes(first - 1, last) == len(reference), text


@pytest.mark.parametrize(
    ("expression", "zone", "start", "same_as"),
    [
        ("30 1 * * *", "America/New_York", "2026-10-31T12:00:00+00:00", "First/Shift"),
        ("30 2 * * *", "America/New_York", "2026-03-07T12:00:00+00:00", "First/Shift"),
        ("30 * * * *", "America/New_York", "2026-11-01T00:00:00-04:00", "Both/Skip"),
        ("*/10 2 * * *", "Australia/Lord_Howe", "2026-10-04T01:55:00+10:30", "Both/Skip"),
    ],
)
def test_at_an_ordinary_change_the_default_is_a_choice_by_the_jobs_kind(
    expression: str, zone: str, start: str, same_as: str
) -> None:
    """Debian cron's rules, for changes of 5 minutes to 3 hours: fixed-time jobs as
    First/Shift, wildcard jobs as Both/Skip."""
    assert _runs(expression, zone, start, 4) == _runs(expression, zone, start, 4, _choice(same_as))


@pytest.mark.parametrize(
    ("expression", "zone", "moment", "expected"),
    [
        ("30 2 * * *", "America/New_York", "2026-03-08T12:00:00+00:00", "03-08 03:00-0400"),
        ("30 1 * * *", "America/New_York", "2026-11-01T07:00:00+00:00", "11-01 01:30-0400"),
        ("30 * * * *", "America/New_York", "2026-11-01T06:45:00+00:00", "11-01 01:30-0500"),
        ("*/15 * * * *", "UTC", "2026-01-01T00:14:59+00:00", "01-01 00:00+0000"),
        ("0 3 * * *", "Pacific/Chatham", "2026-09-27T00:00:00+00:00", "09-27 03:45+1345"),
    ],
)
def test_last_run_at_or_before(expression: str, zone: str, moment: str, expected: str) -> None:
    schedule = cron_schedule(expression, zone)
    found = schedule.last_run_at_or_before(dt.datetime.fromisoformat(moment))
    assert found is not None
    assert found.astimezone(schedule.timeline.zone).strftime("%m-%d %H:%M%z") == expected


def test_next_run_is_strictly_after_the_given_instant() -> None:
    schedule = cron_schedule("*/5 * * * *", "UTC")
    at = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
    assert schedule.next_run_after(at) == dt.datetime(2026, 1, 1, 0, 10, tzinfo=dt.UTC)
    assert schedule.next_run_after(at - dt.timedelta(microseconds=1)) == at


def test_naive_datetimes_are_refused() -> None:
    schedule = cron_schedule("* * * * *", "UTC")
    with pytest.raises(ValueError, match="aware datetime is required"):
        schedule.next_run_after(dt.datetime(2026, 1, 1))  # noqa: DTZ001 - the point of the test


@pytest.mark.parametrize(
    ("zone", "message"),
    [
        ("Mars/Olympus_Mons", "unknown time zone 'Mars/Olympus_Mons'"),
        ("not a zone", "is not an IANA time zone name"),
        ("../etc/passwd", "is not an IANA time zone name"),
    ],
)
def test_unknown_zones_are_refused(zone: str, message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        cron_schedule("* * * * *", zone)


def test_one_shot_runs_once() -> None:
    at = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
    schedule = OneShotSchedule(at)
    assert schedule.next_run_after(at - dt.timedelta(seconds=1)) == at
    assert schedule.next_run_after(at) is None
    assert schedule.last_run_at_or_before(at) == at
    assert schedule.last_run_at_or_before(at - dt.timedelta(seconds=1)) is None
    assert schedule.count_runs_between(at - dt.timedelta(days=1), at) == 1
    assert schedule.count_runs_between(at, at + dt.timedelta(days=1)) == 0
