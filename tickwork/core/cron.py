"""Cron expressions: parsing, and matching on wall-clock minute numbers.

Over 400 lines: one grammar (Vixie cron's fields, names, steps and its day-of-month or
day-of-week rule) and the matching that follows it, which change together.

Syntax is Vixie cron's (as in Debian): five fields — minute, hour, day of
month, month, day of week — each a comma list of ``*``, ``N``, ``N-M`` with
an optional ``/step``; month and weekday names (``jan``, ``mon-fri``); 0 or 7
for Sunday; the macros ``@yearly`` (``@annually``), ``@monthly``,
``@weekly``, ``@daily`` (``@midnight``) and ``@hourly``. As Kubernetes'
CronJob does, ``N/step`` is also accepted and means ``N-max/step``.

Two Vixie rules that surprise people are kept on purpose, because cron users
rely on them:

* day of month and day of week: if either field starts with ``*`` a day must
  match both; if both are restricted, a day matching either one fires
  (``0 0 1,15 * mon`` fires on the 1st, the 15th *and* every Monday);
* a job is *wildcard* when its minute or hour field starts with ``*``, and
  *fixed-time* otherwise; daylight-saving transitions treat the two kinds
  differently (see :mod:`tickwork.core.schedule`).

Everything here works on naive wall-clock minute numbers; time zones are the
schedule module's business.

Why one long module (~400 lines): parsing and matching share the field
tables and the Vixie rules above; kept together so the rules are read once.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from dataclasses import dataclass, field

from tickwork.core import civil
from tickwork.core.errors import CronSyntaxError, NeverFiresError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0


_FIELDS = (
    _FieldSpec("minute", 0, 59),
    _FieldSpec("hour", 0, 23),
    _FieldSpec("day of month", 1, 31),
    _FieldSpec("month", 1, 12, _MONTH_NAMES, 1),
    _FieldSpec("day of week", 0, 7, _DAY_NAMES, 0),
)

#: Characters a cron expression may contain (the CRD's CEL rule checks the same).
ALLOWED_CHARACTERS = re.compile(r"^[0-9A-Za-z*/,\- \t@]+$")

#: How far ahead (in years) a match is searched for before a schedule is
#: declared never to fire; 28 years is a full cycle of weekdays and leap years.
_SEARCH_YEARS = 29


def _parse_value(text: str, spec: _FieldSpec, position: int) -> int:
    lowered = text.lower()
    if spec.names and lowered in spec.names:
        return spec.names.index(lowered) + spec.name_base
    if not text.isdigit():
        hint = f" or a name like {spec.names[0]!r}" if spec.names else ""
        raise CronSyntaxError(
            f"field {position} ({spec.name}): {text!r} is not a number{hint}", field="schedule"
        )
    value = int(text)
    if not spec.low <= value <= spec.high:
        raise CronSyntaxError(
            f"field {position} ({spec.name}): {value} is out of range {spec.low}-{spec.high}",
            field="schedule",
        )
    return value


def _parse_field(text: str, spec: _FieldSpec, position: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronSyntaxError(
                f"field {position} ({spec.name}): empty list element in {text!r}",
                field="schedule",
            )
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronSyntaxError(
                    f"field {position} ({spec.name}): step {step_text!r} must be a positive "
                    "whole number",
                    field="schedule",
                )
            step = int(step_text)
        if base == "*":
            low, high = spec.low, spec.high
        elif "-" in base:
            first, _, last = base.partition("-")
            low = _parse_value(first, spec, position)
            high = _parse_value(last, spec, position)
            if low > high:
                raise CronSyntaxError(
                    f"field {position} ({spec.name}): range {base!r} runs backwards; "
                    f"write it as {last}-{first} or split it into a list",
                    field="schedule",
                )
        else:
            low = _parse_value(base, spec, position)
            high = spec.high if slash else low
        values.update(range(low, high + 1, step))
    return frozenset(values)


def _next_table(allowed: frozenset[int], size: int) -> tuple[int | None, ...]:
    """For each value, the smallest allowed value at or after it (None past the last)."""
    table: list[int | None] = [None] * (size + 1)
    upcoming: int | None = None
    for value in range(size, -1, -1):
        if value in allowed:
            upcoming = value
        table[value] = upcoming
    return tuple(table)


def _prev_table(allowed: frozenset[int], size: int) -> tuple[int | None, ...]:
    """For each value, the largest allowed value at or before it (None before the first)."""
    table: list[int | None] = [None] * (size + 1)
    previous: int | None = None
    for value in range(size + 1):
        if value in allowed:
            previous = value
        table[value] = previous
    return tuple(table)


@dataclass(frozen=True)
class CronExpression:
    """A parsed cron expression. Build it with :func:`parse_cron`."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_or_weekday: bool
    """True when both day fields are restricted: a day matching either fires."""
    wildcard: bool
    """True when the minute or hour field starts with ``*`` (Vixie's MIN_STAR|HR_STAR)."""

    _minutes_sorted: tuple[int, ...] = field(repr=False, compare=False)
    _next_minute: tuple[int | None, ...] = field(repr=False, compare=False)
    _prev_minute: tuple[int | None, ...] = field(repr=False, compare=False)
    _next_hour: tuple[int | None, ...] = field(repr=False, compare=False)
    _prev_hour: tuple[int | None, ...] = field(repr=False, compare=False)
    _next_month: tuple[int | None, ...] = field(repr=False, compare=False)
    _prev_month: tuple[int | None, ...] = field(repr=False, compare=False)

    # -- matching ---------------------------------------------------------

    def matches_day(self, day_number: int, day_of_month: int) -> bool:
        dom = day_of_month in self.days
        dow = civil.weekday(day_number) in self.weekdays
        return (dom or dow) if self.day_or_weekday else (dom and dow)

    def matches(self, local_minute: int) -> bool:
        """Does the wall-clock minute ``local_minute`` match every field?"""
        day_number, rest = divmod(local_minute, civil.MINUTES_PER_DAY)
        hour, minute = divmod(rest, civil.MINUTES_PER_HOUR)
        if minute not in self.minutes or hour not in self.hours:
            return False
        _, month, day = civil.civil_from_days(day_number)
        return month in self.months and self.matches_day(day_number, day)

    def next_match(self, local_minute: int) -> int | None:
        """The first matching wall-clock minute at or after ``local_minute``."""
        day_number, rest = divmod(local_minute, civil.MINUTES_PER_DAY)
        hour, minute = divmod(rest, civil.MINUTES_PER_HOUR)
        year, month, day = civil.civil_from_days(day_number)
        last_year = year + _SEARCH_YEARS
        while year <= last_year:
            next_month = self._next_month[month]
            if next_month != month:
                if next_month is None:
                    year, month = year + 1, self._next_month[1] or 1
                else:
                    month = next_month
                day, hour, minute = 1, 0, 0
                day_number = civil.days_from_civil(year, month, day)
                continue
            if not self.matches_day(day_number, day):
                day_number += 1
                day, hour, minute = day + 1, 0, 0
                if day > civil.days_in_month(year, month):
                    year, month, day = civil.civil_from_days(day_number)
                continue
            next_hour = self._next_hour[hour]
            if next_hour is None:
                day_number += 1
                year, month, day = civil.civil_from_days(day_number)
                hour = minute = 0
                continue
            if next_hour != hour:
                hour, minute = next_hour, 0
            next_minute = self._next_minute[minute]
            if next_minute is None:
                hour, minute = hour + 1, 0
                if hour > 23:  # noqa: PLR2004 - last hour of the day
                    day_number += 1
                    year, month, day = civil.civil_from_days(day_number)
                    hour = 0
                continue
            return (day_number * 24 + hour) * 60 + next_minute
        return None

    def prev_match(self, local_minute: int) -> int | None:
        """The last matching wall-clock minute at or before ``local_minute``."""
        day_number, rest = divmod(local_minute, civil.MINUTES_PER_DAY)
        hour, minute = divmod(rest, civil.MINUTES_PER_HOUR)
        year, month, day = civil.civil_from_days(day_number)
        first_year = year - _SEARCH_YEARS
        while year >= first_year:
            prev_month = self._prev_month[month]
            if prev_month != month:
                if prev_month is None:
                    year, month = year - 1, self._prev_month[12] or 12
                else:
                    month = prev_month
                day, hour, minute = civil.days_in_month(year, month), 23, 59
                day_number = civil.days_from_civil(year, month, day)
                continue
            if not self.matches_day(day_number, day):
                day_number -= 1
                year, month, day = civil.civil_from_days(day_number)
                hour, minute = 23, 59
                continue
            prev_hour = self._prev_hour[hour]
            if prev_hour is None:
                day_number -= 1
                year, month, day = civil.civil_from_days(day_number)
                hour, minute = 23, 59
                continue
            if prev_hour != hour:
                hour, minute = prev_hour, 59
            prev_minute = self._prev_minute[minute]
            if prev_minute is None:
                hour, minute = hour - 1, 59
                if hour < 0:
                    day_number -= 1
                    year, month, day = civil.civil_from_days(day_number)
                    hour = 23
                continue
            return (day_number * 24 + hour) * 60 + prev_minute
        return None

    def count_matches(self, first: int, last: int) -> int:
        """How many wall-clock minutes in ``[first, last]`` match; O(days), not O(minutes)."""
        if last < first:
            return 0
        first_day, first_rest = divmod(first, civil.MINUTES_PER_DAY)
        last_day, last_rest = divmod(last, civil.MINUTES_PER_DAY)
        per_full_day = len(self.hours) * len(self.minutes)
        total = 0
        day_number = first_day
        while day_number <= last_day:
            year, month, day = civil.civil_from_days(day_number)
            if month not in self.months:
                # Skip to the first day of the next month.
                day_number += civil.days_in_month(year, month) - day + 1
                continue
            if self.matches_day(day_number, day):
                start = first_rest if day_number == first_day else 0
                end = last_rest if day_number == last_day else civil.MINUTES_PER_DAY - 1
                if start == 0 and end == civil.MINUTES_PER_DAY - 1:
                    total += per_full_day
                else:
                    total += self._count_in_day(start, end)
            day_number += 1
        return total

    def _count_in_day(self, start: int, end: int) -> int:
        start_hour, start_minute = divmod(start, 60)
        end_hour, end_minute = divmod(end, 60)
        total = 0
        for hour in self.hours:
            if hour < start_hour or hour > end_hour:
                continue
            low = start_minute if hour == start_hour else 0
            high = end_minute if hour == end_hour else 59
            total += bisect.bisect_right(self._minutes_sorted, high) - bisect.bisect_left(
                self._minutes_sorted, low
            )
        return total


def _day_exists(days: frozenset[int], months: frozenset[int]) -> bool:
    """Does some month of the set have some day of the set (February with its 29th)?"""
    return any(day <= civil.days_in_month(2000, month) for month in months for day in days)


def parse_cron(expression: str) -> CronExpression:
    """Parse a cron expression or raise :class:`CronSyntaxError` saying what to fix."""
    text = expression.strip()
    if not text:
        raise CronSyntaxError(
            "the schedule is empty; write five fields, like '*/5 * * * *'", field="schedule"
        )
    if text.upper().startswith(("CRON_TZ=", "TZ=")):
        raise CronSyntaxError(
            "put the time zone in spec.timeZone, not in the schedule", field="schedule"
        )
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            raise CronSyntaxError(
                f"unknown macro {text!r}; use one of {', '.join(MACROS)}", field="schedule"
            )
        parsed = parse_cron(macro)
        return _with_expression(parsed, expression)
    if not ALLOWED_CHARACTERS.match(text):
        bad = sorted({ch for ch in text if not ALLOWED_CHARACTERS.match(ch)})
        raise CronSyntaxError(
            f"unsupported character(s) {''.join(bad)!r}; cron fields use digits, names, "
            "'*', ',', '-' and '/'",
            field="schedule",
        )
    parts = text.split()
    if len(parts) != len(_FIELDS):
        raise CronSyntaxError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}",
            field="schedule",
        )
    minutes, hours, days, months, weekdays = (
        _parse_field(part, spec, index + 1)
        for index, (part, spec) in enumerate(zip(parts, _FIELDS, strict=True))
    )
    if 7 in weekdays:  # noqa: PLR2004 - 7 is Sunday too
        weekdays = (weekdays - {7}) | {0}
    day_or_weekday = not parts[2].startswith("*") and not parts[4].startswith("*")
    # With "day AND weekday" a day must exist in some month; every existing
    # day meets every weekday within 28 years, so that is the only way to
    # write a schedule that never fires.
    if not day_or_weekday and not _day_exists(days, months):
        raise NeverFiresError(
            f"{expression!r} never fires: no month in field 4 has the days in field 3",
            field="schedule",
        )
    return _build(
        expression=expression,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        day_or_weekday=day_or_weekday,
        wildcard=parts[0].startswith("*") or parts[1].startswith("*"),
    )


def _build(
    *,
    expression: str,
    minutes: frozenset[int],
    hours: frozenset[int],
    days: frozenset[int],
    months: frozenset[int],
    weekdays: frozenset[int],
    day_or_weekday: bool,
    wildcard: bool,
) -> CronExpression:
    return CronExpression(
        expression=expression,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        day_or_weekday=day_or_weekday,
        wildcard=wildcard,
        _minutes_sorted=tuple(sorted(minutes)),
        _next_minute=_next_table(minutes, 59),
        _prev_minute=_prev_table(minutes, 59),
        _next_hour=_next_table(hours, 23),
        _prev_hour=_prev_table(hours, 23),
        _next_month=_next_table(months, 12),
        _prev_month=_prev_table(months, 12),
    )


def _with_expression(parsed: CronExpression, expression: str) -> CronExpression:
    return dataclasses.replace(parsed, expression=expression)
