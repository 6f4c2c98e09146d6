"""The Ready condition as a table: what the operator says of a job's health."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickwork.core.states import READY_ERROR_CHARS, JobPhase, RunState, readiness

pytestmark = pytest.mark.unit

S, C, SUS, INV = JobPhase.SCHEDULED, JobPhase.COMPLETED, JobPhase.SUSPENDED, JobPhase.INVALID
P = JobPhase.PAUSED


@pytest.mark.parametrize(
    ("phase", "last", "missed", "ready", "reason"),
    [
        (S, None, False, True, "Scheduled"),
        (S, RunState.SUCCEEDED, False, True, "Scheduled"),
        (S, RunState.FAILED, False, False, "LastRunFailed"),
        (S, RunState.CANCELLED, False, True, "Scheduled"),  # Replace, suspend: not a failure
        (S, RunState.SKIPPED, False, True, "Scheduled"),
        (C, RunState.SUCCEEDED, False, True, "Completed"),
        (C, RunState.FAILED, False, False, "LastRunFailed"),
        (C, None, True, False, "Missed"),
        (S, None, True, True, "Scheduled"),  # a recurring job's miss is counted, not fatal
        (SUS, None, False, True, "Suspended"),
        (SUS, RunState.FAILED, False, False, "LastRunFailed"),
        (INV, RunState.FAILED, False, False, "InvalidSpec"),
        (P, RunState.FAILED, False, False, "Paused"),  # until resumed, whatever ran last
        (P, RunState.SKIPPED, False, False, "Paused"),
        (P, RunState.SUCCEEDED, False, False, "Paused"),
    ],
)
def test_ready_follows_the_spec_the_last_run_and_misses(
    phase: JobPhase, last: RunState | None, missed: bool, ready: bool, reason: str
) -> None:
    verdict = readiness(
        phase=phase,
        invalid_reason="bad cron",
        last_outcome=last,
        last_run_id="r1",
        last_error="boom",
        missed_one_shot=missed,
    )
    assert (verdict.ready, verdict.reason) == (ready, reason)


def test_the_failure_message_names_the_run_and_a_bounded_error() -> None:
    verdict = readiness(
        phase=S,
        invalid_reason=None,
        last_outcome=RunState.FAILED,
        last_run_id="ns.j.abc.1",
        last_error="x" * 5000,
        missed_one_shot=False,
    )
    assert verdict.message.startswith("run ns.j.abc.1 failed: xxx")
    assert len(verdict.message) == len("run ns.j.abc.1 failed: ") + READY_ERROR_CHARS
    bare = readiness(
        phase=S,
        invalid_reason=None,
        last_outcome=RunState.FAILED,
        last_run_id="r",
        last_error=None,
        missed_one_shot=False,
    )
    assert bare.message == "run r failed"


def test_docs_api_lists_every_ready_reason() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs/api.md").read_text()
    conditions = docs.split("## Conditions", 1)[1].split("\n## ", 1)[0]
    reasons = {
        verdict.reason
        for verdict in (
            readiness(
                phase=p,
                invalid_reason=None,
                last_outcome=o,
                last_run_id="r",
                last_error=None,
                missed_one_shot=m,
            )
            for p in JobPhase
            for o in (None, *RunState)
            for m in (False, True)
        )
    }
    assert reasons == {
        "Scheduled",
        "Completed",
        "Suspended",
        "InvalidSpec",
        "LastRunFailed",
        "Missed",
        "Paused",
    }
    for reason in reasons | {"Resumed", "ConsecutiveFailures"}:
        assert f"| `{reason}` |" in conditions, reason
