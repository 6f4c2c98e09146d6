"""Hand the heap's free pages back to the operating system.

A cold start parses every job's JSON, page by page. Those objects are freed once
indexed, but glibc's allocator keeps the pages it got for them: the process stays at
its peak (benchmarks/rounds.md, "Where the operator's memory goes"). ``malloc_trim``
returns the free pages at the top of every arena and the whole free pages inside them;
the informer calls it after a list completes, and the operator and the workers once a
minute.

Elsewhere than glibc (musl, macOS) there is no ``malloc_trim``: :func:`trim` does
nothing and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

#: How often :func:`trim_periodically` trims (a trim of a 1 GiB heap takes a few ms).
TRIM_SECONDS = 60.0


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
            await asyncio.wait_for(stop.wait(), timeout=seconds)
        if not stop.is_set():
            await trim_now("an interval")
