"""A job's status stays small at its maximum: the history keeps short texts, the last
run the full ones (every worker holds every job's status in its copy)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tickwork.api.models import JobPhase, RunRecord, RunState, ScheduledJobStatus
from tickwork.core.text import HISTORY_TEXT_LIMIT, TEXT_LIMIT
from tickwork.kube.status import finished_body

pytestmark = pytest.mark.unit
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def _record(index: int, outcome: RunState) -> RunRecord:
    moment = T0 + dt.timedelta(minutes=index)
    return RunRecord(id=f"{'u' * 36}.{moment:%Y%m%dT%H%M%SZ}", scheduled_at=moment,
                     outcome=outcome, attempts=20, started_at=moment, finished_at=moment,
                     result="r" * 1024, error="e" * 1024)  # fmt: skip


def test_the_history_keeps_short_texts_and_the_last_run_the_full_ones() -> None:
    status = ScheduledJobStatus()
    for index in range(60):  # more than the history keeps, with the longest texts a record takes
        outcome = RunState.SUCCEEDED if index % 2 else RunState.FAILED
        body = finished_body(status, _record(index, outcome), phase=JobPhase.SCHEDULED,
                             successful_history=20, failed_history=20)  # fmt: skip
        status = ScheduledJobStatus.model_validate(body)
    assert len(status.runs) == 40
    assert status.last_run is not None
    assert len(status.last_run.result or "") == TEXT_LIMIT
    assert len(status.last_run.error or "") == TEXT_LIMIT
    assert {len(r.result or "") for r in status.runs} == {HISTORY_TEXT_LIMIT}
    assert {len(r.error or "") for r in status.runs} == {HISTORY_TEXT_LIMIT}
    assert status.runs[0].result == (status.last_run.result or "")[: HISTORY_TEXT_LIMIT - 13] + (
        "… [truncated]"
    )
    # The maximum a tenant can make a job's status grow to (see docs/operations.md).
    assert len(json.dumps(body, separators=(",", ":"))) < 32 * 1024
