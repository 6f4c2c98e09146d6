"""Hand the heap's free pages back to the operating system, and keep a large index
out of the garbage collector's full passes.

A cold start parses every job's JSON, page by page. Those objects are freed once
indexed, but glibc's allocator keeps the pages it got for them: the process stays at
its peak (benchmarks/rounds.md, "Where the operator's memory goes"). ``malloc_trim``
returns the free pages at the top of every arena and the whole free pages inside them;
the informer calls it after a list completes, and the operator and the workers once a
minute.

The objects a list leaves behind (an index of 100,000 jobs is about a million) live
as long as their jobs, yet every full collection of Python's cyclic collector walks
all of them, holding the event loop for as long (docs/performance.md, "The operator
on the real API server"). :func:`settle`, after a list, collects once and then
freezes what survived (``gc.freeze``): later full collections walk only what came
after. Frozen objects are still freed by reference counting when their job changes
or goes; only a reference cycle among them would stay, and the index makes none (a
unit test checks it). :class:`CollectorPauses` exports how long collections take.

Elsewhere than glibc (musl, macOS) there is no ``malloc_trim``: :func:`trim` does
nothing and says so.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import ctypes
import ctypes.util
import functools
import gc
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

#: How often :func:`trim_periodically` trims (a trim of a 1 GiB heap takes a few ms).
TRIM_SECONDS = 60.0
#: The upper bounds of ``tickwork_gc_pause_seconds``'s buckets.
PAUSE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    trim: Callable[[int], int] = function
    return trim


def rss_bytes() -> int | None:
    """This process's resident set size, if /proc tells it."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
    except OSError:
        return None
    import resource  # noqa: PLC0415 - POSIX only, like /proc

    return int(fields[1]) * resource.getpagesize()


def trim() -> bool:
    """Give free heap pages back to the OS; False where the C library cannot."""
    function = _malloc_trim()
    if function is None:
        return False
    function(0)
    return True


async def trim_now(reason: str) -> None:
    """:func:`trim` off the event loop (ctypes releases the GIL for the call), logging
    what it gave back."""
    before = rss_bytes()
    started = time.perf_counter()
    if not await asyncio.to_thread(trim):
        return
    after = rss_bytes()
    if before is not None and after is not None:
        took_ms = (time.perf_counter() - started) * 1000
        logger.debug(
            "heap trimmed after %s in %.1f ms: RSS %.1f -> %.1f MiB",
            reason,
            took_ms,
            before / 2**20,
            after / 2**20,
        )


async def trim_periodically(stop: asyncio.Event, *, seconds: float = TRIM_SECONDS) -> None:
    """Trim every ``seconds`` until ``stop`` is set."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await stop.wait()
        if not stop.is_set():
            await trim_now("an interval")


def settle(reason: str) -> int:
    """Collect every generation, then freeze the survivors (see the module's text);
    how many objects the collector now leaves out of its passes."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.debug(
        "after %s: %d objects out of the collector's passes (%.0f ms)",
        reason,
        frozen,
        (time.perf_counter() - started) * 1000,
    )
    return frozen


class CollectorPauses(Collector):
    """``tickwork_gc_pause_seconds{generation}``: how long each collection of Python's
    cyclic garbage collector held the process, as a histogram.

    ``gc.callbacks`` may run inside any allocation, a metric's own lock held: the
    callback only adds to plain integers here, which a scrape reads.
    """

    def __init__(self) -> None:
        self._started = 0.0
        self._counts = [[0] * (len(PAUSE_BUCKETS) + 1) for _ in range(3)]
        self._sums = [0.0] * 3

    def install(self) -> None:
        """Start timing collections (until :meth:`remove`)."""
        if self._note not in gc.callbacks:
            gc.callbacks.append(self._note)

    def remove(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._note)

    def __enter__(self) -> Self:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _note(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        generation = int(info["generation"])
        self._counts[generation][bisect.bisect_left(PAUSE_BUCKETS, took)] += 1
        self._sums[generation] += took

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "tickwork_gc_pause_seconds",
            "How long each collection of Python's cyclic garbage collector held the "
            "process, by generation (2: a full collection).",
            labels=["generation"],
        )
        for generation in range(3):
            counts, total, buckets = list(self._counts[generation]), 0, []
            for bound, count in zip((*PAUSE_BUCKETS, float("inf")), counts, strict=True):
                total += count
                buckets.append((str(bound) if bound != float("inf") else "+Inf", total))
            family.add_metric([str(generation)], buckets, self._sums[generation])
        yield family
