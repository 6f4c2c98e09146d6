"""What the operator wants its share of a job's status to say: a decision from what
it knows of the job (its :class:`~tickwork_operator.entry.JobEntry`) and the time,
with no effect. :meth:`~tickwork_operator.state.WatchState.refresh_wanted` carries it
out (keeps it, and marks the job for a write when it differs from what was written).

The share holds the lifecycle phase, the next runs (where status shows them), the
failure streak, the backfills' progress, and three conditions, whose changes are
their own small decision (:func:`condition_plan`, driven by a table in
tests/unit/test_wanted_share.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tickwork.api.models import OperatorStatus
from tickwork.api.sharing import compact
from tickwork.core.annotations import RESUME_ANNOTATION
from tickwork.core.failures import describe_pause
from tickwork.core.states import Readiness, job_phase, readiness
from tickwork.kube.status import (
    CONDITION_ON_TIME,
    CONDITION_PAUSED,
    CONDITION_READY,
    CONDITION_STALLED,
    CONDITION_SUSPENDED,
    updated,
    with_condition,
)
from tickwork_operator.dependencies import after_status
from tickwork_operator.entry import JobEntry, recorded_streak


@dataclass(frozen=True, slots=True)
class ConditionChange:
    """One condition as the share should show it."""

    type: str
    status: bool
    reason: str
    message: str


SUSPENDED = ConditionChange(
    CONDITION_SUSPENDED,
    status=True,
    reason="Suspended",
    message="spec.suspend is true: no run is published",
)
UNSUSPENDED = ConditionChange(
    CONDITION_SUSPENDED,
    status=False,
    reason="Resumed",
    message="runs are published again, from the resume on",
)
UNPAUSED = ConditionChange(
    CONDITION_PAUSED,
    status=False,
    reason="Resumed",
    message=f"resumed ({RESUME_ANNOTATION} or a new spec): runs are published again, "
    "from the resume on",
)


UNSTALLED = ConditionChange(
    CONDITION_STALLED,
    status=False,
    reason="Ready",
    message="the job is Ready: nothing waits for a person",
)


def condition_plan(
    *, ready: Readiness, valid: bool, suspended: bool, paused: str | None, shown: frozenset[str]
) -> tuple[ConditionChange, ...]:
    """The conditions to set: ``Ready`` always; ``Suspended`` while a valid job is
    suspended, and False once it no longer is, if status showed it (``shown``: the
    types status holds); ``Paused`` likewise, with why (``paused``) while it is;
    ``Stalled`` likewise, with ``Ready``'s reason while ``Ready`` is False. Every False
    ``Ready`` is a state only a person ends (a spec to fix, a pause to resume, a run
    that failed or was missed), which kstatus (Flux, kpt) reads from ``Stalled``:
    ``Failed`` then, not ``InProgress`` until a timeout."""
    plan = [ConditionChange(CONDITION_READY, ready.ready, ready.reason, ready.message)]
    if not ready.ready:
        plan.append(
            ConditionChange(
                CONDITION_STALLED, status=True, reason=ready.reason, message=ready.message
            )
        )
    elif CONDITION_STALLED in shown:
        plan.append(UNSTALLED)
    if valid and suspended:
        plan.append(SUSPENDED)
    elif valid and CONDITION_SUSPENDED in shown:
        plan.append(UNSUSPENDED)
    if paused is not None:
        plan.append(
            ConditionChange(
                CONDITION_PAUSED, status=True, reason="ConsecutiveFailures", message=paused
            )
        )
    elif CONDITION_PAUSED in shown:
        plan.append(UNPAUSED)
    return tuple(plan)


def on_time(max_lag: int | None, lag: int | None) -> ConditionChange | None:
    """``OnTime`` for a job with a lag objective (``max_lag`` seconds), from how late its
    last run started (``lag``); None: nothing to say (no objective, or no run whose
    start is known yet)."""
    if max_lag is None or lag is None:
        return None
    if lag <= max_lag:
        return ConditionChange(
            CONDITION_ON_TIME,
            status=True,
            reason="WithinObjective",
            message=f"the last run started {lag} s after it was due (spec.slo: {max_lag} s)",
        )
    return ConditionChange(
        CONDITION_ON_TIME,
        status=False,
        reason="StartedLate",
        message=f"the last run started {lag} s after it was due, over spec.slo's "
        f"{max_lag} s: are the workers busy (its namespace's share, the autoscaler's "
        "maximum)?",
    )


def pause_text(entry: JobEntry) -> str | None:
    """Why the job is paused, or None if it is not."""
    if not entry.paused or entry.streak is None or entry.spec is None:
        return None
    return describe_pause(entry.streak, entry.spec.pause_after or entry.streak.count)


def wanted_share(entry: JobEntry, *, now: dt.datetime, keeps_schedule: bool) -> OperatorStatus:
    """The operator's share of ``entry``'s status as it should be at ``now``; the share
    it holds (the same object) when nothing changes. ``keeps_schedule``: status shows
    the next runs (else it shows none, nor an old ``nextRunAt``)."""
    current = entry.wanted.observed_generation == entry.generation
    base = entry.wanted if current else entry.written
    phase = job_phase(
        suspended=entry.suspended,
        valid=entry.spec is not None,
        finished=entry.finished(now=now, last_schedule_time=base.last_schedule_time),
        active=entry.active_run_id() is not None,
        paused=entry.paused,
    )
    pending = entry.pending if entry.spec and not entry.suspended and keeps_schedule else None
    next_run_at = pending.scheduled_at if pending else None
    finished = entry.finished_run_ids()
    # Each step below leaves a new share as it is; the last one is compacted.
    wanted = updated(
        base,
        lean=False,
        observed_generation=entry.generation,
        cancel_requests=[r for r in base.cancel_requests if r.id not in finished],
        phase=phase,
        next_run_at=next_run_at,
        next_runs=entry.next_runs(next_run_at),
        failure_streak=recorded_streak(entry.streak),
        last_resume_token=entry.resumed_token,
        backfills=entry.backfill_progress(),
        after=after_status(entry, now=now),
    )
    paused = pause_text(entry)
    last = entry.observed.last_run
    ready = readiness(
        phase=phase,
        invalid_reason=entry.invalid_reason,
        last_outcome=last.outcome if last else None,
        last_run_id=last.id if last else None,
        last_error=last.error if last else None,
        missed_one_shot=wanted.missed_runs is not None
        and wanted.missed_runs > 0
        and wanted.last_missed_time == wanted.last_schedule_time
        and last is None
        and bool(entry.spec and entry.spec.one_shot),
        pause_message=paused,
        one_shot=entry.spec is None or entry.spec.one_shot,
    )
    shown_types = frozenset(c.type for c in wanted.conditions)
    plan = condition_plan(
        ready=ready,
        valid=entry.spec is not None,
        suspended=entry.suspended,
        paused=paused,
        shown=shown_types,
    )
    slo = entry.spec.slo if entry.spec is not None else None
    timely = on_time(slo.max_lag_seconds if slo else None, last.lag if last else None)
    if timely is not None:
        plan = (*plan, timely)
    elif slo is None and CONDITION_ON_TIME in shown_types:
        kept = [c.model_dump() for c in wanted.conditions if c.type != CONDITION_ON_TIME]
        wanted = updated(wanted, lean=False, conditions=kept)  # the objective went
    for change in plan:
        wanted = with_condition(
            wanted,
            change.type,
            status=change.status,
            reason=change.reason,
            message=change.message,
            now=now,
            lean=False,
        )
    return wanted if wanted is base else compact(wanted)
