"""The heartbeat stops when its attempt ends, even at the instant a renewal lands.

A drill caught a run held for five minutes by a worker that had given it up: the
attempt ended ("cannot read the job; the run will be redelivered") and cancelled
its heartbeat just as a renewal came back from Redis. Python 3.11's
``asyncio.wait_for`` then returns the renewal and drops the cancellation, so the
heartbeat went on renewing a lease nobody used and the run was never redelivered.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tickwork.queue.messages import Claim, RunMessage
from tickwork_worker.lease import Lease, heartbeat


class _Renewals:
    """A queue whose renewals answer when the test says so."""

    def __init__(self) -> None:
        self.sent = 0
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[bool] | None = None

    async def heartbeat(self, claim: Claim, *, lease_seconds: float) -> bool:
        assert claim.token
        assert lease_seconds > 0
        self.sent += 1
        self.answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        return await self.answer


def _claim() -> Claim:
    message = RunMessage(run_id="uid.20261207T174207Z", namespace="ns", name="job", uid="uid")
    return Claim(message=message, token="w-0:abc:1", sent_at=0.0)


@pytest.mark.asyncio
async def test_a_heartbeat_cancelled_as_its_renewal_lands_stops() -> None:
    queue: Any = _Renewals()
    lease = Lease(time.monotonic(), seconds=0.3)  # renewals every 0.1 s
    renewals = asyncio.create_task(heartbeat(queue, _claim(), lease))
    await asyncio.wait_for(queue.asked.wait(), timeout=5)
    # The renewal is answered and the attempt ends in the same turn of the loop.
    assert queue.answer is not None
    queue.answer.set_result(True)
    renewals.cancel()
    done, _ = await asyncio.wait({renewals}, timeout=2)
    assert renewals in done, f"the heartbeat went on renewing ({queue.sent} renewals sent)"
    assert renewals.cancelled()
    assert queue.sent == 1


@pytest.mark.asyncio
async def test_a_heartbeat_cancelled_while_waiting_for_redis_stops() -> None:
    queue: Any = _Renewals()
    lease = Lease(time.monotonic(), seconds=0.3)
    renewals = asyncio.create_task(heartbeat(queue, _claim(), lease))
    await asyncio.wait_for(queue.asked.wait(), timeout=5)
    renewals.cancel()
    done, _ = await asyncio.wait({renewals}, timeout=2)
    assert renewals in done
    assert renewals.cancelled()
