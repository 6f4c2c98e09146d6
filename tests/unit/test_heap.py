"""Freed heap goes back to the OS: a trim returns the pages of freed objects that the
allocator would keep, and the operator's and workers' periodic trim stops with them.
What a list left is settled: collected once, then out of the collector's full passes;
and the collector's pauses are exported."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import threading

import pytest
from prometheus_client import CollectorRegistry

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


# In a fresh interpreter: a freeze is for the whole process.
_SETTLE = """
import gc, json, weakref
from tickwork import heap

class Node:
    pass

kept = [Node() for _ in range(1000)]
garbage = Node()
garbage.me = garbage  # a reference cycle nobody holds: only the collector frees it
gone = weakref.ref(garbage)
del garbage
frozen = heap.settle("a test")
tracked = {id(o) for o in gc.get_objects()}  # every generation the collector walks
print(json.dumps({
    "frozen": frozen,
    "freeze_count": gc.get_freeze_count(),
    "kept_walked": sum(id(o) in tracked for o in kept),
    "cycle_freed": gone() is None,
}))
"""


def test_settle_collects_then_takes_the_survivors_out_of_the_collectors_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SETTLE], capture_output=True, text=True, check=True, timeout=60
    )
    seen = json.loads(done.stdout)
    assert seen["cycle_freed"], "garbage frozen instead of collected: it would never be freed"
    assert seen["frozen"] == seen["freeze_count"] > 1000
    assert seen["kept_walked"] == 0, "a full collection would still walk the live objects"


def test_the_collectors_pauses_are_exported_by_generation_while_installed() -> None:
    registry = CollectorRegistry()
    pauses = heap.CollectorPauses()
    registry.register(pauses)

    def full_collections() -> float:
        value = registry.get_sample_value("tickwork_gc_pause_seconds_count", {"generation": "2"})
        return value or 0.0

    with pauses:
        gc.collect()
        gc.collect()
    assert full_collections() == 2
    inf = registry.get_sample_value(
        "tickwork_gc_pause_seconds_bucket", {"generation": "2", "le": "+Inf"}
    )
    assert inf == 2
    assert (
        registry.get_sample_value("tickwork_gc_pause_seconds_sum", {"generation": "2"}) or 0
    ) > 0
    gc.collect()  # removed: no longer timed
    assert full_collections() == 2
