"""Liveness tells a stuck loop from a busy or waiting one: the operator's ticker (a
leader must finish ticks; a standby only waits) and the worker's claim loop (all
slots busy with long runs is not stuck)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tickwork.core.buckets import BucketIndex
from tickwork.queue.memory import MemoryRunQueue
from tickwork.queue.messages import RunMessage
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState
from tickwork_operator.ticker import Ticker
from tickwork_worker.worker import Worker

pytestmark = pytest.mark.asyncio
LIMIT = 0.4  # seconds without a round that count as stuck here


def _ticker() -> Ticker:
    return Ticker(
        state=WatchState(index=BucketIndex(start=time.time(), width=1.0)),
        queue=MemoryRunQueue(),
        kube=None,  # type: ignore[arg-type]
        events=None,  # type: ignore[arg-type]
        metrics=OperatorMetrics(),
        tick_seconds=0.05,
        reconcile_seconds=3600,
    )


async def _watch(check: Any, seconds: float) -> list[str | None]:
    """``check()`` every 50 ms for ``seconds`` (the loop under test keeps running)."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(check())
        await asyncio.sleep(0.05)  # the observer's cadence, not a wait for an event
    return seen


@pytest.mark.parametrize("leading", [True, False])
async def test_a_ticking_leader_and_a_waiting_standby_are_alive(leading: bool) -> None:
    ticker, lead, stop = _ticker(), asyncio.Event(), asyncio.Event()
    if leading:
        lead.set()
    loop = asyncio.create_task(ticker.run(lead, stop))

    def check() -> str | None:
        return ticker.stuck(leading=lead.is_set(), now=time.monotonic(), limit=LIMIT)

    seen = await _watch(check, 3 * LIMIT)
    stop.set()
    await loop
    assert seen == [None] * len(seen)


async def test_a_leader_whose_tick_hangs_is_stuck() -> None:
    ticker, lead, stop = _ticker(), asyncio.Event(), asyncio.Event()
    lead.set()
    never = asyncio.Event()
    ticker.tick = never.wait  # type: ignore[method-assign]  # a tick that never returns
    loop = asyncio.create_task(ticker.run(lead, stop))

    def check() -> str | None:
        return ticker.stuck(leading=True, now=time.monotonic(), limit=LIMIT)

    seen = await _watch(check, 3 * LIMIT)
    loop.cancel()
    assert seen[0] is None
    assert seen[-1] is not None
    assert seen[-1].startswith("no tick finished for")


class _Busy:
    """A runner whose runs take ``seconds`` each."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def process(self, claim: Any, ended: Any = None) -> None:
        del claim, ended  # never ends within the test: its slot stays taken
        await asyncio.sleep(self.seconds)  # a long task


async def test_a_worker_whose_every_slot_is_busy_keeps_going_round() -> None:
    queue = MemoryRunQueue()
    await queue.enqueue(RunMessage(run_id="u.20260101T000000Z", namespace="n", name="j", uid="u"))
    worker = Worker(
        queue=queue,
        runner=_Busy(4 * LIMIT),  # type: ignore[arg-type]
        name="w",
        concurrency=1,
        lease_seconds=30,
        claim_wait_seconds=0.05,
        maintain_seconds=1,
        grace_seconds=0,
    )
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    seen = await _watch(lambda: time.monotonic() - worker.last_loop, 3 * LIMIT)
    assert len(worker.in_flight) == 1  # the one slot is still busy ...
    stop.set()
    await loop
    assert max(seen) < LIMIT  # ... and the loop went round all along
