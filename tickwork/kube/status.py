"""Every status write of Tickwork, in one module: who owns which field, and the bodies.

Status is written by server-side apply, the operator and the workers as
separate field managers. With server-side apply, an apply states *all* of a
manager's intent: a field it owned and leaves out is removed. So each
manager always sends its whole share, built here from a small record:

============================  =======================================
operator (``tickwork-operator``)   worker (``tickwork-worker``)
============================  =======================================
observedGeneration, nextRunAt      currentRun (while a run executes)
lastScheduleTime, queuedRun        lastRun, runs, lastSuccessfulTime
missedRuns, lastMissedTime
lastTriggerToken, conditions
============================  =======================================

``phase`` is shared: whoever changes what the job is doing sets it, with
``force``; the operator's routine updates send the phase it last saw,
without force, so a worker's newer phase is never overwritten (a conflict
makes the operator re-read the object instead). The one forced write of the
operator that races a worker — "Queued" right after publishing, when a quick
run may already have finished — reads the object first, keeps the worker's
phase if status already names the run, and carries that read's
resourceVersion as a precondition (``Ticker._write_queued``).

The builders are pure; :class:`~tickwork.kube.client.KubeClient` sends them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from tickwork.api.models import RunRecord, ScheduledJobStatus
from tickwork.core.states import ACTIVE_STATES, JobPhase, RunState
from tickwork.core.text import HISTORY_TEXT_LIMIT, TEXT_LIMIT, cap_optional

OPERATOR_MANAGER = "tickwork-operator"
WORKER_MANAGER = "tickwork-worker"

CONDITION_READY = "Ready"
CONDITION_SUSPENDED = "Suspended"


def timestamp(moment: dt.datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z, as Kubernetes writes it."""
    if moment is None:
        return None
    utc = moment.astimezone(dt.UTC)
    text = utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds")
    return text.replace("+00:00", "Z")


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str
    last_transition_time: dt.datetime

    def to_wire(self, generation: int | None) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "type": self.type,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": cap_optional(self.message, 2048) or "",
            "lastTransitionTime": timestamp(self.last_transition_time),
        }
        if generation is not None:
            wire["observedGeneration"] = generation
        return wire


def set_condition(
    conditions: tuple[Condition, ...],
    *,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: dt.datetime,
) -> tuple[Condition, ...]:
    """Replace the condition of ``type_``; its transition time moves only if status flips."""
    previous = next((c for c in conditions if c.type == type_), None)
    since = previous.last_transition_time if previous and previous.status == status else now
    updated = Condition(type_, status, reason, message, since)
    return (*(c for c in conditions if c.type != type_), updated)


@dataclass(frozen=True)
class QueuedRunInfo:
    id: str
    scheduled_at: dt.datetime
    queued_at: dt.datetime
    manual: bool = False


@dataclass(frozen=True)
class OperatorStatus:
    """The operator's share of a job's status; ``apply_body`` is what it sends."""

    phase: JobPhase | None = None
    observed_generation: int | None = None
    next_run_at: dt.datetime | None = None
    last_schedule_time: dt.datetime | None = None
    missed_runs: int = 0
    last_missed_time: dt.datetime | None = None
    last_trigger_token: str | None = None
    queued_run: QueuedRunInfo | None = None
    conditions: tuple[Condition, ...] = field(default_factory=tuple)

    @classmethod
    def observed(cls, status: ScheduledJobStatus) -> OperatorStatus:
        """The operator's share as the API server has it (after a restart, say)."""
        queued = status.queued_run
        return cls(
            phase=status.phase,
            observed_generation=status.observed_generation,
            next_run_at=status.next_run_at,
            last_schedule_time=status.last_schedule_time,
            missed_runs=status.missed_runs or 0,
            last_missed_time=status.last_missed_time,
            last_trigger_token=status.last_trigger_token,
            queued_run=QueuedRunInfo(
                id=queued.id,
                scheduled_at=queued.scheduled_at,
                queued_at=queued.queued_at,
                manual=queued.manual,
            )
            if queued
            else None,
            conditions=tuple(
                Condition(
                    c.type, c.status.value == "True", c.reason, c.message, c.last_transition_time
                )
                for c in status.conditions
                if c.type in (CONDITION_READY, CONDITION_SUSPENDED)
            ),
        )

    def with_condition(
        self, type_: str, *, status: bool, reason: str, message: str, now: dt.datetime
    ) -> OperatorStatus:
        conditions = set_condition(
            self.conditions, type_=type_, status=status, reason=reason, message=message, now=now
        )
        return replace(self, conditions=conditions)

    def apply_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "observedGeneration": self.observed_generation,
            "nextRunAt": timestamp(self.next_run_at),
            "lastScheduleTime": timestamp(self.last_schedule_time),
            "missedRuns": self.missed_runs or None,
            "lastMissedTime": timestamp(self.last_missed_time),
            "lastTriggerToken": self.last_trigger_token,
            "conditions": [c.to_wire(self.observed_generation) for c in self.conditions],
        }
        if self.phase is not None:
            body["phase"] = self.phase.value
        if self.queued_run is not None:
            run = self.queued_run
            body["queuedRun"] = {
                "id": run.id,
                "scheduledAt": timestamp(run.scheduled_at),
                "queuedAt": timestamp(run.queued_at),
                "manual": run.manual,
            }
        return {key: value for key, value in body.items() if value is not None}


# -- the worker's share ---------------------------------------------------------


@dataclass(frozen=True)
class RunInfo:
    """What the worker knows of the run it executes."""

    id: str
    scheduled_at: dt.datetime
    attempt: int
    queued_at: dt.datetime | None
    started_at: dt.datetime
    worker: str
    manual: bool = False


def _kept_fields(observed: ScheduledJobStatus) -> dict[str, Any]:
    """The worker-owned fields it must send again unchanged (or they would vanish)."""
    kept: dict[str, Any] = {}
    if observed.last_run is not None:
        kept["lastRun"] = observed.last_run.to_wire()
    kept["runs"] = [record.to_wire() for record in observed.runs]
    if observed.last_successful_time is not None:
        kept["lastSuccessfulTime"] = timestamp(observed.last_successful_time)
    return kept


def running_body(observed: ScheduledJobStatus, run: RunInfo, *, state: RunState) -> dict[str, Any]:
    """The worker's apply when a run starts (``Running``) or waits for a retry."""
    current = {
        "id": run.id,
        "scheduledAt": timestamp(run.scheduled_at),
        "state": state.value,
        "attempt": run.attempt,
        "queuedAt": timestamp(run.queued_at),
        "startedAt": timestamp(run.started_at),
        "worker": run.worker,
        "manual": run.manual,
    }
    phase = JobPhase.RUNNING if state is RunState.RUNNING else JobPhase.QUEUED
    return {
        **_kept_fields(observed),
        "phase": phase.value,
        "currentRun": {k: v for k, v in current.items() if v is not None},
    }


def keep_history(
    history: list[RunRecord], record: RunRecord, *, successful: int, failed: int
) -> list[RunRecord]:
    """The newest first, at most ``successful`` successes and ``failed`` of the rest."""
    kept: list[RunRecord] = []
    wins = losses = 0
    for item in [record, *(r for r in history if r.id != record.id)]:
        if item.outcome is RunState.SUCCEEDED:
            if wins < successful:
                kept.append(item)
                wins += 1
        elif losses < failed:
            kept.append(item)
            losses += 1
    return kept


def finished_body(
    observed: ScheduledJobStatus,
    record: RunRecord,
    *,
    phase: JobPhase,
    successful_history: int,
    failed_history: int,
) -> dict[str, Any]:
    """The worker's apply when a run ended: no ``currentRun`` of this run (so it is
    removed), but another run's current one is sent again (runs of a job may overlap)."""
    record = replace_record_texts(record)
    runs = keep_history(
        list(observed.runs), record, successful=successful_history, failed=failed_history
    )
    runs = [replace_record_texts(r, limit=HISTORY_TEXT_LIMIT) for r in runs]
    body: dict[str, Any] = {
        "phase": phase.value,
        "lastRun": record.to_wire(),
        "runs": [r.to_wire() for r in runs],
    }
    other = observed.current_run
    if other is not None and other.id != record.id and other.state in ACTIVE_STATES:
        body["currentRun"] = {
            "id": other.id, "scheduledAt": timestamp(other.scheduled_at),
            "state": other.state.value, "attempt": other.attempt,
            "queuedAt": timestamp(other.queued_at), "startedAt": timestamp(other.started_at),
            "worker": other.worker, "manual": other.manual,
        }  # fmt: skip
        body["currentRun"] = {k: v for k, v in body["currentRun"].items() if v is not None}
    last_success = observed.last_successful_time
    if record.outcome is RunState.SUCCEEDED:
        last_success = record.finished_at or last_success
    if last_success is not None:
        body["lastSuccessfulTime"] = timestamp(last_success)
    return body


def replace_record_texts(record: RunRecord, *, limit: int = TEXT_LIMIT) -> RunRecord:
    return record.model_copy(update={"result": cap_optional(record.result, limit),
                                     "error": cap_optional(record.error, limit)})  # fmt: skip
