"""The list of ScheduledJobs at the pace the operator handles it: the next page is
asked for only once all but an allowance of the objects listed have been handled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from kopf._cogs.clients import fetching as kopf_fetching

from tickwork_operator.listing import ListPacing, paced_lists

pytestmark = pytest.mark.unit

JOBS = SimpleNamespace(plural="scheduledjobs", group="tickwork.dev")
OTHER = SimpleNamespace(plural="namespaces", group="")


async def settle() -> None:
    """Let every task that can run, run (no timer involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_page_within_the_allowance_is_not_held() -> None:
    async def scenario() -> ListPacing:
        pacing = ListPacing(ahead=10)
        await pacing.after_page(10)
        return pacing

    pacing = asyncio.run(scenario())
    assert (pacing.waited_seconds, pacing.most_behind, pacing.timeouts) == (0.0, 10, 0)


def test_the_next_page_waits_until_the_handler_is_within_the_allowance() -> None:
    async def scenario() -> None:
        pacing = ListPacing(ahead=2)
        ticks = iter([100.0, 103.5])
        waiting = asyncio.create_task(pacing.after_page(5, clock=lambda: next(ticks)))
        await settle()
        for _ in range(2):
            pacing.handled()
        await settle()
        assert not waiting.done()  # 3 of 5 still to handle: more than 2
        pacing.handled()
        await asyncio.wait_for(waiting, 5)
        assert pacing.waited_seconds == 3.5
        assert pacing.most_behind == 5
        assert pacing.timeouts == 0

    asyncio.run(scenario())


def test_a_handler_that_never_catches_up_holds_the_list_only_for_the_patience() -> None:
    async def scenario() -> ListPacing:
        pacing = ListPacing(ahead=0, patience=0.05)
        await asyncio.wait_for(pacing.after_page(3), 5)
        return pacing

    pacing = asyncio.run(scenario())
    assert pacing.timeouts == 1


def test_a_new_list_forgets_what_an_earlier_one_left_unhandled() -> None:
    async def scenario() -> ListPacing:
        pacing = ListPacing(ahead=0, patience=0.05)
        await pacing.after_page(3)  # never handled: runs out of patience
        pacing.started()
        pacing.handled()
        ticks = iter([0.0, 0.0])
        await asyncio.wait_for(pacing.after_page(1, clock=lambda: next(ticks)), 5)
        return pacing

    pacing = asyncio.run(scenario())
    assert pacing.timeouts == 1  # only the first list's page


def test_bad_allowances_are_refused() -> None:
    with pytest.raises(ValueError, match="ahead"):
        ListPacing(ahead=-1)
    with pytest.raises(ValueError, match="patience"):
        ListPacing(ahead=0, patience=0)


def fake_pages(asked: list[str]) -> Any:
    async def fetch_objs(*, resource: Any, **_: Any) -> AsyncIterator[tuple[list[int], str]]:
        for number in range(3):
            asked.append(f"{resource.plural} page {number}")
            yield [number * 10 + i for i in range(4)], "42"

    return fetch_objs


def test_kopf_asks_for_the_next_page_of_jobs_only_once_the_last_is_handled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_pages(asked))
    pacing = ListPacing(ahead=0)

    async def scenario() -> list[int]:
        seen: list[int] = []

        async def consume() -> None:  # as kopf's watcher does: through the module
            async for page, version in kopf_fetching.fetch_objs(resource=JOBS, logger=None):
                assert version == "42"
                seen.extend(page)

        with paced_lists(pacing, plural="scheduledjobs", group="tickwork.dev"):
            listing = asyncio.create_task(consume())
            await settle()
            assert asked == ["scheduledjobs page 0"]  # held: 4 listed, none handled
            for _ in range(4):
                pacing.handled()
            await settle()
            assert asked == ["scheduledjobs page 0", "scheduledjobs page 1"]
            for _ in range(8):
                pacing.handled()
            await asyncio.wait_for(listing, 5)
        return seen

    assert asyncio.run(scenario()) == [n * 10 + i for n in range(3) for i in range(4)]
    assert pacing.most_behind == 4
    # kopf's own fetcher is put back on the way out
    assert kopf_fetching.fetch_objs.__qualname__ == "fake_pages.<locals>.fetch_objs"


def test_other_resources_are_listed_as_kopf_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(kopf_fetching, "fetch_objs", fake_pages(asked))
    pacing = ListPacing(ahead=0)

    async def scenario() -> int:
        with paced_lists(pacing, plural="scheduledjobs", group="tickwork.dev"):
            pages = [p async for p, _ in kopf_fetching.fetch_objs(resource=OTHER, logger=None)]
        return len(pages)

    assert asyncio.run(scenario()) == 3  # nothing handled, nothing held
    assert (pacing.listed, pacing.most_behind) == (0, 0)
