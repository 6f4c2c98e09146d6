"""What a schedule does where a zone's clock changes: Debian cron's rules, or a choice.

A forward change skips wall-clock times (they do not occur); a backward
change repeats them (they occur twice). Every rule comes down to treating
each change in one of four ways, and each way makes a *span* of UTC minutes
in which at most one instant can fire:

* ``FOLLOW`` — the new wall clock simply applies: repeated times run in both
  passes, skipped times do not run. No span.
* ``SHIFT`` — skipped times run at the first instant after the jump: a
  one-minute span at the transition that fires when any skipped time (or the
  time right after the jump) matches.
* ``FIRST_ONLY`` — repeated times run in the first pass only: the second
  pass is a span in which nothing fires.
* ``LAST_ONLY`` — repeated times run in the second pass only: the first pass
  is a span in which nothing fires.

With no choice (``spec.daylightSaving`` unset) the treatment is Debian
cron's (``cron.c``), which depends on the job's kind and the size of the
shift; with a choice it depends on the choice alone, whatever the size.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tickwork.core.cron import CronExpression
from tickwork.core.zones import Transition

_SMALL_JUMP_MAX = 4  # cron.c: timeDiff <= 5 is a late wake-up, run every minute
_MEDIUM_JUMP_MAX = 179  # cron.c: timeDiff <= 180 minutes is "DST begins"
_REPEAT_MAX = 181  # cron.c: timeDiff >= -180 minutes is "DST ends"

#: The longest span: the largest backward change of any zone since 1970 is 7 hours
#: (Antarctica/Vostok, 1994); a day leaves room for whatever the tz database adds.
MAX_SPAN_MINUTES = 24 * 60


class RepeatedTime(enum.StrEnum):
    """When a wall-clock time that occurs twice (the clock goes back) runs."""

    FIRST = "First"
    LAST = "Last"
    BOTH = "Both"


class SkippedTime(enum.StrEnum):
    """What becomes of a wall-clock time that does not occur (the clock jumps forward)."""

    SHIFT = "Shift"
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class DaylightSavingChoice:
    """A job's choice for both kinds of clock change (``spec.daylightSaving``)."""

    repeated: RepeatedTime
    skipped: SkippedTime


class Treatment(enum.Enum):
    FOLLOW = "follow"
    SHIFT = "shift"
    FIRST_ONLY = "first-only"
    LAST_ONLY = "last-only"


@dataclass(frozen=True, slots=True)
class Span:
    """UTC minutes ``start..end`` in which only ``fires_at`` (if not None) fires."""

    start: int
    end: int
    fires_at: int | None


def debian_treatment(transition: Transition, *, wildcard: bool) -> Treatment:
    """Debian cron's treatment: by the job's kind and the size of the shift."""
    shift = transition.shift
    if 1 <= shift <= _SMALL_JUMP_MAX:
        return Treatment.SHIFT  # every job of the skipped minutes runs after the jump
    if _SMALL_JUMP_MAX < shift <= _MEDIUM_JUMP_MAX:
        return Treatment.FOLLOW if wildcard else Treatment.SHIFT
    if -_REPEAT_MAX <= shift <= -1:
        return Treatment.FOLLOW if wildcard else Treatment.FIRST_ONLY
    return Treatment.FOLLOW  # moved 3 hours or more: the new wall clock applies


def chosen_treatment(transition: Transition, choice: DaylightSavingChoice) -> Treatment:
    if transition.shift > 0:
        return Treatment.SHIFT if choice.skipped is SkippedTime.SHIFT else Treatment.FOLLOW
    return {
        RepeatedTime.FIRST: Treatment.FIRST_ONLY,
        RepeatedTime.LAST: Treatment.LAST_ONLY,
        RepeatedTime.BOTH: Treatment.FOLLOW,
    }[choice.repeated]


def special_span(
    transition: Transition, cron: CronExpression, choice: DaylightSavingChoice | None
) -> Span | None:
    """The span a transition makes for a job, or None where the wall clock just applies."""
    if choice is None:
        treatment = debian_treatment(transition, wildcard=cron.wildcard)
    else:
        treatment = chosen_treatment(transition, choice)
    at, shift = transition.at, transition.shift
    if treatment is Treatment.SHIFT:
        # Any skipped wall-clock time, or the first one after the jump, runs at the jump.
        match = cron.next_match(at + transition.before)
        fires = match is not None and match <= at + transition.after
        return Span(at, at, at if fires else None)
    if treatment is Treatment.FIRST_ONLY:
        return Span(at, at - shift - 1, None)
    if treatment is Treatment.LAST_ONLY:
        return Span(at + shift, at - 1, None)
    return None
