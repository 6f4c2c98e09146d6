"""Owed status writes (first status of new jobs) go on in the background, beside the
ticks: a window of writes in flight, refilled as each ends, across tick boundaries;
none started while a list comes in; a tick never waits for them. The API server is
a gate that holds each write until the test lets it through."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from tickwork.core.buckets import BucketIndex
from tickwork.queue.memory import MemoryRunQueue
from tickwork_operator.clock import Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.parts import Shared
from tickwork_operator.reporter import OWED_CONCURRENCY, Reporter
from tickwork_operator.state import LIST_QUIET_SECONDS, WatchState
from tickwork_operator.ticker import Ticker

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

T0 = dt.datetime(2026, 12, 1, 9, 0, 30, tzinfo=dt.UTC)


class Gate:
    """The status subresource, holding every write until released."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[None]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.written: list[str] = []
        self.arrived = asyncio.Event()

    async def apply_job_status(self, *job: Any, **options: Any) -> dict[str, Any]:
        assert options["field_manager"] == "tickwork-operator"
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        done = asyncio.get_running_loop().create_future()
        self.waiting.append(done)
        self.arrived.set()
        try:
            await done
        finally:
            self.in_flight -= 1
        self.written.append(job[1])
        return {"metadata": {"resourceVersion": str(100 + len(self.written))}}

    async def post(self, job: Any, **event: Any) -> None:
        raise AssertionError(f"no Event is expected, not {event} of {job}")

    async def until(self, count: int) -> None:
        """Until ``count`` writes wait at the gate (a few seconds at most)."""
        while len(self.waiting) < count:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), 5)
            except TimeoutError:
                pytest.fail(f"{len(self.waiting)} writes at the gate, not {count}")

    def release(self, count: int) -> None:
        for done in self.waiting[:count]:
            if not done.done():  # cancelled with its write
                done.set_result(None)
        del self.waiting[:count]


def reporter_with(jobs: int, clock: list[float]) -> tuple[Reporter, WatchState, Gate]:
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1.0))
    for i in range(jobs):
        state.observe(
            {
                "metadata": {
                    "namespace": "ns",
                    "name": f"j{i:04d}",
                    "uid": f"uid-{i}",
                    "generation": 1,
                    "creationTimestamp": T0.isoformat(),
                    "resourceVersion": "7",
                },
                "spec": {"schedule": "0 0 1 1 *", "task": {"echo": {"message": "x"}}},
            },
            now=T0,
        )
    gate = Gate()
    shared = Shared(
        state=state,
        queue=MemoryRunQueue(clock=lambda: clock[0]),
        kube=gate,  # type: ignore[arg-type]
        events=gate,  # type: ignore[arg-type]
        metrics=OperatorMetrics(),
        clock=Clock(wall=lambda: clock[0], monotonic=lambda: clock[0]),
    )
    reporter = Reporter(shared, hold_seconds=0)
    return reporter, state, gate


async def test_a_write_that_ends_makes_room_for_the_next_at_once() -> None:
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(OWED_CONCURRENCY + 5, clock)
    assert len(state.dirty) == OWED_CONCURRENCY + 5  # every new job owes its first status
    writing = reporter.write_owed()
    assert writing is not None
    await gate.until(OWED_CONCURRENCY)
    await asyncio.sleep(0)  # nothing more starts while the window is full
    assert gate.in_flight == OWED_CONCURRENCY
    # One write ends while the others of its round still wait: the next starts at
    # once (a round that waited for its slowest write would start nothing here).
    gate.release(1)
    await gate.until(OWED_CONCURRENCY)
    assert gate.in_flight == OWED_CONCURRENCY
    assert len(gate.written) == 1
    while not writing.done():
        gate.release(len(gate.waiting))
        await asyncio.sleep(0)
    assert gate.most_in_flight == OWED_CONCURRENCY
    assert sorted(gate.written) == sorted(name for _, name in state.jobs)
    assert not state.dirty


async def test_no_write_starts_while_a_list_comes_in_and_the_rest_stay_owed() -> None:
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(OWED_CONCURRENCY * 3, clock)
    writing = reporter.write_owed()
    assert writing is not None
    await gate.until(OWED_CONCURRENCY)
    state.listed_at = clock[0]  # a relist begins while the first writes are on their way
    gate.release(OWED_CONCURRENCY)
    await writing  # ends once the writes on their way have ended
    assert len(gate.written) == OWED_CONCURRENCY
    assert not gate.waiting
    assert len(state.dirty) == OWED_CONCURRENCY * 2
    assert not set(gate.written) & {name for _, name in state.dirty}
    # Once the list is over, the writer goes on with what is still owed.
    clock[0] += LIST_QUIET_SECONDS
    await written_out(reporter, gate)
    assert len(gate.written) == OWED_CONCURRENCY * 3
    assert not state.dirty


async def test_a_tick_publishes_due_runs_while_owed_writes_are_on_their_way() -> None:
    """Ten thousand jobs applied at once owe their first statuses: the ticks go on
    publishing what falls due, never waiting for those writes (a tick that awaited
    them would never end here: the gate holds every write, the clock stands still)."""
    clock = [T0.timestamp()]
    _, state, gate = reporter_with(OWED_CONCURRENCY * 3, clock)
    queue = MemoryRunQueue(clock=lambda: clock[0])
    ticker = Ticker(
        state=state,
        queue=queue,
        kube=gate,  # type: ignore[arg-type]
        events=gate,  # type: ignore[arg-type]
        metrics=OperatorMetrics(),
        tick_seconds=1.0,
        reconcile_seconds=3600,
        clock=Clock(wall=lambda: clock[0], monotonic=lambda: clock[0]),
        report_hold_seconds=0,
    )
    await asyncio.wait_for(ticker.tick(), 5)
    await gate.until(OWED_CONCURRENCY)  # the first statuses, on their way in the background
    state.observe(
        {
            "metadata": {
                "namespace": "ns",
                "name": "due",
                "uid": "uid-due",
                "generation": 1,
                "creationTimestamp": T0.isoformat(),
                "resourceVersion": "8",
            },
            "spec": {
                "runAt": (T0 + dt.timedelta(seconds=1)).isoformat(),
                "task": {"echo": {"message": "x"}},
            },
        },
        now=T0,
    )
    clock[0] += 1
    await asyncio.wait_for(ticker.tick(), 5)
    assert (await queue.depth()).ready == 1  # published, with every owed write still held
    await gate.until(OWED_CONCURRENCY + 1)  # and the run's report, behind it
    assert gate.written == []
    ticker.reporter.stop()


class CountingDirty(dict[Any, None]):
    """``WatchState.dirty`` that counts the passes made over it and the jobs looked up."""

    passes = 0
    looks = 0

    def __iter__(self) -> Any:
        self.passes += 1
        return super().__iter__()

    def __contains__(self, key: object) -> bool:
        self.looks += 1
        return super().__contains__(key)


def observed(
    state: WatchState, i: int, *, generation: int = 1, schedule: str = "0 0 1 1 *"
) -> None:
    state.observe(
        {
            "metadata": {
                "namespace": "ns",
                "name": f"j{i:04d}",
                "uid": f"uid-{i}",
                "generation": generation,
                "creationTimestamp": T0.isoformat(),
                "resourceVersion": str(10 + generation),
            },
            "spec": {"schedule": schedule, "task": {"echo": {"message": "x"}}},
        },
        now=T0,
    )


async def written_out(reporter: Reporter, gate: Gate) -> None:
    """What a tick starts: the owed writes, let through until none is owed."""
    writing = reporter.write_owed()
    while writing is not None and not writing.done():
        gate.release(len(gate.waiting))
        await asyncio.sleep(0)
    if writing is not None:
        await writing


async def test_jobs_waiting_for_their_reports_are_not_looked_at_on_every_tick() -> None:
    """Thousands of jobs are dirty with a report on its way while runs fall due, and
    every watch event wakes a tick: a tick looks only at the jobs that may have become
    owed since the last look, never over every dirty job."""
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(2000, clock)
    state.dirty = CountingDirty(state.dirty)
    for entry in state.jobs.values():
        reporter.owe(entry)  # runs published: their reports will write the status
    await written_out(reporter, gate)  # each new job looked at once: a report is owed
    assert gate.written == []
    # Events of jobs already dirty (a worker's status write) wake more ticks.
    for i in range(10):
        observed(state, i)
    state.dirty.looks = 0
    await written_out(reporter, gate)
    await written_out(reporter, gate)
    assert gate.written == []
    assert state.dirty.looks == 0
    # A new job is owed its first status: the next tick finds it, looking at it alone.
    observed(state, 2000)
    state.dirty.looks = 0
    await written_out(reporter, gate)
    assert gate.written == ["j2000"]
    assert state.dirty.looks <= 3  # found; still owed as its write starts; not after it
    assert state.dirty.passes == 0
    assert list(state.dirty) == [key for key in state.jobs if key != ("ns", "j2000")]


async def test_a_job_whose_report_wrote_an_older_share_is_written_next_tick() -> None:
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(3, clock)
    for entry in state.jobs.values():
        reporter.owe(entry)
    await written_out(reporter, gate)  # none owed: every job has a report
    reporter.start()
    await gate.until(3)  # the reports' writes are on their way
    # Meanwhile the spec of j0001 changes: its wanted share is newer than the one
    # being written, and it was dirty all along.
    observed(state, 1, generation=2, schedule="0 0 1 7 *")
    gate.release(3)
    await reporter.idle()
    assert sorted(gate.written) == ["j0000", "j0001", "j0002"]
    assert list(state.dirty) == [("ns", "j0001")]
    await written_out(reporter, gate)
    assert gate.written[3:] == ["j0001"]
    assert not state.dirty


async def test_jobs_behind_dropped_reports_are_owed_again() -> None:
    """Leadership lost: the reports not sent yet are dropped, and the next
    leadership's ticks write what they would have."""
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(4, clock)
    for entry in state.jobs.values():
        reporter.owe(entry)
    await written_out(reporter, gate)
    assert gate.written == []
    reporter.stop()
    await written_out(reporter, gate)
    assert sorted(gate.written) == ["j0000", "j0001", "j0002", "j0003"]
    assert not state.dirty


async def test_a_write_cancelled_on_its_way_is_owed_again() -> None:
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(3, clock)
    writing = reporter.write_owed()
    assert writing is not None
    await gate.until(3)
    assert not state.dirty  # taken as being written
    writing.cancel()  # the operator stops, or loses its lease
    with pytest.raises(asyncio.CancelledError):
        await writing
    assert gate.written == []
    assert sorted(name for _, name in state.dirty) == ["j0000", "j0001", "j0002"]
    await written_out(reporter, gate)
    assert sorted(gate.written) == ["j0000", "j0001", "j0002"]


async def test_a_job_replaced_while_its_report_is_written_gets_its_first_status() -> None:
    """The report of the old job is on its way when the watch brings a new job of the
    same name (its deletion unseen, as after a relist): the new one is still owed its
    first status once the old one's write ends, though it was dirty all along."""
    clock = [T0.timestamp()]
    reporter, state, gate = reporter_with(1, clock)
    reporter.owe(state.jobs["ns", "j0000"])
    await written_out(reporter, gate)  # none owed: the job has a report
    reporter.start()
    await gate.until(1)
    state.observe(
        {
            "metadata": {
                "namespace": "ns",
                "name": "j0000",
                "uid": "uid-new",
                "generation": 1,
                "creationTimestamp": T0.isoformat(),
                "resourceVersion": "20",
            },
            "spec": {"schedule": "0 0 1 7 *", "task": {"echo": {"message": "x"}}},
        },
        now=T0,
    )
    gate.release(1)
    await reporter.idle()
    assert list(state.dirty) == [("ns", "j0000")]
    await written_out(reporter, gate)
    assert gate.written == ["j0000", "j0000"]
    assert not state.dirty
