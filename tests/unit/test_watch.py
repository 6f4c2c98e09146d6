"""The operator indexes the objects of kopf's lists and the events of its watches
itself, as they arrive: kopf gets each page empty with its resourceVersion (and
watches from it as before) and a bookmark for each event, so no per-object kopf
worker exists for a listed object or a watch event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from kopf._cogs.clients import fetching as kopf_fetching
from kopf._cogs.clients import watching as kopf_watching

from tickwork_operator import watch
from tickwork_operator.watch import indexed_here

pytestmark = pytest.mark.unit

JOBS = SimpleNamespace(plural="scheduledjobs", group="tickwork.dev")
OTHER = SimpleNamespace(plural="namespaces", group="")


def job(number: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": f"job-{number}"}, "n": number}


def fake_fetcher(trail: list[str], *, pages: int = 3, size: int = 4, fail: bool = False) -> Any:
    async def fetch_objs(*, resource: Any, **_: Any) -> AsyncIterator[tuple[list[Any], str]]:
        for number in range(pages):
            trail.append(f"fetched {resource.plural} page {number}")
            yield [job(number * size + i) for i in range(size)], f"rv{number}"
        if fail:
            raise ConnectionError("the list broke off")

    return fetch_objs


def no_events(kind: str, body: dict[str, Any]) -> None:
    raise AssertionError(f"no watch event expected: {kind} {body}")


class Sink:
    """Records what a list hands over; ``add`` may be replaced."""

    def __init__(self, trail: list[str], namespace: str | None = None) -> None:
        self.trail = trail
        self.namespace = namespace

    def add(self, listed: dict[str, Any]) -> None:
        self.trail.append(f"indexed {listed['n']}")

    def end(self) -> None:
        self.trail.append(f"list of {self.namespace or 'all'} ended")


async def kopf_list(resource: Any) -> list[tuple[list[Any], str]]:
    """What kopf's watcher gets, through the module as kopf looks it up."""
    pages = kopf_fetching.fetch_objs(resource=resource, logger=None)  # type: ignore[arg-type]
    return [(list(page), version) async for page, version in pages]


def test_listed_jobs_are_indexed_page_by_page_and_kopf_gets_empty_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail))
    monkeypatch.setattr(watch, "TURN_EVERY", 2)  # the loop turns twice a page

    with indexed_here(lambda ns: Sink(trail, ns), no_events, plural="scheduledjobs",
                      group="tickwork.dev"):  # fmt: skip
        given = asyncio.run(kopf_list(JOBS))
    assert given == [([], "rv0"), ([], "rv1"), ([], "rv2")]  # kopf watches from rv2
    # the next page is asked for while a page is indexed (at the loop's first turn),
    # and no page further ahead: two pages held at most
    assert trail == [
        "fetched scheduledjobs page 0", "indexed 0", "indexed 1",
        "fetched scheduledjobs page 1", "indexed 2", "indexed 3", "indexed 4", "indexed 5",
        "fetched scheduledjobs page 2", "indexed 6", "indexed 7", "indexed 8", "indexed 9",
        "indexed 10", "indexed 11", "list of all ended",
    ]  # fmt: skip
    # kopf's own fetcher is back on the way out
    assert kopf_fetching.fetch_objs.__qualname__ == "fake_fetcher.<locals>.fetch_objs"


def test_a_list_kopf_stops_cancels_the_page_on_its_way(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """kopf closes a list it stops (a shutdown, a lost namespace): the fetch of the
    next page, under way, is cancelled and the fetcher closed; a fetch that failed
    meanwhile is dropped, not logged as never retrieved."""
    trail: list[str] = []

    def fetcher(second: str) -> Any:
        async def fetch_objs(*, resource: Any, **_: Any) -> AsyncIterator[Any]:
            try:
                yield [job(0)], "rv0"
                trail.append("asked for page 1")
                if second == "fail":
                    raise ConnectionError("the list broke off")
                await asyncio.Event().wait()  # the API server takes its time
                yield [job(1)], "rv1"
            finally:
                trail.append("fetcher closed")

        return fetch_objs

    async def first_page_only() -> None:
        pages = kopf_fetching.fetch_objs(resource=JOBS, logger=None)  # type: ignore[arg-type]
        assert await anext(pages) == ((), "rv0")
        await asyncio.sleep(0)  # the fetch ahead starts
        await pages.aclose()  # type: ignore[attr-defined]

    for second in ("wait", "fail"):
        trail.clear()
        monkeypatch.setattr(kopf_fetching, "fetch_objs", fetcher(second))
        with caplog.at_level(logging.ERROR), indexed_here(
            lambda ns: Sink(trail, ns), no_events, plural="scheduledjobs", group="tickwork.dev"
        ):  # fmt: skip
            asyncio.run(first_page_only())
        assert trail == ["indexed 0", "asked for page 1", "fetcher closed"], second
    assert "never retrieved" not in caplog.text


def test_other_resources_are_listed_as_kopf_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=2))
    with indexed_here(lambda ns: Sink(trail, ns), no_events, plural="scheduledjobs",
                      group="tickwork.dev"):  # fmt: skip
        given = asyncio.run(kopf_list(OTHER))
    assert given == [([job(i) for i in range(4)], "rv0"), ([job(i) for i in range(4, 8)], "rv1")]
    assert trail == ["fetched namespaces page 0", "fetched namespaces page 1"]


def test_a_list_that_breaks_off_is_not_taken_for_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a whole list may tell which jobs are gone."""
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=1, fail=True))
    sinks = lambda ns: Sink(trail, ns)  # noqa: E731
    with (
        indexed_here(sinks, no_events, plural="scheduledjobs", group="tickwork.dev"),
        pytest.raises(ConnectionError),
    ):
        asyncio.run(kopf_list(JOBS))
    assert "list of all ended" not in trail
    assert trail[-1] == "indexed 3"


def test_an_object_that_cannot_be_indexed_is_logged_and_the_list_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=2))
    indexed: list[int] = []

    def add(listed: dict[str, Any]) -> None:
        if listed["n"] == 2:
            raise KeyError("uid")
        indexed.append(listed["n"])

    sink = Sink(trail)
    sink.add = add  # type: ignore[method-assign]
    with (
        caplog.at_level(logging.ERROR),
        indexed_here(lambda _: sink, no_events, plural="scheduledjobs", group="tickwork.dev"),
    ):
        given = asyncio.run(kopf_list(JOBS))
    assert indexed == [0, 1, 3, 4, 5, 6, 7]
    assert trail[-1] == "list of all ended"
    assert [version for _, version in given] == ["rv0", "rv1"]
    assert "listed ScheduledJob team-a/job-2 not indexed" in caplog.text


def test_the_event_loop_turns_while_a_long_page_is_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ticker (another task) gets the loop every TURN_EVERY objects of a page."""
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=1, size=200))
    monkeypatch.setattr(watch, "TURN_EVERY", 50)
    turns = [0]
    seen: list[int] = []

    async def scenario() -> None:
        async def ticker() -> None:
            while True:
                turns[0] += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        sink = Sink([])
        sink.add = lambda _: seen.append(turns[0])  # type: ignore[method-assign]
        with indexed_here(lambda _: sink, no_events, plural="scheduledjobs", group="tickwork.dev"):
            await kopf_list(JOBS)
        ticking.cancel()

    asyncio.run(scenario())
    assert len(seen) == 200
    # the other task ran between each block of 50 objects, never inside one
    assert [len(set(seen[i : i + 50])) for i in range(0, 200, 50)] == [1, 1, 1, 1]
    assert len(set(seen)) == 4


def test_a_relist_forgets_the_jobs_deleted_while_the_watch_was_down() -> None:
    """The first list only indexes; a relist (the operator holds jobs of its scope)
    forgets at its end the jobs of its scope it did not bring, and only those."""
    from tickwork.core.buckets import BucketIndex  # noqa: PLC0415
    from tickwork_operator.clock import Clock  # noqa: PLC0415
    from tickwork_operator.handlers import ListedJobs  # noqa: PLC0415
    from tickwork_operator.metrics import OperatorMetrics  # noqa: PLC0415
    from tickwork_operator.state import WatchState  # noqa: PLC0415

    def scheduled(namespace: str, name: str) -> dict[str, Any]:
        return {"apiVersion": "tickwork.dev/v1alpha1", "kind": "ScheduledJob",
                "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}",
                             "generation": 1, "creationTimestamp": "2026-12-01T00:00:00Z"},
                "spec": {"schedule": "@daily", "task": {"echo": {"message": "hi"}}}}  # fmt: skip

    state = WatchState(index=BucketIndex(start=0.0, width=1.0))
    ticker = SimpleNamespace(clock=Clock(wall=lambda: 0.0, monotonic=lambda: 0.0),
                             wakeup=asyncio.Event(), metrics=OperatorMetrics())  # fmt: skip

    def relist(namespace: str | None, *names: tuple[str, str]) -> None:
        sink = ListedJobs(state, ticker, namespace)  # type: ignore[arg-type]
        for job_namespace, name in names:
            sink.add(scheduled(job_namespace, name))
        sink.end()

    first = ListedJobs(state, ticker, None)  # type: ignore[arg-type]
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


def fake_watch(events: list[dict[str, Any]]) -> Any:
    async def watch_objs(*, resource: Any, **_: Any) -> AsyncIterator[dict[str, Any]]:
        for event in events:
            yield event

    return watch_objs


def event(kind: str, number: int, version: str) -> dict[str, Any]:
    body = job(number)
    body["metadata"]["resourceVersion"] = version
    return {"type": kind, "object": body}


async def kopf_watch(resource: Any) -> list[dict[str, Any]]:
    """What kopf's continuous watch gets, through the module as kopf looks it up."""
    stream = kopf_watching.watch_objs(resource=resource, settings=None, namespace=None,
                                      operator_pause_waiter=None)  # type: ignore[arg-type]  # fmt: skip
    return [raw async for raw in stream]


def test_watch_events_go_to_the_operator_and_kopf_keeps_only_their_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopf gets a bookmark per event (it resumes a broken watch from the last one)
    and hands nothing over; errors (410 Gone) and bookmarks reach kopf as they were."""
    gone = {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}}
    stream = [event("ADDED", 1, "5"), event("MODIFIED", 1, "6"), bookmark,
              event("DELETED", 1, "8"), gone]  # fmt: skip
    monkeypatch.setattr(kopf_watching, "watch_objs", fake_watch(stream))
    seen: list[tuple[str, int]] = []
    with indexed_here(lambda ns: Sink([], ns), lambda kind, body: seen.append((kind, body["n"])),
                      plural="scheduledjobs", group="tickwork.dev"):  # fmt: skip
        given = asyncio.run(kopf_watch(JOBS))
    assert seen == [("ADDED", 1), ("MODIFIED", 1), ("DELETED", 1)]
    marks = [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": v}}}
             for v in ("5", "6")]  # fmt: skip
    assert given == [*marks, bookmark,
                     {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}},
                     gone]  # fmt: skip
    assert kopf_watching.watch_objs.__qualname__ == "fake_watch.<locals>.watch_objs"


def test_other_resources_are_watched_as_kopf_watches_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = [event("ADDED", 1, "5")]
    monkeypatch.setattr(kopf_watching, "watch_objs", fake_watch(stream))
    with indexed_here(lambda ns: Sink([], ns), no_events, plural="scheduledjobs",
                      group="tickwork.dev"):  # fmt: skip
        assert asyncio.run(kopf_watch(OTHER)) == stream


def test_an_event_that_cannot_be_indexed_is_logged_and_the_watch_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stream = [event("MODIFIED", 1, "5"), event("MODIFIED", 2, "6")]
    monkeypatch.setattr(kopf_watching, "watch_objs", fake_watch(stream))
    seen: list[int] = []

    def on_event(kind: str, body: dict[str, Any]) -> None:
        if body["n"] == 1:
            raise ValueError("mangled")
        seen.append(body["n"])

    with (
        caplog.at_level(logging.ERROR),
        indexed_here(
            lambda ns: Sink([], ns), on_event, plural="scheduledjobs", group="tickwork.dev"
        ),
    ):
        given = asyncio.run(kopf_watch(JOBS))
    assert seen == [2]
    assert [raw["object"]["metadata"]["resourceVersion"] for raw in given] == ["5", "6"]
    assert "watched ScheduledJob team-a/job-1 not indexed" in caplog.text
