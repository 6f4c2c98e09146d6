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

These rules depend only on the size of the shift, so half-hour
(Australia/Lord_Howe) and 45-minute-offset (Pacific/Chatham) zones need no
special case. All functions are pure: the zone's rules come from ``zoneinfo``
and the current time is always an argument.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
from dataclasses import dataclass
from typing import Protocol

from tickwork.core import civil
from tickwork.core.cron import CronExpression, parse_cron
from tickwork.core.zones import Transition, ZoneTimeline, load_zone

#: A special region after a transition is never longer than this (Vixie's
#: "negative" wake-up covers time going back by up to 3 hours).
_LOOKBACK_MINUTES = 3 * 60 + 2

_SMALL_JUMP_MAX = 4  # cron.c: timeDiff <= 5 is a late wake-up, run every minute
_MEDIUM_JUMP_MAX = 179  # cron.c: timeDiff <= 180 minutes is "DST begins"
_REPEAT_MAX = 181  # cron.c: timeDiff >= -180 minutes is "DST ends"


class _Kind(enum.Enum):
    NONE = "none"
    SMALL_JUMP = "small-jump"
    MEDIUM_JUMP = "medium-jump"
    REPEAT = "repeat"


def _kind(transition: Transition) -> _Kind:
    shift = transition.shift
    if 1 <= shift <= _SMALL_JUMP_MAX:
        return _Kind.SMALL_JUMP
    if _SMALL_JUMP_MAX < shift <= _MEDIUM_JUMP_MAX:
        return _Kind.MEDIUM_JUMP
    if -_REPEAT_MAX <= shift <= -1:
        return _Kind.REPEAT
    return _Kind.NONE


def _special_end(transition: Transition) -> int:
    """The last UTC minute that the transition treats specially (``at - 1`` if none)."""
    kind = _kind(transition)
    if kind in (_Kind.SMALL_JUMP, _Kind.MEDIUM_JUMP):
        return transition.at
    if kind is _Kind.REPEAT:
        return transition.at - transition.shift - 1
    return transition.at - 1


def _fires_at_jump(cron: CronExpression, transition: Transition) -> bool:
    """Does the job fire at the first minute after a forward jump?"""
    first_skipped = transition.at + transition.before
    after_jump = transition.at + transition.after
    if _kind(transition) is _Kind.MEDIUM_JUMP and cron.wildcard:
        return cron.matches(after_jump)
    match = cron.next_match(first_skipped)
    return match is not None and match <= after_jump


@dataclass(frozen=True)
class CronSchedule:
    """A cron expression in a time zone. Build it with :func:`cron_schedule`."""

    cron: CronExpression
    timeline: ZoneTimeline

    @property
    def zone_name(self) -> str:
        return self.timeline.zone.key

    # -- queries on UTC minute numbers --------------------------------------

    def next_fire_minute(self, after: int) -> int | None:
        """The first UTC minute strictly after ``after`` at which the job fires."""
        cron, timeline = self.cron, self.timeline
        position = after + 1
        transition = timeline.last_transition(position, position - _LOOKBACK_MINUTES)
        while True:
            if transition is not None and transition.at <= position <= _special_end(transition):
                found = self._first_in_special(transition, position)
                if found is not None:
                    return found
                position = _special_end(transition) + 1
            offset = timeline.offset(position)
            match = cron.next_match(position + offset)
            if match is None:
                return None
            candidate = match - offset
            transition = timeline.next_transition(position, candidate)
            if transition is None:
                return candidate
            position = transition.at

    def _first_in_special(self, transition: Transition, position: int) -> int | None:
        if _kind(transition) is _Kind.REPEAT:
            if not self.cron.wildcard:
                return None  # fixed-time jobs ran in the first pass
            match = self.cron.next_match(position + transition.after)
            if match is not None and match - transition.after <= _special_end(transition):
                return match - transition.after
            return None
        return transition.at if _fires_at_jump(self.cron, transition) else None

    def prev_fire_minute(self, at_or_before: int) -> int | None:
        """The last UTC minute at or before ``at_or_before`` at which the job fires."""
        cron, timeline = self.cron, self.timeline
        position = at_or_before
        while True:
            offset = timeline.offset(position)
            match = cron.prev_match(position + offset)
            candidate = None if match is None else match - offset
            since = candidate if candidate is not None else position - 30 * 366 * 1440
            transition = timeline.last_transition(position, since - _LOOKBACK_MINUTES)
            if transition is None:
                return candidate
            special_end = _special_end(transition)
            if candidate is not None and candidate > special_end:
                return candidate
            if transition.at <= min(position, special_end):
                found = self._last_in_special(transition, min(position, special_end))
                if found is not None:
                    return found
            position = transition.at - 1

    def _last_in_special(self, transition: Transition, position: int) -> int | None:
        if _kind(transition) is _Kind.REPEAT:
            if not self.cron.wildcard:
                return None
            match = self.cron.prev_match(position + transition.after)
            if match is not None and match - transition.after >= transition.at:
                return match - transition.after
            return None
        return transition.at if _fires_at_jump(self.cron, transition) else None

    def count_fires_minutes(self, after: int, until: int) -> int:
        """How many times the job fires in ``(after, until]``; O(days), not O(fires)."""
        cron, timeline = self.cron, self.timeline
        position = after + 1
        total = 0
        transition = timeline.last_transition(position, position - _LOOKBACK_MINUTES)
        while position <= until:
            if transition is not None and transition.at <= position <= _special_end(transition):
                end = min(_special_end(transition), until)
                if _kind(transition) is _Kind.REPEAT:
                    if cron.wildcard:
                        total += cron.count_matches(
                            position + transition.after, end + transition.after
                        )
                elif _fires_at_jump(cron, transition):
                    total += 1
                position = end + 1
                continue
            offset = timeline.offset(position)
            transition = timeline.next_transition(position, until)
            end = until if transition is None else transition.at - 1
            total += cron.count_matches(position + offset, end + offset)
            if transition is None:
                break
            position = transition.at
        return total

    # -- the same on datetimes -------------------------------------------

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        """The first run strictly after ``moment`` (aware), as an aware UTC datetime."""
        found = self.next_fire_minute(civil.to_minute(moment))
        return None if found is None else civil.from_minute(found)

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        found = self.prev_fire_minute(civil.to_minute(moment))
        return None if found is None else civil.from_minute(found)

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        """Runs in ``(after, until]``."""
        return self.count_fires_minutes(civil.to_minute(after), civil.to_minute(until))


@functools.lru_cache(maxsize=8192)
def cron_schedule(expression: str, time_zone: str = "UTC") -> CronSchedule:
    """Parse ``expression`` for ``time_zone`` or raise an InvalidSpecError saying what to fix.

    Schedules are immutable and shared: a thousand jobs on ``0 * * * *`` in one zone hold
    one parsed expression with its lookup tables, not a thousand."""
    return CronSchedule(cron=parse_cron(expression), timeline=ZoneTimeline(load_zone(time_zone)))


@dataclass(frozen=True)
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


class Schedule(Protocol):
    """What the watcher needs of any schedule; all instants are aware datetimes."""

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None: ...

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None: ...

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int: ...
