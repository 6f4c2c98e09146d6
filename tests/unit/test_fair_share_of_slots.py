"""A namespace's fair share of the slots that exist now: the share as a number of
runs for the live slots, and a worker that claims under it as workers come and go
(against the in-memory queue, with its clock injected)."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.queue import MemoryRunQueue
from tickwork.queue.messages import FairShare
from tickwork_worker.worker import Worker

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("share", "cap", "live", "limit"),
    [
        (0.5, 0, 8, 4),
        (0.5, 0, 16, 8),
        (0.25, 0, 8, 2),
        (0.25, 0, 3, 1),  # never below one run
        (0.5, 0, 0, 1),
        (0.5, 3, 16, 3),  # a fixed cap on top: the lower wins
        (0.5, 10, 8, 4),
        (1.0, 0, 8, 8),
    ],
)
def test_a_share_of_the_live_slots_is_a_number_of_runs(
    share: float, cap: int, live: int, limit: int
) -> None:
    resolved = FairShare(max_in_flight=cap, share=share).under(live)
    assert (resolved.max_in_flight, resolved.share) == (limit, 0.0)


def test_exceptions_and_rates_are_kept_and_no_share_is_left_as_it_is() -> None:
    fair = FairShare(runs_per_minute=60, namespaces={"team-a": (20, None)}, share=0.5)
    resolved = fair.under(8)
    assert (resolved.limit("team-a"), resolved.limit("team-b"), resolved.rate("x")) == (20, 4, 60)
    fixed = FairShare(max_in_flight=3)
    assert fixed.under(100) is fixed


def test_a_share_goes_to_the_queue_only_as_a_number() -> None:
    with pytest.raises(ValueError, match="under"):
        FairShare(share=0.5).to_json()
    with pytest.raises(ValueError, match="between 0 and 1"):
        FairShare(share=1.5)


def test_a_worker_claims_under_the_share_of_every_live_workers_slots() -> None:
    now = [1000.0]
    queue = MemoryRunQueue(clock=lambda: now[0])

    def worker(name: str) -> Worker:
        return Worker(
            queue=queue,
            runner=None,  # type: ignore[arg-type]
            name=name,
            concurrency=8,
            lease_seconds=30,
            claim_wait_seconds=1,
            maintain_seconds=1,
            grace_seconds=0,
            fair_share=FairShare(share=0.5),
        )

    async def scenario() -> list[int]:
        a, b = worker("a"), worker("b")
        seen = [a.claim_share.max_in_flight]  # type: ignore[union-attr]
        await a._register()
        await b._register()
        await a._register()
        seen.append(a.claim_share.max_in_flight)  # type: ignore[union-attr]
        await b._register(going=True)
        await a._register()
        seen.append(a.claim_share.max_in_flight)  # type: ignore[union-attr]
        await b._register()
        now[0] += 31  # b fell silent (killed): its slots stop counting after a lease
        await a._register()
        seen.append(a.claim_share.max_in_flight)  # type: ignore[union-attr]
        return seen

    # Alone (before it knows of others), with a second worker, after it left, after it died.
    assert asyncio.run(scenario()) == [4, 8, 4, 4]
