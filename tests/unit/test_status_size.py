"""A job's status stays small at its maximum: the history keeps short texts, the last
run the full ones (every worker holds every job's status in its copy), and each
record's field manager adds its entry to ``managedFields``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tickwork.api.models import (
    RUNS_LIMIT,
    OperatorStatus,
    RunRecord,
    ScheduledJobStatus,
)
from tickwork.core.params import MAX_PARAMS, PARAMS_TEXT_LIMIT, check_params
from tickwork.core.planning import NEXT_RUNS
from tickwork.core.states import JobPhase, RunState
from tickwork.core.text import HISTORY_TEXT_LIMIT, TEXT_LIMIT
from tickwork.kube.status import (
    TRIM_BATCH,
    operator_body,
    record_body,
    run_manager,
    to_drop,
    trim_due,
    updated,
)

pytestmark = pytest.mark.unit
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
#: The most a manual run's parameters hold: every name and the whole text budget.
PARAMS = check_params(
    {f"p{i}": "v" * (PARAMS_TEXT_LIMIT // MAX_PARAMS - 2) for i in range(MAX_PARAMS)}
)


def _record(index: int, outcome: RunState) -> RunRecord:
    moment = T0 + dt.timedelta(minutes=index)
    return RunRecord(
        id=f"{'u' * 36}.{moment:%Y%m%dT%H%M%SZ}",
        scheduled_at=moment,
        outcome=outcome,
        attempts=20,
        started_at=moment,
        finished_at=moment,
        result="r" * 1024,
        error="e" * 1024,
        params=PARAMS,
    )


def _managed_entry(run_id: str) -> dict[str, Any]:
    """A run manager's entry as the API server keeps it (the shape of a real one)."""
    fields = {
        f"f:{name}": {}
        for name in (
            "id",
            "scheduledAt",
            "outcome",
            "attempts",
            "startedAt",
            "finishedAt",
            "result",
            "error",
            "params",
        )
    }
    return {
        "manager": run_manager(run_id),
        "operation": "Apply",
        "apiVersion": "tickwork.dev/v1alpha1",
        "time": "2026-12-01T09:00:00Z",
        "fieldsType": "FieldsV1",
        "subresource": "status",
        "fieldsV1": {"f:status": {"f:runs": {json.dumps({"id": run_id}): {".": {}, **fields}}}},
    }


def test_the_history_keeps_short_texts_and_the_last_run_the_full_ones() -> None:
    runs: dict[str, dict[str, Any]] = {}  # what the list-map holds, in order
    fullest: dict[str, dict[str, Any]] = {}
    last: dict[str, Any] = {}
    for index in range(60):  # more than the history keeps, with the longest texts a record takes
        record = _record(index, RunState.SUCCEEDED if index % 2 else RunState.FAILED)
        body = record_body(record, successful=20, failed=20)
        runs |= {entry["id"]: entry for entry in body["runs"]}
        last = body["lastRun"]
        held = ScheduledJobStatus.model_validate({"runs": list(runs.values())}).runs
        drop = to_drop(held, record, successful=20, failed=20)
        if len(runs) > len(fullest):
            fullest = dict(runs)
        if trim_due(drop, len(held), placed=False):  # records leave in batches
            for run_id in drop:
                del runs[run_id]
    # The most a history holds: the limits, and a batch about to leave.
    assert len(fullest) == 40 + TRIM_BATCH <= RUNS_LIMIT
    status = ScheduledJobStatus.model_validate({"runs": list(fullest.values()), "lastRun": last})
    assert status.last_run is not None
    assert len(status.last_run.result or "") == TEXT_LIMIT
    assert len(status.last_run.error or "") == TEXT_LIMIT
    assert {len(r.result or "") for r in status.runs} == {HISTORY_TEXT_LIMIT}
    assert {len(r.error or "") for r in status.runs} == {HISTORY_TEXT_LIMIT}
    assert status.runs[-1].result == (status.last_run.result or "")[: HISTORY_TEXT_LIMIT - 13] + (
        "… [truncated]"
    )
    # The maximum a tenant can make a job's status grow to (see docs/operations.md),
    # with the managedFields entry of every record's run: every record a manual run's
    # with the most parameters a trigger may pass.
    managed = [_managed_entry(run.id) for run in status.runs]
    size = len(
        json.dumps({"status": status.to_wire(), "managedFields": managed}, separators=(",", ":"))
    )
    assert size < 64 * 1024


def test_the_operators_share_at_its_largest_stays_small_with_next_runs() -> None:
    """The operator's share with every field at its limit (the failure streak, every
    token, run parameters, every condition): five nextRuns add some 130 bytes to each
    of its writes (which nextRunAt needed anyway), nothing more."""
    token = "t" * 253
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": "R" * 128,
            "message": "m" * 2048,
            "lastTransitionTime": T0,
            "observedGeneration": 2**62,
        }
        for kind in ("Ready", "Suspended", "Paused")
    ]
    params = check_params(
        {f"P{i}": "v" * (PARAMS_TEXT_LIMIT // MAX_PARAMS - 2) for i in range(MAX_PARAMS)}
    )
    streak = {"count": 2**62, "runIds": ["i" * 256] * 10, "countedUntil": T0, "pausedAt": T0}
    runs = [T0 + dt.timedelta(seconds=90 * k, microseconds=999_999) for k in range(NEXT_RUNS)]
    share = OperatorStatus(
        phase=JobPhase.SCHEDULED,
        observed_generation=2**62,
        next_run_at=runs[0],
        next_runs=runs,
        last_schedule_time=T0,
        missed_runs=2**62,
        last_missed_time=T0,
        last_trigger_token=token,
        last_requeue_token=token,
        last_purge_token=token,
        last_resume_token=token,
        failure_streak=streak,
        queued_run={
            "id": "i" * 256,
            "scheduledAt": T0,
            "queuedAt": T0,
            "manual": True,
            "params": params,
        },
        conditions=conditions,
    )
    body = json.dumps(operator_body(share), separators=(",", ":"))
    without = json.dumps(operator_body(updated(share, next_runs=None)), separators=(",", ":"))
    assert len(body) - len(without) <= 5 * 30 + 15
    assert len(body) < 12 * 1024  # 11.5 KiB, most of it the three condition messages
    with pytest.raises(ValueError, match="at most 5 items"):
        updated(share, next_runs=[*runs, T0])
