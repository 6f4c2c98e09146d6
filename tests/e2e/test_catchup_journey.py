"""Catch-up and backfill, end to end: the real control plane and Redis, the operator and
the worker as users run them, and the ``tickwork`` CLI. A job whose operator was down
for four runs gets each of them run by a worker, once; then a backfill
asked for from the CLI runs two of those instants again, under their own run IDs, and
status records it complete. (The same decisions in milliseconds:
tests/unit/test_operator_catchup.py; against the API server and Redis without a worker:
tests/integration/test_catchup.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.test_catchup import down_since
from tests.integration.test_cli import tickwork
from tests.support import Jobs, lead, rfc3339
from tickwork.core.runs import backfill_run_id, scheduled_run_id
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(300)


def succeeded(jobs: Jobs, name: str) -> list[dict[str, Any]]:
    return [r for r in jobs.status(name).get("runs") or [] if r["outcome"] == "Succeeded"]


def test_missed_runs_are_caught_up_by_workers_and_a_backfill_runs_a_range_again(
    start_operator: Start, start_worker: Start, cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    spec = {
        "concurrencyPolicy": "Allow",
        "catchup": {"policy": "All", "windowSeconds": 3600},
        "history": {"successfulRuns": 20, "failedRuns": 5},
    }
    uid, missed = down_since(cluster, jobs, "nightly", spec, minutes=4)
    lead(start_operator())
    start_worker()

    # Each run missed in the outage runs once (every later run is on time). The order
    # they are published in is asserted against Redis in tests/integration/
    # test_catchup.py: here the worker may claim several at once and start them side
    # by side (concurrencyPolicy Allow), so their start times need not follow it.
    outage = [scheduled_run_id(uid, moment) for moment in missed]
    wait_for(
        lambda: {r["id"] for r in succeeded(jobs, "nightly")} >= set(outage),
        timeout=90,
        interval=0.5,
        what="every missed run run by a worker",
    )
    # status.runs is in the order the records were written: by when runs finished.
    runs = sorted(
        (r for r in succeeded(jobs, "nightly") if r["id"] in outage), key=lambda r: r["scheduledAt"]
    )
    assert [r["id"] for r in runs] == outage
    assert [r["scheduledAt"] for r in runs] == [rfc3339(m) for m in missed]
    assert all(r["attempts"] == 1 for r in runs)
    assert jobs.status("nightly").get("missedRuns") is None

    # A backfill of the first two instants: they run again, as runs of their own.
    done = tickwork(
        cluster,
        namespace,
        "backfill",
        "nightly",
        "--from",
        rfc3339(missed[0]),
        "--to",
        rfc3339(missed[1]),
        "--name",
        "redo",
    )
    assert done.returncode == 0, done.stderr
    again = [backfill_run_id(uid, "redo", moment) for moment in missed[:2]]
    wait_for(
        lambda: {r["id"] for r in succeeded(jobs, "nightly")} >= set(again),
        timeout=90,
        interval=0.5,
        what="the backfilled runs run by a worker",
    )
    records = {r["id"]: r for r in succeeded(jobs, "nightly")}
    assert [records[i]["scheduledAt"] for i in again] == [rfc3339(m) for m in missed[:2]]
    wait_for(
        lambda: (jobs.status("nightly").get("backfills") or [{}])[0].get("completedAt"),
        timeout=30,
        what="the backfill recorded complete",
    )
    [progress] = jobs.status("nightly")["backfills"]
    assert (progress["name"], progress["published"], progress["skipped"]) == ("redo", 2, 0)
    # The spec keeps the request (GitOps-visible); the outage's runs ran once each.
    assert [b["name"] for b in jobs.get("nightly")["spec"]["backfills"]] == ["redo"]
    ids = [r["id"] for r in jobs.status("nightly")["runs"]]
    assert len(ids) == len(set(ids))
