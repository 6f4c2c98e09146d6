"""A job on several schedules, end to end: the real control plane and Redis, the operator
and the worker as users run them. ``@every 10s`` and ``@every 15s`` from one
``notBefore`` to one ``notAfter``: the job runs at each instant either names, the
instant both name (30 s in) once, each run with its own run ID, in one history; status
lists the merged next runs and ``kubectl tickwork get`` both schedules."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from tests.integration.test_cli import tickwork
from tests.support import Jobs, lead, rfc3339, row, whole_seconds_from_now
from tickwork.core.runs import scheduled_run_id
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(300)
SECOND = dt.timedelta(seconds=1)


def test_a_job_on_two_intervals_runs_at_each_instant_either_names_once(
    start_operator: Start, start_worker: Start, cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    lead(start_operator())
    start_worker()
    not_before = whole_seconds_from_now(12)
    not_after = not_before + 45 * SECOND
    job = jobs.create(
        "two-grids",
        {
            "schedules": [{"schedule": "@every 10s"}, {"schedule": "@every 15s"}],
            "notBefore": rfc3339(not_before),
            "notAfter": rfc3339(not_after),
            "history": {"successfulRuns": 20, "failedRuns": 5},
            "task": {"echo": {"message": "tick"}},
        },
    )
    offsets = [0, 10, 15, 20, 30, 40, 45]  # 0 and 30: both entries, one run each
    expected = [not_before + s * SECOND for s in offsets]

    wait_for(lambda: "nextRuns" in jobs.status("two-grids"), timeout=15, what="nextRuns")
    assert jobs.status("two-grids")["nextRuns"] == [rfc3339(r) for r in expected[:5]]
    got = tickwork(cluster, namespace, "get", "two-grids")
    assert got.returncode == 0, got.stderr
    assert "@every 10s; @every 15s" in got.stdout

    wait_for(
        lambda: row(cluster, namespace, "two-grids")["phase"] == "Completed",
        timeout=120,
        interval=0.5,
        what="Completed after notAfter",
    )
    runs = jobs.status("two-grids").get("runs") or []
    assert sorted(r["scheduledAt"] for r in runs) == [rfc3339(r) for r in expected]
    assert {r["outcome"] for r in runs} == {"Succeeded"}
    uid = job["metadata"]["uid"]
    assert sorted(r["id"] for r in runs) == sorted(scheduled_run_id(uid, r) for r in expected)
