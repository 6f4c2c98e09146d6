"""The in-memory queue bounds what it keeps as Redis does: dead letters by age (with an
injected clock) and count, acknowledged run IDs by age and count."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.queue import MemoryRunQueue
from tickwork.queue.messages import RunLocation, RunMessage

pytestmark = pytest.mark.unit


def _message(n: int) -> RunMessage:
    return RunMessage(
        run_id=f"uid-{n}.20261201T090000Z",
        namespace="ns",
        name=f"j{n}",
        uid=f"uid-{n}",
        scheduled_at="2026-12-01T09:00:00Z",
    )


def test_dead_letters_older_than_the_retention_go_when_the_next_is_buried() -> None:
    now = [1000.0]
    queue = MemoryRunQueue(clock=lambda: now[0], dead_retention_seconds=3600)

    async def bury(n: int) -> None:
        await queue.enqueue(_message(n))
        [claim] = await queue.claim(consumer="w", lease_seconds=30)
        assert await queue.bury(claim, error="boom")

    async def scenario() -> None:
        await bury(1)
        now[0] += 1800
        await bury(2)
        assert (await queue.depth()).oldest_dead_seconds == 1800
        now[0] += 1800  # the first is now exactly an hour old
        await bury(3)
        assert await queue.locate(_message(1).run_id) is None
        assert await queue.locate(_message(2).run_id) is RunLocation.DEAD
        assert (await queue.depth()).dead == 2

    asyncio.run(scenario())
