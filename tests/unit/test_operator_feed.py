"""What the operator's informer brings goes into its index: a listed object marks a list
in progress (owed status writes wait), a watch event does not; a deleted job is
forgotten; a relist forgets, at its end, the jobs of its scope it did not bring (deleted
while the watch was down, they come in no event), and only those."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tickwork.core.buckets import BucketIndex
from tickwork.kube.client import KubeClient
from tickwork_operator.clock import Clock
from tickwork_operator.feed import JobFeed, informer
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState
from tickwork_operator.ticker import Ticker

pytestmark = pytest.mark.unit


def scheduled(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "generation": 1,
            "creationTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {"schedule": "@daily", "task": {"echo": {"message": "hi"}}},
        "status": {"phase": "Scheduled"},
    }


def feed_of(now: list[float]) -> tuple[JobFeed, WatchState, OperatorMetrics]:
    state = WatchState(index=BucketIndex(start=0.0, width=1.0))
    metrics = OperatorMetrics()
    ticker = SimpleNamespace(
        clock=Clock(wall=lambda: now[0], monotonic=lambda: now[0]),
        wakeup=asyncio.Event(),
        metrics=metrics,
    )
    return JobFeed(state, cast("Ticker", ticker)), state, metrics


def count(metrics: OperatorMetrics, kind: str) -> float | None:
    return metrics.registry.get_sample_value("tickwork_operator_events_total", {"type": kind})


def test_a_listed_object_marks_a_list_in_progress_and_a_watch_event_does_not() -> None:
    now = [100.0]
    feed, state, metrics = feed_of(now)
    feed.event(None, "MODIFIED", scheduled("team-a", "nightly"))
    assert state.listed_at is None
    assert count(metrics, "MODIFIED") == 1
    assert not state.listing(now[0])
    sink = feed.listing(None)
    sink.add(scheduled("team-a", "other"))
    assert state.listed_at == 100.0
    assert count(metrics, "LISTED") == 1
    assert state.listing(101.0)
    assert not state.listing(102.5)
    assert {("team-a", "nightly"), ("team-a", "other")} <= set(state.jobs)
    feed.event(None, "DELETED", scheduled("team-a", "nightly"))
    assert ("team-a", "nightly") not in state.jobs
    assert count(metrics, "DELETED") == 1


def test_a_relist_forgets_the_jobs_deleted_while_the_watch_was_down() -> None:
    feed, state, _ = feed_of([0.0])

    def relist(namespace: str | None, *names: tuple[str, str]) -> None:
        sink = feed.listing(namespace)
        for job_namespace, name in names:
            sink.add(scheduled(job_namespace, name))
        sink.end()

    first = feed.listing(None)
    assert first.seen is None  # nothing to forget: no set of keys is built
    for namespace, name in [("team-a", "a"), ("team-a", "b"), ("team-b", "c")]:
        first.add(scheduled(namespace, name))
    first.end()
    assert set(state.jobs) == {("team-a", "a"), ("team-a", "b"), ("team-b", "c")}
    assert state.index.due_of(("run", "team-a", "b")) is not None

    relist("team-a", ("team-a", "a"))
    assert set(state.jobs) == {("team-a", "a"), ("team-b", "c")}  # team-b is not its scope
    assert state.index.due_of(("run", "team-a", "b")) is None  # never published
    relist(None, ("team-a", "a"))
    assert set(state.jobs) == {("team-a", "a")}


def test_the_feed_knows_which_scopes_it_watches() -> None:
    feed, _, _ = feed_of([0.0])
    feed.live("team-a")
    feed.live("team-b")
    feed.lost("team-a")
    assert feed.watching == {"team-b"}


def test_the_operator_lists_in_pages_ahead_and_resumes_a_broken_watch() -> None:
    feed, _, _ = feed_of([0.0])
    kube = cast("KubeClient", None)
    every = informer(kube, feed, [], page_size=7)
    assert every.scopes == [None]
    assert every.settings.page_size == 7
    assert every.settings.fetch_ahead
    assert not every.settings.relist_after_error  # 100,000 jobs take a minute to list
    assert informer(kube, feed, ["a", "b"], page_size=500).scopes == ["a", "b"]
