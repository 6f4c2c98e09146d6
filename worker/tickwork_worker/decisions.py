"""The worker's decisions about one claimed run, as pure functions: may it start,
how did an attempt end, and what comes next. No I/O and no clock: the runner
reads the job and the time and passes them in, so every decision is unit-tested
without a server (tests/unit/test_worker_decisions.py).
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import overload

from tickwork.api.models import ActiveRun, CancelRequest, ScheduledJob
from tickwork.core.planning import upcoming
from tickwork.core.retry import GiveUp, after_failure
from tickwork.core.runs import belongs_to, parse_run_id
from tickwork.core.states import FINAL_STATES, JobPhase, RunState, transition
from tickwork.core.text import cap_optional
from tickwork.queue.messages import RunMessage


class SkipReason(enum.StrEnum):
    """Why a claimed run does not execute; the value is the metric's ``reason`` label."""

    GONE = "gone"
    """The job was deleted."""
    REPLACED = "replaced"
    """A new object of the same name (another UID) stands there now."""
    DELETING = "deleting"
    """A delete waits on finalizers: it is a delete."""
    FOREIGN = "foreign"
    """The run ID belongs to another object: never execute under it."""
    SUSPENDED = "suspended"
    PAUSED = "paused"
    """Runs failed in a row and the operator paused the job (failurePolicy.pauseAfter)
    after this run was queued."""
    ALREADY_FINISHED = "already-finished"
    """A redelivery of a run whose outcome status already has."""
    CANCELLED = "cancelled"
    """status.cancelRequests names the run (kubectl tickwork cancel, CancelOther,
    TerminateOther)."""

    @property
    def state(self) -> RunState | None:
        """What the run's record says, or None when nothing is written (there is no
        job to write to, or its record already exists)."""
        return _RECORDED.get(self)

    @property
    def text(self) -> str:
        return _TEXTS.get(self, f"skipped: {self.value}")


_RECORDED = {
    SkipReason.SUSPENDED: RunState.SKIPPED,
    SkipReason.PAUSED: RunState.SKIPPED,
    SkipReason.CANCELLED: RunState.CANCELLED,
}
_TEXTS = {
    SkipReason.SUSPENDED: "skipped: the job is suspended",
    SkipReason.PAUSED: "skipped: the job is paused after consecutive failed runs "
    "(status.failureStreak); it was queued before the pause",
    SkipReason.CANCELLED: "cancelled before it started",
}


def not_this_job(job: ScheduledJob | None, message: RunMessage) -> SkipReason | None:
    """Why ``job`` is not the object the run belongs to, or None if it is."""
    if job is None:
        return SkipReason.GONE
    if job.metadata.get("uid") != message.uid:
        return SkipReason.REPLACED
    if job.metadata.get("deletionTimestamp"):
        return SkipReason.DELETING
    if not belongs_to(message.run_id, message.uid):
        return SkipReason.FOREIGN
    return None


def why_skip(job: ScheduledJob | None, message: RunMessage) -> SkipReason | None:
    """Why a claimed run must not execute, or None if it may."""
    mismatch = not_this_job(job, message)
    if mismatch is not None:
        return mismatch
    assert job is not None  # noqa: S101 - not_this_job said it is the run's object
    status = job.status
    finished = [status.last_run, *status.runs] if status.last_run else list(status.runs)
    for record in finished:
        if record.id != message.run_id or record.outcome not in FINAL_STATES:
            continue
        # A dead letter requeued by hand is meant to run again; anything else
        # that already ended (a redelivery after a crash) must not.
        if not (message.requeued and record.outcome is RunState.FAILED):
            return SkipReason.ALREADY_FINISHED
    # A run that already finished is acknowledged as it is, suspended or not: a
    # Skipped record must not overwrite its real one.
    if cancel_request(job, message.run_id) is not None:
        return SkipReason.CANCELLED
    if job.spec.suspend:
        return SkipReason.SUSPENDED
    if status.phase is JobPhase.PAUSED:
        # The operator publishes nothing while it has the job paused, and writes the
        # end of a pause before it publishes again: this run was queued before.
        return SkipReason.PAUSED
    return None


def cancel_request(job: ScheduledJob | None, run_id: str) -> CancelRequest | None:
    """The operator's request to stop ``run_id``, if status has one."""
    if job is None:
        return None
    return next((r for r in job.status.cancel_requests if r.id == run_id), None)


def cancelled_outcome(request: CancelRequest) -> Outcome:
    """A run stopped on request: Cancelled, no retry, saying why."""
    return Outcome(state=RunState.CANCELLED, error=request.reason or "cancelled")


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended. Texts are capped here, once, before they reach status,
    Events, logs or the dead-letter queue."""

    state: RunState
    result: str | None = None
    error: str | None = None
    retry_delay: float | None = None
    next_attempt: int | None = None
    brief: str | None = None
    """The error without the task's detail (an answer's body): what Events say."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "result", cap_optional(self.result))
        object.__setattr__(self, "error", cap_optional(self.error))
        object.__setattr__(self, "brief", cap_optional(self.brief))

    @property
    def told(self) -> str:
        """The error as Events may tell it."""
        return self.brief or self.error or ""


def failure_outcome(
    job: ScheduledJob,
    message: RunMessage,
    error: str,
    *,
    permanent: bool,
    detail: str | None = None,
) -> Outcome:
    """A failed attempt under the job's retry policy: Retrying with the delay and the
    next attempt's number, or Failed saying why no attempt is left."""
    retry = job.spec.retry
    decision = after_failure(
        message.run_id,
        attempt=message.attempt,
        max_attempts=retry.max_attempts,
        permanent=permanent,
        base=retry.backoff_seconds,
        cap=retry.max_backoff_seconds,
    )
    text = f"{error}: {detail}" if detail else error  # the detail: status only
    if isinstance(decision, GiveUp):
        return Outcome(
            state=RunState.FAILED,
            error=f"{text} ({decision.reason})",
            brief=f"{error} ({decision.reason})",
        )
    return Outcome(
        state=RunState.RETRYING,
        error=text,
        brief=error,
        retry_delay=decision.delay_seconds,
        next_attempt=decision.next_attempt,
    )


def attempts_exhausted(job: ScheduledJob, message: RunMessage) -> Outcome | None:
    """Failed, if this delivery comes after the last allowed attempt (its worker died
    during it, and the lease expired); None if the attempt may run."""
    if message.attempt <= job.spec.retry.max_attempts:
        return None
    return Outcome(
        state=RunState.FAILED,
        error=f"attempt {message.attempt - 1} of {job.spec.retry.max_attempts} was cut "
        "short (its worker stopped answering) and no attempts are left",
    )


class RunProgress:
    """The run's state as this worker moves it, through the state machine's table: a
    delivery starts Queued (whatever the last attempt left in status, the queue
    requeued it), and every move is checked, so a code path that would, say, record
    Succeeded for a skipped run raises instead of writing it."""

    def __init__(self) -> None:
        self.state = RunState.QUEUED

    def move(self, target: RunState) -> RunState:
        self.state = transition(self.state, target)
        return self.state


@overload
def scheduled_at(message: RunMessage, default: dt.datetime) -> dt.datetime: ...
@overload
def scheduled_at(message: RunMessage, default: None) -> dt.datetime | None: ...
def scheduled_at(message: RunMessage, default: dt.datetime | None) -> dt.datetime | None:
    """The run's nominal time: when it was due, or when a manual run was triggered;
    ``default`` for a manual run published by an older operator, which says neither."""
    moment = message.scheduled_at or message.triggered_at
    if moment:
        return dt.datetime.fromisoformat(moment)
    return default


def waiting_run(message: RunMessage, now: dt.datetime) -> ActiveRun:
    """The run's ``activeRuns`` entry while it waits for a place of its concurrency
    key (the key as the job names it, without the namespace)."""
    key = (message.concurrency_key or "").partition("/")[2]
    return ActiveRun(
        id=message.run_id,
        scheduled_at=scheduled_at(message, now),
        state=transition(RunState.QUEUED, RunState.WAITING),
        attempt=message.attempt,
        queued_at=dt.datetime.fromtimestamp(message.enqueued_at, dt.UTC)
        if message.enqueued_at
        else None,
        manual=message.scheduled_at is None,
        params=message.params,
        waiting_for=key or None,
    )


def on_schedule(message: RunMessage) -> bool:
    """Is the run one of its job's schedule (not a manual or a backfilled run)?"""
    if message.scheduled_at is None:
        return False
    try:
        return parse_run_id(message.run_id).backfill is None
    except ValueError:
        return False


def next_runs_shown(job: ScheduledJob, message: RunMessage) -> list[dt.datetime]:
    """What ``status.nextRunAt`` and ``nextRuns`` say once this run's record is written
    (the same write carries them: one status write per run, DESIGN.md invariant 10).

    * A run of the schedule: the runs that follow it (not those after the moment it
      ended: the operator publishes the next one after this one, and a run that ends
      late must not show the one after that as next).
    * A manual or backfilled run: what the job showed, unchanged.
    * None (the fields leave, where this run's manager holds them) for a one-shot,
      suspended, paused, completed or invalid job: the operator shows no next run
      there, and writes so itself when it decides it; and for a job that names
      Calendars or runs after other jobs: only the operator follows those, and shows
      its next runs itself.

    The operator works these out from the same spec (:func:`upcoming`), and writes
    them itself whenever no run's record is on its way to do so."""
    spec, status = job.spec, job.status
    held = (JobPhase.SUSPENDED, JobPhase.PAUSED, JobPhase.COMPLETED, JobPhase.INVALID)
    operator_shows = spec.calendars is not None or spec.after is not None
    if spec.one_shot or operator_shows or spec.suspend or status.phase in held:
        return []
    due = message.scheduled_at
    if due is None or not on_schedule(message):
        if status.next_runs:
            return list(status.next_runs)
        return [status.next_run_at] if status.next_run_at is not None else []
    created = (job.metadata or {}).get("creationTimestamp")
    anchor = dt.datetime.fromisoformat(created) if created else dt.datetime.fromisoformat(due)
    schedule = spec.schedule_of(anchor)
    return upcoming(schedule, schedule.next_run_after(dt.datetime.fromisoformat(due)))


#: Tries of a progress mark (Running, Retrying) while the API server is away.
MARK_ATTEMPTS = 6
#: How long a run's record is retried while the API server is away; past this it
#: is dead-lettered with its outcome (an outage this long wants a person anyway).
RECORD_PATIENCE_SECONDS = 600.0


class AfterRefusal(enum.Enum):
    """What follows a status write that the API server did not take (:func:`after_refusal`)."""

    DONE = "done"
    """Nothing is left to write to: the job is gone, or another object has its name."""
    STALE = "stale"
    """A write conditional on the job's resourceVersion found a newer job: read it
    again and decide anew."""
    RETRY = "retry"
    """The API server is away: try again after a pause."""
    GIVE_UP = "give-up"
    """Refused for good, or away too long."""


@dataclass(frozen=True)
class WriteStep:
    next: AfterRefusal
    wait_seconds: float = 0.0
    warn: bool = False
    """Say that the run's record is still not written (every few tries)."""


def after_refusal(
    *,
    not_found: bool,
    conflict: bool,
    unavailable: bool,
    conditional: bool,
    record: bool,
    attempt: int,
    patient_seconds: float,
) -> WriteStep:
    """What to do after try ``attempt`` (from 1) of a status write failed. A progress
    mark is given up after :data:`MARK_ATTEMPTS`; a run's record is not while
    ``patient_seconds`` (of :data:`RECORD_PATIENCE_SECONDS`) are left: acknowledging
    a run whose outcome status never heard of would lose it. The pause doubles from
    half a second to at most eight."""
    if not_found:
        return WriteStep(AfterRefusal.DONE)
    if conflict:
        return WriteStep(AfterRefusal.STALE if conditional else AfterRefusal.DONE)
    tired = patient_seconds <= 0 if record else attempt >= MARK_ATTEMPTS
    if not unavailable or tired:
        return WriteStep(AfterRefusal.GIVE_UP)
    wait = min(0.5 * 2 ** min(attempt - 1, 4), 8.0)
    return WriteStep(AfterRefusal.RETRY, wait_seconds=wait, warn=attempt % MARK_ATTEMPTS == 0)
