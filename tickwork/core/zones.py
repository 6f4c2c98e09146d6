"""UTC-offset transitions of IANA time zones, at minute resolution.

``zoneinfo`` answers "what is the offset at this instant" but does not list
its transitions, so they are found by probing each year every six hours and
bisecting every change to the minute, then cached per (zone, year). Two
transitions less than six hours apart would be missed; the tz database has
none since 1970, and the property tests compare against a minute-by-minute
reference that does not use this module.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import re
import zoneinfo
from dataclasses import dataclass

from tickwork.core import civil
from tickwork.core.errors import InvalidSpecError

_PROBE_MINUTES = 6 * 60

#: The shape of an IANA zone name (the CRD's CEL rule checks the same).
ZONE_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,2}$"
_ZONE_NAME = re.compile(ZONE_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class Transition:
    """The offset changes from ``before`` to ``after`` minutes at UTC minute ``at``."""

    at: int
    before: int
    after: int

    @property
    def shift(self) -> int:
        return self.after - self.before


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """The zone called ``name``, or :class:`InvalidSpecError` saying what is wrong."""
    if not _ZONE_NAME.match(name):
        raise InvalidSpecError(
            f"{name!r} is not an IANA time zone name like 'Europe/Berlin' or 'UTC'",
            field="timeZone",
        )
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidSpecError(
            f"unknown time zone {name!r}; use a name from the IANA database, like "
            "'America/New_York'",
            field="timeZone",
        ) from exc


def offset_at(zone: dt.tzinfo, utc_minute: int) -> int:
    """The UTC offset, in whole minutes, in force at a UTC minute."""
    offset = dt.datetime.fromtimestamp(utc_minute * 60, zone).utcoffset()
    assert offset is not None  # noqa: S101 - fromtimestamp(tz) always yields an aware time
    return int(offset.total_seconds()) // 60


def _first_change(zone: dt.tzinfo, low: int, high: int) -> int:
    """The first minute in ``(low, high]`` whose offset differs from ``low``'s."""
    base = offset_at(zone, low)
    while high - low > 1:
        middle = (low + high) // 2
        if offset_at(zone, middle) == base:
            low = middle
        else:
            high = middle
    return high


@functools.lru_cache(maxsize=8192)
def _year_transitions(
    zone: zoneinfo.ZoneInfo, year: int
) -> tuple[tuple[int, ...], tuple[Transition, ...]]:
    """The transitions with ``at`` in the given UTC year, and their ``at`` values."""
    start = civil.days_from_civil(year, 1, 1) * civil.MINUTES_PER_DAY
    end = civil.days_from_civil(year + 1, 1, 1) * civil.MINUTES_PER_DAY
    found: list[Transition] = []
    previous_minute = start - 1
    previous_offset = offset_at(zone, previous_minute)
    probe = start
    while True:
        probe = min(probe, end - 1)
        offset = offset_at(zone, probe)
        if offset != previous_offset:
            at = _first_change(zone, previous_minute, probe)
            found.append(Transition(at=at, before=offset_at(zone, at - 1), after=offset))
        if probe == end - 1:
            break
        previous_minute, previous_offset = probe, offset
        probe += _PROBE_MINUTES
    return tuple(t.at for t in found), tuple(found)


# The first UTC minute of each year from 1900 to 2200: the year of a minute is a
# bisection of this table (a schedule asks for it on every transition lookup).
_FIRST_YEAR = 1900
_YEAR_STARTS = tuple(
    civil.days_from_civil(year, 1, 1) * civil.MINUTES_PER_DAY for year in range(_FIRST_YEAR, 2201)
)


def _year_of(utc_minute: int) -> int:
    if _YEAR_STARTS[0] <= utc_minute < _YEAR_STARTS[-1]:
        return _FIRST_YEAR - 1 + bisect.bisect_right(_YEAR_STARTS, utc_minute)
    return civil.civil_from_days(utc_minute // civil.MINUTES_PER_DAY)[0]


class ZoneTimeline:
    """The transitions of one zone, looked up by UTC minute."""

    __slots__ = ("zone",)

    def __init__(self, zone: zoneinfo.ZoneInfo) -> None:
        self.zone = zone

    def offset(self, utc_minute: int) -> int:
        return offset_at(self.zone, utc_minute)

    def next_transition(self, after: int, until: int) -> Transition | None:
        """The first transition with ``after < at <= until``, if any."""
        for year in range(_year_of(after), _year_of(until) + 1):
            ats, transitions = _year_transitions(self.zone, year)
            index = bisect.bisect_right(ats, after)
            if index < len(ats):
                found = transitions[index]
                return found if found.at <= until else None
        return None

    def last_transition(self, at_or_before: int, since: int) -> Transition | None:
        """The last transition with ``since < at <= at_or_before``, if any."""
        for year in range(_year_of(at_or_before), _year_of(since) - 1, -1):
            ats, transitions = _year_transitions(self.zone, year)
            index = bisect.bisect_right(ats, at_or_before)
            if index > 0:
                found = transitions[index - 1]
                return found if found.at > since else None
        return None
