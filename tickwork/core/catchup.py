"""Runs missed while nobody was watching, and which of them to start late.

When the watcher comes back after a pause (restart, leader change; a resume of
a suspended job is *not* one: resume starts from now), several runs may have
fallen due. Without ``spec.catchup`` Tickwork does what CronJob does: it starts
at most one of them — the latest — and only if it is still within
``startingDeadlineSeconds``; the rest are counted as missed.

With ``spec.catchup`` the job chooses (:class:`CatchupPolicy`): ``None`` starts
none of them, ``Latest`` the latest, ``All`` each one inside the catch-up window,
oldest first, at most :data:`MAX_CATCHUP_RUNS` (the newest ones). ``All`` hands
them out one at a time: each decision names the oldest run still owed, and the
watcher records it (``lastScheduleTime``, ``nextRunAt``) before the next, so a
restart in the middle goes on where the last one stopped.

A run less late than the *grace* (a tick's delay, the job's jitter) is not
missed at all: every policy starts it. Counting the missed ones uses the
schedule's arithmetic (O(days)); only ``All`` walks, over at most
:data:`MAX_CATCHUP_RUNS` runs.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from tickwork.core.schedule import Schedule

#: The most runs ``All`` starts for one catch-up: the newest ones inside the window;
#: older ones are counted missed.
MAX_CATCHUP_RUNS = 100
#: A run published at most this late (after its time plus jitter) is on time, not
#: caught up: a busy tick or a short hand-over between leaders must not drop it.
ON_TIME_SECONDS = 10
_EPSILON = dt.timedelta(microseconds=1)


class CatchupPolicy(enum.StrEnum):
    """Which of the runs missed while no watcher ran are started (``spec.catchup.policy``)."""

    NONE = "None"
    LATEST = "Latest"
    ALL = "All"


@dataclass(frozen=True)
class CatchupRule:
    """``spec.catchup`` with ``startingDeadlineSeconds``: the policy and the window."""

    policy: CatchupPolicy
    window_seconds: int | None = None
    """Only runs at most this old are started; None: no limit but the cap."""

    @classmethod
    def of(
        cls,
        policy: CatchupPolicy,
        window_seconds: int | None,
        starting_deadline_seconds: int | None,
    ) -> CatchupRule:
        """Both limits apply: the window is the shorter one that is set."""
        limits = [s for s in (window_seconds, starting_deadline_seconds) if s is not None]
        return cls(policy=policy, window_seconds=min(limits) if limits else None)


@dataclass(frozen=True)
class CatchUp:
    """What to do about the runs due in ``(last_scheduled, now]``."""

    run: dt.datetime | None
    """The scheduled instant to start now, or None."""
    missed: int
    """Runs that will not happen."""
    latest_missed: dt.datetime | None
    """The latest of the missed runs, for status and the Event."""
    more: bool = False
    """``All``: later runs are due too, and owed next (oldest first)."""
    late: bool = False
    """``run`` is caught up (later than the grace), so it is paced by the rate limit."""


NOTHING_DUE = CatchUp(run=None, missed=0, latest_missed=None)


def catch_up(
    schedule: Schedule,
    *,
    last_scheduled: dt.datetime,
    now: dt.datetime,
    starting_deadline_seconds: int | None,
    rule: CatchupRule | None = None,
    grace_seconds: int = ON_TIME_SECONDS,
) -> CatchUp:
    """Decide about the runs due after ``last_scheduled`` up to ``now``; without a
    ``rule``, CronJob's way (``startingDeadlineSeconds`` only)."""
    due = schedule.count_runs_between(last_scheduled, now)
    if due == 0:
        return NOTHING_DUE
    latest = schedule.last_run_at_or_before(now)
    assert latest is not None  # noqa: S101 - due > 0 guarantees a run at or before now
    if rule is None:
        return _latest_within(schedule, latest, due, now=now, limit=starting_deadline_seconds)
    on_time = (now - latest).total_seconds() <= grace_seconds
    if on_time and due == 1:
        return CatchUp(run=latest, missed=0, latest_missed=None)
    return _by_policy(
        schedule,
        rule,
        last_scheduled,
        latest,
        due,
        now=now,
        on_time=on_time,
        grace_seconds=grace_seconds,
    )


def _by_policy(
    schedule: Schedule,
    rule: CatchupRule,
    last_scheduled: dt.datetime,
    latest: dt.datetime,
    due: int,
    *,
    now: dt.datetime,
    on_time: bool,
    grace_seconds: int,
) -> CatchUp:
    if rule.policy is CatchupPolicy.NONE:
        if on_time:
            return CatchUp(run=latest, missed=due - 1, latest_missed=_before(schedule, latest))
        return CatchUp(run=None, missed=due, latest_missed=latest)
    limit = None if rule.window_seconds is None else max(rule.window_seconds, grace_seconds)
    if rule.policy is CatchupPolicy.LATEST:
        found = _latest_within(schedule, latest, due, now=now, limit=limit)
        return CatchUp(
            run=found.run,
            missed=found.missed,
            latest_missed=found.latest_missed,
            late=found.run is not None and not on_time,
        )
    return _oldest_owed(
        schedule, last_scheduled, latest, due, now=now, limit=limit, on_time=on_time
    )


def _before(schedule: Schedule, moment: dt.datetime) -> dt.datetime | None:
    return schedule.last_run_at_or_before(moment - _EPSILON)


def _latest_within(
    schedule: Schedule, latest: dt.datetime, due: int, *, now: dt.datetime, limit: int | None
) -> CatchUp:
    if limit is None or (now - latest).total_seconds() <= limit:
        previous = _before(schedule, latest) if due > 1 else None
        return CatchUp(run=latest, missed=due - 1, latest_missed=previous)
    return CatchUp(run=None, missed=due, latest_missed=latest)


def _oldest_owed(
    schedule: Schedule,
    last_scheduled: dt.datetime,
    latest: dt.datetime,
    due: int,
    *,
    now: dt.datetime,
    limit: int | None,
    on_time: bool,
) -> CatchUp:
    """``All``: the oldest run inside the window (and among the newest
    :data:`MAX_CATCHUP_RUNS`); the ones before it are missed."""
    after = last_scheduled
    if limit is not None:
        after = max(after, now - dt.timedelta(seconds=limit) - _EPSILON)
    owed = schedule.count_runs_between(after, now) if after != last_scheduled else due
    if owed == 0:
        return CatchUp(run=None, missed=due, latest_missed=latest)
    if owed > MAX_CATCHUP_RUNS:
        first = latest
        for _ in range(MAX_CATCHUP_RUNS - 1):
            earlier = _before(schedule, first)
            assert earlier is not None  # noqa: S101 - owed > cap runs lie before latest
            first = earlier
        owed = MAX_CATCHUP_RUNS
    else:
        found = schedule.next_run_after(after)
        assert found is not None  # noqa: S101 - owed > 0 runs lie after ``after``
        first = found
    missed = due - owed
    return CatchUp(
        run=first,
        missed=missed,
        latest_missed=_before(schedule, first) if missed else None,
        more=owed > 1,
        late=not (on_time and first == latest),
    )
