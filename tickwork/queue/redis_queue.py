"""The run queue on Redis: every multi-key change is one Lua script (see :mod:`.keys`).

Over 400 lines: one method per queue operation, each the same few lines around its
script; split, the operations would share the connection and scripts across files.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar, cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tickwork.core.text import cap
from tickwork.queue import keys as scripts
from tickwork.queue.connection import explain, unavailable
from tickwork.queue.keys import QueueKeys
from tickwork.queue.messages import (
    Claim,
    DeadLetter,
    Depth,
    EnqueueOutcome,
    FairShare,
    RunLocation,
    RunMessage,
)
from tickwork.queue.settings import RedisSettings

_BATCH = 1000
#: The most runs one coalesced enqueue or ack script call carries.
_COALESCE_LIMIT = 500

T = TypeVar("T")
R = TypeVar("R")


class _Coalescer(Generic[T, R]):
    """Turns the calls made in one turn of the event loop into one script call.

    A worker finishing ten runs at once, or an operator publishing a thousand due
    runs, would otherwise pay one round trip each. Every caller still awaits its
    own result, which exists only once Redis has applied the whole batch: nothing
    is acknowledged early, so at-least-once holds exactly as for single calls.
    """

    def __init__(self, send: Callable[[list[T]], Awaitable[list[R]]]) -> None:
        self._send = send
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._flushes: set[asyncio.Task[None]] = set()

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, future))
        if len(self._waiting) == 1:
            # Let every caller of this turn add itself, then send them together.
            loop.call_soon(self._start_flush)
        return await future

    def _start_flush(self) -> None:
        task = asyncio.create_task(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self) -> None:
        while self._waiting:
            batch = self._waiting[:_COALESCE_LIMIT]
            del self._waiting[:_COALESCE_LIMIT]
            try:
                results = await self._send([item for item, _ in batch])
            except BaseException as exc:  # every caller hears of the failure
                cancelled = isinstance(exc, asyncio.CancelledError)
                if cancelled:  # shutting down: nobody will send the rest either
                    batch += self._waiting
                    self._waiting = []
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if cancelled:
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)


class RedisRunQueue:
    """A :class:`~tickwork.queue.protocol.RunQueue` on one Redis (or Redis Cluster slot)."""

    def __init__(self, client: aioredis.Redis, settings: RedisSettings) -> None:
        self._client = client
        self._settings = settings
        self.keys = QueueKeys(prefix=settings.key_prefix, queue=settings.queue)
        register = client.register_script
        self._enqueue = register(scripts.ENQUEUE)
        self._claim = register(scripts.CLAIM)
        self._heartbeat = register(scripts.HEARTBEAT)
        self._ack = register(scripts.ACK)
        self._retry = register(scripts.RETRY)
        self._bury = register(scripts.BURY)
        self._release = register(scripts.RELEASE)
        self._wait_key = register(scripts.WAIT_KEY)
        self._notice = register(scripts.NOTICE)
        self._reap = register(scripts.REAP)
        self._promote = register(scripts.PROMOTE)
        self._rebalance = register(scripts.REBALANCE)
        self._register = register(scripts.REGISTER)
        self._cancel = register(scripts.CANCEL)
        self._locate = register(scripts.LOCATE)
        self._oldest_waiting = register(scripts.OLDEST_WAITING)
        self._requeue_dead = register(scripts.REQUEUE_DEAD)
        self._purge_dead = register(scripts.PURGE_DEAD)
        self._enqueues: _Coalescer[RunMessage, str] = _Coalescer(self._enqueue_many)
        self._acks: _Coalescer[Claim, int] = _Coalescer(self._ack_many)

    async def _call(
        self, script: Callable[..., Awaitable[Any]], keys: list[str], args: list[Any]
    ) -> Any:
        with self._translated():
            return await script(keys=keys, args=args)

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Redis being away or refusing (out of memory, read-only, not persisting) is
        QueueUnavailableError, which every caller handles by trying again later;
        anything else (a script bug) stays what it is."""
        try:
            yield
        except RedisError as exc:
            if unavailable(exc):
                raise explain(exc, self._settings) from None
            raise

    async def enqueue(self, message: RunMessage) -> EnqueueOutcome:
        return EnqueueOutcome(await self._enqueues.submit(message))

    async def _enqueue_many(self, messages: list[RunMessage]) -> list[str]:
        k = self.keys
        args: list[Any] = [self._settings.dedup_seconds]
        for message in messages:
            args += [message.run_id, message.to_json()]
        outcomes = await self._call(
            self._enqueue, [k.messages, k.ready, k.dead, k.done, k.cancelled, k.notify], args
        )
        return [str(outcome) for outcome in outcomes]

    async def claim(
        self,
        *,
        consumer: str,
        lease_seconds: float,
        count: int = 1,
        wait_seconds: float = 0.0,
        fair_share: FairShare | None = None,
    ) -> list[Claim]:
        k = self.keys
        fair = fair_share.to_json() if fair_share is not None else ""
        keys = [
            k.ready,
            k.inflight,
            k.leases,
            k.messages,
            k.cancelled,
            k.done,
            k.notify,
            k.owners,
            k.shares,
            k.parked,
            k.delayed,
            k.pace,
            k.paced,
            k.parked_runs,
            k.key_owners,
            k.key_held,
            k.key_waiting,
        ]
        deadline = time.monotonic() + wait_seconds
        while True:
            prefix = f"{consumer}:{uuid.uuid4().hex[:12]}"
            sent_at = time.monotonic()
            raw = await self._call(self._claim, keys, [count, lease_seconds, prefix, fair])
            if raw:
                return [
                    Claim(
                        message=RunMessage.from_json(raw[i]),
                        token=raw[i + 1],
                        sent_at=sent_at,
                        waits_for_key=bool(raw[i + 2]),
                    )
                    for i in range(0, len(raw), 3)
                ]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            # Sleep in Redis until an enqueue (or a reaped/promoted run) wakes us.
            timeout = min(remaining, self._settings.poll_seconds)
            with self._translated():
                await self._client.blpop([k.notify], timeout=timeout)

    async def heartbeat(self, claim: Claim, *, lease_seconds: float) -> bool:
        k = self.keys
        done = await self._call(
            self._heartbeat, [k.inflight, k.leases], [claim.run_id, claim.token, lease_seconds]
        )
        return bool(done)

    async def ack(self, claim: Claim) -> bool:
        return bool(await self._acks.submit(claim))

    async def _ack_many(self, claims: list[Claim]) -> list[int]:
        k = self.keys
        args: list[Any] = [self._settings.dedup_seconds, self._settings.dedup_max_runs]
        for claim in claims:
            args += [claim.run_id, claim.token]
        done = await self._call(
            self._ack, [k.inflight, k.leases, k.messages, k.done, *k.slots], args
        )
        return [int(flag) for flag in done]

    async def retry(self, claim: Claim, *, delay_seconds: float, attempt: int) -> bool:
        k = self.keys
        done = await self._call(
            self._retry,
            [k.inflight, k.leases, k.messages, k.delayed, *k.slots],
            [claim.run_id, claim.token, max(0.0, delay_seconds), attempt],
        )
        return bool(done)

    async def bury(self, claim: Claim, *, error: str) -> bool:
        k = self.keys
        done = await self._call(
            self._bury,
            [k.inflight, k.leases, k.dead, k.dead_errors, k.messages, *k.slots],
            [
                claim.run_id,
                claim.token,
                cap(error),
                self._settings.dead_max,
                self._settings.dead_retention_seconds,
            ],
        )
        return bool(done)

    async def release(self, claim: Claim) -> bool:
        k = self.keys
        done = await self._call(
            self._release,
            [k.inflight, k.leases, k.ready, k.notify, *k.slots],
            [claim.run_id, claim.token],
        )
        return bool(done)

    async def wait_for_key(self, claim: Claim) -> bool:
        k = self.keys
        done = await self._call(
            self._wait_key,
            [k.inflight, k.leases, k.messages, k.ready, k.notify, k.key_held, k.key_waiting],
            [claim.run_id, claim.token],
        )
        return bool(done)

    async def admit_notice(self, notice: str, namespace: str, *, per_minute: int) -> str:
        k = self.keys
        answer = await self._call(
            self._notice, [k.notices, k.notice_rate], [notice, namespace, per_minute, 86400]
        )
        return answer.decode() if isinstance(answer, bytes) else str(answer)

    async def reap_expired(self, *, limit: int = _BATCH) -> int:
        k = self.keys
        count = await self._call(
            self._reap,
            [k.inflight, k.leases, k.messages, k.ready, k.notify, k.server, *k.slots],
            [limit, self._settings.reap_grace_seconds],
        )
        return int(count)

    async def promote_due(self, *, limit: int = _BATCH) -> int:
        k = self.keys
        count = await self._call(self._promote, [k.delayed, k.ready, k.notify, k.messages], [limit])
        return int(count)

    async def cancel(self, run_id: str) -> bool:
        k = self.keys
        done = await self._call(
            self._cancel,
            [k.messages, k.inflight, k.delayed, k.dead, k.cancelled, k.done, k.paced],
            [run_id],
        )
        return bool(done)

    async def register_consumer(self, consumer: str, slots: int, *, ttl_seconds: float) -> int:
        k = self.keys
        total = await self._call(
            self._register, [k.consumers, k.consumer_slots], [consumer, slots, ttl_seconds]
        )
        return int(total)

    async def rebalance(self, fair_share: FairShare | None, *, limit: int = _BATCH) -> int:
        k = self.keys
        fair = fair_share.to_json() if fair_share is not None else ""
        moved = await self._call(
            self._rebalance,
            [*k.slots[:3], k.inflight, *k.slots[3:]],
            [fair, limit],
        )
        return int(moved)

    async def locate(self, run_id: str) -> RunLocation | None:
        k = self.keys
        where = await self._call(
            self._locate,
            [k.messages, k.inflight, k.delayed, k.dead, k.done, k.cancelled],
            [run_id],
        )
        return RunLocation(where) if where else None

    async def depth(self) -> Depth:
        k = self.keys
        with self._translated():
            async with self._client.pipeline(transaction=True) as pipe:
                [pipe.llen(ready) for ready in (k.ready_high, k.ready, k.ready_low)]
                pipe.scard(k.cancelled)
                pipe.zcard(k.inflight)
                pipe.zcard(k.delayed)
                pipe.zcard(k.dead)
                pipe.zcard(k.done)
                pipe.zrange(k.dead, 0, 0, withscores=True)
                pipe.time()
                pipe.info("memory")
                pipe.hvals(k.parked)
                pipe.hvals(k.key_waiting)
                await self._oldest_waiting(
                    keys=[k.ready, k.messages, k.parked_runs, k.cancelled], client=pipe
                )
                (
                    ready_high,
                    ready_normal,
                    ready_low,
                    cancelled,
                    in_flight,
                    delayed,
                    dead,
                    remembered,
                    oldest,
                    now,
                    memory,
                    parked,
                    keyed,
                    waiting,
                ) = await pipe.execute()
        clock = now[0] + now[1] / 1e6
        return Depth(
            ready=max(0, ready_high + ready_normal + ready_low - cancelled),
            in_flight=in_flight,
            delayed=delayed,
            dead=dead,
            remembered=remembered,
            oldest_dead_seconds=max(0.0, clock - oldest[0][1]) if oldest else 0.0,
            oldest_waiting_seconds=max(0.0, clock - float(waiting)) if waiting else 0.0,
            memory_used_bytes=int(memory.get("used_memory", 0)),
            memory_max_bytes=int(memory.get("maxmemory", 0)),
            parked=sum(int(n) for n in parked),
            ready_high=ready_high,
            ready_low=ready_low,
            waiting_for_key=sum(int(n) for n in keyed),
        )

    async def _dead_letters(self, pairs: list[tuple[str, float]]) -> list[DeadLetter]:
        if not pairs:
            return []
        ids, k = [run_id for run_id, _ in pairs], self.keys
        with self._translated():
            messages = cast("list[str | None]", await self._client.hmget(k.messages, ids))
            errors = cast("list[str | None]", await self._client.hmget(k.dead_errors, ids))
        return [
            DeadLetter(message=RunMessage.from_json(raw), error=error or "", failed_at=score)
            for (_, score), raw, error in zip(pairs, messages, errors, strict=True)
            if raw is not None
        ]

    async def dead_letters(self, *, limit: int = 100) -> list[DeadLetter]:
        with self._translated():
            pairs = cast(
                "list[tuple[str, float]]",
                await self._client.zrevrange(self.keys.dead, 0, limit - 1, withscores=True),
            )
        return await self._dead_letters([(str(run_id), float(score)) for run_id, score in pairs])

    async def inspect_dead(self, run_id: str) -> DeadLetter | None:
        with self._translated():
            score = await self._client.zscore(self.keys.dead, run_id)
        if score is None:
            return None
        found = await self._dead_letters([(run_id, float(score))])
        return found[0] if found else None

    async def requeue_dead(self, run_id: str | None = None) -> int:
        k = self.keys
        return await self._in_batches(
            self._requeue_dead, [k.dead, k.dead_errors, k.messages, k.ready, k.notify], run_id
        )

    async def purge_dead(self, run_id: str | None = None) -> int:
        k = self.keys
        return await self._in_batches(self._purge_dead, [k.dead, k.dead_errors, k.messages], run_id)

    async def _in_batches(
        self, script: Callable[..., Awaitable[Any]], keys: list[str], run_id: str | None
    ) -> int:
        if run_id is not None:
            return int(await self._call(script, keys, [run_id, 1]))
        total = 0
        while moved := int(await self._call(script, keys, ["", _BATCH])):
            total += moved
        return total

    async def close(self) -> None:
        await self._client.aclose()
