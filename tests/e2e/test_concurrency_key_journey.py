"""Concurrency keys on real parts (issue 50, item 4): the real API server, Redis,
operator and a worker with four slots. Three jobs of one namespace name the key
`db` with a limit of one, a fourth names none, all due at the same instant: the
three run one after another (in the order they were queued: the queue contract
tests check that), while the fourth runs beside them; the same key in another
namespace is another key. The runs over the limit show Waiting in status and in
`kubectl tickwork runs`, saying for which key."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from tests.support import Jobs, QueueProbe, lead, rfc3339
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for

pytestmark = pytest.mark.timeout(240)

SLEEP = {"python": {"name": "tickwork.sleep", "kwargs": {"seconds": "4"}}}


def _span(jobs: Jobs, name: str) -> tuple[dt.datetime, dt.datetime]:
    last = jobs.status(name)["lastRun"]
    return (
        dt.datetime.fromisoformat(last["startedAt"]),
        dt.datetime.fromisoformat(last["finishedAt"]),
    )


def test_jobs_naming_one_key_run_one_at_a_time_and_others_beside_them(
    start_operator: Callable[..., TickworkProcess],
    start_worker: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
    api_client: k8s.ApiClient,
    other_namespace: str,
    cluster: Cluster,
) -> None:
    lead(start_operator(TICKWORK_OPERATOR_NAMESPACES=f"{jobs.namespace},{other_namespace}"))
    due = rfc3339(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3))
    keyed = ["db-a", "db-b", "db-c"]
    for name in keyed:
        jobs.create(name, {"runAt": due, "concurrency": {"key": "db"}, "task": SLEEP})
    jobs.create("free", {"runAt": due, "task": SLEEP})
    elsewhere = Jobs(api_client, other_namespace)
    elsewhere.create("db-x", {"runAt": due, "concurrency": {"key": "db"}, "task": SLEEP})
    # Queued with no worker yet: nothing waits for the key before a claim.
    wait_for(lambda: probe.depth().ready == 5, timeout=60, interval=0.2, what="five runs")

    # Runs shorter than 10 s are never marked Running: a record alone must take a
    # run's Waiting entry out.
    start_worker(TICKWORK_WORKER_CONCURRENCY="4", TICKWORK_WORKER_RUNNING_AFTER_SECONDS="10")

    def waiting(name: str) -> dict[str, object] | None:
        active = jobs.status(name).get("activeRuns") or []
        return next((run for run in active if run["state"] == "Waiting"), None)

    # Two of the key's runs wait while the first runs (each shows Waiting until its
    # record replaces the entry), and the CLI says so.
    wait_for(
        lambda: sum(waiting(n) is not None for n in keyed) == 2,
        timeout=30,
        interval=0.2,
        what="two runs waiting for the key",
    )
    shown = {n: waiting(n) for n in keyed}
    assert all(run["waitingFor"] == "db" for run in shown.values() if run), shown
    tables = [
        subprocess.run(
            [console_script("tickwork"), "-n", jobs.namespace, "runs", name],
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        for name in keyed
        if shown[name]
    ]  # the second of the two still waits (4 s more at least) when its table is read
    assert any("Waiting" in t and "for concurrency key db" in t for t in tables), tables

    def succeeded(on: Jobs, name: str) -> bool:
        return (on.status(name).get("lastRun") or {}).get("outcome") == "Succeeded"

    wait_for(
        lambda: all(succeeded(jobs, n) for n in [*keyed, "free"]) and succeeded(elsewhere, "db-x"),
        timeout=120,
        interval=0.5,
        what="every run",
    )
    spans = sorted(_span(jobs, name) for name in keyed)
    for (_, first_end), (second_start, _) in itertools.pairwise(spans):
        assert second_start >= first_end, spans  # never two of the key at once
    free_start, _ = _span(jobs, "free")
    other_start, _ = _span(elsewhere, "db-x")
    assert free_start < spans[0][1]  # no key: beside the first of them
    assert other_start < spans[0][1]  # another namespace's db: another key
    assert probe.depth().waiting_for_key == 0
    assert {jobs.status(n)["lastRun"]["attempts"] for n in keyed} == {1}
    assert not any(jobs.status(n).get("missedRuns") for n in keyed)  # waiting is not missing
    assert not any(jobs.status(n).get("activeRuns") for n in keyed)  # every entry went
