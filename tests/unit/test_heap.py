"""Freed heap goes back to the OS: a trim returns the pages of freed objects that the
allocator would keep, and the operator's and workers' periodic trim stops with them."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tickwork import heap

pytestmark = pytest.mark.unit


def test_a_trim_gives_back_the_pages_of_freed_objects_that_the_allocator_keeps() -> None:
    before = heap.rss_bytes()
    assert before is not None
    # 64 MiB of 4 KiB objects (glibc's heap, not mmap), touched; every 64th stays
    # alive, so no freed run of them is at the heap's top: free() alone returns none.
    blocks = [bytes([i & 0xFF]) * 4096 for i in range(16_384)]
    grown = heap.rss_bytes()
    assert grown is not None
    assert grown - before > 48 * 2**20
    keepers = blocks[63::64]
    del blocks
    freed = heap.rss_bytes()
    assert freed is not None
    assert freed - before > 48 * 2**20, "glibc kept the pages: what a trim is for"
    assert heap.trim()
    trimmed = heap.rss_bytes()
    assert trimmed is not None
    assert freed - trimmed > 40 * 2**20
    assert len(keepers) == 256


@pytest.mark.asyncio
async def test_the_periodic_trim_trims_at_its_interval_and_ends_with_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[str] = []
    third = asyncio.Event()

    async def fake_trim(reason: str) -> None:
        trims.append(reason)
        if len(trims) == 3:
            third.set()

    monkeypatch.setattr(heap, "trim_now", fake_trim)
    stop = asyncio.Event()
    task = asyncio.create_task(heap.trim_periodically(stop, seconds=0.01))
    await asyncio.wait_for(third.wait(), timeout=5)
    stop.set()
    await asyncio.wait_for(task, timeout=1)
    count = len(trims)
    await asyncio.sleep(0.05)  # no trim after the stop: nothing left to wait for
    assert len(trims) == count
    assert trims[:3] == ["an interval"] * 3


@pytest.mark.asyncio
async def test_trim_now_runs_the_trim_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []

    def fake_trim() -> bool:
        threads.append(threading.get_ident())
        return True

    monkeypatch.setattr(heap, "trim", fake_trim)
    await heap.trim_now("a test")
    assert threads
    assert threads[0] != threading.get_ident()
