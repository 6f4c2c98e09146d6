"""The leader's overlap policies and cancels, in milliseconds: the real ticker,
publisher, reporter and watch state over the in-memory queue, a clock moved by
hand. (The same against the real API server, Redis and a worker:
tests/integration/test_overlap.py and tests/e2e/test_overlap_journey.py.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_operator_decisions import UID, Leader, minute, running, worker_took
from tickwork.core.annotations import CANCEL_ANNOTATION
from tickwork.core.cancel import CANCELLED_BY_USER
from tickwork.core.planning import BUFFER_LIMIT
from tickwork.core.runs import scheduled_run_id
from tickwork.kube.status import run_manager
from tickwork.queue.messages import RunLocation

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

EVERY_MINUTE = {"schedule": "* * * * *"}


def rid(m: int) -> str:
    return scheduled_run_id(UID, minute(m))


def finished(m: int, outcome: str = "Succeeded") -> dict[str, Any]:
    """The worker's share of status once the run of minute ``m`` ended."""
    record = {"id": rid(m), "scheduledAt": minute(m).isoformat(), "outcome": outcome}
    return {"lastRun": record, "runs": [record], "activeRuns": []}


def seen(leader: Leader, spec: dict[str, Any], worker: dict[str, Any], **kw: Any) -> None:
    """The job as the watch brings it: the operator's last write and the worker's share."""
    leader.observe(spec, status={**leader.sink.status, **worker}, **kw)


def buffered(leader: Leader) -> list[str]:
    return [b["id"] for b in leader.sink.status.get("bufferedRuns", [])]


async def due_while_run_0_runs(leader: Leader, spec: dict[str, Any], *, minutes: int) -> None:
    """A worker has run 0 (due at minute 0) and it is still running while the runs of
    the next ``minutes`` minutes fall due, each tick seeing the status written before."""
    await worker_took(leader, minute(0))
    leader.observe(spec, status=running(minute(0)))
    await leader.tick_at(minute(1, 0.005))
    for later in range(2, minutes + 1):
        seen(leader, spec, running(minute(0)))
        await leader.tick_at(minute(later, 0.005))


async def test_buffer_one_keeps_one_run_waiting_and_publishes_it_when_the_active_one_ends() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "BufferOne"}
    await due_while_run_0_runs(leader, spec, minutes=1)
    assert await leader.queued() == []
    assert buffered(leader) == [rid(1)]
    assert "RunBuffered" in leader.sink.reasons()
    seen(leader, spec, running(minute(0)))
    await leader.tick_at(minute(2, 0.005))  # one waits already: this one is skipped, counted
    assert buffered(leader) == [rid(1)]
    assert leader.sink.status["missedRuns"] == 1
    await leader.tick_at(minute(2, 10))
    assert await leader.queued() == []  # still running: nothing published
    seen(leader, spec, finished(0))
    await leader.tick_at(minute(2, 20))
    assert await leader.queued() == [rid(1)]
    assert buffered(leader) == []
    assert leader.sink.status["queuedRun"]["id"] == rid(1)
    assert "RunReleased" in leader.sink.reasons()


async def test_buffer_all_runs_the_buffered_runs_one_after_another() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "BufferAll"}
    await due_while_run_0_runs(leader, spec, minutes=2)
    assert buffered(leader) == [rid(1), rid(2)]
    assert "missedRuns" not in leader.sink.status
    seen(leader, spec, finished(0))
    await leader.tick_at(minute(2, 10))
    assert await leader.queued() == [rid(1)]
    assert buffered(leader) == [rid(2)]
    await leader.tick_at(minute(2, 20))  # run 1 is active now (published, not finished)
    assert await leader.queued() == [rid(1)]
    seen(leader, spec, finished(1))
    await leader.tick_at(minute(2, 30))
    assert await leader.queued() == [rid(1), rid(2)]
    assert buffered(leader) == []


async def test_buffer_all_counts_a_run_past_its_bound_as_missed() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "BufferAll"}
    full = [
        {
            "id": scheduled_run_id(UID, minute(-200 + i)),
            "scheduledAt": minute(-200 + i).isoformat(),
            "bufferedAt": minute(-200 + i).isoformat(),
        }
        for i in range(BUFFER_LIMIT)
    ]
    await worker_took(leader, minute(0))
    leader.observe(
        spec,
        status={
            **running(minute(0)),
            "bufferedRuns": full,
            "observedGeneration": 1,
            "nextRunAt": minute(1).isoformat(),
            "lastScheduleTime": minute(0).isoformat(),
        },
    )
    await leader.tick_at(minute(1, 0.005))
    assert len(buffered(leader)) == BUFFER_LIMIT
    assert rid(1) not in buffered(leader)
    assert leader.sink.status["missedRuns"] == 1
    assert any("already buffered" in text for _, text in leader.sink.events)


async def test_a_new_leader_publishes_the_buffer_it_finds_in_status() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "BufferAll"}
    await due_while_run_0_runs(leader, spec, minutes=1)
    written = dict(leader.sink.status)
    standby = Leader()
    standby.t = leader.t
    standby.observe(spec, status={**written, **finished(0)})
    await standby.tick_at(minute(1, 5))
    assert await standby.queued() == [rid(1)]
    assert "bufferedRuns" not in standby.sink.status or buffered(standby) == []


async def test_cancel_other_cancels_the_active_run_and_starts_the_new_one_when_it_ends() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "CancelOther"}
    await due_while_run_0_runs(leader, spec, minutes=1)
    [request] = leader.sink.status["cancelRequests"]
    assert (request["id"], request["terminate"]) == (rid(0), False)
    assert "CancelOther" in request["reason"]
    assert await leader.queued() == []  # not before the active run has ended
    assert buffered(leader) == [rid(1)]
    seen(leader, spec, finished(0, "Cancelled"))
    await leader.tick_at(minute(1, 10))
    assert await leader.queued() == [rid(1)]
    assert "cancelRequests" not in leader.sink.status  # its run ended: the request goes


async def test_replace_withdraws_a_queued_run_and_records_it_cancelled() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "Replace"}  # CancelOther's old name
    leader.observe(spec)
    await leader.tick_at(minute(1, 0.005))
    assert await leader.queued() == [rid(1)]  # no worker took it
    await leader.tick_at(minute(2, 0.005))
    assert await leader.queued() == []
    assert await leader.queue.locate(rid(1)) is RunLocation.DONE  # withdrawn, remembered
    [(manager, body)] = leader.sink.run_applies
    assert manager == run_manager(rid(1))  # the run's own record, as its worker would write
    assert body is not None
    assert body["lastRun"]["outcome"] == "Cancelled"
    assert body["lastRun"]["id"] == rid(1)
    assert buffered(leader) == [rid(2)]
    seen(leader, spec, finished(1, "Cancelled"))
    await leader.tick_at(minute(2, 10))
    assert await leader.queued() == [rid(2)]


async def test_terminate_other_starts_the_new_run_at_once_and_kills_the_active_one() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "TerminateOther"}
    await due_while_run_0_runs(leader, spec, minutes=1)
    assert await leader.queued() == [rid(1)]
    [request] = leader.sink.status["cancelRequests"]
    assert (request["id"], request["terminate"]) == (rid(0), True)
    assert buffered(leader) == []


async def test_a_suspend_drops_the_buffer_and_counts_it_missed() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "BufferAll"}
    await due_while_run_0_runs(leader, spec, minutes=2)
    assert buffered(leader) == [rid(1), rid(2)]
    seen(leader, {**spec, "suspend": True}, finished(0), generation=2)
    await leader.tick_at(minute(2, 10))
    assert await leader.queued() == []  # never after the suspend is visible
    assert buffered(leader) == []
    assert leader.sink.status["missedRuns"] == 2
    assert "BufferDropped" in leader.sink.reasons()


async def test_cancel_annotation_asks_the_worker_to_stop_a_running_run() -> None:
    leader = Leader()
    await worker_took(leader, minute(0))
    leader.observe(EVERY_MINUTE, status=running(minute(0)), annotations={CANCEL_ANNOTATION: rid(0)})
    await leader.tick_at(minute(0, 30))
    [request] = leader.sink.status["cancelRequests"]
    assert (request["id"], request["terminate"], request["reason"]) == (
        rid(0),
        False,
        CANCELLED_BY_USER,
    )
    assert leader.sink.run_applies == []  # in flight: its worker records it
    # Acted on once: the next ticks ask nothing more.
    events = len(leader.sink.events)
    seen(leader, EVERY_MINUTE, running(minute(0)), annotations={CANCEL_ANNOTATION: rid(0)})
    await leader.tick_at(minute(0, 40))
    assert len(leader.sink.events) == events


async def test_cancel_annotation_withdraws_a_queued_run_and_drops_a_buffered_one() -> None:
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "BufferOne"}
    leader.observe(spec)
    await leader.tick_at(minute(1, 0.005))
    assert await leader.queued() == [rid(1)]
    seen(leader, spec, {})
    await leader.tick_at(minute(2, 0.005))  # run 1 is queued: run 2 waits
    assert buffered(leader) == [rid(2)]
    seen(leader, spec, {}, annotations={CANCEL_ANNOTATION: f"{rid(1)},{rid(2)}"})
    await leader.tick_at(minute(2, 10))
    assert await leader.queued() == []
    assert await leader.queue.locate(rid(1)) is RunLocation.DONE  # it never executes
    assert buffered(leader) == []
    assert {m for m, _ in leader.sink.run_applies} == {run_manager(rid(1)), run_manager(rid(2))}
    outcomes = {
        body["lastRun"]["id"]: body["lastRun"]["outcome"]
        for _, body in leader.sink.run_applies
        if body
    }
    assert outcomes == {rid(1): "Cancelled", rid(2): "Cancelled"}


async def test_cancel_of_a_finished_or_unknown_run_does_nothing() -> None:
    leader = Leader()
    leader.observe(
        EVERY_MINUTE, status=finished(0), annotations={CANCEL_ANNOTATION: f"{rid(0)},{rid(7)}"}
    )
    await leader.tick_at(minute(0, 30))
    assert "cancelRequests" not in leader.sink.status
    assert leader.sink.run_applies == []
    assert "RunCancelled" not in leader.sink.reasons()
