"""What the informer's two subscribers keep, the operator's index and a worker's job
cache, makes no reference cycle, from a list, a change or a delete.

After a list both are frozen out of the collector's passes (``tickwork.heap.settle``):
a frozen object is still freed by reference counting when its job changes or goes, but
a cycle among frozen objects would never be. These tests run with the collector off
and count what a collection finds afterwards: any cycle the subscribers made."""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tickwork.core.buckets import BucketIndex
from tickwork.core.runs import scheduled_run_id
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeClient
from tickwork.kube.informer import Subscriber
from tickwork_operator.clock import Clock
from tickwork_operator.feed import JobFeed
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState
from tickwork_operator.ticker import Ticker

pytestmark = pytest.mark.unit
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
JOBS = 200


def body(number: int, version: int, *, ran: int = 0) -> dict[str, Any]:
    """A job of a fleet; after ``ran`` runs, with the status a worker leaves."""
    uid = f"00000000-0000-4000-8000-{number:012d}"
    status: dict[str, Any] = {
        "observedGeneration": 1,
        "phase": "Scheduled",
        "nextRunAt": (T0 + dt.timedelta(minutes=ran + 1)).isoformat(),
    }
    if ran:
        runs = [
            {
                "id": scheduled_run_id(uid, T0 + dt.timedelta(minutes=minute)),
                "scheduledAt": (T0 + dt.timedelta(minutes=minute)).isoformat(),
                "startedAt": (T0 + dt.timedelta(minutes=minute)).isoformat(),
                "finishedAt": (T0 + dt.timedelta(minutes=minute, seconds=2)).isoformat(),
                "outcome": "Succeeded" if minute % 3 else "Failed",
                "result": "done",
                "slot": f"s{minute % 3}",
            }
            for minute in range(max(0, ran - 3), ran)
        ]
        status |= {
            "runs": runs,
            "lastRun": runs[-1],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Scheduled",
                    "lastTransitionTime": T0.isoformat(),
                }
            ],
        }
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {
            "namespace": f"team-{number % 7}",
            "name": f"job-{number:05d}",
            "uid": uid,
            "generation": 1,
            "resourceVersion": str(version),
            "creationTimestamp": "2026-11-01T00:00:00Z",
        },
        "spec": {
            "schedule": f"{number % 60} * * * *",
            "timeZone": "Europe/Berlin",
            "history": {"succeeded": 3, "failed": 3},
            "task": {"http": {"url": "https://example.com/hook", "method": "POST"}},
        },
        "status": status,
    }


@pytest.fixture
def collector_off() -> Iterator[Callable[[], int]]:
    """With the collector off: a function that collects and says how many objects
    were found in cycles since the last call."""
    gc.collect()
    gc.disable()
    try:
        yield gc.collect
    finally:
        gc.enable()


def operator_feed() -> tuple[Subscriber, Callable[[], int]]:
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1.0))
    ticker = SimpleNamespace(
        clock=Clock(wall=T0.timestamp, monotonic=lambda: 0.0),
        wakeup=asyncio.Event(),
        metrics=OperatorMetrics(),
    )
    return JobFeed(state, cast("Ticker", ticker)), lambda: len(state.jobs)


def worker_cache() -> tuple[Subscriber, Callable[[], int]]:
    cache = JobCache(cast("KubeClient", None))
    return cache, lambda: len(cache)


@pytest.mark.parametrize("make", [operator_feed, worker_cache], ids=["operator", "worker"])
def test_a_list_changes_and_deletes_leave_no_cycle_behind(
    make: Callable[[], tuple[Subscriber, Callable[[], int]]],
    collector_off: Callable[[], int],
) -> None:
    subscriber, held = make()
    sink = subscriber.listing(None)
    for number in range(JOBS):
        sink.add(body(number, 100 + number))
    sink.end()
    subscriber.live(None)
    assert held() == JOBS
    assert collector_off() == 0, "the list made cycles"

    for ran in (1, 4):  # a first run, then histories full and turning over
        for number in range(JOBS):
            subscriber.event(None, "MODIFIED", body(number, 1000 * ran + number, ran=ran))
        subscriber.reached(None, str(1000 * ran + JOBS))
    assert held() == JOBS
    assert collector_off() == 0, "replacing what a job held made cycles"

    for number in range(0, JOBS, 2):
        subscriber.event(None, "DELETED", body(number, 9000 + number, ran=4))
    assert held() == JOBS // 2
    assert collector_off() == 0, "forgetting a job made cycles"

    relisted = subscriber.listing(None)
    for number in range(1, JOBS, 4):
        relisted.add(body(number, 10_000 + number, ran=4))
    relisted.end()
    assert held() == JOBS // 4
    assert collector_off() == 0, "a relist made cycles"
