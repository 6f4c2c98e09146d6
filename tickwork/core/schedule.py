"""When a schedule fires, in real (UTC) time: cron in an IANA zone, or one-shot ``runAt``.

Daylight saving follows Vixie cron as Debian ships it (``cron.c``'s main
loop), because that is what cron users already know:

* A job is *wildcard* when its minute or hour field starts with ``*``,
  otherwise *fixed-time*.
* Clocks jump forward by 5 to 179 minutes (DST begins): a fixed-time job
  whose wall-clock time was skipped runs at the first instant after the
  jump; a wildcard job skips the gap. Jumps of 1-4 minutes run every job of
  the skipped minutes right after the jump; jumps of 3 hours or more skip
  the gap for every job.
* Clocks go back by up to 181 minutes (DST ends): wildcard jobs follow the
  clock and run in both passes of the repeated wall-clock times; fixed-time
  jobs run once, in the first pass. Going back by more than that replays
  everything.
* Several skipped wall-clock times of one fixed-time job collapse into the
  single run after the jump (cron would start it several times at once).

A job may choose instead (``spec.daylightSaving``): a repeated time runs at
its first occurrence, its last or both; a skipped time shifts to the first
instant after the jump or is skipped — for every change of the zone's
offset, whatever its size (:mod:`tickwork.core.daylight`).

These rules depend only on the size of the shift, so half-hour
(Australia/Lord_Howe) and 45-minute-offset (Pacific/Chatham) zones need no
special case. All functions are pure: the zone's rules come from ``zoneinfo``
and the current time is always an argument.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Protocol

from tickwork.core import civil
from tickwork.core.cron import CronExpression, parse_cron
from tickwork.core.daylight import (
    MAX_SPAN_MINUTES,
    DaylightSavingChoice,
    RepeatedTime,
    Span,
    special_span,
)
from tickwork.core.zones import Transition, ZoneTimeline, load_zone

#: How far back a search for a run before an instant goes when the cron never matches.
_SEARCH_BACK_MINUTES = 30 * 366 * civil.MINUTES_PER_DAY


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A cron expression in a time zone. Build it with :func:`cron_schedule`."""

    cron: CronExpression
    timeline: ZoneTimeline
    daylight_saving: DaylightSavingChoice | None = None
    """The job's choice at clock changes; None: Debian cron's rules."""

    # -- the timeline's segments and spans ---------------------------------
    #
    # Between transitions the wall clock runs evenly and the cron's own
    # tables find the runs. A transition either just changes the offset, or
    # makes a span (tickwork.core.daylight) in which at most one instant fires.
    # A span starts at its transition, except the first pass that
    # ``repeated: Last`` suppresses, which ends right before it.

    def _span(self, transition: Transition) -> Span | None:
        return special_span(transition, self.cron, self.daylight_saving)

    @property
    def _spans_lead(self) -> bool:
        """Can a span start before its transition?"""
        choice = self.daylight_saving
        return choice is not None and choice.repeated is RepeatedTime.LAST

    def _span_containing(self, position: int) -> Span | None:
        timeline = self.timeline
        before = timeline.last_transition(position, position - MAX_SPAN_MINUTES - 1)
        if before is not None:
            span = self._span(before)
            if span is not None and span.start <= position <= span.end:
                return span
        if self._spans_lead:
            following = timeline.next_transition(position, position + MAX_SPAN_MINUTES)
            if following is not None:
                span = self._span(following)
                if span is not None and span.start <= position:
                    return span
        return None

    def _segment_end(self, position: int, until: int) -> int | None:
        """Where the segment holding ``position`` ends (the next transition or span
        start, exclusive), if that is at or before ``until``."""
        lead = MAX_SPAN_MINUTES if self._spans_lead else 0
        transition = self.timeline.next_transition(position, until + lead)
        if transition is None:
            return None
        span = self._span(transition)
        boundary = transition.at if span is None else min(span.start, transition.at)
        return boundary if boundary <= until else None

    def _segment_start(self, position: int, since: int) -> int | None:
        """Where the segment holding ``position`` starts (the last transition or span
        end, inclusive), if that is after ``since``."""
        transition = self.timeline.last_transition(position, since - MAX_SPAN_MINUTES - 1)
        if transition is None:
            return None
        span = self._span(transition)
        boundary = transition.at if span is None else max(span.end + 1, transition.at)
        return boundary if boundary > since else None

    # -- queries on UTC minute numbers --------------------------------------

    def next_fire_minute(self, after: int) -> int | None:
        """The first UTC minute strictly after ``after`` at which the job fires."""
        cron, timeline = self.cron, self.timeline
        position = after + 1
        while True:
            span = self._span_containing(position)
            if span is not None:
                if span.fires_at is not None and span.fires_at >= position:
                    return span.fires_at
                position = span.end + 1
                continue
            offset = timeline.offset(position)
            match = cron.next_match(position + offset)
            if match is None:
                return None
            candidate = match - offset
            boundary = self._segment_end(position, candidate)
            if boundary is None:
                return candidate
            position = boundary

    def prev_fire_minute(self, at_or_before: int) -> int | None:
        """The last UTC minute at or before ``at_or_before`` at which the job fires."""
        cron, timeline = self.cron, self.timeline
        position = at_or_before
        while True:
            span = self._span_containing(position)
            if span is not None:
                if span.fires_at is not None and span.fires_at <= position:
                    return span.fires_at
                position = span.start - 1
                continue
            offset = timeline.offset(position)
            match = cron.prev_match(position + offset)
            candidate = None if match is None else match - offset
            since = candidate if candidate is not None else position - _SEARCH_BACK_MINUTES
            boundary = self._segment_start(position, since)
            if boundary is None:
                return candidate
            position = boundary - 1

    def count_fires_minutes(self, after: int, until: int) -> int:
        """How many times the job fires in ``(after, until]``; O(days), not O(fires)."""
        cron, timeline = self.cron, self.timeline
        position = after + 1
        total = 0
        while position <= until:
            span = self._span_containing(position)
            if span is not None:
                if span.fires_at is not None and position <= span.fires_at <= until:
                    total += 1
                position = span.end + 1
                continue
            offset = timeline.offset(position)
            boundary = self._segment_end(position, until)
            end = until if boundary is None else boundary - 1
            total += cron.count_matches(position + offset, end + offset)
            if boundary is None:
                break
            position = boundary
        return total

    # -- the same on datetimes -------------------------------------------

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        """The first run strictly after ``moment`` (aware), as an aware UTC datetime."""
        found = self.next_fire_minute(civil.to_minute(moment))
        return None if found is None else civil.run_instant(found)

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        found = self.prev_fire_minute(civil.to_minute(moment))
        return None if found is None else civil.run_instant(found)

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        """Runs in ``(after, until]``."""
        return self.count_fires_minutes(civil.to_minute(after), civil.to_minute(until))


@functools.lru_cache(maxsize=8192)
def cron_schedule(
    expression: str,
    time_zone: str = "UTC",
    daylight_saving: DaylightSavingChoice | None = None,
) -> CronSchedule:
    """Parse ``expression`` for ``time_zone`` or raise an InvalidSpecError saying what to fix.

    ``daylight_saving`` is the job's choice at clock changes (None: Debian cron's rules).
    Schedules are immutable and shared: a thousand jobs on ``0 * * * *`` in one zone hold
    one parsed expression with its lookup tables, not a thousand."""
    return CronSchedule(
        cron=parse_cron(expression),
        timeline=ZoneTimeline(load_zone(time_zone)),
        daylight_saving=daylight_saving,
    )


@dataclass(frozen=True, slots=True)
class OneShotSchedule:
    """A single run at ``run_at`` (``spec.runAt``)."""

    run_at: dt.datetime

    def __post_init__(self) -> None:
        if self.run_at.tzinfo is None:
            raise ValueError("run_at must be timezone-aware")

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        return self.run_at if self.run_at > moment else None

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        return self.run_at if self.run_at <= moment else None

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        return int(after < self.run_at <= until)


class NoRuns:
    """No run at all: a job whose runs are started by other jobs' runs (``spec.after``),
    which the operator plans from those (tickwork.core.after)."""

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        del moment  # none after any moment
        return None

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        del moment
        return None

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        del after, until
        return 0


NO_RUNS = NoRuns()


class Schedule(Protocol):
    """What the watcher needs of any schedule; all instants are aware datetimes."""

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None: ...

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None: ...

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int: ...
