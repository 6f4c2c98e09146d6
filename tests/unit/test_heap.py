"""Freed heap goes back to the OS: a trim returns the pages of freed objects that the
allocator would keep, and the operator's and workers' periodic trim stops with them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest

from tickwork import heap

pytestmark = pytest.mark.unit


# Run in a fresh interpreter: in a test process that already freed heap (an xdist
# worker at 250 MiB), new objects reuse those resident pages and RSS need not grow.
_MEASURE = """
import json
from tickwork import heap

before = heap.rss_bytes()
# 64 MiB of 4 KiB objects (glibc's heap, not mmap), touched; every 64th stays
# alive, so no freed run of them is at the heap's top: free() alone returns none.
blocks = [bytes([i & 0xFF]) * 4096 for i in range(16_384)]
grown = heap.rss_bytes()
keepers = blocks[63::64]
del blocks
freed = heap.rss_bytes()
trimmed = heap.trim()
after = heap.rss_bytes()
print(json.dumps({"before": before, "grown": grown, "freed": freed,
                  "trimmed": trimmed, "after": after, "keepers": len(keepers)}))
"""


def test_a_trim_gives_back_the_pages_of_freed_objects_that_the_allocator_keeps() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE], capture_output=True, text=True, check=True, timeout=60
    )
    seen = json.loads(done.stdout)
    assert None not in (seen["before"], seen["grown"], seen["freed"], seen["after"])
    assert seen["grown"] - seen["before"] > 48 * 2**20
    assert seen["freed"] - seen["before"] > 48 * 2**20, "glibc kept the pages: what a trim is for"
    assert seen["trimmed"] is True
    assert seen["freed"] - seen["after"] > 40 * 2**20
    assert seen["keepers"] == 256


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
