"""The operator's clock, injected: the wall clock for due times and status, the
monotonic clock for budgets and intervals. Tests pass a clock they move by hand,
so the leader's decisions (due, missed, Forbid, Replace, run-now, leader loss)
are unit-tested in milliseconds (tests/unit/test_operator_decisions.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    wall: Callable[[], float] = time.time
    """Seconds since the epoch: due times, status timestamps."""
    monotonic: Callable[[], float] = time.monotonic
    """Seconds on a clock that never jumps: budgets, intervals."""

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.wall(), dt.UTC)


SYSTEM = Clock()


async def wait_any(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
