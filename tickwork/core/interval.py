"""Interval schedules: ``@every 90s``, ``@every 15m``, ``@every 1h30m``.

A run falls due every *interval*, on a grid fixed by an *anchor* instant: at
``anchor + k * interval`` for every whole ``k``. The anchor is the job's
``spec.notBefore`` (rounded up to the second) or else its creation time, both
stored in the object, so every watcher computes the same instants and run IDs
stay deterministic across restarts and leader changes (robfig/cron's
``@every`` counts from whenever its process added the entry instead). Time
zones play no part: an interval is a span of real time.

The interval is written as hours, minutes and seconds in that order, each at
most once (``1h30m``, ``90s``, ``2h``), lower case, like Go's durations; it is
at least :data:`MIN_INTERVAL_SECONDS` (a run every second would cost several
status writes per second per job) and at most :data:`MAX_INTERVAL_SECONDS`.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from tickwork.core.errors import InvalidSpecError

INTERVAL_PREFIX = "@every "
#: The shortest interval: each run costs a few status writes (published, started,
#: finished), so one job on a shorter interval would load the API server more than
#: a thousand minute-jobs; and publishing ticks once a second.
MIN_INTERVAL_SECONDS = 10
#: The longest interval: 366 days (8784h).
MAX_INTERVAL_SECONDS = 366 * 24 * 3600

#: The interval's text after ``@every ``, RE2 and Python alike (the CRD's CEL rule
#: checks the same): hours, minutes, seconds, in that order, at least one.
INTERVAL_TEXT_PATTERN = (
    r"(?:[0-9]{1,4}h(?:[0-9]{1,6}m)?(?:[0-9]{1,8}s)?|[0-9]{1,6}m(?:[0-9]{1,8}s)?|[0-9]{1,8}s)"
)
_INTERVAL = re.compile(rf"^@every {INTERVAL_TEXT_PATTERN}$")
_PART = re.compile(r"([0-9]+)([hms])")
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}

SHAPE_MESSAGE = (
    "an interval schedule is '@every ' and a duration in hours, minutes and seconds, "
    "in that order and lower case, like '@every 90s', '@every 15m' or '@every 1h30m'"
)
RANGE_MESSAGE = (
    f"an @every interval must be at least {MIN_INTERVAL_SECONDS}s and at most 8784h (366 days)"
)


def is_interval(expression: str) -> bool:
    """Is ``expression`` meant as an interval (``@every ...``) rather than cron?"""
    return expression.strip().lower().startswith("@every")


def parse_interval(expression: str) -> int:
    """The interval of ``@every ...`` in seconds, or an InvalidSpecError saying what to fix."""
    text = expression.strip()
    if not _INTERVAL.match(text):
        raise InvalidSpecError(SHAPE_MESSAGE, field="schedule")
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(text))
    if not MIN_INTERVAL_SECONDS <= seconds <= MAX_INTERVAL_SECONDS:
        raise InvalidSpecError(RANGE_MESSAGE, field="schedule")
    return seconds


def interval_anchor(moment: dt.datetime) -> dt.datetime:
    """The grid's anchor for ``moment`` (aware): the next whole second at or after it,
    in UTC, so that runs fall on whole seconds as run IDs name them."""
    if moment.tzinfo is None:
        raise ValueError("an interval's anchor must be timezone-aware")
    utc = moment.astimezone(dt.UTC)
    whole = utc.replace(microsecond=0)
    return whole if whole == utc else whole + dt.timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    """Runs at ``anchor + k * seconds`` for every whole ``k`` (bound it with
    :class:`~tickwork.core.bounds.BoundedSchedule`). O(1) per question."""

    anchor: dt.datetime
    seconds: int
    step: dt.timedelta = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.anchor.tzinfo is None:
            raise ValueError("anchor must be timezone-aware")
        if self.seconds <= 0:
            raise ValueError("an interval must be positive")
        object.__setattr__(self, "step", dt.timedelta(seconds=self.seconds))

    def _slot(self, moment: dt.datetime) -> int:
        """The number of the last run at or before ``moment`` (negative before the anchor)."""
        return (moment - self.anchor) // self.step

    def _at(self, slot: int) -> dt.datetime | None:
        try:
            return (self.anchor + slot * self.step).astimezone(dt.UTC)
        except OverflowError:
            return None  # past year 9999 (or before year 1): no such run

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        return self._at(self._slot(moment) + 1)

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        return self._at(self._slot(moment))

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        """Runs in ``(after, until]``."""
        return max(0, self._slot(until) - self._slot(after))


def interval_schedule(expression: str, *, anchor: dt.datetime) -> IntervalSchedule:
    """``@every ...`` on the grid of ``anchor`` (see :func:`interval_anchor`)."""
    return IntervalSchedule(anchor=interval_anchor(anchor), seconds=parse_interval(expression))
