"""The worker loop: keep N slots busy with claimed runs; drain on SIGTERM.

A slot is an execution: a run holds it from its claim until its task has ended,
then waits for its record's write and its ack without one, at most
``finishing_per_slot`` such runs per slot (the worker setting, 16 by default), so
that a burst's next runs start while the API server takes the last ones' records
(docs/performance.md, "Slots free when a task ends"); their leases are renewed all
along. With 0 a run holds its slot until its outcome is written and acknowledged.

On shutdown the worker stops claiming at once, lets in-flight runs finish
for ``grace_seconds``, then cancels the runs still executing — each hands its run
back to the queue (no attempt is counted), so another worker takes it immediately
instead of waiting for the lease to expire — and gives the runs whose task has
ended ``FINISH_SECONDS`` more to write their record (handed back, they would run
again).

Under a fair share of the slots (``FairShare.share``), the worker notes its slots
in the queue every maintenance round (alive for a lease's length) and claims under
that share of the slots of every worker alive now: one namespace never holds more
than its share of the slots that exist, however many the autoscaler adds later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue.messages import Claim, FairShare
from tickwork.queue.protocol import RunQueue

logger = logging.getLogger(__name__)

#: On shutdown, how long runs whose task ended may still write their record after the
#: drain's ``grace_seconds``, while the runs still executing are handed back.
FINISH_SECONDS = 10.0


class ClaimRunner(Protocol):
    """What carries a claim to its end (:class:`tickwork_worker.runner.Runner`):
    ``ended()`` once nothing more executes for the run."""

    async def process(self, claim: Claim, ended: Callable[[], None] = ...) -> None: ...


class Worker:
    def __init__(
        self,
        *,
        queue: RunQueue,
        runner: ClaimRunner,
        name: str,
        concurrency: int,
        lease_seconds: float,
        claim_wait_seconds: float,
        maintain_seconds: float,
        grace_seconds: float,
        fair_share: FairShare | None = None,
        finishing_per_slot: int = 0,
    ) -> None:
        self.queue = queue
        self.runner = runner
        self.name = name
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.claim_wait_seconds = claim_wait_seconds
        self.maintain_seconds = maintain_seconds
        self.grace_seconds = grace_seconds
        self.fair_share = fair_share
        self.finishing_per_slot = finishing_per_slot
        self.claim_share = fair_share.under(concurrency) if fair_share else None
        """The limits claims are made under now (a share resolved for the live slots)."""
        self.in_flight: set[asyncio.Task[None]] = set()
        """Every claim in hand: executing, or ended and being written."""
        self._executing: set[asyncio.Task[None]] = set()
        """The claims that hold a slot."""
        self._freed = asyncio.Event()
        self.last_loop = time.monotonic()
        """When the claim loop last went round (liveness)."""

    async def run(self, stop: asyncio.Event) -> None:
        with contextlib.suppress(QueueUnavailableError):
            await self._register()
        maintainer = asyncio.create_task(self._maintain(stop))
        try:
            await self._claim_loop(stop)
        finally:
            maintainer.cancel()
            await self._drain()
            with contextlib.suppress(QueueUnavailableError):
                await self._register(going=True)  # the others' share shrinks at once

    async def _register(self, *, going: bool = False) -> None:
        """Note this worker's slots in the queue and claim under the share of every
        live worker's slots (only under a fair share of the slots)."""
        if self.fair_share is None or not self.fair_share.share:
            return
        live = await self.queue.register_consumer(
            self.name, 0 if going else self.concurrency, ttl_seconds=self.lease_seconds
        )
        resolved = self.fair_share.under(max(live, self.concurrency))
        if not going and resolved != self.claim_share:
            logger.info(
                "%d slot(s) alive: up to %d run(s) of one namespace in flight",
                live,
                resolved.max_in_flight,
            )
            self.claim_share = resolved

    async def _claim_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.last_loop = time.monotonic()
            free = self.free_slots()
            if free <= 0:
                # Every slot busy (long runs): wait for one, but go round regularly,
                # or liveness would take a busy worker for a stuck one and kill it.
                self._freed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.claim_wait_seconds):
                        await self._freed.wait()
                continue
            claiming = asyncio.ensure_future(
                self.queue.claim(
                    consumer=self.name,
                    lease_seconds=self.lease_seconds,
                    count=free,
                    wait_seconds=self.claim_wait_seconds,
                    fair_share=self.claim_share,
                )
            )
            try:
                claims = await _unless_stopped(claiming, stop, grace=self.claim_wait_seconds + 1)
            except QueueUnavailableError as exc:
                logger.warning("cannot claim runs: %s", exc)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):  # back off, wake on stop
                        await stop.wait()
                continue
            if claims is None:
                logger.info("stopped while a claim still waited for Redis: given up")
                return
            if stop.is_set():
                for claim in claims:  # claimed during shutdown: hand straight back
                    await self.queue.release(claim)
                return
            for claim in claims:
                self._start(claim)

    def free_slots(self) -> int:
        """How many more runs the worker may claim now."""
        if not self.finishing_per_slot:
            return self.concurrency - len(self.in_flight)
        finishing = len(self.in_flight) - len(self._executing)
        return min(
            self.concurrency - len(self._executing),
            self.concurrency * self.finishing_per_slot - finishing,
        )

    def _start(self, claim: Claim) -> None:
        task = asyncio.create_task(self.runner.process(claim, ended=self._ended), name=claim.run_id)
        self.in_flight.add(task)
        self._executing.add(task)
        task.add_done_callback(self._finished)

    def _ended(self) -> None:
        """Called by the run's own task once nothing more executes: its slot is free
        (with ``finishing_per_slot``), its record not written yet."""
        task = asyncio.current_task()
        if task in self._executing:
            self._executing.discard(task)
            if self.finishing_per_slot:
                self._freed.set()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.in_flight.discard(task)
        self._executing.discard(task)
        self._freed.set()

    async def _maintain(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(QueueUnavailableError):
                await self.queue.reap_expired()
                await self.queue.promote_due()
                await self._register()
                # Parked runs of a namespace whose limit was raised (or lifted: a worker
                # without a fair share returns every parked run) go back to ready.
                await self.queue.rebalance(self.claim_share)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.maintain_seconds):
                    await stop.wait()

    async def _drain(self) -> None:
        if not self.in_flight:
            return
        logger.info("draining %d run(s) for up to %.0fs", len(self.in_flight), self.grace_seconds)
        _, pending = await asyncio.wait(self.in_flight, timeout=self.grace_seconds)
        # A run still executing is handed back (no attempt counted). One whose task has
        # ended is only writing its record: handed back, it would run again, so it gets
        # up to FINISH_SECONDS more while the others go back (the chart's grace period
        # leaves 15 s beyond the drain).
        executing = [task for task in pending if task in self._executing]
        for task in executing:
            task.cancel()  # the runner hands the run back to the queue
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=FINISH_SECONDS)
        for task in late:
            task.cancel()  # its record not written in time: handed back after all
        if late:
            await asyncio.wait(late, timeout=2)
        logger.info("handed %d unfinished run(s) back to the queue", len(late | set(executing)))


async def _unless_stopped(
    call: asyncio.Future[list[Claim]], stop: asyncio.Event, *, grace: float
) -> list[Claim] | None:
    """The claim's result; once ``stop`` is set, ``grace`` seconds more, then None.

    A claim answers within its wait while Redis is up, and what it claims during a
    shutdown is handed straight back. A claim that retries an unreachable Redis
    (connections refused, or a Redis Pod gone with its address: each attempt waits
    for its connect timeout) would hold the shutdown for up to a minute, past the
    Pod's grace period. Given up, it has claimed nothing, or its runs stay in flight
    under their lease until the queue's reaper hands them to another worker: not
    executed here, and not lost.
    """
    stopping = asyncio.ensure_future(stop.wait())
    either: list[asyncio.Future[Any]] = [call, stopping]
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not call.done():
            await asyncio.wait({call}, timeout=grace)
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError, QueueUnavailableError):
                await call
            return None
        return call.result()
    finally:
        stopping.cancel()
        if not call.done():  # this task was cancelled: so is the call
            call.cancel()
