"""A write that follows the worker's own to the same job waits until the watch has
brought that one: the API server begins a write from its watch cache, and one begun
from a copy older than etcd's is done twice (benchmarks/rounds.md, twentieth round).
The watch is fed here by the test, event by event, so each wait is shown to last
exactly until its event and no longer."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from tickwork.api.models import RunRecord, ScheduledJob
from tickwork.core.states import RunState
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeClient
from tickwork.kube.status import TRIM_MANAGER
from tickwork.queue.messages import Claim, RunMessage
from tickwork_worker.job_access import JobAccess
from tickwork_worker.metrics import WorkerMetrics

pytestmark = pytest.mark.unit
NS, NAME, UID = "team-a", "nightly", "uid-1"
T0 = dt.datetime(2026, 12, 5, 9, tzinfo=dt.UTC)


def body(version: str, runs: list[str] | None = None) -> dict[str, Any]:
    status = {
        "runs": [
            {"id": run, "scheduledAt": "2026-12-05T09:00:00Z", "outcome": "Succeeded"}
            for run in runs or []
        ]
    }
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {
            "namespace": NS,
            "name": NAME,
            "uid": UID,
            "resourceVersion": version,
            "generation": 1,
        },
        "spec": {
            "schedule": "@daily",
            "history": {"successfulRuns": 1},
            "task": {"echo": {"message": "hi"}},
        },
        "status": status,
    }


class FedWatch:
    """An API server whose list holds one job at version 5 and whose watch brings
    what the test puts in ``events`` (an exception breaks the watch)."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[dict[str, Any] | Exception] = asyncio.Queue()
        self.lists = 0
        self.patches: list[list[dict[str, Any]]] = []

    async def request(self, method: str, path: str, *, params: dict[str, str]) -> Any:
        assert (method, path.rsplit("/", 1)[-1], "continue" in params) == (
            "GET",
            "scheduledjobs",
            False,
        )
        self.lists += 1
        return {"items": [body("5")], "metadata": {"resourceVersion": "5"}}

    async def watch(
        self, path: str, params: dict[str, str], *, idle_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        assert path.endswith("/scheduledjobs")
        assert params["resourceVersion"] == "5"  # from the list on
        assert params["allowWatchBookmarks"] == "true"
        assert idle_timeout > 0
        while True:
            event = await self.events.get()
            if isinstance(event, Exception):
                raise event
            yield event

    async def patch_job_status(
        self, namespace: str, name: str, patch: list[dict[str, Any]], *, field_manager: str
    ) -> dict[str, Any]:
        assert (namespace, name, field_manager) == (NS, NAME, TRIM_MANAGER)
        self.patches.append(patch)
        return body("99")


async def settle() -> None:
    """Let every task run until it waits for something (no clock involved)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def following(kube: FedWatch, namespaces: tuple[str, ...] = ()) -> JobCache:
    cache = JobCache(cast("KubeClient", kube), namespaces)
    asyncio.get_running_loop().create_task(cache.run())
    await settle()
    assert cache.synced
    return cache


def modified(version: str) -> dict[str, Any]:
    return {"type": "MODIFIED", "object": body(version)}


def bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}


@pytest.mark.asyncio
async def test_a_wait_ends_when_the_watch_brings_the_version_and_not_before() -> None:
    kube = FedWatch()
    cache = await following(kube)
    waiting = asyncio.create_task(cache.until_watched(NS, "12", seconds=60))
    await kube.events.put(modified("11"))  # an earlier write (someone else's)
    await settle()
    assert not waiting.done()
    await kube.events.put(modified("12"))
    await settle()
    assert waiting.done()
    assert waiting.result() is True
    # Reached already: no wait at all.
    assert await asyncio.wait_for(cache.until_watched(NS, "9", seconds=60), 1) is True


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("event", "watched"), [(bookmark("30"), True), (RuntimeError("connection reset"), False)]
)
async def test_a_bookmark_past_the_version_or_a_broken_watch_ends_the_wait(
    event: dict[str, Any] | Exception, watched: bool
) -> None:
    kube = FedWatch()
    cache = await following(kube)
    waiting = asyncio.create_task(cache.until_watched(NS, "12", seconds=60))
    await settle()
    assert not waiting.done()
    await kube.events.put(event)
    await settle()
    assert waiting.done()
    assert waiting.result() is watched


@pytest.mark.asyncio
async def test_no_wait_where_nothing_could_end_it() -> None:
    kube = FedWatch()
    cache = await following(kube, ("team-a",))
    # Not an integer (KEP-5504 compares only those), or a namespace nobody watches.
    assert await asyncio.wait_for(cache.until_watched(NS, "v-12", seconds=60), 1) is False
    assert await asyncio.wait_for(cache.until_watched("team-b", "12", seconds=60), 1) is False
    # A watch that never brings it: given up after ``seconds``.
    assert await cache.until_watched(NS, "12", seconds=0.05) is False
    assert cache._waiting[NS] == []  # nobody left behind


def claim() -> Claim:
    return Claim(message=RunMessage(run_id="r5", namespace=NS, name=NAME, uid=UID), token="t")


@pytest.mark.asyncio
async def test_a_trim_is_sent_only_once_the_watch_has_brought_the_record_before_it() -> None:
    kube = FedWatch()
    cache = await following(kube)
    access = JobAccess(kube=cast("KubeClient", kube), metrics=WorkerMetrics(), jobs=cache)
    # The record of r5 just written (version 12): four records past a history of 1.
    written = body("12", ["r1", "r2", "r3", "r4", "r5"])
    record = RunRecord(id="r5", scheduled_at=T0, outcome=RunState.SUCCEEDED, finished_at=T0)
    job = ScheduledJob.model_validate(body("5"))
    trim = asyncio.create_task(access.trim(claim(), written, record, job, placed=False))
    await kube.events.put(modified("11"))
    await settle()
    assert kube.patches == []  # the watch cache may not hold the record yet
    await kube.events.put(modified("12"))
    await settle()
    assert trim.done()
    assert len(kube.patches) == 1
    removed = [op["path"] for op in kube.patches[0] if op["op"] == "remove"]
    assert removed == [f"/status/runs/{index}" for index in (3, 2, 1, 0)]


@pytest.mark.asyncio
async def test_without_the_watched_copy_a_trim_is_sent_at_once() -> None:
    kube = FedWatch()
    access = JobAccess(kube=cast("KubeClient", kube), metrics=WorkerMetrics(), jobs=None)
    written = body("12", ["r1", "r2", "r3", "r4", "r5"])
    record = RunRecord(id="r5", scheduled_at=T0, outcome=RunState.SUCCEEDED, finished_at=T0)
    await asyncio.wait_for(
        access.trim(claim(), written, record, ScheduledJob.model_validate(body("5")), placed=False),
        1,
    )
    assert len(kube.patches) == 1
