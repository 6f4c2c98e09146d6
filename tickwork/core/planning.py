"""The watcher's decisions, as pure functions of a job's facts and the current time.

The operator feeds these functions what the API server said about a job (a
:class:`JobFacts`) and acts on what they return; it decides nothing itself.
Two questions are answered here:

* :func:`pending_run` — which run is the job waiting for, and when is it due?
  (On first sight, after a restart, after an edit, after a resume.)
* :func:`decide` — the run fell due: publish it (which one, cancelling what),
  skip it, or count it missed; and what comes next.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.core.catchup import ON_TIME_SECONDS, CatchupRule, catch_up
from tickwork.core.runs import jitter_seconds, scheduled_run_id
from tickwork.core.schedule import Schedule

_EPSILON = dt.timedelta(microseconds=1)
#: How many due times ``status.nextRuns`` lists (``nextRunAt`` is the first).
NEXT_RUNS = 5


#: Runs ``status.bufferedRuns`` holds at most (BufferAll); a run falling due past
#: it is skipped and counted in ``missedRuns``, never silently lost.
BUFFER_LIMIT = 100


class ConcurrencyPolicy(enum.StrEnum):
    """What to do when a run falls due while another run of the job is still active:
    Temporal's overlap policies, with CronJob's three names still accepted."""

    SKIP = "Skip"
    BUFFER_ONE = "BufferOne"
    BUFFER_ALL = "BufferAll"
    CANCEL_OTHER = "CancelOther"
    TERMINATE_OTHER = "TerminateOther"
    ALLOW_ALL = "AllowAll"
    # CronJob's names, as Tickwork accepted them first.
    FORBID = "Forbid"
    ALLOW = "Allow"
    REPLACE = "Replace"

    @property
    def overlap(self) -> ConcurrencyPolicy:
        """The policy under its Temporal name (Forbid is Skip, Allow is AllowAll,
        Replace is CancelOther)."""
        return _ALIASES.get(self, self)

    @property
    def buffers(self) -> bool:
        """Does a run that falls due while another is active wait in
        ``status.bufferedRuns`` (BufferOne, BufferAll, and CancelOther while the
        active run winds down)?"""
        return self.overlap in _BUFFERING

    @property
    def buffer_limit(self) -> int:
        """How many runs may wait in ``status.bufferedRuns`` under this policy."""
        return BUFFER_LIMIT if self.overlap is ConcurrencyPolicy.BUFFER_ALL else 1


_ALIASES = {
    ConcurrencyPolicy.FORBID: ConcurrencyPolicy.SKIP,
    ConcurrencyPolicy.ALLOW: ConcurrencyPolicy.ALLOW_ALL,
    ConcurrencyPolicy.REPLACE: ConcurrencyPolicy.CANCEL_OTHER,
}
_BUFFERING = frozenset(
    {
        ConcurrencyPolicy.BUFFER_ONE,
        ConcurrencyPolicy.BUFFER_ALL,
        ConcurrencyPolicy.CANCEL_OTHER,
    }
)


@dataclass(frozen=True)
class JobFacts:
    """What the watcher knows of one ScheduledJob, from its spec and status."""

    uid: str
    schedule: Schedule
    one_shot: bool
    created_at: dt.datetime
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.SKIP
    starting_deadline_seconds: int | None = None
    jitter_seconds: int = 0
    catchup: CatchupRule | None = None
    """spec.catchup with startingDeadlineSeconds; None: CronJob's way (the deadline only)."""
    # from status
    next_run_at: dt.datetime | None = None
    last_schedule_time: dt.datetime | None = None
    status_is_current: bool = False
    """True when status was written for the spec's current generation."""
    active_run_id: str | None = None
    """A run that is queued, running or waiting for a retry, if any."""
    buffered: int = 0
    """Runs waiting in ``status.bufferedRuns`` for the active run to end."""


@dataclass(frozen=True, slots=True)
class PendingRun:
    """The next run the job waits for: scheduled at ``scheduled_at``, published at ``due_at``."""

    scheduled_at: dt.datetime
    due_at: dt.datetime
    uid: str
    """The job's UID (the entry's own string): the run ID is worked out from it when
    asked for, not held (~100 bytes a job, and the watcher holds one per job)."""

    @property
    def run_id(self) -> str:
        return scheduled_run_id(self.uid, self.scheduled_at)


def pending_for(facts: JobFacts, scheduled_at: dt.datetime | None) -> PendingRun | None:
    if scheduled_at is None:
        return None
    seconds = 0
    if facts.jitter_seconds > 0:
        seconds = jitter_seconds(scheduled_run_id(facts.uid, scheduled_at), facts.jitter_seconds)
    # Without jitter the run is due when scheduled: the same (shared) instant, not an
    # equal datetime of its own.
    due = _later(scheduled_at, dt.timedelta(seconds=seconds)) if seconds else scheduled_at
    return PendingRun(scheduled_at=scheduled_at, due_at=due, uid=facts.uid)


def _later(moment: dt.datetime, delay: dt.timedelta) -> dt.datetime:
    """``moment + delay``, or the last representable instant: a ``runAt`` in 9999
    plus its jitter must not crash the watcher."""
    try:
        return moment + delay
    except OverflowError:
        return dt.datetime.max.replace(tzinfo=dt.UTC)


def upcoming(
    schedule: Schedule,
    first: dt.datetime | None,
    count: int = NEXT_RUNS,
    *,
    known: Sequence[dt.datetime] | None = None,
) -> list[dt.datetime]:
    """``first`` and the runs that follow it: ``count`` at most, fewer when the schedule
    ends (a one-shot job, ``notAfter``), none when ``first`` is None.

    ``known`` is a list this function returned before for the same schedule: its runs
    from ``first`` on are kept, so moving on by one run costs one more run worked out,
    not ``count``."""
    if first is None:
        return []
    runs = list(known[known.index(first) :]) if known and first in known else [first]
    del runs[count:]
    moment: dt.datetime | None = runs[-1]
    while len(runs) < count and moment is not None:
        moment = schedule.next_run_after(moment)
        if moment is not None:
            runs.append(moment)
    return runs


def pending_run(facts: JobFacts, *, now: dt.datetime, fresh_start: bool) -> PendingRun | None:
    """The run the job is waiting for.

    ``fresh_start`` is true when the schedule itself is new to the watcher —
    the job was just created or edited while the watcher was running, or was
    just resumed — and false when the watcher merely (re)reads a job it may
    have handled before (at start-up, or as a standby following the leader).

    * One-shot: the ``runAt`` instant, until it has been published.
    * A status written for this generation holds ``nextRunAt``: keep it, even
      in the past (the watcher was down; :func:`decide` applies the deadline).
    * A job never scheduled: the first run after its creation, so that runs
      due while no watcher ran are caught up, within the deadline.
    * Otherwise (an edit, a resume): the first run after ``now``, no burst.
    """
    if facts.one_shot:
        run_at = facts.schedule.next_run_after(facts.created_at - dt.timedelta(days=36500))
        if run_at is None or facts.last_schedule_time == run_at:
            return None
        return pending_for(facts, run_at)
    if not fresh_start and facts.status_is_current and facts.next_run_at is not None:
        return pending_for(facts, facts.next_run_at)
    if not fresh_start and facts.last_schedule_time is None and facts.next_run_at is None:
        return pending_for(facts, facts.schedule.next_run_after(facts.created_at))
    return pending_for(facts, facts.schedule.next_run_after(now))


class Action(enum.StrEnum):
    PUBLISH = "publish"
    BUFFER = "buffer"  # BufferOne, BufferAll, CancelOther: wait for the active run to end
    SKIP = "skip"  # Skip, or a full buffer: another run is still active
    MISS = "miss"  # too late: past startingDeadlineSeconds


@dataclass(frozen=True)
class Decision:
    action: Action
    scheduled_at: dt.datetime | None
    """The run published or skipped (None when every due run was missed)."""
    run_id: str | None
    cancel_run_id: str | None
    """CancelOther, TerminateOther: the active run to stop."""
    terminate: bool
    """TerminateOther: stop it at once (no grace), and do not wait for it to end."""
    missed: int
    """Runs that will not happen, beyond the one published or skipped."""
    latest_missed: dt.datetime | None
    following: PendingRun | None
    """What the job waits for next (None: a one-shot job is done)."""
    reason: str
    late: bool = False
    """A caught-up run (spec.catchup): published at the operator's catch-up pace."""


def decide(facts: JobFacts, pending: PendingRun, *, now: dt.datetime) -> Decision:
    """``pending`` fell due at ``now``: what to do, and what comes next.

    With catch-up policy ``All`` the next thing may be a run already due: the
    oldest one still owed, published next (paced by the operator's rate limit)."""
    result = catch_up(
        facts.schedule,
        last_scheduled=pending.scheduled_at - _EPSILON,
        now=max(now, pending.scheduled_at),
        starting_deadline_seconds=facts.starting_deadline_seconds,
        rule=facts.catchup,
        grace_seconds=ON_TIME_SECONDS + facts.jitter_seconds,
    )
    if facts.one_shot:
        following = None
    elif result.more and result.run is not None:
        following = pending_for(facts, facts.schedule.next_run_after(result.run))
    else:
        following = pending_for(facts, facts.schedule.next_run_after(now))
    if result.run is None:
        late = (now - pending.scheduled_at).total_seconds()
        why = (
            f"past startingDeadlineSeconds ({facts.starting_deadline_seconds}s)"
            if facts.catchup is None
            else (
                f"outside the catch-up (policy {facts.catchup.policy}, "
                f"window {facts.catchup.window_seconds}s)"
            )
        )
        return Decision(
            action=Action.MISS,
            scheduled_at=None,
            run_id=None,
            cancel_run_id=None,
            terminate=False,
            missed=result.missed,
            latest_missed=result.latest_missed,
            following=following,
            reason=f"missed: {late:.0f}s late, {why}",
        )
    run_id = scheduled_run_id(facts.uid, result.run)
    action, cancel, reason = overlap(facts, run_id)
    return Decision(
        action=action,
        scheduled_at=result.run,
        run_id=run_id,
        cancel_run_id=cancel,
        terminate=cancel is not None
        and facts.concurrency_policy.overlap is ConcurrencyPolicy.TERMINATE_OTHER,
        missed=result.missed,
        latest_missed=result.latest_missed,
        following=following,
        reason=reason,
        late=result.late,
    )


def overlap(facts: JobFacts, run_id: str) -> tuple[Action, str | None, str]:
    """What the job's concurrencyPolicy makes of run ``run_id`` falling due: publish,
    buffer or skip it, and which active run to cancel (if any); and why. Scheduled,
    caught-up and backfilled runs all go through here."""
    policy = facts.concurrency_policy
    name = policy.overlap.value
    active = facts.active_run_id if facts.active_run_id != run_id else None
    waiting = facts.buffered if policy.buffers else 0
    if active is None and not waiting:
        return Action.PUBLISH, None, "due"
    if policy.overlap is ConcurrencyPolicy.ALLOW_ALL:
        return Action.PUBLISH, None, "due"
    if policy.overlap is ConcurrencyPolicy.TERMINATE_OTHER:
        return Action.PUBLISH, active, f"due: run {active} is terminated (concurrencyPolicy {name})"
    if not policy.buffers:  # Skip
        return (
            Action.SKIP,
            None,
            f"skipped: run {active} is still active (concurrencyPolicy {policy.value})",
        )
    cancel = active if policy.overlap is ConcurrencyPolicy.CANCEL_OTHER else None
    if waiting >= policy.buffer_limit:
        held = "a run is" if waiting == 1 else f"{waiting} runs are"
        return (
            Action.SKIP,
            cancel,
            f"skipped: {held} already buffered, the most concurrencyPolicy {name} keeps",
        )
    after = f"run {active}" if active is not None else "the runs buffered before it"
    how = "is cancelled" if cancel is not None else "ends"
    why = f"buffered: it starts once {after} {how} (concurrencyPolicy {name})"
    return Action.BUFFER, cancel, why
