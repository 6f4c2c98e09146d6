"""kopf is used as a watcher only: no diff base is built for events (a deep copy of
every body, for on.create/on.update handlers the operator does not have), nothing is
written to objects, and the initial list comes in pages."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kopf
import pytest

from tickwork.core.buckets import BucketIndex
from tickwork_operator.clock import Clock
from tickwork_operator.handlers import LIST_PAGE, kopf_settings, registry, scheduled_job_event
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState

pytestmark = pytest.mark.unit


def body() -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.dev/v1alpha1", "kind": "ScheduledJob",
        "metadata": {"name": "nightly", "namespace": "team-a", "uid": "u1",
                     "annotations": {"tickwork.dev/last-handled-configuration": '{"spec": {}}'}},
        "spec": {"schedule": "@daily", "task": {"echo": {"message": "x" * 1000}}},
        "status": {"phase": "Scheduled"},
    }  # fmt: skip


def test_no_diff_base_is_built_fetched_or_stored_for_an_event() -> None:
    settings = kopf_settings()
    storage = settings.persistence.diffbase_storage
    wrapped = kopf.Body(body())
    assert storage.build(body=wrapped) == {}
    assert storage.fetch(body=wrapped) is None  # not even an old annotation is read
    patch = kopf.Patch()
    storage.store(body=wrapped, patch=patch, essence=kopf.BodyEssence(spec={"a": 1}))
    assert not patch


def test_only_event_handlers_are_registered_so_nothing_needs_a_diff_base() -> None:
    resource = kopf.Resource("tickwork.dev", "v1alpha1", "scheduledjobs")
    assert registry._watching.has_handlers(resource=resource)
    assert not registry._changing.has_handlers(resource=resource)
    assert not registry._spawning.has_handlers(resource=resource)


def test_the_list_comes_in_pages_and_kopf_posts_and_scans_nothing() -> None:
    settings = kopf_settings()
    assert settings.watching.chunk_size == LIST_PAGE
    assert kopf_settings(list_page=7).watching.chunk_size == 7
    assert not settings.posting.enabled
    assert settings.scanning.disabled


@pytest.mark.asyncio
async def test_a_listed_object_marks_a_list_in_progress_and_a_watch_event_does_not() -> None:
    state = WatchState(index=BucketIndex(start=0.0, width=1.0))
    now = [100.0]
    metrics = OperatorMetrics()
    ticker = SimpleNamespace(clock=Clock(wall=lambda: now[0], monotonic=lambda: now[0]),
                             wakeup=asyncio.Event(), metrics=metrics)  # fmt: skip
    memo = kopf.Memo(state=state, ticker=ticker)
    job = body()
    await scheduled_job_event(event={"type": "MODIFIED", "object": job}, body=kopf.Body(job),
                              memo=memo)  # fmt: skip
    assert state.listed_at is None
    assert metrics.registry.get_sample_value(
        "tickwork_operator_events_total", {"type": "MODIFIED"}) == 1  # fmt: skip
    assert not state.listing(now[0])
    await scheduled_job_event(event={"type": None, "object": job}, body=kopf.Body(job),
                              memo=memo)  # fmt: skip  # kopf's type for a listed object
    assert state.listed_at == 100.0
    assert metrics.registry.get_sample_value(
        "tickwork_operator_events_total", {"type": "LISTED"}) == 1  # fmt: skip
    assert metrics.registry.get_sample_value("tickwork_operator_kopf_events_total") == 2
    assert state.listing(101.0)
    assert not state.listing(102.5)
    assert ("team-a", "nightly") in state.jobs  # and it is indexed as any event
