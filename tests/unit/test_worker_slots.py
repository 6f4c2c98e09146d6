"""With ``finishing_per_slot``, a slot is an execution: a run whose task has ended frees
its slot while its record is still being written, so the next runs of a burst start
meanwhile; runs waiting for their write are bounded, and a drain still waits for them.
With 0, a slot is held until the record is written (against the
in-memory queue, with a runner that stands in for the executions and the writes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tickwork.queue import MemoryRunQueue
from tickwork.queue.messages import Claim, RunMessage
from tickwork_worker.worker import Worker

FINISHING_PER_SLOT = 3

pytestmark = pytest.mark.unit


class Runner:
    """Each run executes until the test ends it, then writes until the test lets the
    writes through; what the worker holds is visible at each step."""

    def __init__(self, queue: MemoryRunQueue) -> None:
        self.queue = queue
        self.executing: dict[str, asyncio.Event] = {}
        self.writing: set[str] = set()
        self.written = asyncio.Event()
        self.done: list[str] = []
        self.handed_back: list[str] = []
        self.back = asyncio.Event()

    async def process(self, claim: Claim, ended: Callable[[], None] = lambda: None) -> None:
        run = claim.run_id
        self.executing[run] = asyncio.Event()
        try:
            await self.executing[run].wait()
        except asyncio.CancelledError:
            self.handed_back.append(run)  # as the runner does: the run goes back
            self.back.set()
            await self.queue.release(claim)
            raise
        del self.executing[run]
        ended()
        self.writing.add(run)
        await self.written.wait()  # the record's write, at the API server's pace
        self.writing.discard(run)
        await self.queue.ack(claim)
        self.done.append(run)


async def _turns(condition: Callable[[], object]) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


async def _stage(
    runs: int, concurrency: int, finishing_per_slot: int = 0, grace_seconds: float = 30
) -> tuple[MemoryRunQueue, Runner, Worker]:
    """``runs`` runs in the queue, a worker with a runner that stands in for the rest."""
    queue = MemoryRunQueue()
    runner = Runner(queue)
    worker = Worker(
        queue=queue,
        runner=runner,  # type: ignore[arg-type]
        name="w",
        concurrency=concurrency,
        lease_seconds=30,
        claim_wait_seconds=5,
        maintain_seconds=60,
        grace_seconds=grace_seconds,
        finishing_per_slot=finishing_per_slot,
    )
    for index in range(runs):
        await queue.enqueue(
            RunMessage(run_id=f"r{index:02d}", namespace="ns", name=f"j{index}", uid=f"u{index}")
        )
    return queue, runner, worker


def test_a_run_whose_task_ended_frees_its_slot_before_its_record_is_written() -> None:
    async def scenario() -> None:
        total = 2 * FINISHING_PER_SLOT + 4
        queue, runner, worker = await _stage(total, 2, FINISHING_PER_SLOT)
        stop = asyncio.Event()
        loop = asyncio.create_task(worker.run(stop))
        await _turns(lambda: len(runner.executing) == 2)
        assert worker.free_slots() == 0  # two slots, two executions
        # Both tasks end; their records wait for the API server: two more start.
        for event in list(runner.executing.values()):
            event.set()
        await _turns(lambda: len(runner.writing) == 2 and len(runner.executing) == 2)
        # ... and so on until the runs waiting for their write fill their bound.
        while len(runner.writing) < 2 * FINISHING_PER_SLOT:
            for event in list(runner.executing.values()):
                event.set()
            await _turns(lambda: not any(e.is_set() for e in runner.executing.values()))
            await _turns(
                lambda: len(runner.executing) == 2 or len(runner.writing) >= 2 * FINISHING_PER_SLOT
            )
        for event in list(runner.executing.values()):
            event.set()
        await _turns(lambda: not runner.executing)
        for _ in range(20):
            await asyncio.sleep(0)
        # Every slot free, but as many runs wait for their write as the bound allows:
        # no more are claimed until writes go through.
        assert len(runner.writing) == 2 * FINISHING_PER_SLOT
        assert not runner.executing
        assert worker.free_slots() == 0
        assert (await queue.depth()).ready == total - 2 * FINISHING_PER_SLOT
        runner.written.set()  # the API server takes the records: the rest run
        while len(runner.done) < total:
            await _turns(lambda: runner.executing or len(runner.done) == total)
            for event in list(runner.executing.values()):
                event.set()
            await asyncio.sleep(0)
        stop.set()
        await loop

    asyncio.run(scenario())


def test_a_drain_waits_for_runs_whose_record_is_being_written() -> None:
    async def scenario() -> list[str]:
        _, runner, worker = await _stage(1, 1, FINISHING_PER_SLOT)
        stop = asyncio.Event()
        loop = asyncio.create_task(worker.run(stop))
        await _turns(lambda: runner.executing)
        runner.executing["r00"].set()
        await _turns(lambda: runner.writing)
        stop.set()  # SIGTERM while the record is on its way
        for _ in range(20):
            await asyncio.sleep(0)
        assert not loop.done()  # the drain waits for it
        runner.written.set()
        await loop
        return runner.done

    assert asyncio.run(scenario()) == ["r00"]


def test_after_the_grace_a_drain_hands_back_executing_runs_and_lets_records_be_written() -> None:
    """Handed back, a run whose task has ended would run again: only the runs still
    executing go back to the queue; a record on its way is waited for."""

    async def scenario() -> None:
        queue, runner, worker = await _stage(2, 2, FINISHING_PER_SLOT, grace_seconds=0.01)
        stop = asyncio.Event()
        loop = asyncio.create_task(worker.run(stop))
        await _turns(lambda: len(runner.executing) == 2)
        runner.executing["r00"].set()
        await _turns(lambda: runner.writing == {"r00"})
        stop.set()  # SIGTERM: r01 still executes, r00 writes its record
        await asyncio.wait_for(runner.back.wait(), 5)  # the grace passes
        assert runner.handed_back == ["r01"]
        assert not loop.done()  # r00's record is still waited for
        runner.written.set()
        await loop
        assert runner.done == ["r00"]
        assert (await queue.depth()).ready == 1  # r01, for another worker

    asyncio.run(scenario())


def test_with_none_finishing_a_slot_is_held_until_the_record_is_written() -> None:
    async def scenario() -> None:
        _, runner, worker = await _stage(2, 1)
        stop = asyncio.Event()
        loop = asyncio.create_task(worker.run(stop))
        await _turns(lambda: runner.executing)
        runner.executing["r00"].set()
        await _turns(lambda: runner.writing)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not runner.executing  # the second run waits for the first's write
        assert worker.free_slots() == 0
        runner.written.set()
        await _turns(lambda: runner.executing)
        runner.executing["r01"].set()
        await _turns(lambda: len(runner.done) == 2)
        stop.set()
        await loop

    asyncio.run(scenario())
