"""Cron expressions: what parses into what, what is refused with which message, and
matching on wall-clock minutes."""

from __future__ import annotations

import datetime as dt

import pytest

from tickwork.core import civil
from tickwork.core.cron import parse_cron
from tickwork.core.errors import CronSyntaxError, NeverFiresError

ALL_MINUTES = frozenset(range(60))
ALL_HOURS = frozenset(range(24))
ALL_DAYS = frozenset(range(1, 32))
ALL_MONTHS = frozenset(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))


@pytest.mark.parametrize(
    ("expression", "field", "expected"),
    [
        ("* * * * *", "minutes", ALL_MINUTES),
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("5/20 * * * *", "minutes", {5, 25, 45}),
        ("1-10/3 * * * *", "minutes", {1, 4, 7, 10}),
        ("0,30,59 * * * *", "minutes", {0, 30, 59}),
        ("0 9-17 * * *", "hours", set(range(9, 18))),
        ("0 */6 * * *", "hours", {0, 6, 12, 18}),
        ("0 0 1,15,31 * *", "days", {1, 15, 31}),
        ("0 0 * jan,JUL,dec *", "months", {1, 7, 12}),
        ("0 0 * mar-may *", "months", {3, 4, 5}),
        ("0 0 * */3 *", "months", {1, 4, 7, 10}),
        ("0 0 * * mon-fri", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * 7", "weekdays", {0}),
        ("0 0 * * 5-7", "weekdays", {0, 5, 6}),
        ("0 0 * * SUN,sat", "weekdays", {0, 6}),
        ("@hourly", "minutes", {0}),
        ("@daily", "hours", {0}),
        ("@weekly", "weekdays", {0}),
        ("@monthly", "days", {1}),
        ("@yearly", "months", {1}),
        ("@annually", "days", {1}),
        ("@midnight", "minutes", {0}),
    ],
)
def test_fields_parse_to_the_values_they_name(
    expression: str, field: str, expected: set[int]
) -> None:
    assert getattr(parse_cron(expression), field) == frozenset(expected)


@pytest.mark.parametrize(
    ("expression", "wildcard", "day_or_weekday"),
    [
        ("30 2 * * *", False, False),  # fixed time
        ("*/5 * * * *", True, False),  # minute starts with *
        ("0 * * * *", True, False),  # hour starts with *
        ("0 */2 * * *", True, False),  # a step on * is still a wildcard
        ("0-59 2 * * *", False, False),  # a full range is not a star: fixed-time
        ("@hourly", True, False),
        ("@daily", False, False),
        ("0 0 1,15 * mon", False, True),  # both day fields restricted: either fires
        ("0 0 */2 * mon", False, False),  # day field starts with *: both must match
        ("0 0 1 * *", False, False),
    ],
)
def test_flags_follow_vixie_rules(expression: str, wildcard: bool, day_or_weekday: bool) -> None:
    parsed = parse_cron(expression)
    assert parsed.wildcard is wildcard
    assert parsed.day_or_weekday is day_or_weekday


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "the schedule is empty"),
        ("* * * *", "expected 5 fields"),
        ("* * * * * *", "expected 5 fields"),
        ("60 * * * *", "field 1 (minute): 60 is out of range 0-59"),
        ("* 24 * * *", "field 2 (hour): 24 is out of range 0-23"),
        ("* * 0 * *", "field 3 (day of month): 0 is out of range 1-31"),
        ("* * * 13 *", "field 4 (month): 13 is out of range 1-12"),
        ("* * * * 8", "field 5 (day of week): 8 is out of range 0-7"),
        ("*/0 * * * *", "step '0' must be a positive whole number"),
        ("*/x * * * *", "step 'x' must be a positive whole number"),
        ("5-1 * * * *", "range '5-1' runs backwards"),
        ("* * * foo *", "'foo' is not a number or a name like 'jan'"),
        ("* * * * funday", "'funday' is not a number or a name like 'sun'"),
        ("1,,2 * * * *", "empty list element"),
        ("? * * * *", "unsupported character(s) '?'"),
        ("* * L * *", "'L' is not a number"),
        ("@reboot", "unknown macro '@reboot'"),
        ("CRON_TZ=UTC * * * * *", "put the time zone in spec.timeZone"),
    ],
)
def test_bad_expressions_say_what_to_fix(expression: str, message: str) -> None:
    with pytest.raises(CronSyntaxError, match=r"^schedule: ") as excinfo:
        parse_cron(expression)
    assert message in str(excinfo.value)


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 feb *"])
def test_a_schedule_naming_no_existing_day_is_refused(expression: str) -> None:
    with pytest.raises(NeverFiresError, match="never fires"):
        parse_cron(expression)


@pytest.mark.parametrize("expression", ["0 0 29 2 *", "0 0 30 2 mon", "0 0 31 * *"])
def test_rare_but_real_days_are_accepted(expression: str) -> None:
    parse_cron(expression)


def _minute(*args: int) -> int:
    return civil.minute_from_naive(dt.datetime(*args))  # noqa: DTZ001 - wall clock


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        ("*/15 * * * *", (2026, 1, 1, 0, 1), (2026, 1, 1, 0, 15)),
        ("*/15 * * * *", (2026, 1, 1, 0, 15), (2026, 1, 1, 0, 15)),  # at-or-after
        ("0 0 * * *", (2026, 12, 31, 0, 1), (2027, 1, 1, 0, 0)),
        ("0 0 29 2 *", (2026, 3, 1, 0, 0), (2028, 2, 29, 0, 0)),  # next leap day
        ("0 12 * * mon", (2026, 11, 29, 0, 0), (2026, 11, 30, 12, 0)),
        # both day fields restricted: the 1st or a Friday, whichever comes first
        ("0 0 1 * fri", (2026, 11, 28, 0, 0), (2026, 12, 1, 0, 0)),
        ("0 0 13 * fri", (2026, 11, 14, 0, 0), (2026, 11, 20, 0, 0)),
        # day field with a star: the 13th that is a Friday
        ("0 0 */13 * fri", (2026, 1, 1, 0, 0), (2026, 2, 27, 0, 0)),
        ("30 4 1 jan *", (2026, 1, 1, 4, 31), (2027, 1, 1, 4, 30)),
        ("59 23 31 12 *", (2026, 6, 1, 0, 0), (2026, 12, 31, 23, 59)),
    ],
)
def test_next_match_finds_the_first_matching_minute(
    expression: str, start: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    parsed = parse_cron(expression)
    assert parsed.next_match(_minute(*start)) == _minute(*expected)


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        ("*/15 * * * *", (2026, 1, 1, 0, 14), (2026, 1, 1, 0, 0)),
        ("0 0 * * *", (2027, 1, 1, 0, 0), (2027, 1, 1, 0, 0)),
        ("0 0 * * *", (2026, 12, 31, 23, 59), (2026, 12, 31, 0, 0)),
        ("0 0 29 2 *", (2028, 2, 28, 0, 0), (2024, 2, 29, 0, 0)),
        ("30 4 1 jan *", (2026, 1, 1, 4, 29), (2025, 1, 1, 4, 30)),
        ("0 12 * * mon", (2026, 11, 29, 0, 0), (2026, 11, 23, 12, 0)),
    ],
)
def test_prev_match_finds_the_last_matching_minute(
    expression: str, start: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    assert parse_cron(expression).prev_match(_minute(*start)) == _minute(*expected)


@pytest.mark.parametrize(
    ("expression", "first", "last", "expected"),
    [
        ("* * * * *", (2026, 1, 1, 0, 0), (2026, 12, 31, 23, 59), 365 * 1440),
        ("*/15 9-17 * * mon-fri", (2026, 11, 1, 0, 0), (2026, 11, 30, 23, 59), 21 * 9 * 4),
        ("0 0 1 * *", (2026, 1, 1, 0, 0), (2030, 12, 31, 0, 0), 60),
        ("30 * * * *", (2026, 1, 1, 0, 31), (2026, 1, 1, 2, 30), 2),
        ("0 0 29 2 *", (2000, 1, 1, 0, 0), (2100, 12, 31, 0, 0), 25),  # 2100 is not leap
    ],
)
def test_count_matches_counts_without_walking_minutes(
    expression: str, first: tuple[int, ...], last: tuple[int, ...], expected: int
) -> None:
    assert parse_cron(expression).count_matches(_minute(*first), _minute(*last)) == expected


def test_count_matches_of_an_empty_range_is_zero() -> None:
    parsed = parse_cron("* * * * *")
    assert parsed.count_matches(100, 99) == 0
