"""A job's status stays small at its maximum: the history keeps short texts, the last
run the full ones (every worker holds every job's status in its copy), and each
record's field manager adds its entry to ``managedFields``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tickwork.api.models import RunRecord, RunState, ScheduledJobStatus
from tickwork.core.params import MAX_PARAMS, PARAMS_TEXT_LIMIT, check_params
from tickwork.core.text import HISTORY_TEXT_LIMIT, TEXT_LIMIT
from tickwork.kube.status import record_body, run_manager, to_drop

pytestmark = pytest.mark.unit
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
#: The most a manual run's parameters hold: every name and the whole text budget.
PARAMS = check_params({f"p{i}": "v" * (PARAMS_TEXT_LIMIT // MAX_PARAMS - 2)
                       for i in range(MAX_PARAMS)})  # fmt: skip


def _record(index: int, outcome: RunState) -> RunRecord:
    moment = T0 + dt.timedelta(minutes=index)
    return RunRecord(id=f"{'u' * 36}.{moment:%Y%m%dT%H%M%SZ}", scheduled_at=moment,
                     outcome=outcome, attempts=20, started_at=moment, finished_at=moment,
                     result="r" * 1024, error="e" * 1024, params=PARAMS)  # fmt: skip


def _managed_entry(run_id: str) -> dict[str, Any]:
    """A run manager's entry as the API server keeps it (the shape of a real one)."""
    fields = {f"f:{name}": {} for name in ("id", "scheduledAt", "outcome", "attempts",
              "startedAt", "finishedAt", "result", "error", "params")}  # fmt: skip
    return {
        "manager": run_manager(run_id), "operation": "Apply", "apiVersion": "tickwork.dev/v1alpha1",
        "time": "2026-12-01T09:00:00Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {"f:status": {"f:runs": {json.dumps({"id": run_id}): {".": {}, **fields}}}},
    }  # fmt: skip


def test_the_history_keeps_short_texts_and_the_last_run_the_full_ones() -> None:
    runs: dict[str, dict[str, Any]] = {}  # what the list-map holds, in order
    last: dict[str, Any] = {}
    for index in range(60):  # more than the history keeps, with the longest texts a record takes
        record = _record(index, RunState.SUCCEEDED if index % 2 else RunState.FAILED)
        body = record_body(record, successful=20, failed=20)
        runs |= {entry["id"]: entry for entry in body["runs"]}
        last = body["lastRun"]
        held = ScheduledJobStatus.model_validate({"runs": list(runs.values())}).runs
        for run_id in to_drop(held, record, successful=20, failed=20):
            del runs[run_id]
    status = ScheduledJobStatus.model_validate({"runs": list(runs.values()), "lastRun": last})
    assert len(status.runs) == 40
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
    size = len(json.dumps({"status": status.to_wire(), "managedFields": managed},
                          separators=(",", ":")))  # fmt: skip
    assert size < 60 * 1024
