"""The run state machine, and the job phase shown by ``kubectl get scheduledjobs``.

A run is born Queued when the watcher publishes it. Every later move must be
one of :data:`TRANSITIONS`; anything else raises
:class:`~tickwork.core.errors.IllegalTransitionError`, naming what is allowed.
The worker moves each delivery through :func:`transition` (its
``RunProgress``) before it writes a state to status, so a code path that
would record, say, an outcome for a run it skipped fails instead.
"""

from __future__ import annotations

import enum

from tickwork.core.errors import IllegalTransitionError


class RunState(enum.StrEnum):
    QUEUED = "Queued"
    RUNNING = "Running"
    RETRYING = "Retrying"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    SKIPPED = "Skipped"


TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    # A worker claims it, or it is cancelled (Replace policy, suspend, deletion),
    # or the worker finds it obsolete (resource gone, replaced, already done).
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.SKIPPED}),
    # It ends; or fails and waits for a retry; or its worker died and the lease
    # expired, so it is queued again.
    RunState.RUNNING: frozenset({
        RunState.SUCCEEDED, RunState.FAILED, RunState.RETRYING,
        RunState.CANCELLED, RunState.QUEUED,
    }),
    # The backoff elapses and it is queued again, or it is cancelled meanwhile.
    RunState.RETRYING: frozenset({RunState.QUEUED, RunState.CANCELLED, RunState.FAILED}),
    # A dead-lettered run may be requeued by an operator (`tickwork dlq requeue`).
    RunState.FAILED: frozenset({RunState.QUEUED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.CANCELLED: frozenset(),
    RunState.SKIPPED: frozenset(),
}  # fmt: skip

#: States after which nothing happens unless a person intervenes.
FINAL_STATES = frozenset({
    RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED,
})  # fmt: skip


def can_transition(current: RunState, target: RunState) -> bool:
    return target in TRANSITIONS[current]


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
    COMPLETED = "Completed"
    INVALID = "Invalid"


def job_phase(
    *, suspended: bool, valid: bool, one_shot: bool, finished: bool, active: bool
) -> JobPhase:
    """The lifecycle: a one-shot job whose run ended (and none is active) is
    Completed, however the run ended (``lastRun.outcome`` says how)."""
    if not valid:
        return JobPhase.INVALID
    if one_shot and finished and not active:
        return JobPhase.COMPLETED
    if suspended:
        return JobPhase.SUSPENDED
    return JobPhase.SCHEDULED
