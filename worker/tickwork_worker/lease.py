"""A claim's lease, as far as this worker can prove it holds it: the heartbeat that
renews it, and waiting for a task under it. A run whose lease is lost is stopped
and nothing more is written for it: Redis has given it (or will give it) to
another worker as a new attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tickwork.queue.messages import Claim
from tickwork.queue.protocol import RunQueue

logger = logging.getLogger(__name__)

#: How long a task cancelled for a lost lease gets to end before its slot is reused.
STOP_SECONDS = 5.0


class LeaseLostError(Exception):
    """The lease expired and the run went to another worker: stop, write nothing."""


class Lease:
    """A claim's lease as far as this worker can prove it holds it.

    Held until ``until`` (``time.monotonic()``): when the claim or the last renewal
    that Redis confirmed was *sent*, plus the lease, less a margin. Redis set its
    deadline later than that, so no one else can have claimed the run before. Past
    it, or once Redis says the token is gone, the lease is lost for good.
    """

    def __init__(self, sent_at: float, seconds: float) -> None:
        self.seconds = seconds
        self.margin = min(2.0, seconds / 5)
        self.until = sent_at + seconds - self.margin
        self.lost = asyncio.Event()
        self.why = ""

    def renewed(self, sent_at: float) -> None:
        self.until = max(self.until, sent_at + self.seconds - self.margin)

    def lose(self, why: str) -> None:
        if not self.lost.is_set():
            self.why = why
            self.lost.set()

    def check(self) -> None:
        """Raise LeaseLostError unless the lease is provably still held."""
        if time.monotonic() >= self.until:
            self.lose(f"not renewed within its {self.seconds:g}s")
        if self.lost.is_set():
            raise LeaseLostError(self.why)


async def heartbeat(queue: RunQueue, claim: Claim, lease: Lease) -> None:
    """Renew the lease every third of it; after a failed renewal try again every
    second. A renewal that has not landed when the lease runs out, or that Redis
    refuses (the token is gone), loses the lease."""
    interval = lease.seconds / 3
    pause = interval
    while True:
        # The renewal period, but never past the moment the lease runs out.
        await asyncio.sleep(max(0.0, min(pause, lease.until - time.monotonic())))
        sent_at = time.monotonic()
        if sent_at >= lease.until:
            lease.lose(f"Redis did not confirm a renewal within {lease.seconds:g}s")
            return
        try:
            # asyncio.timeout, not wait_for: on Python 3.11, wait_for returns a renewal
            # that lands as the attempt cancels this task and drops the cancellation,
            # and the lease of a run given up is renewed until the worker exits.
            async with asyncio.timeout(lease.until - sent_at):
                held = await queue.heartbeat(claim, lease_seconds=lease.seconds)
        except Exception as exc:  # noqa: BLE001 - unreachable or slow Redis: try again
            logger.debug("lease not renewed yet: %r", exc, extra={"run_id": claim.run_id})
            pause = min(1.0, interval)
            continue
        if not held:
            lease.lose("Redis gave the run to another worker")
            return
        lease.renewed(sent_at)
        pause = interval


async def under_lease(task: asyncio.Task[Any], lease: Lease, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``task``; True once it has ended. If the lease is
    lost first, cancel the task, give it a moment to end (a command's process group
    is killed, an HTTP request closed), and raise LeaseLostError."""
    lost = asyncio.create_task(lease.lost.wait())
    try:
        await asyncio.wait({task, lost}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        lost.cancel()
    if lease.lost.is_set():
        task.cancel()
        await asyncio.wait({task}, timeout=STOP_SECONDS)
        raise LeaseLostError(lease.why)
    return task.done()
