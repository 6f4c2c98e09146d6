"""Small registered tasks that ship with Tickwork, for demos, tests and benchmarks.

Registered in Tickwork's own ``tickwork.tasks`` entry points.
"""

from __future__ import annotations

import asyncio

from tickwork.core.errors import PermanentTaskError


async def sleep(seconds: str = "1", *, run_id: str) -> str:
    """Wait ``seconds`` (cancellable), then report it."""
    await asyncio.sleep(float(seconds))
    return f"slept {seconds}s in {run_id}"


def fail(message: str = "failing on purpose", *, run_id: str) -> None:  # noqa: ARG001 - the API
    """Always fail, retryably."""
    raise RuntimeError(message)


def refuse(message: str = "refusing on purpose", *, run_id: str) -> None:  # noqa: ARG001 - the API
    """Always fail, permanently."""
    raise PermanentTaskError(message)
