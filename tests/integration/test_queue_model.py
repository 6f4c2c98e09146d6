"""A hypothesis state machine drives each queue implementation and a plain model side
by side: every outcome, count and location must agree after every step."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
import redis as redis_lib
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tickwork.queue import MemoryRunQueue, RedisRunQueue, RedisSettings, RunQueue
from tickwork.queue.connection import create_client
from tickwork.queue.messages import Claim, EnqueueOutcome, FairShare, RunLocation, RunMessage
from tickwork_dev.devcluster.redis import RedisServer

T = TypeVar("T")
RUNS = st.integers(0, 11)


def message(n: int) -> RunMessage:
    return RunMessage(run_id=f"u{n}.20261201T090000Z", namespace="ns", name=f"j{n}", uid=f"u{n}")


@dataclass
class Model:
    ready: set[str] = field(default_factory=set)
    inflight: dict[str, bool] = field(default_factory=dict)  # run ID -> lease already expired
    delayed: dict[str, bool] = field(default_factory=dict)  # run ID -> due now
    dead: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    cancelled: set[str] = field(default_factory=set)  # withdrawn while ready
    attempts: dict[str, int] = field(default_factory=dict)


class QueueMachine(RuleBasedStateMachine):
    def __init__(self, make_queue: Callable[[], RunQueue]) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.queue = make_queue()
        self.model = Model()
        self.held: list[Claim] = []

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        self.run(self.queue.close())
        self.loop.close()

    @rule(n=RUNS)
    def enqueue(self, n: int) -> None:
        run_id = message(n).run_id
        m = self.model
        if run_id in m.dead:
            expected = EnqueueOutcome.DEAD
        elif run_id in m.done or run_id in m.cancelled:
            expected = EnqueueOutcome.ALREADY_DONE
        elif run_id in m.ready or run_id in m.inflight or run_id in m.delayed:
            expected = EnqueueOutcome.ALREADY_QUEUED
        else:
            expected = EnqueueOutcome.ENQUEUED
            m.ready.add(run_id)
            m.attempts[run_id] = 1
        assert self.run(self.queue.enqueue(message(n))) is expected

    @rule(count=st.integers(1, 3), expiring=st.booleans())
    def claim(self, count: int, expiring: bool) -> None:
        claims = self.run(
            self.queue.claim(consumer="m", lease_seconds=0 if expiring else 3600, count=count)
        )
        m = self.model
        assert len(claims) == min(count, len(m.ready))
        for claim in claims:
            assert claim.run_id in m.ready
            assert claim.message.attempt == m.attempts[claim.run_id]
            m.ready.remove(claim.run_id)
            m.inflight[claim.run_id] = expiring
            self.held.append(claim)
        # Cancelled runs that reached the head of the list were dropped as done.
        if len(claims) < count:
            m.done |= m.cancelled
            m.cancelled.clear()

    def _take(self, index: int) -> Claim:
        return self.held.pop(index % len(self.held))

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 100))
    def ack(self, index: int) -> None:
        claim = self._take(index)
        assert self.run(self.queue.ack(claim))
        del self.model.inflight[claim.run_id]
        self.model.done.add(claim.run_id)

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 100), due_now=st.booleans())
    def retry(self, index: int, due_now: bool) -> None:
        claim = self._take(index)
        attempt = self.model.attempts[claim.run_id] + 1
        assert self.run(
            self.queue.retry(claim, delay_seconds=0 if due_now else 3600, attempt=attempt)
        )
        del self.model.inflight[claim.run_id]
        self.model.delayed[claim.run_id] = due_now
        self.model.attempts[claim.run_id] = attempt

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 100))
    def bury(self, index: int) -> None:
        claim = self._take(index)
        assert self.run(self.queue.bury(claim, error="boom"))
        del self.model.inflight[claim.run_id]
        self.model.dead.add(claim.run_id)

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 100))
    def release(self, index: int) -> None:
        claim = self._take(index)
        assert self.run(self.queue.release(claim))
        del self.model.inflight[claim.run_id]
        self.model.ready.add(claim.run_id)

    @rule()
    def promote(self) -> None:
        due = [run_id for run_id, now in self.model.delayed.items() if now]
        assert self.run(self.queue.promote_due()) == len(due)
        for run_id in due:
            del self.model.delayed[run_id]
            self.model.ready.add(run_id)

    @rule()
    def reap(self) -> None:
        expired = [run_id for run_id, gone in self.model.inflight.items() if gone]
        assert self.run(self.queue.reap_expired()) == len(expired)
        for run_id in expired:
            del self.model.inflight[run_id]
            self.model.ready.add(run_id)
            self.model.attempts[run_id] += 1
        self.held = [c for c in self.held if c.run_id not in expired]

    @rule(n=RUNS)
    def cancel(self, n: int) -> None:
        run_id = message(n).run_id
        m = self.model
        expected = run_id in m.ready or run_id in m.delayed
        assert self.run(self.queue.cancel(run_id)) is expected
        if run_id in m.ready:
            m.ready.remove(run_id)
            m.cancelled.add(run_id)
        elif run_id in m.delayed:
            del m.delayed[run_id]
            m.done.add(run_id)

    @rule(n=RUNS)
    def requeue_dead(self, n: int) -> None:
        run_id = message(n).run_id
        assert self.run(self.queue.requeue_dead(run_id)) == int(run_id in self.model.dead)
        if run_id in self.model.dead:
            self.model.dead.remove(run_id)
            self.model.ready.add(run_id)
            self.model.attempts[run_id] = 1

    @rule(n=RUNS)
    def purge_dead(self, n: int) -> None:
        run_id = message(n).run_id
        assert self.run(self.queue.purge_dead(run_id)) == int(run_id in self.model.dead)
        self.model.dead.discard(run_id)

    @invariant()
    def depth_and_locations_agree(self) -> None:
        m = self.model
        depth = self.run(self.queue.depth())
        assert (depth.ready, depth.in_flight, depth.delayed, depth.dead) == (
            len(m.ready),
            len(m.inflight),
            len(m.delayed),
            len(m.dead),
        )
        for n in range(12):
            run_id = message(n).run_id
            where = self.run(self.queue.locate(run_id))
            if run_id in m.ready:
                assert where is RunLocation.READY
            elif run_id in m.inflight:
                assert where is RunLocation.IN_FLIGHT
            elif run_id in m.delayed:
                assert where is RunLocation.DELAYED
            elif run_id in m.dead:
                assert where is RunLocation.DEAD
            elif run_id in m.cancelled:
                assert where in (RunLocation.CANCELLED, RunLocation.DONE)
            elif run_id in m.done:
                assert where is RunLocation.DONE
            else:
                assert where is None


MACHINE_SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_memory_queue_agrees_with_the_model() -> None:
    run_state_machine_as_test(lambda: QueueMachine(MemoryRunQueue), settings=MACHINE_SETTINGS)


def fresh_redis_queue(redis_server: RedisServer) -> Callable[[], RunQueue]:
    """A maker of queues on the session's Redis, emptied for each example."""

    def make() -> RunQueue:
        with redis_lib.Redis.from_url(redis_server.url) as connection:
            connection.flushall()
        redis_settings = RedisSettings(url=redis_server.url)
        return RedisRunQueue(create_client(redis_settings), redis_settings)

    return make


@pytest.mark.timeout(600)
def test_redis_queue_agrees_with_the_model(redis_server: RedisServer) -> None:
    make = fresh_redis_queue(redis_server)
    run_state_machine_as_test(lambda: QueueMachine(make), settings=MACHINE_SETTINGS)


# -- Fair shares: one limit per namespace, changed at will; nothing lost, never over --


NAMESPACES = ("a", "b", "c")


def tenant_message(n: int) -> RunMessage:
    return RunMessage(
        run_id=f"f{n}.20261201T090000Z", namespace=NAMESPACES[n % 3], name=f"j{n}", uid=f"f{n}"
    )


class FairShareMachine(RuleBasedStateMachine):
    """Claims under per-namespace limits that change between steps: a namespace never
    has more runs in flight than its limit allowed when they were claimed, every run
    is somewhere (ready, parked, in flight, delayed, done), and in the end every run
    drains under the final limits."""

    def __init__(self, make_queue: Callable[[], RunQueue]) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.queue = make_queue()
        self.limits = dict.fromkeys(NAMESPACES, 1)
        self.held: list[Claim] = []
        self.enqueued: set[str] = set()
        self.done: set[str] = set()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    @property
    def fair(self) -> FairShare:
        return FairShare(namespaces={ns: (n, None) for ns, n in self.limits.items()})

    def _in_flight(self, namespace: str) -> int:
        return sum(1 for c in self.held if c.message.namespace == namespace)

    @rule(n=st.integers(0, 14))
    def enqueue(self, n: int) -> None:
        if self.run(self.queue.enqueue(tenant_message(n))) is EnqueueOutcome.ENQUEUED:
            self.enqueued.add(tenant_message(n).run_id)

    @rule(count=st.integers(1, 4))
    def claim(self, count: int) -> None:
        claims = self.run(
            self.queue.claim(consumer="m", lease_seconds=3600, count=count, fair_share=self.fair)
        )
        assert len(claims) <= count
        self.held += claims
        for namespace in NAMESPACES:  # held before the limit was lowered may exceed it
            taken = sum(1 for c in claims if c.message.namespace == namespace)
            if taken and self.limits[namespace]:
                assert self._in_flight(namespace) <= self.limits[namespace]

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 100), how=st.sampled_from(["ack", "retry", "release"]))
    def finish(self, index: int, how: str) -> None:
        claim = self.held.pop(index % len(self.held))
        if how == "ack":
            assert self.run(self.queue.ack(claim))
            self.done.add(claim.run_id)
        elif how == "retry":
            assert self.run(self.queue.retry(claim, delay_seconds=0, attempt=2))
        else:
            assert self.run(self.queue.release(claim))

    @rule()
    def promote(self) -> None:
        self.run(self.queue.promote_due())

    @rule(namespace=st.sampled_from(NAMESPACES), limit=st.integers(0, 3))
    def change_limit(self, namespace: str, limit: int) -> None:
        self.limits[namespace] = limit  # 0: no limit
        self.run(self.queue.rebalance(self.fair))

    @invariant()
    def every_run_is_somewhere(self) -> None:
        depth = self.run(self.queue.depth())
        assert depth.in_flight == len(self.held)
        waiting = depth.ready + depth.parked + depth.delayed
        assert waiting + depth.in_flight + len(self.done) == len(self.enqueued)

    def teardown(self) -> None:
        try:
            for claim in self.held:
                assert self.run(self.queue.ack(claim))
                self.done.add(claim.run_id)
            self.held = []
            for _ in range(3 * len(self.enqueued) + 3):
                self.run(self.queue.promote_due())
                claims = self.run(
                    self.queue.claim(
                        consumer="m", lease_seconds=3600, count=2, fair_share=self.fair
                    )
                )
                for claim in claims:
                    assert self.run(self.queue.ack(claim))
                    self.done.add(claim.run_id)
            assert self.done == self.enqueued  # parked runs all came back
            depth = self.run(self.queue.depth())
            assert (depth.ready, depth.parked, depth.in_flight) == (0, 0, 0)
        finally:
            self.run(self.queue.close())
            self.loop.close()


def test_memory_queue_keeps_fair_shares() -> None:
    run_state_machine_as_test(lambda: FairShareMachine(MemoryRunQueue), settings=MACHINE_SETTINGS)


@pytest.mark.timeout(600)
def test_redis_queue_keeps_fair_shares(redis_server: RedisServer) -> None:
    make = fresh_redis_queue(redis_server)
    run_state_machine_as_test(lambda: FairShareMachine(make), settings=MACHINE_SETTINGS)
