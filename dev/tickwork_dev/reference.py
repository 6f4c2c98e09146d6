"""Brute-force oracles for schedules, one minute at a time.

These are the test and benchmark references, not production code: they are
slow on purpose (a step per minute), read the UTC offset of every single
minute straight from ``zoneinfo`` and share nothing with :mod:`.schedule`
but the parsed field sets.

* :func:`vixie_fires` ports Vixie ``cron.c``'s main loop and its wake-up
  classification (``timeDiff`` small / medium / negative / large): the
  default, Debian cron's rules.
* :func:`chosen_fires` applies a ``spec.daylightSaving`` choice by its
  definition: list every instant at which each wall-clock minute occurs,
  then run a matching minute at the first, the last or each of its
  occurrences, and one that never occurs at the first instant after it or
  not at all.
"""

from __future__ import annotations

import collections
import datetime as dt

from tickwork.core.cron import CronExpression
from tickwork.core.daylight import DaylightSavingChoice, RepeatedTime, SkippedTime

_EPOCH = dt.datetime(1970, 1, 1)  # noqa: DTZ001 - a naive wall-clock origin on purpose
# Long enough for cron's virtual clock to settle: it waits for the wall clock at
# most 180 minutes after the clock goes back (a bigger step resets it), so 12 hours
# before the window leave it in the state the minutes before would have.
_WARMUP_MINUTES = 12 * 60


def _matches(cron: CronExpression, local_minute: int) -> bool:
    # The minute of the hour and the hour of the day first, by plain arithmetic on
    # the naive minute count (a day is 1,440 of them): most minutes fail there, and
    # building a datetime for each of them was most of the oracle's time.
    if local_minute % 60 not in cron.minutes or local_minute // 60 % 24 not in cron.hours:
        return False
    moment = _EPOCH + dt.timedelta(minutes=local_minute)
    if moment.month not in cron.months:
        return False
    day_ok = moment.day in cron.days
    weekday_ok = (moment.isoweekday() % 7) in cron.weekdays
    return (day_ok or weekday_ok) if cron.day_or_weekday else (day_ok and weekday_ok)


def _offset(zone: dt.tzinfo, utc_minute: int) -> int:
    offset = dt.datetime.fromtimestamp(utc_minute * 60, zone).utcoffset()
    assert offset is not None  # noqa: S101 - aware by construction
    return int(offset.total_seconds()) // 60


def vixie_fires(cron: CronExpression, zone: dt.tzinfo, first: int, last: int) -> list[int]:
    """UTC minutes in ``[first, last]`` at which Vixie cron would start the job."""
    minute = first - _WARMUP_MINUTES
    virtual = minute + _offset(zone, minute)
    fires: list[int] = []
    for now in range(minute + 1, last + 1):
        running = now + _offset(zone, now)
        diff = running - virtual
        if diff == 1 or diff > 180 or diff < -180:  # noqa: PLR2004 - cron.c's thresholds
            virtual = running
            fire = _matches(cron, running)
        elif diff > 5:  # noqa: PLR2004 - "DST begins"
            if cron.wildcard:
                fire = _matches(cron, running)
            else:
                fire = any(_matches(cron, m) for m in range(virtual + 1, running + 1))
            virtual = running
        elif diff > 0:  # woke up a little late: every job of every minute missed
            fire = any(_matches(cron, m) for m in range(virtual + 1, running + 1))
            virtual = running
        else:  # "DST ends": wildcard jobs only, virtual time waits
            fire = cron.wildcard and _matches(cron, running)
        if fire and now >= first:
            fires.append(now)
    return fires


# The occurrences of a wall-clock minute are at most one step back of the clock apart:
# 7 hours at the most since 1970 (Antarctica/Vostok, 1994), 3 since 2000.
_PAD_MINUTES = 12 * 60


def chosen_fires(
    cron: CronExpression, zone: dt.tzinfo, first: int, last: int, choice: DaylightSavingChoice
) -> list[int]:
    """UTC minutes in ``[first, last]`` at which a job with ``choice`` starts."""
    start = first - _PAD_MINUTES
    minutes = range(start, last + _PAD_MINUTES + 1)
    local = [minute + _offset(zone, minute) for minute in minutes]
    occurrences: dict[int, list[int]] = collections.defaultdict(list)
    for minute, wall in zip(minutes, local, strict=True):
        occurrences[wall].append(minute)

    fires: set[int] = set()
    previous_wall: int | None = None
    for minute, wall in zip(minutes, local, strict=True):
        if _matches(cron, wall):
            seen = occurrences[wall]  # every instant this wall-clock minute occurs at
            if (
                choice.repeated is RepeatedTime.BOTH
                or (choice.repeated is RepeatedTime.FIRST and minute == seen[0])
                or (choice.repeated is RepeatedTime.LAST and minute == seen[-1])
            ):
                fires.add(minute)
        if (
            choice.skipped is SkippedTime.SHIFT
            and previous_wall is not None
            and wall > previous_wall + 1  # the clock jumped: wall-clock minutes were skipped
        ):
            skipped = range(previous_wall + 1, wall)
            if any(m not in occurrences and _matches(cron, m) for m in skipped):
                fires.add(minute)  # the first instant after the skipped time
        previous_wall = wall
    return sorted(fire for fire in fires if first <= fire <= last)


def interval_fires(anchor: int, seconds: int, first: int, last: int) -> list[int]:
    """Epoch seconds in ``[first, last]`` at which an ``@every`` job on the grid of
    ``anchor`` fires: one step per second, a fire whenever a whole number of
    intervals has passed since the anchor (before it too)."""
    return [now for now in range(first, last + 1) if (now - anchor) % seconds == 0]


def within_bounds(
    fires: list[dt.datetime], not_before: dt.datetime | None, not_after: dt.datetime | None
) -> list[dt.datetime]:
    """The ``fires`` that ``spec.notBefore`` and ``spec.notAfter`` let through (both
    inclusive), looked at one by one."""
    return [
        fire
        for fire in fires
        if (not_before is None or fire >= not_before) and (not_after is None or fire <= not_after)
    ]
