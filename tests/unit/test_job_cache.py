"""The worker's copy of the jobs takes changes in the order the API server made them,
comparing resourceVersions only for equality: a copy read or written meanwhile wins
until the watch reaches it, a deleted job stays deleted, a copy older than the run's
generation vouches for nothing, and a watch task that fails stops vouching."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeClient

pytestmark = pytest.mark.unit
NS, NAME, UID = "team-a", "nightly", "uid-1"


def job(version: str, message: str, *, generation: int = 1, uid: str = UID) -> dict[str, Any]:
    return {
        "metadata": {"namespace": NS, "name": NAME, "uid": uid, "resourceVersion": version,
                     "generation": generation, "managedFields": [{"manager": "x"}]},
        "spec": {"schedule": "@daily", "task": {"echo": {"message": message}}},
    }  # fmt: skip


def listed(*objects: dict[str, Any]) -> JobCache:
    cache = JobCache(cast("KubeClient", None))
    for obj in objects:
        cache._store(obj, seen=(obj["metadata"]["resourceVersion"],))
    cache._live.add(None)  # listed, watch running
    return cache


def message(cache: JobCache, generation: int | None = None, uid: str = UID) -> str | None:
    body = cache.get(NS, NAME, uid, generation)
    return None if body is None else str(body["spec"]["task"]["echo"]["message"])


def test_a_copy_the_watch_brought_already_never_replaces_a_newer_one() -> None:
    # Opaque versions: only the watch's order says which came first.
    cache = listed(job("rv-b", "first"))
    cache._watched(job("rv-a", "second"))
    cache.observe(job("rv-b", "first"))  # a read answered late, with the first version
    assert message(cache) == "second"


def test_the_workers_own_write_wins_until_the_watch_reaches_it() -> None:
    cache = listed(job("17", "listed"))
    cache.observe(job("19", "own write"))  # not brought by the watch yet: newer
    cache._watched(job("18", "someone else's earlier write"))
    assert message(cache) == "own write"
    cache._watched(job("19", "own write"))
    cache._watched(job("20", "later"))
    assert message(cache) == "later"
    assert "managedFields" not in cast("dict[str, Any]", cache.get(NS, NAME, UID))["metadata"]


def test_a_deleted_job_is_not_put_back_by_a_read_that_raced_the_delete() -> None:
    cache = listed(job("5", "alive"))
    cache._deleted(job("6", "alive"))
    cache.observe(job("5", "alive"))
    assert message(cache) is None
    assert len(cache) == 0
    cache.observe(job("7", "recreated", uid="uid-2"))  # a new object under the name
    assert message(cache, uid="uid-2") == "recreated"


def test_a_copy_older_than_the_runs_generation_vouches_for_nothing() -> None:
    cache = listed(job("5", "v1", generation=1))
    assert message(cache, generation=2) is None  # published from an edit not seen yet
    assert message(cache, generation=1) == "v1"
    assert message(cache) == "v1"  # a message from before generations were sent
    cache._watched(job("6", "v2", generation=2))
    assert message(cache, generation=2) == "v2"


def vouching(cache: JobCache) -> bool:
    return cache.synced


@pytest.mark.asyncio
async def test_a_failing_watch_task_stops_vouching_and_is_restarted() -> None:
    cache = listed(job("5", "v1"))
    assert vouching(cache)
    # No API client at all: every list fails with an error that is not the API's.
    task = asyncio.create_task(cache.run())
    for _ in range(100):  # let the task run its first steps (no clock involved)
        await asyncio.sleep(0)
    assert not vouching(cache)
    assert message(cache) is None
    assert not task.done()  # supervised: it tries again rather than dying
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not vouching(cache)
