"""Small registered tasks for Tickwork's demos, tests and benchmarks — not part of
the product: its wheel and image do not contain them (the demo image does).

Registered in the entry-point group ``tickwork.demo_tasks``, which workers load only
when the installer turns demo tasks on (``worker.demoTasks.enabled``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

from tickwork.core.errors import PermanentTaskError


async def sleep(seconds: str = "1", *, run_id: str) -> str:
    """Wait ``seconds`` (cancellable), then report it."""
    await asyncio.sleep(float(seconds))
    return f"slept {seconds}s in {run_id}"


_HELD: set[str] = set()
"""Runs whose ``hold`` is running in this process (in a thread of its own)."""
_HELD_LOCK = threading.Lock()


def hold(seconds: str = "20", *, run_id: str, attempt: int) -> str:
    """A plain function that ignores its timeout: the first attempt blocks its thread
    ``seconds``, a later one returns at once. An attempt that starts while an earlier
    attempt of the same run still holds its thread in this process fails permanently,
    saying so (the lingering-thread attack: a retry must never run beside it)."""
    with _HELD_LOCK:
        if run_id in _HELD:
            raise PermanentTaskError(f"attempt {attempt} ran beside an earlier attempt's thread")
        _HELD.add(run_id)
    try:
        time.sleep(float(seconds) if attempt == 1 else 0)
    finally:
        with _HELD_LOCK:
            _HELD.discard(run_id)
    return f"held {run_id} in attempt {attempt}"


def fail(message: str = "failing on purpose", *, run_id: str) -> None:  # noqa: ARG001 - the API
    """Always fail, retryably."""
    raise RuntimeError(message)


def refuse(message: str = "refusing on purpose", *, run_id: str) -> None:  # noqa: ARG001 - the API
    """Always fail, permanently."""
    raise PermanentTaskError(message)


def record(path: str, seconds: str = "0", *, run_id: str) -> str:
    """Append the run ID to ``path`` (one line, atomically), then wait ``seconds``.

    The resilience drills count executions with it: a run recorded twice was
    executed twice.
    """
    line = f"{run_id}\n".encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)  # one write of a short line under O_APPEND: atomic
    finally:
        os.close(descriptor)
    time.sleep(float(seconds))
    return f"recorded {run_id}"
