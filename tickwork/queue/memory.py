"""The run queue in process memory: the prototype's ``queue.Queue`` grown up.

Same contract as the Redis queue (the same tests run against both), for the
single-process local mode (``--queue memory``) where watcher and worker share
one event loop. Nothing survives the process, which is the point of Redis.

Over 400 lines: a second, complete implementation of the queue contract (leases,
retries, dead letters, fair share, rate limits), one state machine whose parts
read each other's fields; split further than its ready lists (tickwork.queue.ready)
and concurrency keys (tickwork.queue.keyed), it would hide that from whoever checks
it against the Redis scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace

from tickwork.core.text import cap
from tickwork.queue.keyed import ConcurrencyKeys
from tickwork.queue.messages import (
    Claim,
    DeadLetter,
    Depth,
    EnqueueOutcome,
    FairShare,
    RunLocation,
    RunMessage,
)
from tickwork.queue.ready import ReadyRuns, level

DEFAULT_DEDUP_SECONDS = 6 * 3600
#: The most runs one claim parks or delays for their namespace's limits (as CLAIM's).
SET_ASIDE_LIMIT = 1000


class MemoryRunQueue:
    """A :class:`~tickwork.queue.protocol.RunQueue` in one process. ``clock`` is injectable."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        dedup_seconds: float = DEFAULT_DEDUP_SECONDS,
        dedup_max_runs: int = 1_000_000,
        dead_max: int = 10_000,
        dead_retention_seconds: float = 7 * 86400,
    ) -> None:
        """The bounds are RedisSettings' (which see)."""
        self._clock = clock
        self._dedup_seconds = dedup_seconds
        self._dedup_max = dedup_max_runs
        self._dead_max = dead_max
        self._dead_retention = dead_retention_seconds
        self._messages: dict[str, RunMessage] = {}
        # appendleft = enqueue, pop = claim; a run's list is its message's priority's
        self._ready = ReadyRuns(lambda run_id: level(self._messages[run_id].priority))
        self._cancelled: set[str] = set()
        self._inflight: dict[str, float] = {}  # run ID -> lease deadline
        self._leases: dict[str, str] = {}
        self._delayed: dict[str, float] = {}
        self._dead: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._done: OrderedDict[str, float] = OrderedDict()  # in acknowledgement order
        # Fair shares (see tickwork.queue.keys): counted runs, parked runs, paces.
        self._owners: dict[str, str] = {}  # run ID -> namespace, for counted runs
        self._shares: Counter[str] = Counter()  # namespace -> its runs in flight
        self._parked: dict[str, deque[str]] = {}  # appendleft = park, pop = return
        self._pace: dict[str, float] = {}  # namespace -> when its next run is due (GCRA)
        self._paced: set[str] = set()  # runs delayed by their rate: start reserved
        self._consumers: dict[str, tuple[float, int]] = {}  # consumer -> (alive until, slots)
        self._keys = ConcurrencyKeys()  # concurrency keys: places held, runs waiting
        self._notices: dict[str, float] = {}  # notice -> when it was told
        self._notice_rate: dict[str, tuple[int, int]] = {}  # namespace -> (minute, count)
        self._wakeup = asyncio.Condition()
        self._tokens = itertools.count(1)

    async def _notify(self) -> None:
        async with self._wakeup:
            self._wakeup.notify_all()

    def _forget_old_done(self, now: float) -> None:
        while self._done and next(iter(self._done.values())) <= now - self._dedup_seconds:
            self._done.popitem(last=False)
        while len(self._done) > self._dedup_max:
            self._done.popitem(last=False)

    async def enqueue(self, message: RunMessage) -> EnqueueOutcome:
        run_id = message.run_id
        now = self._clock()
        if run_id in self._messages:
            if run_id in self._dead:
                return EnqueueOutcome.DEAD
            if run_id in self._cancelled:
                return EnqueueOutcome.ALREADY_DONE
            return EnqueueOutcome.ALREADY_QUEUED
        self._forget_old_done(now)
        if run_id in self._done:
            return EnqueueOutcome.ALREADY_DONE
        self._messages[run_id] = replace(message, enqueued_at=now)
        self._ready.appendleft(run_id)
        await self._notify()
        return EnqueueOutcome.ENQUEUED

    def _set_aside(self, message: RunMessage, fair: FairShare, now: float) -> bool:
        """Park or delay a run over its namespace's limits; False if it may start."""
        run_id, namespace = message.run_id, message.namespace
        limit = fair.limit(namespace)
        if limit > 0 and self._shares[namespace] >= limit:
            self._parked.setdefault(namespace, deque()).appendleft(run_id)
            return True
        reserved = run_id in self._paced
        self._paced.discard(run_id)
        rate = fair.rate(namespace)
        if rate > 0 and not reserved:
            interval = 60 / rate
            due = max(self._pace.get(namespace, 0.0), now)
            self._pace[namespace] = due + interval
            start = due - (60 - interval)
            if start > now:
                self._delayed[run_id] = start
                self._paced.add(run_id)
                return True
        return False

    def _claim_now(
        self, consumer: str, lease_seconds: float, count: int, fair: FairShare | None
    ) -> list[Claim]:
        claims: list[Claim] = []
        now = self._clock()
        deadline = now + lease_seconds
        set_aside = 0
        while self._ready and len(claims) < count and set_aside < SET_ASIDE_LIMIT:
            run_id = self._ready.pop()
            if run_id in self._cancelled:
                self._cancelled.discard(run_id)
                self._paced.discard(run_id)
                self._messages.pop(run_id, None)
                self._done[run_id] = self._clock()  # a cancelled run counts as done
                continue
            message = self._messages.get(run_id)
            if message is None:
                continue
            if self._keys.full(message):  # before the fair share, as CLAIM
                claims.append(self._hold(consumer, message, deadline, waits_for_key=True))
                continue
            if fair is not None:
                if self._set_aside(message, fair, now):
                    set_aside += 1
                    continue
                self._owners[run_id] = message.namespace
                self._shares[message.namespace] += 1
            self._keys.take(message)
            claims.append(self._hold(consumer, message, deadline))
        return claims

    def _hold(
        self, consumer: str, message: RunMessage, deadline: float, *, waits_for_key: bool = False
    ) -> Claim:
        token = f"{consumer}:{next(self._tokens)}"
        self._inflight[message.run_id] = deadline
        self._leases[message.run_id] = token
        return Claim(message=message, token=token, waits_for_key=waits_for_key)

    def _free_slot(self, run_id: str) -> bool:
        """The run left the in-flight set: free its concurrency key's place and its
        namespace's slot, and return the key's oldest waiting run and the namespace's
        oldest parked run to the claim end; True if one returned."""
        back = [self._keys.free(run_id)]
        namespace = self._owners.pop(run_id, None)
        if namespace is not None:
            self._shares[namespace] -= 1
            if self._shares[namespace] <= 0:
                del self._shares[namespace]
            if parked := self._parked.get(namespace):
                back.append(parked.pop())
                if not parked:
                    del self._parked[namespace]
        returned = [run for run in back if run is not None]
        self._ready.extend(returned)
        return bool(returned)

    async def register_consumer(self, consumer: str, slots: int, *, ttl_seconds: float) -> int:
        now = self._clock()
        self._consumers = {name: entry for name, entry in self._consumers.items() if entry[0] > now}
        if slots > 0:
            self._consumers[consumer] = (now + ttl_seconds, slots)
        else:
            self._consumers.pop(consumer, None)
        return sum(slots for _, slots in self._consumers.values())

    async def rebalance(self, fair_share: FairShare | None, *, limit: int = 1000) -> int:
        self._shares = Counter(
            ns for run_id, ns in self._owners.items() if run_id in self._inflight
        )
        self._owners = {r: ns for r, ns in self._owners.items() if r in self._inflight}
        moved = 0
        for namespace, parked in list(self._parked.items()):
            room = len(parked)
            if fair_share is not None and (most := fair_share.limit(namespace)) > 0:
                room = min(room, most - self._shares[namespace])
            batch = [parked.pop() for _ in range(max(0, min(room, limit - moved)))]
            self._ready.extend(reversed(batch))  # the oldest last: it is claimed first
            moved += len(batch)
            if not parked:
                del self._parked[namespace]
        keyed = self._keys.rebalance(self._inflight, self._messages.get)
        self._ready.extend(keyed)
        moved += len(keyed)
        if moved:
            await self._notify()
        return moved

    async def claim(
        self,
        *,
        consumer: str,
        lease_seconds: float,
        count: int = 1,
        wait_seconds: float = 0.0,
        fair_share: FairShare | None = None,
    ) -> list[Claim]:
        claims = self._claim_now(consumer, lease_seconds, count, fair_share)
        if claims or wait_seconds <= 0:
            return claims
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_seconds), self._wakeup:
                while not (claims := self._claim_now(consumer, lease_seconds, count, fair_share)):
                    await self._wakeup.wait()
        return claims

    def _holds(self, claim: Claim) -> bool:
        return self._leases.get(claim.run_id) == claim.token

    def _drop_lease(self, run_id: str) -> bool:
        """Take the run out of flight; True if a parked run returned to ready."""
        self._inflight.pop(run_id, None)
        self._leases.pop(run_id, None)
        return self._free_slot(run_id)

    async def heartbeat(self, claim: Claim, *, lease_seconds: float) -> bool:
        if not self._holds(claim):
            return False
        self._inflight[claim.run_id] = self._clock() + lease_seconds
        return True

    async def ack(self, claim: Claim) -> bool:
        if not self._holds(claim):
            return False
        now = self._clock()
        returned = self._drop_lease(claim.run_id)
        self._messages.pop(claim.run_id, None)
        self._done.pop(claim.run_id, None)
        self._done[claim.run_id] = now
        self._forget_old_done(now)
        if returned:
            await self._notify()
        return True

    async def retry(self, claim: Claim, *, delay_seconds: float, attempt: int) -> bool:
        if not self._holds(claim):
            return False
        returned = self._drop_lease(claim.run_id)
        self._messages[claim.run_id] = replace(self._messages[claim.run_id], attempt=attempt)
        self._delayed[claim.run_id] = self._clock() + max(0.0, delay_seconds)
        if returned:
            await self._notify()
        return True

    async def bury(self, claim: Claim, *, error: str) -> bool:
        if not self._holds(claim):
            return False
        returned = self._drop_lease(claim.run_id)
        now = self._clock()
        self._dead[claim.run_id] = (now, cap(error))
        while self._dead and (
            len(self._dead) > self._dead_max
            or next(iter(self._dead.values()))[0] <= now - self._dead_retention
        ):
            gone, _ = self._dead.popitem(last=False)
            self._messages.pop(gone, None)
        if returned:
            await self._notify()
        return True

    async def release(self, claim: Claim) -> bool:
        if not self._holds(claim):
            return False
        self._drop_lease(claim.run_id)
        self._ready.append(claim.run_id)
        await self._notify()
        return True

    async def wait_for_key(self, claim: Claim) -> bool:
        if not self._holds(claim):
            return False
        self._drop_lease(claim.run_id)
        message = self._messages[claim.run_id] = replace(self._messages[claim.run_id], waited=True)
        if self._keys.full(message):
            self._keys.wait(message)
            return True
        self._ready.append(claim.run_id)
        await self._notify()
        return True

    async def admit_notice(self, notice: str, namespace: str, *, per_minute: int) -> str:
        now = self._clock()
        self._notices = {n: t for n, t in self._notices.items() if t > now - 86400}
        if notice in self._notices:
            return "duplicate"
        minute = int(now // 60)
        held_minute, count = self._notice_rate.get(namespace, (minute, 0))
        count = count if held_minute == minute else 0
        if count >= per_minute:
            return "limited"
        self._notice_rate[namespace] = (minute, count + 1)
        self._notices[notice] = now
        return "send"

    async def reap_expired(self, *, limit: int = 1000) -> int:
        now = self._clock()
        expired = sorted((d, r) for r, d in self._inflight.items() if d <= now)[:limit]
        for _, run_id in expired:
            self._drop_lease(run_id)
            message = self._messages[run_id]
            self._messages[run_id] = replace(
                message, attempt=message.attempt + 1, redeliveries=message.redeliveries + 1
            )
            self._ready.append(run_id)
        if expired:
            await self._notify()
        return len(expired)

    async def promote_due(self, *, limit: int = 1000) -> int:
        now = self._clock()
        due = sorted((t, r) for r, t in self._delayed.items() if t <= now)[:limit]
        for _, run_id in due:
            del self._delayed[run_id]
            self._ready.append(run_id)
        if due:
            await self._notify()
        return len(due)

    async def cancel(self, run_id: str) -> bool:
        if run_id not in self._messages or run_id in self._inflight or run_id in self._dead:
            return False
        if self._delayed.pop(run_id, None) is not None:
            del self._messages[run_id]
            self._paced.discard(run_id)
            self._done[run_id] = self._clock()  # a cancelled run counts as done
            return True
        if run_id in self._cancelled:
            return False
        self._cancelled.add(run_id)
        return True

    async def locate(self, run_id: str) -> RunLocation | None:
        if run_id not in self._messages:
            return RunLocation.DONE if run_id in self._done else None
        places = (
            (self._inflight, RunLocation.IN_FLIGHT),
            (self._delayed, RunLocation.DELAYED),
            (self._dead, RunLocation.DEAD),
            (self._cancelled, RunLocation.CANCELLED),
        )
        for place, location in places:
            if run_id in place:
                return location
        return RunLocation.READY

    def _oldest_waiting(self) -> float | None:
        """When the first was enqueued of the run next to be claimed and each namespace's
        next parked run (the Redis queue reads the longest parked: one of them)."""
        heads = self._ready.heads()
        heads += [parked[-1] for parked in self._parked.values() if parked]
        times = [
            self._messages[run_id].enqueued_at
            for run_id in heads
            if run_id not in self._cancelled and run_id in self._messages
        ]
        return min((t for t in times if t is not None), default=None)

    async def depth(self) -> Depth:
        oldest = next(iter(self._dead.values()))[0] if self._dead else None
        waiting = self._oldest_waiting()
        return Depth(
            ready=len(self._ready) - len(self._cancelled),
            in_flight=len(self._inflight),
            delayed=len(self._delayed),
            dead=len(self._dead),
            remembered=len(self._done),
            oldest_dead_seconds=max(0.0, self._clock() - oldest) if oldest is not None else 0.0,
            oldest_waiting_seconds=max(0.0, self._clock() - waiting)
            if waiting is not None
            else 0.0,
            parked=sum(len(parked) for parked in self._parked.values()),
            ready_high=self._ready.count("H"),
            ready_low=self._ready.count("L"),
            waiting_for_key=self._keys.waiting(),
        )

    async def dead_letters(self, *, limit: int = 100) -> list[DeadLetter]:
        newest = sorted(self._dead.items(), key=lambda item: item[1][0], reverse=True)[:limit]
        return [
            DeadLetter(message=self._messages[run_id], error=error, failed_at=when)
            for run_id, (when, error) in newest
        ]

    async def inspect_dead(self, run_id: str) -> DeadLetter | None:
        if run_id not in self._dead:
            return None
        when, error = self._dead[run_id]
        return DeadLetter(message=self._messages[run_id], error=error, failed_at=when)

    async def requeue_dead(self, run_id: str | None = None) -> int:
        ids = [run_id] if run_id is not None else list(self._dead)
        moved = 0
        for one in ids:
            if self._dead.pop(one, None) is None:
                continue
            self._messages[one] = replace(
                self._messages[one], attempt=1, redeliveries=0, requeued=True
            )
            self._ready.appendleft(one)
            moved += 1
        if moved:
            await self._notify()
        return moved

    async def purge_dead(self, run_id: str | None = None) -> int:
        ids = [run_id] if run_id is not None else list(self._dead)
        removed = 0
        for one in ids:
            if self._dead.pop(one, None) is not None:
                self._messages.pop(one, None)
                removed += 1
        return removed

    async def close(self) -> None:
        return None
