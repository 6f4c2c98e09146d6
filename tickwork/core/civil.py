"""Integer calendar arithmetic on "minute numbers": minutes since 1970-01-01 00:00.

The schedule code works on plain integers rather than datetime objects: the
same number is a UTC instant or a naive wall-clock reading depending on the
context, which is exactly how cron itself counts (``clockTime`` in Vixie
cron). The day conversions are Howard Hinnant's ``days_from_civil`` and
``civil_from_days``, exact for the proleptic Gregorian calendar.
"""

from __future__ import annotations

import datetime as dt
import functools

MINUTES_PER_DAY = 1440
MINUTES_PER_HOUR = 60
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2 and is_leap(year):  # noqa: PLR2004 - February
        return 29
    return _DAYS_IN_MONTH[month - 1]


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a Gregorian date."""
    year -= month <= 2  # noqa: PLR2004 - the year starts in March here
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1  # noqa: PLR2004
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The Gregorian (year, month, day) of a day number."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    year = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)  # noqa: PLR2004
    return year + (month <= 2), month, day  # noqa: PLR2004


def weekday(days: int) -> int:
    """Cron's day of week of a day number: 0 is Sunday (1970-01-01 was a Thursday)."""
    return (days + 4) % 7


def to_minute(moment: dt.datetime) -> int:
    """The UTC minute number of an aware datetime, rounded down to the minute."""
    if moment.tzinfo is None:
        raise ValueError("an aware datetime is required; Tickwork never guesses a time zone")
    return int((moment - _EPOCH).total_seconds() // 60)


def from_minute(minute: int) -> dt.datetime:
    """The aware UTC datetime of a UTC minute number."""
    return _EPOCH + dt.timedelta(minutes=minute)


@functools.lru_cache(maxsize=16384)
def run_instant(minute: int) -> dt.datetime:
    """:func:`from_minute` for a schedule's runs, shared: a fleet's jobs on the same
    schedules hold the same instants (each job keeps its next runs, for status.nextRuns,
    and a datetime is 48 bytes). At most 16,384 instants are kept (~2.5 MB)."""
    return from_minute(minute)


def naive_from_minute(minute: int) -> dt.datetime:
    """The naive wall-clock datetime of a local minute number (for messages and tests)."""
    return (_EPOCH + dt.timedelta(minutes=minute)).replace(tzinfo=None)


def minute_from_naive(moment: dt.datetime) -> int:
    """The local minute number of a naive wall-clock datetime."""
    return to_minute(moment.replace(tzinfo=dt.UTC))
