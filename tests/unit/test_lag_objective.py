"""A job's lag objective (spec.slo, issue 51): condition OnTime says whether its last
run started within ``maxLagSeconds`` of when it was due, and ``tickwork_job_late``
names it while it did not. The operator reads it from the run's record (first
attempts only: a retry starts late by design). With the test's clock.

(The alert on recorded series: tests/data/alerts.promtest.yaml; on a worker's real
runs: tests/integration/test_operator.py::test_a_late_run_breaks_the_jobs_objective.)"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.unit.test_operator_decisions import UID, Leader, minute
from tickwork.core.runs import scheduled_run_id
from tickwork_operator.metrics import OperatorMetrics

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

OBJECTIVE = {"schedule": "* * * * *", "slo": {"maxLagSeconds": 30}}


def ran(m: int, *, late: float, attempts: int = 1) -> dict[str, Any]:
    """Status after the run due at minute ``m`` started ``late`` seconds after it."""
    due = minute(m)
    record = {
        "id": scheduled_run_id(UID, due),
        "scheduledAt": due.isoformat(),
        "outcome": "Succeeded",
        "attempts": attempts,
        "startedAt": (due + dt.timedelta(seconds=late)).isoformat(),
        "finishedAt": (due + dt.timedelta(seconds=late + 1)).isoformat(),
    }
    return {"lastRun": record, "runs": [record]}


def on_time(leader: Leader) -> dict[str, Any] | None:
    conditions = leader.sink.status.get("conditions") or []
    return next((c for c in conditions if c["type"] == "OnTime"), None)


def late_series(leader: Leader) -> dict[tuple[str, str], float]:
    metrics = OperatorMetrics()
    metrics.count_jobs(leader.state.phases, leader.state.late.keys)
    return {
        (s.labels["job_namespace"], s.labels["job_name"]): s.value
        for family in metrics.registry.collect()
        if family.name == "tickwork_job_late"
        for s in family.samples
    }


async def test_a_run_that_started_late_breaks_the_objective_and_names_the_job() -> None:
    leader = Leader()
    leader.observe(OBJECTIVE, status=ran(0, late=75))
    await leader.tick_at(minute(0, 80))
    condition = on_time(leader)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "StartedLate")
    assert "started 75 s after it was due, over spec.slo's 30 s" in condition["message"]
    assert late_series(leader) == {("ns", "j"): 1.0}
    ready = {c["type"]: c for c in leader.sink.status["conditions"]}["Ready"]
    assert ready["status"] == "True"  # late is not broken: nothing for kstatus to fail


async def test_a_run_on_time_again_clears_it() -> None:
    leader = Leader()
    leader.observe(OBJECTIVE, status=ran(0, late=75))
    await leader.tick_at(minute(0, 80))
    leader.observe(OBJECTIVE, status=ran(1, late=2))
    await leader.tick_at(minute(1, 10))
    condition = on_time(leader)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "WithinObjective")
    assert late_series(leader) == {}


async def test_a_retried_run_or_a_job_without_an_objective_says_nothing() -> None:
    leader = Leader()
    leader.observe(OBJECTIVE, status=ran(0, late=300, attempts=2))  # a retry's start
    await leader.tick_at(minute(0, 10))
    assert on_time(leader) is None
    plain = Leader()
    plain.observe({"schedule": "* * * * *"}, status=ran(0, late=300))
    await plain.tick_at(minute(0, 10))
    assert on_time(plain) is None
    assert late_series(plain) == {}


async def test_the_condition_goes_with_the_objective() -> None:
    leader = Leader()
    leader.observe(OBJECTIVE, status=ran(0, late=75))
    await leader.tick_at(minute(0, 80))
    assert on_time(leader) is not None
    leader.observe({"schedule": "* * * * *"}, status=ran(0, late=75), generation=2)
    await leader.tick_at(minute(0, 90))
    assert on_time(leader) is None
    assert late_series(leader) == {}
