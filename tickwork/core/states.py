"""The run state machine, and the job phase and readiness shown by ``kubectl get``.

A run is born Queued when the watcher publishes it. Every later move must be
one of :data:`TRANSITIONS`; anything else raises
:class:`~tickwork.core.errors.IllegalTransitionError`, naming what is allowed.
The worker moves each delivery through :func:`transition` (its
``RunProgress``) before it writes a state to status, so a code path that
would record, say, an outcome for a run it skipped fails instead.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tickwork.core.errors import IllegalTransitionError


class RunState(enum.StrEnum):
    QUEUED = "Queued"
    WAITING = "Waiting"
    """Over its concurrency key's limit: in the key's waiting list, in order."""
    RUNNING = "Running"
    RETRYING = "Retrying"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    SKIPPED = "Skipped"


TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    # A worker claims it, or it is cancelled (Replace policy, suspend, deletion),
    # or the worker finds it obsolete (resource gone, replaced, already done).
    RunState.QUEUED: frozenset(
        {RunState.RUNNING, RunState.WAITING, RunState.CANCELLED, RunState.SKIPPED}
    ),
    # Its concurrency key has a place again: queued once more (then claimed), or
    # cancelled while it waits.
    RunState.WAITING: frozenset({RunState.QUEUED, RunState.CANCELLED}),
    # It ends; or fails and waits for a retry; or its worker died and the lease
    # expired, so it is queued again.
    RunState.RUNNING: frozenset(
        {
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.RETRYING,
            RunState.CANCELLED,
            RunState.QUEUED,
        }
    ),
    # The backoff elapses and it is queued again, or it is cancelled meanwhile.
    RunState.RETRYING: frozenset({RunState.QUEUED, RunState.CANCELLED, RunState.FAILED}),
    # A dead-lettered run may be requeued by an operator (`tickwork dlq requeue`).
    RunState.FAILED: frozenset({RunState.QUEUED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.CANCELLED: frozenset(),
    RunState.SKIPPED: frozenset(),
}

#: States after which nothing happens unless a person intervenes.
FINAL_STATES = frozenset(
    {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.CANCELLED,
        RunState.SKIPPED,
    }
)


def transition(current: RunState, target: RunState) -> RunState:
    """Return ``target`` if a run may move there from ``current``; raise otherwise."""
    if target not in TRANSITIONS[current]:
        allowed = tuple(sorted(state.value for state in TRANSITIONS[current]))
        raise IllegalTransitionError(current.value, target.value, allowed)
    return target


class JobPhase(enum.StrEnum):
    """A ScheduledJob's lifecycle, written by the operator alone. What its runs are
    doing is the workers' share of status (``activeRuns``, ``lastRun``); ``kubectl
    get`` shows both."""

    SCHEDULED = "Scheduled"
    SUSPENDED = "Suspended"
    PAUSED = "Paused"
    """Runs failed in a row (``spec.failurePolicy.pauseAfter``): none is published
    until a person resumes the job."""
    COMPLETED = "Completed"
    INVALID = "Invalid"


def job_phase(
    *,
    suspended: bool,
    valid: bool,
    finished: bool,
    active: bool,
    paused: bool = False,
) -> JobPhase:
    """The lifecycle: a job with no run left to publish (``finished``: a one-shot job
    whose run was published, a recurring one past its ``notAfter``) and none active is
    Completed, however its last run ended (``lastRun.outcome`` says how)."""
    if not valid:
        return JobPhase.INVALID
    if finished and not active:
        return JobPhase.COMPLETED
    if suspended:
        return JobPhase.SUSPENDED
    if paused:
        return JobPhase.PAUSED
    return JobPhase.SCHEDULED


@dataclass(frozen=True)
class Readiness:
    """The ``Ready`` condition: True while the job does what it is meant to."""

    ready: bool
    reason: str
    message: str


#: How much of a failed run's error the Ready message repeats (lastRun has it whole).
READY_ERROR_CHARS = 200


_COMPLETED = "the one-shot run is over (lastRun says how it ended)"
_ENDED = "spec.notAfter leaves no run to start (lastRun says how the last one ended)"


def readiness(
    *,
    phase: JobPhase,
    invalid_reason: str | None,
    last_outcome: RunState | None,
    last_run_id: str | None,
    last_error: str | None,
    missed_one_shot: bool,
    pause_message: str | None = None,
    one_shot: bool = True,
) -> Readiness:
    """``Ready`` from what the operator knows: False for an invalid spec, a job paused
    by failed runs (until it is resumed), a last run that failed (until a later run
    succeeds) and a one-shot run that was missed; a suspended job is Ready (it does
    what it was told)."""
    if phase is JobPhase.INVALID:
        text = invalid_reason or "invalid spec"
        return Readiness(ready=False, reason="InvalidSpec", message=text)
    if phase is JobPhase.PAUSED:
        text = pause_message or "paused after consecutive failed runs"
        return Readiness(ready=False, reason="Paused", message=text)
    if last_outcome is RunState.FAILED:
        error = (last_error or "")[:READY_ERROR_CHARS]
        text = f"run {last_run_id} failed: {error}".rstrip(": ")
        return Readiness(ready=False, reason="LastRunFailed", message=text)
    if missed_one_shot and phase is JobPhase.COMPLETED:
        text = "the one-shot run could not start within startingDeadlineSeconds"
        return Readiness(ready=False, reason="Missed", message=text)
    reason, text = {
        JobPhase.SUSPENDED: ("Suspended", "suspended"),
        JobPhase.COMPLETED: ("Completed", _COMPLETED if one_shot else _ENDED),
    }.get(phase, ("Scheduled", "the schedule is valid and indexed"))
    return Readiness(ready=True, reason=reason, message=text)
