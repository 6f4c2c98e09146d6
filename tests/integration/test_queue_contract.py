"""The run-queue contract, run against both implementations: Redis (a real
redis-server) and memory. Leases that must expire are taken with a zero-second
lease, so nothing here waits on a clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import pytest_asyncio

from tickwork.queue import MemoryRunQueue, RedisRunQueue, RedisSettings, RunQueue
from tickwork.queue.connection import create_client
from tickwork.queue.messages import (
    PRIORITY_TURNS,
    Claim,
    EnqueueOutcome,
    FairShare,
    RunLocation,
    RunMessage,
)

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture(params=["redis", "memory"])
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[RunQueue]:
    if request.param == "memory":
        yield MemoryRunQueue()
        return
    redis_url: str = request.getfixturevalue("redis_url")
    settings = RedisSettings(url=redis_url)
    redis_queue = RedisRunQueue(create_client(settings), settings)
    yield redis_queue
    await redis_queue.close()


#: Small bounds, so that the tests below reach them.
BOUNDS = {"dedup_max_runs": 1000, "dead_max": 3}


@pytest_asyncio.fixture(params=["redis", "memory"])
async def bounded(request: pytest.FixtureRequest) -> AsyncIterator[RunQueue]:
    if request.param == "memory":
        yield MemoryRunQueue(**BOUNDS)  # type: ignore[arg-type]
        return
    redis_url: str = request.getfixturevalue("redis_url")
    settings = RedisSettings(url=redis_url, **BOUNDS)  # type: ignore[arg-type]
    redis_queue = RedisRunQueue(create_client(settings), settings)
    yield redis_queue
    await redis_queue.close()


def message(n: int = 1, **kwargs: object) -> RunMessage:
    return RunMessage(
        run_id=f"uid-{n}.20261201T0900{n:02d}Z",
        namespace="default",
        name=f"job-{n}",
        uid=f"uid-{n}",
        scheduled_at="2026-12-01T09:00:00Z",
        **kwargs,  # type: ignore[arg-type]
    )


async def test_a_claimed_run_carries_its_identity_only(queue: RunQueue) -> None:
    assert await queue.enqueue(message(1)) is EnqueueOutcome.ENQUEUED
    [claim] = await queue.claim(consumer="w1", lease_seconds=30)
    sent = message(1)
    got = claim.message
    assert (got.run_id, got.namespace, got.name, got.uid, got.attempt) == (
        sent.run_id,
        sent.namespace,
        sent.name,
        sent.uid,
        1,
    )
    assert got.enqueued_at is not None
    assert await queue.locate(sent.run_id) is RunLocation.IN_FLIGHT


async def test_enqueue_is_idempotent_by_run_id(queue: RunQueue) -> None:
    assert await queue.enqueue(message(1)) is EnqueueOutcome.ENQUEUED
    assert await queue.enqueue(message(1)) is EnqueueOutcome.ALREADY_QUEUED
    [claim] = await queue.claim(consumer="w1", lease_seconds=30)
    assert await queue.enqueue(message(1)) is EnqueueOutcome.ALREADY_QUEUED
    assert await queue.ack(claim)
    assert await queue.enqueue(message(1)) is EnqueueOutcome.ALREADY_DONE
    assert await queue.locate(message(1).run_id) is RunLocation.DONE
    assert (await queue.depth()).backlog == 0


async def test_runs_are_claimed_first_in_first_out_in_batches(queue: RunQueue) -> None:
    for n in range(1, 6):
        await queue.enqueue(message(n))
    first = await queue.claim(consumer="w1", lease_seconds=30, count=3)
    rest = await queue.claim(consumer="w1", lease_seconds=30, count=10)
    assert [c.message.name for c in first + rest] == [f"job-{n}" for n in range(1, 6)]
    assert await queue.claim(consumer="w1", lease_seconds=30) == []


async def test_a_waiting_claim_wakes_up_on_enqueue(queue: RunQueue) -> None:
    waiting = asyncio.create_task(queue.claim(consumer="w1", lease_seconds=30, wait_seconds=30))
    await asyncio.sleep(0)  # let the claim start waiting
    await queue.enqueue(message(7))
    claims = await asyncio.wait_for(waiting, timeout=30)
    assert [c.message.name for c in claims] == ["job-7"]


async def test_a_waiting_claim_gives_up_after_its_wait(queue: RunQueue) -> None:
    assert await queue.claim(consumer="w1", lease_seconds=30, wait_seconds=0.2) == []


async def test_an_expired_lease_is_reaped_and_redelivered_as_a_new_attempt(
    queue: RunQueue,
) -> None:
    await queue.enqueue(message(1))
    [lost] = await queue.claim(consumer="w1", lease_seconds=0)
    assert await queue.reap_expired() == 1
    [again] = await queue.claim(consumer="w2", lease_seconds=30)
    assert again.run_id == lost.run_id
    assert (again.message.attempt, again.message.redeliveries) == (2, 1)
    # The first holder lost its lease: nothing it does counts any more.
    assert not await queue.ack(lost)
    assert not await queue.heartbeat(lost, lease_seconds=30)
    assert not await queue.retry(lost, delay_seconds=0, attempt=9)
    assert not await queue.bury(lost, error="late")
    assert await queue.ack(again)


async def test_a_heartbeat_extends_the_lease(queue: RunQueue) -> None:
    await queue.enqueue(message(1))
    [claim] = await queue.claim(consumer="w1", lease_seconds=0)
    assert await queue.heartbeat(claim, lease_seconds=60)
    assert await queue.reap_expired() == 0
    assert await queue.locate(claim.run_id) is RunLocation.IN_FLIGHT


async def test_retry_waits_in_the_delayed_set_then_comes_back(queue: RunQueue) -> None:
    await queue.enqueue(message(1))
    [claim] = await queue.claim(consumer="w1", lease_seconds=30)
    assert await queue.retry(claim, delay_seconds=3600, attempt=2)
    assert await queue.locate(claim.run_id) is RunLocation.DELAYED
    assert await queue.promote_due() == 0
    assert (await queue.depth()).delayed == 1

    await queue.enqueue(message(2))
    [second] = await queue.claim(consumer="w1", lease_seconds=30)
    assert await queue.retry(second, delay_seconds=0, attempt=2)
    assert await queue.promote_due() == 1
    [back] = await queue.claim(consumer="w1", lease_seconds=30)
    assert (back.run_id, back.message.attempt) == (second.run_id, 2)


async def test_dead_letters_can_be_listed_inspected_requeued_and_purged(queue: RunQueue) -> None:
    for n in (1, 2, 3):
        await queue.enqueue(message(n))
        [claim] = await queue.claim(consumer="w1", lease_seconds=30)
        assert await queue.bury(claim, error=f"HTTP 500 from job-{n}")
    assert await queue.enqueue(message(1)) is EnqueueOutcome.DEAD
    depth = await queue.depth()
    assert (depth.ready, depth.in_flight, depth.dead) == (0, 0, 3)

    letters = await queue.dead_letters(limit=10)
    assert {letter.error for letter in letters} == {f"HTTP 500 from job-{n}" for n in (1, 2, 3)}
    inspected = await queue.inspect_dead(message(2).run_id)
    assert inspected is not None
    assert inspected.message.name == "job-2"
    assert await queue.inspect_dead("no-such-run") is None

    assert await queue.requeue_dead(message(2).run_id) == 1
    [again] = await queue.claim(consumer="w1", lease_seconds=30)
    assert (again.message.name, again.message.attempt, again.message.requeued) == ("job-2", 1, True)
    assert await queue.purge_dead(message(1).run_id) == 1
    assert await queue.locate(message(1).run_id) is None
    assert await queue.requeue_dead() == 1  # all that are left: job-3
    assert await queue.purge_dead() == 0
    assert (await queue.depth()).dead == 0


async def test_release_hands_a_run_back_without_counting_an_attempt(queue: RunQueue) -> None:
    await queue.enqueue(message(1))
    await queue.enqueue(message(2))
    [claim] = await queue.claim(consumer="w1", lease_seconds=30)
    assert await queue.release(claim)
    [again] = await queue.claim(consumer="w2", lease_seconds=30)
    assert (again.run_id, again.message.attempt) == (claim.run_id, 1)  # first in line again


async def test_cancel_withdraws_ready_and_delayed_runs_but_not_running_ones(
    queue: RunQueue,
) -> None:
    for n in (1, 2, 3):
        await queue.enqueue(message(n))
    assert await queue.cancel(message(1).run_id)
    assert await queue.locate(message(1).run_id) is RunLocation.CANCELLED
    assert (await queue.depth()).ready == 2
    [claim] = await queue.claim(consumer="w1", lease_seconds=30)
    assert claim.message.name == "job-2"  # job-1 was dropped
    assert not await queue.cancel(claim.run_id)  # in flight
    assert await queue.retry(claim, delay_seconds=3600, attempt=2)
    assert await queue.cancel(claim.run_id)  # delayed
    assert not await queue.cancel("no-such-run")
    # A cancelled run will not happen: publishing it again is a no-op.
    assert await queue.locate(claim.run_id) is RunLocation.DONE
    assert await queue.enqueue(message(1)) is EnqueueOutcome.ALREADY_DONE
    assert await queue.enqueue(message(2)) is EnqueueOutcome.ALREADY_DONE


async def test_depth_counts_each_place(queue: RunQueue) -> None:
    for n in range(1, 7):
        await queue.enqueue(message(n))
    claims = await queue.claim(consumer="w1", lease_seconds=30, count=3)
    await queue.retry(claims[0], delay_seconds=3600, attempt=2)
    await queue.bury(claims[1], error="boom")
    depth = await queue.depth()
    assert (depth.ready, depth.in_flight, depth.delayed, depth.dead) == (3, 1, 1, 1)
    assert depth.backlog == 4


async def test_dead_letters_are_kept_up_to_their_limit_the_oldest_going_first(
    bounded: RunQueue,
) -> None:
    for n in range(1, 6):
        await bounded.enqueue(message(n))
        [claim] = await bounded.claim(consumer="w1", lease_seconds=30)
        assert await bounded.bury(claim, error=f"failed {n}")
    letters = await bounded.dead_letters(limit=10)
    assert sorted(letter.message.run_id for letter in letters) == [
        message(n).run_id for n in (3, 4, 5)
    ]
    assert (await bounded.depth()).dead == 3
    # The oldest are forgotten whole: no message left behind, and publishable again.
    assert await bounded.locate(message(1).run_id) is None
    assert await bounded.enqueue(message(1)) is EnqueueOutcome.ENQUEUED


async def test_remembered_runs_are_bounded_by_count_the_oldest_forgotten_first(
    bounded: RunQueue,
) -> None:
    runs = [message(n) for n in range(1, 1006)]
    for batch in range(0, len(runs), 200):
        await asyncio.gather(*(bounded.enqueue(m) for m in runs[batch : batch + 200]))
        claims = await bounded.claim(consumer="w1", lease_seconds=30, count=200)
        assert all(await asyncio.gather(*(bounded.ack(c) for c in claims)))
    depth = await bounded.depth()
    assert depth.remembered == 1000
    assert await bounded.locate(runs[0].run_id) is None  # forgotten: the oldest
    assert await bounded.locate(runs[-1].run_id) is RunLocation.DONE
    assert await bounded.enqueue(runs[-1]) is EnqueueOutcome.ALREADY_DONE


# -- Fair shares (issue 14, item 4) ---------------------------------------------------


def run_of(namespace: str, n: int) -> RunMessage:
    return RunMessage(
        run_id=f"{namespace}-uid-{n}.20261201T090000Z",
        namespace=namespace,
        name=f"job-{n}",
        uid=f"{namespace}-uid-{n}",
    )


def namespaces_of(claims: list[Claim]) -> list[str]:
    return [claim.message.namespace for claim in claims]


async def test_a_namespace_at_its_limit_waits_while_others_run(queue: RunQueue) -> None:
    fair = FairShare(max_in_flight=2)
    for n in range(5):
        await queue.enqueue(run_of("team-a", n))
    await queue.enqueue(run_of("team-b", 0))
    claims = await queue.claim(consumer="w1", lease_seconds=30, count=10, fair_share=fair)
    assert [c.message.run_id for c in claims] == [
        run_of("team-a", 0).run_id,
        run_of("team-a", 1).run_id,
        run_of("team-b", 0).run_id,
    ]
    depth = await queue.depth()
    assert (depth.ready, depth.parked, depth.in_flight, depth.backlog) == (0, 3, 3, 6)
    # Parked runs wait in the queue: not claimable, not lost, not enqueued twice.
    assert await queue.claim(consumer="w2", lease_seconds=30, count=10, fair_share=fair) == []
    assert await queue.enqueue(run_of("team-a", 2)) is EnqueueOutcome.ALREADY_QUEUED
    assert await queue.locate(run_of("team-a", 2).run_id) is RunLocation.READY
    # One of team A's runs finishes: its oldest parked run, and only that, comes back.
    assert await queue.ack(claims[0])
    [next_one] = await queue.claim(consumer="w2", lease_seconds=30, count=10, fair_share=fair)
    assert next_one.message.run_id == run_of("team-a", 2).run_id
    assert (await queue.depth()).parked == 2


async def _queued_ago(queue: RunQueue, run: RunMessage, seconds: float) -> None:
    """Make ``run`` look enqueued ``seconds`` before its enqueue (as the queue keeps it)."""
    if isinstance(queue, RedisRunQueue):
        client, key = queue._client, queue.keys.messages
        stored = json.loads(await client.hget(key, run.run_id))
        stored["enqueued_at"] -= seconds
        await client.hset(key, run.run_id, json.dumps(stored))
    else:
        assert isinstance(queue, MemoryRunQueue)
        held = queue._messages[run.run_id]
        queue._messages[run.run_id] = replace(held, enqueued_at=(held.enqueued_at or 0.0) - seconds)


async def test_the_oldest_waiting_run_is_the_next_to_claim_or_the_longest_parked(
    queue: RunQueue,
) -> None:
    def about(seconds: float) -> object:
        return pytest.approx(seconds, abs=20)  # the time the test itself takes

    assert (await queue.depth()).oldest_waiting_seconds == 0
    runs = [run_of("team-a", 0), run_of("team-a", 1), run_of("team-a", 2), run_of("team-b", 0)]
    for run, ago in zip(runs, (400, 300, 200, 100), strict=True):
        await queue.enqueue(run)
        await _queued_ago(queue, run, ago)
    assert (await queue.depth()).oldest_waiting_seconds == about(400)  # team-a 0, next
    # Team A's others are parked behind its limit: the first of them waits longest.
    fair = FairShare(max_in_flight=1)
    claims = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=fair)
    assert [c.message.run_id for c in claims] == [runs[0].run_id, runs[3].run_id]
    assert (await queue.depth()).oldest_waiting_seconds == about(300)
    assert await queue.ack(claims[0])
    [returned] = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=fair)
    assert returned.message.run_id == runs[1].run_id
    assert (await queue.depth()).oldest_waiting_seconds == about(200)
    assert await queue.ack(returned)
    [last] = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=fair)
    assert last.message.run_id == runs[2].run_id
    assert (await queue.depth()).oldest_waiting_seconds == 0  # in flight: none waits


async def _parked_everywhere(queue: RunQueue) -> int:
    """Parked runs as depth counts them; on Redis, the one key an autoscaler reads too."""
    parked = (await queue.depth()).parked
    if isinstance(queue, RedisRunQueue):
        assert await queue._client.zcard(queue.keys.parked_runs) == parked
    return parked


async def test_every_way_out_of_flight_frees_the_namespaces_slot(queue: RunQueue) -> None:
    fair = FairShare(max_in_flight=1)
    for n in range(6):
        await queue.enqueue(run_of("team-a", n))
    a = [run_of("team-a", n).run_id for n in range(6)]

    async def one(lease_seconds: float = 30) -> Claim:
        claims = await queue.claim(
            consumer="w", lease_seconds=lease_seconds, count=10, fair_share=fair
        )
        assert len(claims) == 1, [c.run_id for c in claims]
        return claims[0]

    first = await one()
    assert first.run_id == a[0]
    assert await _parked_everywhere(queue) == 5
    assert await queue.ack(first)
    assert await queue.retry(second := await one(), delay_seconds=3600, attempt=2)
    assert second.run_id == a[1]
    assert await queue.bury(third := await one(), error="boom")
    assert third.run_id == a[2]
    assert await queue.release(fourth := await one())
    assert fourth.run_id == a[3]
    # A handed-back run goes before the parked run its slot returned.
    expiring = await one(lease_seconds=0)
    assert expiring.run_id == a[3]
    assert await queue.reap_expired() == 1
    again = await one()
    assert (again.run_id, again.message.attempt) == (a[3], 2)
    assert await queue.ack(again)
    assert (fifth := await one()).run_id == a[4]
    assert await queue.ack(fifth)
    assert (await one()).run_id == a[5]
    assert await _parked_everywhere(queue) == 0
    depth = await queue.depth()
    places = (depth.parked, depth.ready, depth.in_flight, depth.delayed, depth.dead)
    assert places == (0, 0, 1, 1, 1)


async def test_rebalance_returns_parked_runs_when_a_limit_is_raised_or_lifted(
    queue: RunQueue,
) -> None:
    for n in range(6):
        await queue.enqueue(run_of("team-a", n))
    tight = FairShare(max_in_flight=1)
    [held] = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=tight)
    assert (await queue.depth()).parked == 5
    assert await queue.rebalance(tight) == 0  # no room: nothing moves
    raised = FairShare(max_in_flight=1, namespaces={"team-a": (3, None)})
    assert await queue.rebalance(raised) == 2  # room for two more
    assert await _parked_everywhere(queue) == 3
    claims = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=raised)
    assert [c.run_id for c in claims] == [run_of("team-a", n).run_id for n in (1, 2)]
    assert await queue.rebalance(None) == 3  # fair share turned off: every run returns
    assert await _parked_everywhere(queue) == 0
    depth = await queue.depth()
    assert (depth.parked, depth.ready, depth.in_flight) == (0, 3, 3)
    claims = await queue.claim(consumer="w", lease_seconds=30, count=10)
    assert len(claims) == 3
    assert await queue.ack(held)


async def test_consumers_note_their_slots_and_are_forgotten_when_gone_or_silent(
    queue: RunQueue,
) -> None:
    assert await queue.register_consumer("w1", 8, ttl_seconds=30) == 8
    assert await queue.register_consumer("w2", 4, ttl_seconds=30) == 12
    assert await queue.register_consumer("w1", 8, ttl_seconds=30) == 12  # again: once
    assert await queue.register_consumer("w2", 0, ttl_seconds=30) == 8  # going
    assert await queue.register_consumer("w3", 2, ttl_seconds=-1) == 10  # time ran out…
    assert await queue.register_consumer("w1", 8, ttl_seconds=30) == 8  # …so it is gone


async def test_a_share_of_the_live_slots_limits_a_namespace_as_they_come_and_go(
    queue: RunQueue,
) -> None:
    share = FairShare(share=0.5)
    for n in range(6):
        await queue.enqueue(run_of("team-a", n))
    one_worker = share.under(await queue.register_consumer("w1", 4, ttl_seconds=30))
    claims = await queue.claim(consumer="w1", lease_seconds=30, count=4, fair_share=one_worker)
    assert len(claims) == 2  # half of 4 slots
    two_workers = share.under(await queue.register_consumer("w2", 4, ttl_seconds=30))
    assert await queue.rebalance(two_workers) == 2  # half of 8: room for two more
    more = await queue.claim(consumer="w2", lease_seconds=30, count=4, fair_share=two_workers)
    assert len(more) == 2
    assert (await queue.depth()).parked == 2
    # A worker goes: the share shrinks for new claims, nothing running is touched.
    back_to_one = share.under(await queue.register_consumer("w2", 0, ttl_seconds=30))
    assert await queue.ack(claims[0])
    assert await queue.claim(consumer="w1", lease_seconds=30, count=4, fair_share=back_to_one) == []
    assert (await queue.depth()).in_flight == 3


async def _make_due(queue: RunQueue, run_id: str) -> None:
    """The delayed run's time has come (without waiting for it)."""
    if isinstance(queue, RedisRunQueue):
        await queue._client.zadd(queue.keys.delayed, {run_id: 0})
    else:
        assert isinstance(queue, MemoryRunQueue)
        queue._delayed[run_id] = 0


async def test_a_namespace_over_its_rate_waits_for_its_reserved_start(queue: RunQueue) -> None:
    fair = FairShare(runs_per_minute=2, namespaces={"team-b": (None, 0)})
    for n in range(4):
        await queue.enqueue(run_of("team-a", n))
        await queue.enqueue(run_of("team-b", n))
    claims = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=fair)
    # A minute's worth of team A (2) at once, the rest later; team B is not limited.
    assert sorted(namespaces_of(claims)) == ["team-a"] * 2 + ["team-b"] * 4
    depth = await queue.depth()
    assert (depth.delayed, depth.ready, depth.parked) == (2, 0, 0)
    third = run_of("team-a", 2).run_id
    assert await queue.locate(third) is RunLocation.DELAYED
    if isinstance(queue, RedisRunQueue):  # 30 s and 60 s from now: 2 a minute
        scores = await queue._client.zrange(queue.keys.delayed, 0, -1, withscores=True)
        (_, start3), (_, start4) = scores
        assert start4 - start3 == pytest.approx(30, abs=0.01)
    # Its start was reserved: once due it runs, without taking another run's turn.
    await _make_due(queue, third)
    assert await queue.promote_due() == 1
    [claim] = await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=fair)
    assert claim.run_id == third
    await queue.enqueue(run_of("team-a", 9))
    assert await queue.claim(consumer="w", lease_seconds=30, count=10, fair_share=fair) == []
    assert await queue.locate(run_of("team-a", 9).run_id) is RunLocation.DELAYED
    assert await queue.cancel(run_of("team-a", 9).run_id)  # a delayed run can be withdrawn


# -- Priorities ---------------------------------------------------------------------


def _level(claim: Claim) -> str:
    return (claim.message.priority or "Normal")[0]


async def _claim_one_by_one(queue: RunQueue, count: int) -> list[Claim]:
    claims = []
    for _ in range(count):
        [claim] = await queue.claim(consumer="w1", lease_seconds=30)
        claims.append(claim)
    return claims


async def test_while_every_priority_waits_each_8_claims_take_5_high_2_normal_1_low(
    queue: RunQueue,
) -> None:
    for n in range(24):
        await queue.enqueue(message(n, priority=["High", None, "Low"][n % 3]))
    depth = await queue.depth()
    assert (depth.ready, depth.ready_high, depth.ready_low) == (24, 8, 8)
    claims = await _claim_one_by_one(queue, 8)
    levels = "".join(_level(c) for c in claims)
    assert sorted(levels) == sorted("HHHHHNNL"), levels
    assert levels == PRIORITY_TURNS  # a fresh queue starts at the round's first turn
    # Within each level, the oldest first.
    assert [c.message.run_id for c in claims if _level(c) == "H"] == [
        message(n).run_id for n in (0, 3, 6, 9, 12)
    ]


async def test_a_high_backlog_starves_no_low_run(queue: RunQueue) -> None:
    """The rule's bound: the oldest Low run is claimed within 8 claims, the oldest
    Normal run within 4, however many High runs wait."""
    for n in range(60):
        await queue.enqueue(message(n, priority="High"))
    await queue.enqueue(message(60))
    await queue.enqueue(message(61, priority="Low"))
    levels = "".join(_level(c) for c in await _claim_one_by_one(queue, 8))
    assert "N" in levels[:4], levels
    assert "L" in levels, levels
    assert levels.count("H") == 6, levels


async def test_with_no_normal_run_waiting_high_goes_before_low_but_low_keeps_its_turn(
    queue: RunQueue,
) -> None:
    for n in range(8):
        await queue.enqueue(message(n, priority="Low"))
    for n in range(8, 16):
        await queue.enqueue(message(n, priority="High"))
    levels = "".join(_level(c) for c in await _claim_one_by_one(queue, 8))
    assert levels == PRIORITY_TURNS.replace("N", "H"), levels  # Normal's turns go to High


async def test_a_run_handed_back_reaped_or_retried_returns_to_its_own_priority(
    queue: RunQueue,
) -> None:
    await queue.enqueue(message(1, priority="High"))
    await queue.enqueue(message(2, priority="Low"))
    first, second = await queue.claim(consumer="w1", lease_seconds=30, count=2)
    assert {_level(first), _level(second)} == {"H", "L"}
    high, low = (first, second) if _level(first) == "H" else (second, first)
    assert await queue.release(high)
    assert await queue.retry(low, delay_seconds=0, attempt=2)
    assert await queue.promote_due() == 1
    depth = await queue.depth()
    assert (depth.ready, depth.ready_high, depth.ready_low) == (2, 1, 1)
    again = await queue.claim(consumer="w1", lease_seconds=0, count=2)
    assert await queue.reap_expired() == 2
    depth = await queue.depth()
    assert (depth.ready, depth.ready_high, depth.ready_low) == (2, 1, 1)
    assert {c.message.priority for c in again} == {"High", "Low"}


async def test_only_normal_runs_are_one_fifo_as_before(queue: RunQueue) -> None:
    for n in range(10):
        await queue.enqueue(message(n))
    claims = await _claim_one_by_one(queue, 10)
    assert [c.message.run_id for c in claims] == [message(n).run_id for n in range(10)]
    assert all(c.message.priority is None for c in claims)


async def test_a_parked_run_returns_to_its_own_priority(queue: RunQueue) -> None:
    fair = FairShare(max_in_flight=1)
    for n in (1, 2, 3):
        await queue.enqueue(message(n, priority="High"))
    [first] = await queue.claim(consumer="w1", lease_seconds=30, count=3, fair_share=fair)
    assert (await queue.depth()).parked == 2
    assert await queue.ack(first)  # its slot frees: the oldest parked run returns
    depth = await queue.depth()
    assert (depth.ready, depth.ready_high, depth.parked) == (1, 1, 1)
    assert await queue.rebalance(None) == 1  # no share: every parked run returns
    depth = await queue.depth()
    assert (depth.ready, depth.ready_high, depth.parked) == (2, 2, 0)
    claims = await _claim_one_by_one(queue, 2)
    assert {c.message.run_id for c in claims} == {message(2).run_id, message(3).run_id}


# -- Concurrency keys ---------------------------------------------------------------


def keyed(n: int, key: str = "default/db", limit: int = 1) -> RunMessage:
    return message(n, concurrency_key=key, concurrency_limit=limit)


async def claim_to_run(
    queue: RunQueue, *, lease_seconds: float = 30, count: int = 1
) -> list[Claim]:
    """Claim as a worker does: the runs claimed to wait for their key are handed to
    its waiting list at once (a worker first shows them Waiting in status)."""
    claims = await queue.claim(consumer="w1", lease_seconds=lease_seconds, count=count)
    for claim in claims:
        if claim.waits_for_key:
            assert await queue.wait_for_key(claim)
    return [claim for claim in claims if not claim.waits_for_key]


async def test_a_run_over_its_keys_limit_is_claimed_to_wait_and_waits_once_handed_on(
    queue: RunQueue,
) -> None:
    """Its claimer holds it until it has shown it Waiting: no one else starts it before."""
    await queue.enqueue(keyed(1))
    await queue.enqueue(keyed(2))
    first, second = await queue.claim(consumer="w1", lease_seconds=30, count=2)
    assert (first.message.run_id, first.waits_for_key) == (keyed(1).run_id, False)
    assert (second.message.run_id, second.waits_for_key) == (keyed(2).run_id, True)
    assert await queue.locate(second.message.run_id) is RunLocation.IN_FLIGHT
    assert (await queue.depth()).waiting_for_key == 0
    assert await queue.claim(consumer="w2", lease_seconds=30, count=2) == []
    assert await queue.wait_for_key(second)
    assert (await queue.depth()).waiting_for_key == 1
    assert not await queue.wait_for_key(second)  # handed on once
    assert not await queue.ack(second)  # no longer held: it waits
    assert await queue.claim(consumer="w2", lease_seconds=30, count=2) == []
    assert await queue.ack(first)  # the place is free: the waiting run returns
    [again] = await queue.claim(consumer="w2", lease_seconds=30, count=2)
    assert (again.message.run_id, again.waits_for_key) == (keyed(2).run_id, False)
    assert again.message.waited  # its record must take its Waiting entry out
    assert again.message == replace(keyed(2), waited=True, enqueued_at=again.message.enqueued_at)


async def test_a_run_handed_on_after_a_place_came_free_is_ready_at_once(queue: RunQueue) -> None:
    await queue.enqueue(keyed(1))
    await queue.enqueue(keyed(2))
    first, second = await queue.claim(consumer="w1", lease_seconds=30, count=2)
    assert second.waits_for_key
    assert await queue.ack(first)  # before the waiting run is handed on
    assert await queue.wait_for_key(second)
    assert (await queue.depth()).waiting_for_key == 0
    [again] = await queue.claim(consumer="w2", lease_seconds=30)
    assert (again.message.run_id, again.waits_for_key) == (keyed(2).run_id, False)


async def test_a_run_claimed_to_wait_whose_claimer_died_is_claimed_again(queue: RunQueue) -> None:
    await queue.enqueue(keyed(1))
    await queue.enqueue(keyed(2))
    _, second = await queue.claim(consumer="w1", lease_seconds=0, count=2)
    assert second.waits_for_key
    assert await queue.reap_expired() == 2  # both leases ran out, the key's place too
    assert not await queue.wait_for_key(second)  # too late: not its claimer's any more
    claims = await queue.claim(consumer="w2", lease_seconds=30, count=2)
    assert sorted(c.waits_for_key for c in claims) == [False, True]
    assert {c.message.run_id for c in claims} == {keyed(1).run_id, keyed(2).run_id}


async def test_a_run_whose_key_has_no_place_free_waits_and_others_go_past_it(
    queue: RunQueue,
) -> None:
    await queue.enqueue(keyed(1))
    await queue.enqueue(keyed(2))
    await queue.enqueue(message(3))
    claims = await claim_to_run(queue, count=3)
    assert [c.message.run_id for c in claims] == [keyed(1).run_id, message(3).run_id]
    depth = await queue.depth()
    assert (depth.ready, depth.waiting_for_key, depth.backlog) == (0, 1, 2)
    assert await queue.claim(consumer="w1", lease_seconds=30) == []  # still waiting
    assert await queue.ack(claims[0])  # the place is free: the waiting run returns
    [second] = await claim_to_run(queue)
    assert second.message.run_id == keyed(2).run_id
    assert (await queue.depth()).waiting_for_key == 0


async def test_runs_wait_for_their_key_in_order_and_a_limit_of_two_holds_two(
    queue: RunQueue,
) -> None:
    for n in range(1, 6):
        await queue.enqueue(keyed(n, limit=2))
    first = await claim_to_run(queue, count=5)
    assert [c.message.run_id for c in first] == [keyed(1).run_id, keyed(2).run_id]
    assert (await queue.depth()).waiting_for_key == 3
    seen = [c.message.run_id for c in first]
    in_flight = list(first)
    while in_flight:
        assert await queue.ack(in_flight.pop(0))
        more = await claim_to_run(queue, count=5)
        assert len(in_flight) + len(more) <= 2
        in_flight += more
        seen += [c.message.run_id for c in more]
    assert seen == [keyed(n).run_id for n in range(1, 6)]


async def test_a_place_is_given_up_by_a_retry_a_release_and_a_lost_lease(
    queue: RunQueue,
) -> None:
    await queue.enqueue(keyed(1))
    await queue.enqueue(keyed(2))
    [holder] = await claim_to_run(queue, lease_seconds=0, count=2)
    assert holder.message.run_id == keyed(1).run_id
    assert (await queue.depth()).waiting_for_key == 1
    assert await queue.reap_expired() == 1  # the holder's lease ran out
    claims = await claim_to_run(queue, count=2)
    assert len(claims) == 1  # one of the two holds the place again, the other waits
    assert await queue.release(claims[0])
    [again] = await claim_to_run(queue, count=2)
    assert await queue.retry(again, delay_seconds=0, attempt=2)
    [last] = await claim_to_run(queue, count=2)
    assert {again.message.run_id, last.message.run_id} == {keyed(1).run_id, keyed(2).run_id}
    assert await queue.promote_due() == 1  # the retried run: back, but the key is held
    assert await claim_to_run(queue, count=2) == []
    assert await queue.rebalance(None) == 0  # a recount frees no place that is held
    assert (await queue.depth()).waiting_for_key == 1


async def test_keys_of_other_namespaces_or_names_are_other_places(queue: RunQueue) -> None:
    await queue.enqueue(keyed(1, key="team-a/db"))
    await queue.enqueue(keyed(2, key="team-b/db"))
    await queue.enqueue(keyed(3, key="team-a/cache"))
    claims = await queue.claim(consumer="w1", lease_seconds=30, count=3)
    assert len(claims) == 3


# -- Notices ------------------------------------------------------------------------


async def test_a_notice_is_told_once_and_a_namespace_at_most_so_many_a_minute(
    queue: RunQueue,
) -> None:
    assert await queue.admit_notice("run-1/Failed/0", "team-a", per_minute=2) == "send"
    assert await queue.admit_notice("run-1/Failed/0", "team-a", per_minute=2) == "duplicate"
    assert await queue.admit_notice("run-1/Failed/1", "team-a", per_minute=2) == "send"
    assert await queue.admit_notice("run-2/Failed/0", "team-a", per_minute=2) == "limited"
    # A limited notice was not noted as told: another namespace's minute has room.
    assert await queue.admit_notice("run-2/Failed/0", "team-b", per_minute=2) == "send"
    assert await queue.admit_notice("run-2/Failed/0", "team-b", per_minute=2) == "duplicate"
