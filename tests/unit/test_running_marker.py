"""When a worker marks a run Running: at once, late, or never for a quick run — and
never after the run's final status."""

from __future__ import annotations

import asyncio

import pytest

from tickwork_worker.job_access import RunningMarker

pytestmark = pytest.mark.asyncio


class Recorder:
    def __init__(self, *, slow: asyncio.Event | None = None) -> None:
        self.writes: list[str] = []
        self.slow = slow
        self.began = asyncio.Event()

    async def write(self) -> None:
        self.writes.append("start Running")
        self.began.set()
        if self.slow is not None:
            await self.slow.wait()
        self.writes.append("Running written")


async def test_without_a_delay_the_run_is_marked_before_it_starts() -> None:
    recorder = Recorder()
    marker = RunningMarker(recorder.write, 0)
    await marker.start()
    assert recorder.writes == ["start Running", "Running written"]
    await marker.settle()


async def test_a_run_that_ends_within_the_delay_is_never_marked() -> None:
    recorder = Recorder()
    marker = RunningMarker(recorder.write, 60)
    await marker.start()
    await marker.settle()  # the run ended long before 60 s
    await asyncio.sleep(0)
    assert recorder.writes == []


async def test_a_running_write_under_way_finishes_before_the_final_status() -> None:
    gate = asyncio.Event()
    recorder = Recorder(slow=gate)
    marker = RunningMarker(recorder.write, 0.01)
    await marker.start()
    await recorder.began.wait()  # the delay passed, the write began
    settling = asyncio.create_task(marker.settle())
    for _ in range(20):
        await asyncio.sleep(0)  # let every ready task run
    assert not settling.done()  # the final write has to wait for it
    gate.set()
    await settling
    assert recorder.writes == ["start Running", "Running written"]
