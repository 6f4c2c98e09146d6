"""Tickwork's Argo CD health check, run in gopher-lua (Argo CD's Lua VM) against
ScheduledJobs in each state; docs/operations.md ships the same script."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tickwork.api import models
from tickwork_dev.argocd import HEALTH_SCRIPT, health

ROOT = Path(__file__).resolve().parents[2]
RUN = "ns.j.0123abcd.1764579600"


EVERY_MINUTE = {"schedule": "* * * * *"}
ONCE = {"runAt": "2026-12-01T09:00:00Z"}
UNTIL = {"schedule": "@every 90s", "notAfter": "2026-12-01T09:00:00Z"}


def job(generation: int = 3, spec: dict[str, Any] = EVERY_MINUTE, **status: Any) -> dict[str, Any]:
    body = {
        "apiVersion": models.API_VERSION,
        "kind": models.KIND,
        "metadata": {"name": "j", "namespace": "ns", "generation": generation},
        "spec": {**spec, "task": {"echo": {}}},
        **({"status": status} if status else {}),
    }
    models.ScheduledJob.model_validate(body)  # each sample is a status Tickwork can write
    return body


def ready(value: str, reason: str, message: str = "") -> list[dict[str, Any]]:
    return [
        {
            "type": "Ready",
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": "2026-12-01T09:00:00Z",
            "observedGeneration": 3,
        }
    ]


def record(outcome: str) -> dict[str, Any]:
    return {"id": RUN, "scheduledAt": "2026-12-01T09:00:00Z", "outcome": outcome, "attempts": 1}


SCHEDULED = {"observedGeneration": 3, "phase": "Scheduled", "nextRunAt": "2026-12-01T09:01:00Z"}

CASES = [
    ("new, not yet seen by the operator", job(), "Progressing", "Waiting"),
    (
        "spec edited, not yet acted on",
        job(**{**SCHEDULED, "observedGeneration": 2, "conditions": ready("True", "Scheduled")}),
        "Progressing",
        "latest spec",
    ),
    ("seen, no condition yet", job(**SCHEDULED), "Progressing", "readiness"),
    (
        "scheduled",
        job(**SCHEDULED, conditions=ready("True", "Scheduled")),
        "Healthy",
        "Next run at 2026-12-01T09:01:00Z",
    ),
    (
        "running its run",
        job(
            **SCHEDULED,
            conditions=ready("True", "Scheduled"),
            activeRuns=[
                {"id": RUN, "scheduledAt": "2026-12-01T09:00:00Z", "state": "Running", "attempt": 1}
            ],
        ),
        "Healthy",
        "Next run",
    ),
    (
        "last run failed",
        job(
            **SCHEDULED,
            lastRun=record("Failed"),
            conditions=ready("False", "LastRunFailed", f"run {RUN} failed: 503"),
        ),
        "Degraded",
        "LastRunFailed: run ns.j.0123abcd.1764579600 failed: 503",
    ),
    (
        "invalid spec",
        job(
            observedGeneration=3,
            phase="Invalid",
            conditions=ready("False", "InvalidSpec", "unknown time zone 'Mars/Base'"),
        ),
        "Degraded",
        "InvalidSpec: unknown time zone",
    ),
    (
        "suspended",
        job(observedGeneration=3, phase="Suspended", conditions=ready("True", "Suspended")),
        "Suspended",
        "spec.suspend",
    ),
    (
        "suspended after a failure",
        job(
            observedGeneration=3,
            phase="Suspended",
            lastRun=record("Failed"),
            conditions=ready("False", "LastRunFailed", "x"),
        ),
        "Degraded",
        "LastRunFailed",
    ),
    (
        "paused after failed runs",
        job(
            observedGeneration=3,
            phase="Paused",
            lastRun=record("Failed"),
            conditions=ready("False", "Paused", "paused after 2 ..."),
        ),
        "Degraded",
        "Paused: paused after 2",
    ),
    (
        "one-shot done",
        job(
            spec=ONCE,
            observedGeneration=3,
            phase="Completed",
            lastRun=record("Succeeded"),
            conditions=ready("True", "Completed"),
        ),
        "Healthy",
        "The one-shot run is over: Succeeded",
    ),
    (
        "past notAfter",
        job(
            spec=UNTIL,
            observedGeneration=3,
            phase="Completed",
            lastRun=record("Succeeded"),
            conditions=ready("True", "Completed"),
        ),
        "Healthy",
        "No run is left before notAfter: Succeeded",
    ),
    (
        "one-shot missed",
        job(
            spec=ONCE,
            observedGeneration=3,
            phase="Completed",
            missedRuns=1,
            conditions=ready("False", "Missed", "could not start"),
        ),
        "Degraded",
        "Missed: could not start",
    ),
]


@pytest.mark.parametrize(("case", "obj", "status", "message"), CASES, ids=[c[0] for c in CASES])
def test_the_health_check_maps_each_state_to_an_argo_cd_status(
    case: str, obj: dict[str, Any], status: str, message: str
) -> None:
    got_status, got_message = health(obj)
    assert got_status == status, case
    assert message in got_message, (case, got_message)


def test_operations_docs_ship_the_tested_script_in_the_argocd_cm_snippet() -> None:
    docs = (ROOT / "docs/operations.md").read_text()
    [snippet] = re.findall(
        (
            r"resource\.customizations\.health\.tickwork\.dev_ScheduledJob: \|\n"
            r"((?:    .*\n|\n)+)"
        ),
        docs,
    )
    assert textwrap.dedent(snippet).strip() == HEALTH_SCRIPT.read_text().strip()
