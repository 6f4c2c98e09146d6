"""A bounded interval job, end to end: the real control plane and Redis, the operator and
the worker as users run them. An ``@every 10s`` job lists its next runs in status, runs
repeatedly on the grid of its creation, and stops at ``notAfter``; another waits for
its ``notBefore`` and counts from it. (The same decisions in milliseconds:
tests/unit/test_operator_bounds.py.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from tests.support import Jobs, lead, rfc3339, row, whole_seconds_from_now
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(300)
TEN = dt.timedelta(seconds=10)
TICK = {"echo": {"message": "tick"}}


def grid(start: dt.datetime, end: dt.datetime, *, first: int) -> list[dt.datetime]:
    """``start + k * 10s`` for k from ``first`` on, up to ``end`` included."""
    runs, k = [], first
    while start + k * TEN <= end:
        runs.append(start + k * TEN)
        k += 1
    return runs


def succeeded(jobs: Jobs, name: str) -> list[str]:
    return sorted(
        r["scheduledAt"] for r in jobs.status(name).get("runs") or [] if r["outcome"] == "Succeeded"
    )


def test_an_every_job_lists_its_next_runs_runs_repeatedly_and_stops_at_not_after(
    start_operator: Start, start_worker: Start, cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    lead(start_operator())
    start_worker()
    history = {"successfulRuns": 10, "failedRuns": 10}
    not_after = whole_seconds_from_now(42)
    job = jobs.create(
        "every-10s",
        {
            "schedule": "@every 10s",
            "notAfter": rfc3339(not_after),
            "history": history,
            "task": TICK,
        },
    )
    created = dt.datetime.fromisoformat(job["metadata"]["creationTimestamp"])
    expected = [rfc3339(run) for run in grid(created, not_after, first=1)]
    assert len(expected) in (4, 5)
    # Not before creation, from it: notBefore waits and anchors the second job's grid.
    not_before = whole_seconds_from_now(15)
    jobs.create(
        "later",
        {
            "schedule": "@every 10s",
            "notBefore": rfc3339(not_before),
            "notAfter": rfc3339(not_before + 15 * dt.timedelta(seconds=1)),
            "history": history,
            "task": TICK,
        },
    )

    # status.nextRuns: the next due times, nextRunAt first and in the printer column.
    wait_for(lambda: "nextRuns" in jobs.status("every-10s"), timeout=15, what="nextRuns")
    status = jobs.status("every-10s")
    assert status["nextRuns"] == [run for run in expected if run >= status["nextRunAt"]][:5]
    assert row(cluster, namespace, "every-10s")["nextRun"] == status["nextRuns"][0]
    wait_for(lambda: "nextRuns" in jobs.status("later"), timeout=15, what="nextRuns")
    assert jobs.status("later")["nextRuns"] == [rfc3339(not_before), rfc3339(not_before + TEN)]

    # Runs, one every ten seconds on the creation's grid, each by a worker; then no more.
    wait_for(
        lambda: row(cluster, namespace, "every-10s")["phase"] == "Completed",
        timeout=90,
        interval=0.5,
        what="Completed after notAfter",
    )
    assert succeeded(jobs, "every-10s") == expected
    status = jobs.status("every-10s")
    assert "nextRunAt" not in status
    assert "nextRuns" not in status
    assert status["lastRun"]["scheduledAt"] == expected[-1]  # the last run of the grid
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Completed")
    assert row(cluster, namespace, "every-10s")["nextRun"] == ""

    wait_for(
        lambda: row(cluster, namespace, "later")["phase"] == "Completed",
        timeout=60,
        interval=0.5,
        what="the second job Completed",
    )
    assert succeeded(jobs, "later") == [rfc3339(not_before), rfc3339(not_before + TEN)]

    # The grid's next slot after notAfter passes: nothing more runs.
    following = dt.datetime.fromisoformat(expected[-1]) + TEN + dt.timedelta(seconds=2)
    wait_for(lambda: dt.datetime.now(dt.UTC) > following, timeout=15, what="the next slot")
    assert succeeded(jobs, "every-10s") == expected
    assert not jobs.status("every-10s").get("activeRuns")
