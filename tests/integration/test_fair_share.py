"""Fair shares (issue 14, item 4) with a real worker, API server and Redis: one
tenant's long runs fill its share of the worker's slots and no more; another
tenant's run starts at once; the runs over the limit wait in the queue and all
run in the end, never more than the limit at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support import HoldingServer, Jobs, QueueProbe, finished, publish
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(180)
Start = Callable[..., TickworkProcess]


@pytest.fixture
def team_b(api_client: k8s.ApiClient, crd: None, other_namespace: str) -> Jobs:
    return Jobs(api_client, other_namespace)


@pytest.fixture
def holds() -> Iterator[tuple[HoldingServer, HoldingServer]]:
    a, b = HoldingServer(), HoldingServer()
    yield a, b
    a.close()
    b.close()


def _held(url: str) -> dict[str, Any]:
    return {
        "task": {"http": {"url": url, "method": "POST"}},
        "timeoutSeconds": 120,
        "retry": {"maxAttempts": 1},
    }


def _starts(server: HoldingServer) -> int:
    return sum(1 for kind, _ in list(server.events) if kind == "start")


def _most_at_once(server: HoldingServer) -> int:
    running = most = 0
    for kind, _ in list(server.events):
        running += 1 if kind == "start" else -1
        most = max(most, running)
    return most


def test_a_tenant_at_its_limit_leaves_the_other_slots_to_other_tenants(
    start_worker: Start,
    jobs: Jobs,
    team_b: Jobs,
    probe: QueueProbe,
    holds: tuple[HoldingServer, HoldingServer],
) -> None:
    hold_a, hold_b = holds
    # Four slots; team A may hold two of them (its own exception), others the default 3.
    start_worker(
        TICKWORK_WORKER_CONCURRENCY="4",
        TICKWORK_WORKER_MAX_RUNS_PER_NAMESPACE="3",
        TICKWORK_WORKER_TENANTS=json.dumps({jobs.namespace: {"maxRuns": 2}}),
    )
    for n in range(5):
        publish(jobs, probe, f"long-{n}", _held(hold_a.url))
    wait_for(
        lambda: _starts(hold_a) == 2 and probe.depth().parked == 3,
        timeout=30,
        what="two of team A's runs executing and three parked",
    )
    depth = probe.depth()
    assert (depth.ready, depth.in_flight, depth.backlog) == (0, 2, 5)  # parked runs count

    # Two slots are free: team B's run starts while team A's runs still hold theirs.
    publish(team_b, probe, "quick", _held(hold_b.url))
    wait_for(lambda: _starts(hold_b) == 1, timeout=30, what="team B's run to start")
    assert _starts(hold_a) == 2
    hold_b.released.set()
    assert finished(team_b, "quick")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]

    # Team A's parked runs were waiting, not dropped: each runs, two at a time at most.
    hold_a.released.set()
    for n in range(5):
        assert finished(jobs, f"long-{n}")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]
    assert _starts(hold_a) == 5
    assert _most_at_once(hold_a) == 2
    depth = probe.depth()
    assert (depth.parked, depth.ready, depth.in_flight) == (0, 0, 0)


def test_a_tenant_holds_its_share_of_the_slots_that_exist_and_more_as_workers_join(
    start_worker: Start,
    jobs: Jobs,
    team_b: Jobs,
    probe: QueueProbe,
    holds: tuple[HoldingServer, HoldingServer],
) -> None:
    hold_a, hold_b = holds
    share = {"TICKWORK_WORKER_CONCURRENCY": "8", "TICKWORK_WORKER_SHARE_PER_NAMESPACE": "0.5"}
    start_worker("worker-a", **share)  # the chart's defaults: 8 slots, half for one tenant
    for n in range(12):
        publish(jobs, probe, f"long-{n}", _held(hold_a.url))
    wait_for(
        lambda: _starts(hold_a) == 4 and probe.depth().parked == 8,
        timeout=30,
        what="half of the one worker's 8 slots taken by team A",
    )
    assert probe.depth().backlog == 12  # what the autoscaler sees: more workers would help

    publish(team_b, probe, "quick", _held(hold_b.url))
    wait_for(lambda: _starts(hold_b) == 1, timeout=30, what="team B's run to start")

    # A second worker joins (as the autoscaler adds one): 16 slots, 8 for team A.
    start_worker("worker-b", **share)
    wait_for(lambda: _starts(hold_a) == 8, timeout=30, what="team A's share to grow")
    assert probe.depth().parked == 4
    hold_a.released.set()
    hold_b.released.set()
    for n in range(12):
        assert finished(jobs, f"long-{n}")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]
    assert _most_at_once(hold_a) == 8
