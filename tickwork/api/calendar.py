"""A Calendar (``tickwork.dev/v1alpha1``): days on a time zone's wall clock, which a
job's runs stay off (:mod:`tickwork.core.calendar`). ``tickwork explain -f JOB
--calendar FILE`` reads them offline and marks the runs that fall on their days."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Self

from pydantic import AfterValidator, ConfigDict, Field, StrictStr, model_validator

from tickwork.api import rules
from tickwork.api.base import ShortText, ZoneName, _cel, _Model
from tickwork.core import civil
from tickwork.core.calendar import DaySet, day_pattern
from tickwork.core.zones import load_zone

CALENDAR_KIND = "Calendar"
CALENDAR_PLURAL = "calendars"
CALENDAR_SINGULAR = "calendar"
CALENDAR_SHORT_NAMES = ("twcal",)
#: The most dates, ranges and day patterns one calendar lists.
MAX_DATES, MAX_RANGES, MAX_PATTERNS = 1000, 100, 20
#: The most Calendars a job names, in notOn and in onlyOn each.
MAX_JOB_CALENDARS = 8

CalendarName = Annotated[
    StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_NAME_PATTERN)
]


def _check_days(value: str) -> str:
    day_pattern(value)  # cron's day fields: a value, range, list or step each
    return value


DayPatternText = Annotated[
    StrictStr, Field(min_length=5, max_length=128), AfterValidator(_check_days)
]


class DateRange(_Model):
    """Every day from ``from`` to ``to``, both included."""

    from_: dt.date = Field(alias="from")
    to: dt.date

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.to < self.from_:
            raise ValueError("a range's to must not be before its from")
        return self


class CalendarSpec(_Model):
    """The days of a calendar, each a whole day on ``timeZone``'s wall clock."""

    time_zone: ZoneName = "UTC"
    """IANA zone whose days these are."""
    dates: Annotated[list[dt.date], Field(max_length=MAX_DATES)] = []
    """Single days (YYYY-MM-DD)."""
    ranges: Annotated[list[DateRange], Field(max_length=MAX_RANGES)] = []
    """Runs of days, both ends included."""
    days: Annotated[list[DayPatternText], Field(max_length=MAX_PATTERNS)] = []
    """Days that recur, as cron's three day fields: ``day-of-month month day-of-week``
    (``* * sat,sun``: weekends; ``25 12 *``: every December 25)."""
    description: ShortText = ""
    """Free text for people; Tickwork does not read it."""

    def day_set(self, name: str) -> DaySet:
        def number(day: dt.date) -> int:
            return civil.days_from_civil(day.year, day.month, day.day)

        return DaySet(
            name=name,
            zone=load_zone(self.time_zone),
            dates=frozenset(number(d) for d in self.dates),
            ranges=tuple((number(r.from_), number(r.to)) for r in self.ranges),
            patterns=tuple(day_pattern(text) for text in self.days),
        )


class JobCalendars(_Model):
    """The Calendars (of the job's own namespace) whose days a job's runs keep off, or
    keep to. A run is kept when none of ``notOn`` holds its day and every one of
    ``onlyOn`` does, each calendar's day read on its own time zone's wall clock."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.CALENDAR_NAMES))

    not_on: Annotated[list[CalendarName], Field(max_length=MAX_JOB_CALENDARS)] = []
    """No run on these calendars' days (holidays, a freeze)."""
    only_on: Annotated[list[CalendarName], Field(max_length=MAX_JOB_CALENDARS)] = []
    """Runs only on days every one of these calendars holds (trading days)."""

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.not_on and not self.only_on:
            raise ValueError(rules.CALENDAR_NAMES.message)
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """Every Calendar named, each once, in the order given."""
        return tuple(dict.fromkeys([*self.not_on, *self.only_on]))
