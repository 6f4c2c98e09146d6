"""The run queue's interface, implemented by Redis (production) and memory (local mode).

Delivery is at-least-once: a claimed run is held under a lease that the
consumer extends with heartbeats; if the consumer dies, the lease expires and
the reaper makes the run ready again (with its attempt number raised, so the
duplicate is visible). Every operation that takes a :class:`Claim` checks its
lease token and returns False when the lease was lost meanwhile.
"""

from __future__ import annotations

from typing import Protocol

from tickwork.queue.messages import (
    Claim,
    DeadLetter,
    Depth,
    EnqueueOutcome,
    FairShare,
    RunLocation,
    RunMessage,
)


class RunQueue(Protocol):
    async def enqueue(self, message: RunMessage) -> EnqueueOutcome:
        """Add a run unless a run with its ID is queued, in flight, delayed, dead or done."""
        ...

    async def claim(
        self,
        *,
        consumer: str,
        lease_seconds: float,
        count: int = 1,
        wait_seconds: float = 0.0,
        fair_share: FairShare | None = None,
    ) -> list[Claim]:
        """Take up to ``count`` ready runs, waiting up to ``wait_seconds`` for the first.

        Under ``fair_share``, runs over their namespace's limits are set aside (parked
        or delayed), not taken, and the runs taken are counted for their namespace.
        """
        ...

    async def register_consumer(self, consumer: str, slots: int, *, ttl_seconds: float) -> int:
        """Note that ``consumer`` is alive with ``slots`` slots for ``ttl_seconds`` more
        (0 slots: it is going); return the slots of every consumer alive now."""
        ...

    async def rebalance(self, fair_share: FairShare | None, *, limit: int = 1000) -> int:
        """Return parked runs whose namespace has room under ``fair_share`` (all of them
        when None) to the ready queue, recounting runs in flight; return how many."""
        ...

    async def heartbeat(self, claim: Claim, *, lease_seconds: float) -> bool:
        """Extend the lease; False if it was lost (expired and redelivered)."""
        ...

    async def ack(self, claim: Claim) -> bool:
        """The run is finished: forget it (and remember its ID for deduplication)."""
        ...

    async def retry(self, claim: Claim, *, delay_seconds: float, attempt: int) -> bool:
        """Park the run for ``delay_seconds``, then make it ready as attempt ``attempt``."""
        ...

    async def bury(self, claim: Claim, *, error: str) -> bool:
        """Move the run to the dead-letter queue with the reason it failed."""
        ...

    async def release(self, claim: Claim) -> bool:
        """Hand the run back, ready again at once, without counting an attempt."""
        ...

    async def wait_for_key(self, claim: Claim) -> bool:
        """A run claimed to wait for its concurrency key (``claim.waits_for_key``) waits
        in the key's list, in order (or is ready again if a place came free meanwhile);
        False if the lease was lost."""
        ...

    async def reap_expired(self, *, limit: int = 1000) -> int:
        """Make runs whose lease expired ready again; return how many."""
        ...

    async def promote_due(self, *, limit: int = 1000) -> int:
        """Make delayed runs whose time has come ready; return how many."""
        ...

    async def cancel(self, run_id: str) -> bool:
        """Withdraw a ready or delayed run (not one in flight); True if one was withdrawn."""
        ...

    async def locate(self, run_id: str) -> RunLocation | None:
        """Where the run is, or None if the queue does not know it."""
        ...

    async def depth(self) -> Depth: ...

    async def dead_letters(self, *, limit: int = 100) -> list[DeadLetter]:
        """The newest dead letters first."""
        ...

    async def inspect_dead(self, run_id: str) -> DeadLetter | None: ...

    async def requeue_dead(self, run_id: str | None = None) -> int:
        """Make one dead run (or all of them) ready again as attempt 1; return how many."""
        ...

    async def purge_dead(self, run_id: str | None = None) -> int:
        """Delete one dead run (or all of them); return how many."""
        ...

    async def admit_notice(self, notice: str, namespace: str, *, per_minute: int) -> str:
        """Whether to tell ``notice`` (``"<run ID>/<event>"``): ``"send"`` (noted as
        told), ``"duplicate"`` (told already, within a day) or ``"limited"`` (the
        namespace told ``per_minute`` this minute)."""
        ...

    async def close(self) -> None: ...
