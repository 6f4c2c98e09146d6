"""The Redis queue under failure: killed consumers, a crashed and restarted Redis,
racing consumers and publishers, and a Redis that cannot be reached."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client, wait_until_ready
from tickwork.queue.messages import Claim, EnqueueOutcome, RunLocation, RunMessage
from tickwork_dev.devcluster.process import free_port
from tickwork_dev.devcluster.redis import RedisServer

pytestmark = pytest.mark.asyncio


def message(n: int) -> RunMessage:
    return RunMessage(
        run_id=f"uid-{n}.20261201T090000Z", namespace="ns", name=f"job-{n}", uid=f"uid-{n}"
    )


def open_queue(url: str) -> RedisRunQueue:
    settings = RedisSettings(url=url, poll_seconds=0.2)
    return RedisRunQueue(create_client(settings), settings)


@pytest_asyncio.fixture
async def queue(redis_url: str) -> AsyncIterator[RedisRunQueue]:
    redis_queue = open_queue(redis_url)
    yield redis_queue
    await redis_queue.close()


async def _reclaim(queue: RedisRunQueue, want: int, *, within: float) -> list[Claim]:
    """Reap and claim until ``want`` runs are back, waiting on the queue, not on a clock."""
    got: list[Claim] = []
    deadline = time.monotonic() + within
    while len(got) < want and time.monotonic() < deadline:
        await queue.reap_expired()
        got += await queue.claim(consumer="rescuer", lease_seconds=60, count=want, wait_seconds=0.2)
    return got


@pytest.mark.timeout(120)
async def test_a_killed_consumer_loses_no_run(queue: RedisRunQueue, redis_url: str) -> None:
    for n in range(100):
        assert await queue.enqueue(message(n)) is EnqueueOutcome.ENQUEUED
    consumer = textwrap.dedent(f"""
        import asyncio, threading
        from tickwork.queue import RedisRunQueue, RedisSettings
        from tickwork.queue.connection import create_client
        async def main():
            settings = RedisSettings(url={redis_url!r})
            queue = RedisRunQueue(create_client(settings), settings)
            claims = await queue.claim(consumer="doomed", lease_seconds=2, count=100)
            print(len(claims), flush=True)
            await asyncio.Event().wait()
        asyncio.run(main())
    """)
    with subprocess.Popen(
        [sys.executable, "-c", consumer], stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "100"
        assert (await queue.depth()).in_flight == 100
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    rescued = await _reclaim(queue, 100, within=60)
    assert sorted(c.run_id for c in rescued) == sorted(message(n).run_id for n in range(100))
    assert {c.message.attempt for c in rescued} == {2}  # the redelivery is visible
    for claim in rescued:
        assert await queue.ack(claim)
    depth = await queue.depth()
    assert (depth.ready, depth.in_flight, depth.delayed, depth.dead) == (0, 0, 0, 0)


def _aof_contains(directory: Path, needle: bytes) -> bool:
    return any(needle in path.read_bytes() for path in directory.rglob("*.aof*") if path.is_file())


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(120)
async def test_a_crashed_redis_with_aof_keeps_what_was_flushed(tmp_path: Path) -> None:
    server = RedisServer(workdir=tmp_path / "redis", appendonly=True)
    server.start()
    try:
        queue = open_queue(server.url)
        for n in range(200):
            await queue.enqueue(message(n))
        acked = await queue.claim(consumer="w", lease_seconds=600, count=50)
        for claim in acked:
            assert await queue.ack(claim)
        held = await queue.claim(consumer="w", lease_seconds=600, count=10)
        await queue.close()
        # appendfsync everysec: wait until the last write is on disk (the
        # event), not a fixed second.
        last = held[-1].run_id.encode()
        assert _wait_for(lambda: _aof_contains(tmp_path / "redis", last), timeout=10)
        server.kill()  # a crash, not a clean shutdown
        server.start()

        queue = open_queue(server.url)
        depth = await queue.depth()
        assert (depth.ready, depth.in_flight) == (140, 10)
        for claim in acked:  # nothing acknowledged comes back
            assert await queue.locate(claim.run_id) is RunLocation.DONE
            assert await queue.enqueue(claim.message) is EnqueueOutcome.ALREADY_DONE
        for claim in held:  # leases survive too, and still expire and redeliver
            assert await queue.locate(claim.run_id) is RunLocation.IN_FLIGHT
        await queue.close()
    finally:
        server.stop()


@pytest.mark.timeout(60)
async def test_after_a_restart_expired_leases_are_left_to_their_workers_for_a_grace(
    tmp_path: Path,
) -> None:
    """Renewals made just before Redis crashed can be lost with it, so after a restart
    leases look expired that a live worker holds. The reaper leaves them alone for the
    grace: the live worker renews its lease, and only the one nobody renews is
    redelivered."""
    server = RedisServer(workdir=tmp_path / "redis", appendonly=True)
    server.start()
    settings = RedisSettings(url=server.url, poll_seconds=0.2, reap_grace_seconds=3)
    reaper = RedisRunQueue(create_client(settings), settings)
    worker = RedisRunQueue(create_client(settings), settings)
    try:
        for n in (1, 2):
            await worker.enqueue(message(n))
        alive, dead = await worker.claim(consumer="w", lease_seconds=0.2, count=2)
        assert await worker.heartbeat(alive, lease_seconds=0.2)
        assert await reaper.reap_expired() == 0  # the reaper knows this Redis; none expired
        assert _wait_for(lambda: _aof_contains(tmp_path / "redis", dead.run_id.encode()), 10)
        server.kill()
        server.start()

        client = reaper._client  # Redis's own clock decides expiry
        while True:  # both deadlines pass by Redis's clock (the grace starts at the reap)
            seconds, micros = await client.time()
            if await client.zcount(reaper.keys.inflight, "-inf", seconds + micros / 1e6) == 2:
                break
            await asyncio.sleep(0.05)
        assert await reaper.reap_expired() == 0  # within the grace: workers renew first
        assert await worker.heartbeat(alive, lease_seconds=600)
        assert await worker.locate(alive.run_id) is RunLocation.IN_FLIGHT
        deadline = time.monotonic() + 15
        while await reaper.reap_expired() == 0:  # the grace ends: the dead lease goes
            assert time.monotonic() < deadline, "the grace never ended"
            await asyncio.sleep(0.1)
        assert await worker.locate(dead.run_id) is RunLocation.READY
        assert await worker.locate(alive.run_id) is RunLocation.IN_FLIGHT
        assert not await worker.heartbeat(dead, lease_seconds=60)
    finally:
        await reaper.close()
        await worker.close()
        server.stop()


@pytest.mark.timeout(120)
async def test_concurrent_consumers_never_hold_the_same_run(redis_url: str) -> None:
    runs = 300
    queues = [open_queue(redis_url) for _ in range(8)]
    try:
        for n in range(runs):
            await queues[0].enqueue(message(n))
        holding: dict[str, str] = {}
        processed: list[str] = []
        overlaps: list[str] = []

        async def consume(name: str, queue: RedisRunQueue) -> None:
            while True:
                claims = await queue.claim(consumer=name, lease_seconds=60, count=3)
                if not claims:
                    return
                for claim in claims:
                    if claim.run_id in holding:
                        overlaps.append(claim.run_id)
                    holding[claim.run_id] = name
                    await asyncio.sleep(0)  # let the others interleave
                    del holding[claim.run_id]
                    processed.append(claim.run_id)
                    assert await queue.ack(claim)

        await asyncio.gather(*(consume(f"c{i}", q) for i, q in enumerate(queues)))
        assert overlaps == []
        assert sorted(processed) == sorted(message(n).run_id for n in range(runs))
    finally:
        for queue in queues:
            await queue.close()


@pytest.mark.timeout(60)
async def test_concurrent_enqueues_of_one_run_yield_one_message(redis_url: str) -> None:
    queues = [open_queue(redis_url) for _ in range(10)]
    try:
        outcomes = await asyncio.gather(*(q.enqueue(message(42)) for q in queues for _ in range(5)))
        assert outcomes.count(EnqueueOutcome.ENQUEUED) == 1
        assert outcomes.count(EnqueueOutcome.ALREADY_QUEUED) == 49
        assert (await queues[0].depth()).ready == 1
    finally:
        for queue in queues:
            await queue.close()


async def test_an_unreachable_redis_is_a_clear_error() -> None:
    settings = RedisSettings(
        url=f"redis://127.0.0.1:{free_port()}/0",
        password="s3cret-pw",
        reconnect_attempts=1,
        connect_timeout_seconds=1,
    )
    client = create_client(settings)
    with pytest.raises(QueueUnavailableError) as excinfo:
        await wait_until_ready(client, settings, timeout_seconds=1)
    text = str(excinfo.value)
    assert text.startswith("cannot reach Redis at redis://127.0.0.1:")
    assert "TICKWORK_REDIS_URL" in text
    assert "s3cret-pw" not in text
    queue = RedisRunQueue(client, settings)
    with pytest.raises(QueueUnavailableError, match="cannot reach Redis"):
        await queue.enqueue(message(1))
    await queue.close()


async def test_a_wrong_password_is_a_clear_error_and_not_retried(
    redis_server: RedisServer,
) -> None:
    settings = RedisSettings(
        url=f"redis://127.0.0.1:{redis_server.port}/0", password="not-the-password"
    )
    client = create_client(settings)
    started = time.monotonic()
    with pytest.raises(QueueUnavailableError) as excinfo:
        await wait_until_ready(client, settings, timeout_seconds=30)
    assert time.monotonic() - started < 25  # gave up at once instead of waiting 30 s
    text = str(excinfo.value)
    assert "refused the credentials" in text
    assert "TICKWORK_REDIS_PASSWORD" in text
    assert "not-the-password" not in text
    await client.aclose()


@pytest.mark.timeout(60)
async def test_the_client_reconnects_after_redis_restarts(tmp_path: Path) -> None:
    server = RedisServer(workdir=tmp_path / "redis", appendonly=True)
    server.start()
    try:
        queue = open_queue(server.url)
        assert await queue.enqueue(message(1)) is EnqueueOutcome.ENQUEUED
        server.restart()  # same port, same data; the client's connection is now dead
        assert await queue.enqueue(message(2)) is EnqueueOutcome.ENQUEUED
        assert (await queue.depth()).ready == 2
        await queue.close()
    finally:
        server.stop()


def _script_calls(url: str) -> int:
    import redis  # noqa: PLC0415 - a plain client to read the server's own counters

    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
        return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
    finally:
        client.close()


@pytest.mark.timeout(60)
async def test_concurrent_enqueues_and_acks_travel_as_one_script_call_each(
    queue: RedisRunQueue, redis_url: str
) -> None:
    await queue.depth()  # connected and scripts known before counting
    before = _script_calls(redis_url)
    messages = [message(n) for n in range(200)] + [message(7)]  # one duplicate in the batch
    outcomes = await asyncio.gather(*(queue.enqueue(m) for m in messages))
    assert outcomes.count(EnqueueOutcome.ENQUEUED) == 200
    assert outcomes[-1] is EnqueueOutcome.ALREADY_QUEUED
    enqueue_calls = _script_calls(redis_url) - before

    claims = await queue.claim(consumer="c", lease_seconds=60, count=200)
    assert len(claims) == 200
    forged = Claim(message=claims[0].message, token="not-the-lease")
    before = _script_calls(redis_url)
    acked = await asyncio.gather(*(queue.ack(c) for c in [forged, *claims]))
    ack_calls = _script_calls(redis_url) - before

    assert acked == [False] + [True] * 200  # each caller gets its own answer
    # NOSCRIPT on a fresh server may add a retry; never one call per run.
    assert enqueue_calls <= 2
    assert ack_calls <= 2
    assert (await queue.depth()).in_flight == 0
    assert all([await queue.locate(m.run_id) is RunLocation.DONE for m in messages[:3]])


@pytest.mark.timeout(60)
async def test_an_idle_consumer_after_a_burst_waits_instead_of_spinning(
    queue: RedisRunQueue, redis_url: str
) -> None:
    await asyncio.gather(*(queue.enqueue(message(n)) for n in range(300)))
    taken = await queue.claim(consumer="c", lease_seconds=60, count=300)
    assert len(taken) == 300
    before = _script_calls(redis_url)
    # The enqueues left 300 wake-up tokens; the claim that emptied the queue dropped them,
    # so this wait sleeps in BLPOP (0.2 s polls) instead of claiming once per token.
    assert await queue.claim(consumer="c", lease_seconds=60, count=1, wait_seconds=1.0) == []
    assert _script_calls(redis_url) - before <= 8
