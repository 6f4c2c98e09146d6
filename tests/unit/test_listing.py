"""The operator indexes the objects of kopf's lists itself, page by page as they
arrive: kopf gets each page empty with its resourceVersion (and watches from it as
before), and no per-object kopf worker exists for a listed object."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from kopf._cogs.clients import fetching as kopf_fetching

from tickwork_operator import listing
from tickwork_operator.listing import listed_here

pytestmark = pytest.mark.unit

JOBS = SimpleNamespace(plural="scheduledjobs", group="tickwork.dev")
OTHER = SimpleNamespace(plural="namespaces", group="")


def job(number: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": f"job-{number}"}, "n": number}


def fake_fetcher(trail: list[str], *, pages: int = 3, size: int = 4) -> Any:
    async def fetch_objs(*, resource: Any, **_: Any) -> AsyncIterator[tuple[list[Any], str]]:
        for number in range(pages):
            trail.append(f"fetched {resource.plural} page {number}")
            yield [job(number * size + i) for i in range(size)], f"rv{number}"

    return fetch_objs


async def kopf_list(resource: Any) -> list[tuple[list[Any], str]]:
    """What kopf's watcher gets, through the module as kopf looks it up."""
    pages = kopf_fetching.fetch_objs(resource=resource, logger=None)  # type: ignore[arg-type]
    return [(list(page), version) async for page, version in pages]


def test_listed_jobs_are_indexed_page_by_page_and_kopf_gets_empty_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail))

    def handle(listed: dict[str, Any]) -> None:
        trail.append(f"indexed {listed['n']}")

    with listed_here(handle, plural="scheduledjobs", group="tickwork.dev"):
        given = asyncio.run(kopf_list(JOBS))
    assert given == [([], "rv0"), ([], "rv1"), ([], "rv2")]  # kopf watches from rv2
    # each page indexed before the next is asked for: one page held at a time
    assert trail == [
        "fetched scheduledjobs page 0", "indexed 0", "indexed 1", "indexed 2", "indexed 3",
        "fetched scheduledjobs page 1", "indexed 4", "indexed 5", "indexed 6", "indexed 7",
        "fetched scheduledjobs page 2", "indexed 8", "indexed 9", "indexed 10", "indexed 11",
    ]  # fmt: skip
    # kopf's own fetcher is back on the way out
    assert kopf_fetching.fetch_objs.__qualname__ == "fake_fetcher.<locals>.fetch_objs"


def test_other_resources_are_listed_as_kopf_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=2))
    handled: list[Any] = []
    with listed_here(handled.append, plural="scheduledjobs", group="tickwork.dev"):
        given = asyncio.run(kopf_list(OTHER))
    assert given == [([job(i) for i in range(4)], "rv0"), ([job(i) for i in range(4, 8)], "rv1")]
    assert handled == []


def test_an_object_that_cannot_be_indexed_is_logged_and_the_list_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=2))
    indexed: list[int] = []

    def handle(listed: dict[str, Any]) -> None:
        if listed["n"] == 2:
            raise KeyError("uid")
        indexed.append(listed["n"])

    with caplog.at_level(logging.ERROR), listed_here(handle, plural="scheduledjobs",
                                                     group="tickwork.dev"):  # fmt: skip
        given = asyncio.run(kopf_list(JOBS))
    assert indexed == [0, 1, 3, 4, 5, 6, 7]
    assert [version for _, version in given] == ["rv0", "rv1"]
    assert "listed ScheduledJob team-a/job-2 not indexed" in caplog.text


def test_the_event_loop_turns_while_a_long_page_is_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ticker (another task) gets the loop every TURN_EVERY objects of a page."""
    trail: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_fetcher(trail, pages=1, size=200))
    monkeypatch.setattr(listing, "TURN_EVERY", 50)
    turns = [0]
    seen: list[int] = []

    async def scenario() -> None:
        async def ticker() -> None:
            while True:
                turns[0] += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        with listed_here(lambda _: seen.append(turns[0]), plural="scheduledjobs",
                         group="tickwork.dev"):  # fmt: skip
            await kopf_list(JOBS)
        ticking.cancel()

    asyncio.run(scenario())
    assert len(seen) == 200
    # the other task ran between each block of 50 objects, never inside one
    assert [len(set(seen[i : i + 50])) for i in range(0, 200, 50)] == [1, 1, 1, 1]
    assert len(set(seen)) == 4
