"""The worker's copy of the jobs takes changes in the order the API server made them,
comparing resourceVersions only for equality: an answer sent before the watch brought
a change is dropped, the worker's own write wins until the watch reaches it, a deleted
job stays deleted, a copy older than the run's generation vouches for nothing, and a
watch task that fails stops vouching. A property test drives random interleavings of
changes, watch deliveries, late answers and lists."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.kube import packed as cache_module
from tickwork.kube.cache import INFORMER, JobCache
from tickwork.kube.client import KubeClient
from tickwork.kube.informer import Informer
from tickwork.kube.packed import entry as _entry

pytestmark = pytest.mark.unit
NS, NAME, UID = "team-a", "nightly", "uid-1"


def job(version: str, message: str, *, generation: int = 1, uid: str = UID) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": NS,
            "name": NAME,
            "uid": uid,
            "resourceVersion": version,
            "generation": generation,
            "managedFields": [{"manager": "x"}],
        },
        "spec": {"schedule": "@daily", "task": {"echo": {"message": message}}},
    }


def relist(cache: JobCache, objects: list[dict[str, Any]]) -> None:
    """What a list of ``objects`` does (encoded page by page, then taken at once)."""
    cache._relist(None, dict(_entry(obj, delivered=0) for obj in objects))


def listed(*objects: dict[str, Any]) -> JobCache:
    cache = JobCache(cast("KubeClient", None))
    relist(cache, list(objects))
    cache._live.add(None)  # listed, watch running
    return cache


def message(cache: JobCache, generation: int | None = None, uid: str = UID) -> str | None:
    body = cache.get(NS, NAME, uid, generation)
    return None if body is None else str(body["spec"]["task"]["echo"]["message"])


def test_an_answer_sent_before_the_watch_brought_a_change_may_be_older_and_is_dropped() -> None:
    # Opaque versions: only the watch's order says which came first.
    cache = listed(job("rv-b", "first"))
    since = cache.mark()
    cache._watched(job("rv-a", "second"))
    cache.observe(job("rv-b", "first"), since=since)  # a read answered late
    assert message(cache) == "second"


def test_the_workers_own_write_wins_until_the_watch_reaches_it() -> None:
    cache = listed(job("17", "listed"))
    since = cache.mark()
    cache.observe(job("19", "own write"), since=since)  # nothing watched since: newer
    cache._watched(job("18", "someone else's earlier write"))
    assert message(cache) == "own write"
    cache._watched(job("19", "own write"))
    cache._watched(job("20", "later"))
    assert message(cache) == "later"
    assert "managedFields" not in cast("dict[str, Any]", cache.get(NS, NAME, UID))["metadata"]


def test_the_watch_bringing_the_workers_own_write_does_not_encode_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = listed(job("17", "listed"))
    since = cache.mark()
    cache.observe(job("19", "own write"), since=since)
    encoded: list[str] = []
    real = cache_module.encode
    monkeypatch.setattr(
        cache_module,
        "encode",
        lambda obj: encoded.append(obj["metadata"]["resourceVersion"]) or real(obj),
    )
    cache._watched(job("19", "own write"))  # the watch catches up with the write
    assert encoded == []
    assert cache.resource_version(NS, NAME, UID) == "19"
    cache._watched(job("20", "later"))  # and then goes on as before
    assert encoded == ["20"]
    assert message(cache) == "later"


def test_the_copys_resource_version_is_there_only_where_get_vouches_for_the_job() -> None:
    cache = JobCache(cast("KubeClient", None))
    relist(cache, [job("7", "listed")])
    assert cache.resource_version(NS, NAME, UID) is None  # listed, but no watch yet
    cache._live.add(None)
    assert cache.resource_version(NS, NAME, UID) == "7"
    assert cache.resource_version(NS, NAME, "another-uid") is None
    assert cache.resource_version(NS, "other", UID) is None


def test_a_read_sent_before_a_list_is_dropped() -> None:
    cache = listed(job("5", "old"))
    since = cache.mark()
    relist(cache, [job("9", "listed later")])
    cache.observe(job("7", "read before the list"), since=since)
    assert message(cache) == "listed later"


def test_a_deleted_job_is_not_put_back_by_a_read_that_raced_the_delete() -> None:
    cache = listed(job("5", "alive"))
    since = cache.mark()
    cache._deleted(job("6", "alive"))
    cache.observe(job("5", "alive"), since=since)
    assert message(cache) is None
    assert len(cache) == 0
    cache.observe(job("7", "recreated", uid="uid-2"), since=cache.mark())  # a new object
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


class PagedLists:
    """An API server's answers to lists in pages: each list is the given pages."""

    def __init__(self, *lists: list[list[dict[str, Any]]]) -> None:
        self.lists = list(lists)
        self.pages: list[list[dict[str, Any]]] = []
        self.asked: list[dict[str, str]] = []

    async def request(self, method: str, path: str, *, params: dict[str, str]) -> Any:
        assert method == "GET"
        assert path.endswith("/scheduledjobs")
        self.asked.append(dict(params))
        if "continue" not in params:
            self.pages = list(self.lists.pop(0))
        items = self.pages.pop(0)
        more = {"continue": f"token-{len(self.pages)}"} if self.pages else {}
        return {"items": items, "metadata": {"resourceVersion": "900", **more}}


def named(name: str, version: str, message: str) -> dict[str, Any]:
    body = job(version, message)
    body["metadata"]["name"] = name
    body["metadata"]["uid"] = f"uid-{name}"
    return body


@pytest.mark.asyncio
async def test_a_list_in_pages_keeps_every_job_deflated_and_drops_the_ones_gone_since() -> None:
    first = [[named("a", "1", "alpha"), named("b", "2", "beta")], [named("c", "3", "gamma")]]
    second = [[named("a", "4", "alpha again")], [named("c", "3", "gamma")]]
    kube = PagedLists(first, second)
    cache = JobCache(cast("KubeClient", kube))
    informer = Informer(cast("KubeClient", kube), KubeClient.jobs_path, [None], cache, INFORMER)
    assert await informer._list(None) == "900"
    assert [p.get("continue") for p in kube.asked] == [None, "token-1"]
    cache._live.add(None)
    for name, text in [("a", "alpha"), ("b", "beta"), ("c", "gamma")]:
        body = cast("dict[str, Any]", cache.get(NS, name, f"uid-{name}"))
        assert body["spec"]["task"]["echo"]["message"] == text
        assert body["kind"] == "ScheduledJob"
        assert "managedFields" not in body["metadata"]
        # Deflated against the preset dictionary: well under the compact JSON.
        compact = json.dumps(body, separators=(",", ":")).encode()
        assert len(cache._jobs[(NS, name)].body) < len(compact) / 2
    await informer._list(None)
    assert cache.get(NS, "b", "uid-b") is None  # deleted while nobody watched
    again = cast("dict[str, Any]", cache.get(NS, "a", "uid-a"))
    assert again["spec"]["task"]["echo"]["message"] == "alpha again"


# -- random interleavings ---------------------------------------------------------


@dataclass
class World:
    """The job's true history at the API server, and what is on its way to the cache."""

    history: list[dict[str, Any] | None] = field(default_factory=list)
    """Every state in order; None where the object was deleted."""
    uids: int = 0
    pending: list[int] = field(default_factory=list)
    """Indexes of history the watch has yet to deliver, in order."""
    reads: list[tuple[int, int]] = field(default_factory=list)
    """Requests in flight: (cache.mark() when sent, history index when sent)."""
    floor: int = -1
    """The newest history index the list or the watch brought."""

    def commit(self, state: dict[str, Any] | None) -> None:
        self.history.append(state)
        self.pending.append(len(self.history) - 1)

    def current(self) -> dict[str, Any] | None:
        return self.history[-1] if self.history else None


OPERATIONS = ["create", "edit", "status", "delete", "deliver", "deliver", "send", "answer", "list"]


def step(world: World, cache: JobCache, operation: str, data: st.DataObject) -> None:
    now = world.current()
    version = str(len(world.history) + 100)
    if operation == "create" and now is None:
        world.uids += 1
        world.commit(job(version, "created", uid=f"uid-{world.uids}"))
    elif operation in ("edit", "status") and now is not None:
        generation = now["metadata"]["generation"] + (operation == "edit")
        world.commit(job(version, operation, generation=generation, uid=now["metadata"]["uid"]))
    elif operation == "delete" and now is not None:
        world.commit(None)
    elif operation == "deliver" and world.pending:
        index = world.pending.pop(0)
        state = world.history[index]
        if state is None:
            cache._deleted(cast("dict[str, Any]", world.history[index - 1]))
        else:
            cache._watched(state)
        world.floor = index
    elif operation == "send":
        world.reads.append((cache.mark(), len(world.history) - 1))
    elif operation == "answer" and world.reads and world.history:
        since, sent_at = world.reads.pop(data.draw(st.integers(0, len(world.reads) - 1)))
        # The answer shows the job at some moment between sending and now.
        state = world.history[data.draw(st.integers(max(sent_at, 0), len(world.history) - 1))]
        if state is not None:  # else the answer was 404
            cache.observe(state, since=since)
    elif operation == "list":
        relist(cache, [now] if now is not None else [])
        world.pending.clear()  # the watch starts again from the list
        world.floor = len(world.history) - 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OPERATIONS), min_size=1, max_size=60), st.data())
def test_the_copy_never_goes_back_in_time(operations: list[str], data: st.DataObject) -> None:
    world = World()
    cache = listed()
    shown = -1  # the history index of the copy last shown
    for operation in operations:
        step(world, cache, operation, data)
        copy = cache._jobs.get((NS, NAME))
        if copy is None:  # only ever because the watch or a list said it is gone
            assert world.floor < 0 or world.history[world.floor] is None
            continue
        index = int(copy.resource_version) - 100
        assert index >= shown, "the copy went back in time"
        assert index >= world.floor, "the copy is older than what the watch brought"
        assert world.history[index] is not None, "a deleted job came back"
        shown = index


# -- what the copy keeps: what a run reads ---------------------------------------------


def _full_job(status: dict[str, Any]) -> dict[str, Any]:
    uid = "7c8e4d0a-1111-4222-8333-444455556666"
    return {
        "apiVersion": "tickwork.dev/v1",
        "kind": "ScheduledJob",
        "metadata": {
            "namespace": NS,
            "name": NAME,
            "uid": uid,
            "resourceVersion": "9",
            "generation": 2,
            "managedFields": [{"manager": "tickwork-run-x"}],
        },
        "spec": {
            "schedule": "* * * * *",
            "task": {"http": {"url": "https://example.com/"}},
            "history": {"successfulRuns": 3, "failedRuns": 3},
        },
        "status": status,
    }


def test_the_copy_keeps_what_a_run_reads_and_decides_as_the_whole_job_would() -> None:
    """Every decision a worker makes from its copy (may the run start, is it already
    done, cancelled, paused; how many dead letters) is the one the whole object gives,
    while the history's texts, times and parameters, nextRuns and conditions are gone."""
    from tickwork.api.models import ScheduledJob  # noqa: PLC0415
    from tickwork.core.runs import scheduled_run_id  # noqa: PLC0415
    from tickwork.queue.messages import RunMessage  # noqa: PLC0415
    from tickwork_worker.decisions import why_skip  # noqa: PLC0415

    uid = _full_job({})["metadata"]["uid"]
    at = [f"2026-12-01T0{hour}:00:00Z" for hour in range(8)]
    ids = [scheduled_run_id(uid, __import__("datetime").datetime.fromisoformat(t)) for t in at]

    def ended(i: int, outcome: str) -> dict[str, Any]:
        return {
            "id": ids[i],
            "scheduledAt": at[i],
            "startedAt": at[i],
            "finishedAt": at[i],
            "outcome": outcome,
            "attempts": 2,
            "result": "HTTP 200 " + "x" * 900,
            "params": {"region": "eu"},
        }

    statuses = [
        {
            "phase": "Scheduled",
            "runs": [ended(0, "Succeeded"), ended(1, "Failed")],
            "lastRun": ended(2, "Succeeded"),
            "nextRuns": at[:5],
            "nextRunAt": at[7],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Scheduled",
                    "message": "m",
                    "lastTransitionTime": at[0],
                }
            ],
            "deadRuns": [
                {
                    "id": ids[1],
                    "scheduledAt": at[1],
                    "failedAt": at[1],
                    "attempts": 3,
                    "error": "HTTP 503",
                }
            ],
            "cancelRequests": [{"id": ids[3], "requestedAt": at[3], "reason": "CancelOther"}],
            "activeRuns": [{"id": ids[4], "scheduledAt": at[4], "state": "Running", "attempt": 1}],
        },
        {"phase": "Paused", "runs": [ended(5, "Cancelled")]},
        {},
    ]
    for status in statuses:
        whole = _full_job(status)
        cache = listed(whole)
        copy = cache.get(NS, NAME, uid)
        assert copy is not None
        kept, full = ScheduledJob.model_validate(copy), ScheduledJob.model_validate(whole)
        assert kept.spec == full.spec
        assert kept.status.dead_runs == [] or [d.id for d in kept.status.dead_runs] == [
            d.id for d in full.status.dead_runs
        ]
        assert len(kept.status.dead_runs) == len(full.status.dead_runs)
        for i, run_id in enumerate(ids):
            for requeued in (False, True):
                run = RunMessage(
                    namespace=NS,
                    name=NAME,
                    uid=uid,
                    attempt=1,
                    run_id=run_id,
                    scheduled_at=at[i],
                    requeued=requeued,
                )
                assert why_skip(kept, run) == why_skip(full, run), (status, i, requeued)
        text = json.dumps(copy)
        for gone in (
            "HTTP 200",
            "region",
            "nextRuns",
            "conditions",
            "activeRuns",
            "managedFields",
            "HTTP 503",
        ):
            assert gone not in text
    # The decisions differ between the runs above, so the comparison means something.
    first = ScheduledJob.model_validate(listed(_full_job(statuses[0])).get(NS, NAME, uid))
    reasons = {
        why_skip(
            first,
            RunMessage(
                namespace=NS, name=NAME, uid=uid, attempt=1, run_id=ids[i], scheduled_at=at[i]
            ),
        )
        for i in range(8)
    }
    assert len(reasons) >= 3


def test_a_job_with_a_full_history_is_kept_in_a_few_hundred_bytes() -> None:
    records = [
        {
            "id": f"{'7c8e4d0a-1111-4222-8333-444455556666'}@2026-12-0{d}T05:00:00Z",
            "scheduledAt": f"2026-12-0{d}T05:00:00Z",
            "startedAt": f"2026-12-0{d}T05:00:00Z",
            "finishedAt": f"2026-12-0{d}T05:00:03Z",
            "outcome": "Succeeded",
            "attempts": 1,
            "result": f"HTTP 200 in {d}1 ms",
        }
        for d in range(1, 7)
    ]
    whole = _full_job(
        {
            "phase": "Scheduled",
            "runs": records,
            "lastRun": records[-1],
            "nextRuns": ["2026-12-08T05:00:00Z"] * 3,
        }
    )
    _, cached = _entry(whole, delivered=0)
    assert len(cached.body) < 250 < len(json.dumps(whole)) // 8


def test_uids_and_versions_are_packed_without_changing_what_they_compare_equal_to() -> None:
    from tickwork.kube.packed import Cached as _Cached  # noqa: PLC0415

    uid = "7c8e4d0a-1111-4222-8333-444455556666"
    for version in ("123", "0123", "rv-a", ""):
        _, cached = _entry(job(version, "m", uid=uid), delivered=0)
        assert isinstance(cached, _Cached)
        assert (cached.uid, cached.resource_version) == (uid, version)
    assert isinstance(_entry(job("123", "m", uid=uid), delivered=0)[1].packed_uid, bytes)
    # "0123" and "123" are different opaque versions: the watch skips nothing it should not.
    cache = listed(job("123", "listed", uid=uid))
    since = cache.mark()
    cache.observe(job("0123", "own write", uid=uid), since=since)
    assert message(cache, uid=uid) == "own write"
    upper = uid.upper()  # not the API server's spelling: kept as it is, never equal
    _, odd = _entry(job("1", "m", uid=upper), delivered=0)
    assert odd.uid == upper
    assert cache.get(NS, NAME, upper) is None


def test_the_copys_metadata_of_a_job_is_what_the_watch_last_brought_whatever_its_uid() -> None:
    cache = listed(job("5", "v1"))
    assert (cache.metadata(NS, NAME) or {})["resourceVersion"] == "5"
    cache._watched(job("6", "v2", generation=2, uid="uid-2"))  # replaced under its name
    assert {k: (cache.metadata(NS, NAME) or {}).get(k) for k in ("uid", "generation")} == {
        "uid": "uid-2",
        "generation": 2,
    }
    assert "managedFields" not in (cache.metadata(NS, NAME) or {})
    cache._deleted(job("7", "v2", uid="uid-2"))
    assert cache.metadata(NS, NAME) is None
    assert cache.metadata(NS, "another") is None
