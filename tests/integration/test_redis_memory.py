"""Redis cannot run out of memory from what Tickwork keeps (issue 14, item 5), on a
real redis-server with a small ``maxmemory`` and ``noeviction``, as the chart runs it.

Acknowledged run IDs (the dedup window) and dead letters are bounded by count as
well as by age, so a stream of runs far larger than the limit could hold keeps
being published, claimed and acknowledged; no queued run is lost; and the depth
reports memory in use next to the limit, for the alert. Without the bounds the
same stream fills this Redis (checked in the same test), and a full Redis refuses
writes with a clear error instead of dropping anything."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage
from tickwork_dev.devcluster.redis import RedisServer

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(240)]
LIMIT = 8 * 1024 * 1024
RUNS = 24_000
ERROR = "HTTP 500: " + "the target's error page, kept in the dead letter " * 8


@pytest_asyncio.fixture
async def small_redis(tmp_path: Path) -> AsyncIterator[RedisServer]:
    with RedisServer(workdir=tmp_path / "redis") as server:
        client = aioredis.Redis(port=server.port, password=server.password)
        await client.config_set("maxmemory", str(LIMIT))
        await client.config_set("maxmemory-policy", "noeviction")
        await client.aclose()
        yield server


def _message(queue: str, n: int) -> RunMessage:
    scheduled = dt.datetime(2026, 12, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=n)
    uid = f"{queue}-{n:08d}-0000-4000-8000-000000000000"
    return RunMessage(
        run_id=f"{uid}.{scheduled:%Y%m%dT%H%M%SZ}",
        namespace="team-a",
        name=f"job-{n:05d}",
        uid=uid,
        scheduled_at=scheduled.isoformat(),
    )


async def _stream(queue: RedisRunQueue, name: str) -> tuple[int, int]:
    """Publish RUNS runs in batches, claim each, acknowledge two in three and bury the
    third; return (runs claimed, distinct runs claimed)."""
    claimed: list[str] = []
    for start in range(0, RUNS, 500):
        batch = [_message(name, n) for n in range(start, start + 500)]
        await asyncio.gather(*(queue.enqueue(m) for m in batch))
        claims = await queue.claim(consumer="w", lease_seconds=60, count=500)
        claimed += [c.run_id for c in claims]
        acks = [queue.ack(c) for i, c in enumerate(claims) if i % 3]
        assert all(await asyncio.gather(*acks))  # one script call: acks coalesce
        for i in range(0, len(claims), 3):  # as a worker's slots bury, a few at a time
            assert await queue.bury(claims[i], error=ERROR)
    return len(claimed), len(set(claimed))


async def test_a_stream_larger_than_redis_keeps_flowing_within_its_memory(
    small_redis: RedisServer,
) -> None:
    settings = RedisSettings(
        url=small_redis.url, queue="bounded", dedup_max_runs=5000, dead_max=2000
    )
    queue = RedisRunQueue(create_client(settings), settings)
    try:
        assert await _stream(queue, "bounded") == (RUNS, RUNS)  # none lost, none twice
        depth = await queue.depth()
        assert (depth.ready, depth.in_flight) == (0, 0)
        assert depth.remembered == 5000
        assert depth.dead == 2000
        # What the alert watches: memory in use, well below the limit.
        assert depth.memory_max_bytes == LIMIT
        assert depth.memory_used_bytes is not None
        assert depth.memory_used_bytes < 0.6 * LIMIT
    finally:
        await queue.close()

    # The same stream without bounds (the defaults are sized for 256 MB) fills it:
    # Redis then refuses writes, which the queue reports as unavailable, never as lost.
    unbounded = RedisSettings(url=small_redis.url, queue="unbounded")
    queue = RedisRunQueue(create_client(unbounded), unbounded)
    try:
        with pytest.raises(QueueUnavailableError, match=r"(?i)memory"):
            await _stream(queue, "unbounded")
    finally:
        await queue.close()


async def test_dead_letters_past_their_retention_go_when_the_next_is_buried(
    small_redis: RedisServer,
) -> None:
    settings = RedisSettings(url=small_redis.url, queue="aged", dead_retention_seconds=3600)
    queue = RedisRunQueue(create_client(settings), settings)
    raw = aioredis.Redis(port=small_redis.port, password=small_redis.password)
    try:
        first, second = _message("aged", 1), _message("aged", 2)
        for message in (first, second):
            await queue.enqueue(message)
        one, two = await queue.claim(consumer="w", lease_seconds=60, count=2)
        assert await queue.bury(one, error=ERROR)
        # Its burial moved two hours back (Redis' clock cannot be injected; its score is
        # the time it was buried): past the retention of an hour.
        seconds, _ = await raw.time()
        await raw.zadd(queue.keys.dead, {one.run_id: seconds - 7200})
        assert (await queue.depth()).oldest_dead_seconds >= 7199
        assert await queue.bury(two, error=ERROR)
        assert await queue.locate(one.run_id) is None  # gone whole, message and error
        assert not await raw.hexists(queue.keys.messages, one.run_id)
        assert not await raw.hexists(queue.keys.dead_errors, one.run_id)
        assert await queue.locate(two.run_id) is not None
        assert (await queue.depth()).dead == 1
    finally:
        await raw.aclose()
        await queue.close()
