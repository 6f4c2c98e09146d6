"""The leader with ``@every`` intervals, ``notBefore``/``notAfter`` and ``status.nextRuns``,
in milliseconds: the real ticker, publisher, reporter and watch state over the
in-memory queue, a clock moved by hand, and every status write echoed back as the
watch event it causes (as the API server does). (The same against the real API
server, Redis and a worker: tests/e2e/test_bounds_journey.py.)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.unit.test_operator_decisions import T0, UID, Leader
from tickwork.core.runs import scheduled_run_id

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

EVERY_90S = {"schedule": "@every 90s"}


def later(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Watched:
    """A leader whose every status write comes back as a watch event, with the bodies
    it applied: an apply states all of the operator's fields, so a field missing from
    the last body is gone from the object (the sink only merges)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.leader = Leader()
        self.spec = spec
        self.generation = 1
        self.bodies: list[dict[str, Any]] = []
        self.run_status: dict[str, Any] = {}
        """What the workers wrote (activeRuns, lastRun)."""
        sink, apply = self.leader.sink, self.leader.sink.apply_job_status

        async def recording(*job: Any, **options: Any) -> dict[str, Any]:
            if options["field_manager"] == "tickwork-operator":
                self.bodies.append(job[3])
            return await apply(*job, **options)

        sink.apply_job_status = recording  # type: ignore[method-assign]
        sink.echo = lambda _status: self.observe()
        self.observe()

    @property
    def status(self) -> dict[str, Any]:
        return self.bodies[-1] if self.bodies else {}

    def observe(self) -> None:
        self.leader.observe(
            self.spec, status={**self.status, **self.run_status}, generation=self.generation
        )

    def edit(self, **changes: Any) -> None:
        self.spec = {**self.spec, **changes}
        self.generation += 1
        self.observe()

    def worker_finished(self, run_at: dt.datetime) -> None:
        record = {
            "id": scheduled_run_id(UID, run_at),
            "scheduledAt": run_at.isoformat(),
            "outcome": "Succeeded",
            "attempts": 1,
        }
        self.run_status = {"lastRun": record, "runs": [record]}
        self.observe()

    async def tick_at(self, when: dt.datetime) -> list[str]:
        """Tick at ``when``; the run IDs published (taken out of the queue)."""
        await self.leader.tick_at(when)
        claims = await self.leader.queue.claim(consumer="test", lease_seconds=30, count=100)
        for claim in claims:
            await self.leader.queue.ack(claim)
        return [claim.message.run_id for claim in claims]


def ready(status: dict[str, Any]) -> tuple[str, str, str]:
    condition = next(c for c in status["conditions"] if c["type"] == "Ready")
    return condition["status"], condition["reason"], condition["message"]


async def test_an_every_job_runs_on_the_grid_of_its_creation_and_lists_its_next_runs() -> None:
    job = Watched(EVERY_90S)
    assert await job.tick_at(later(1)) == []
    assert job.status["nextRunAt"] == stamp(later(90))
    assert job.status["nextRuns"] == [stamp(later(90 * k)) for k in range(1, 6)]
    writes = job.leader.sink.writes
    for k in (1, 2, 3):
        assert await job.tick_at(later(90 * k - 0.5)) == []
        assert await job.tick_at(later(90 * k + 0.005)) == [scheduled_run_id(UID, later(90 * k))]
        job.worker_finished(later(90 * k))
        assert job.status["nextRunAt"] == stamp(later(90 * (k + 1)))
        assert job.status["nextRuns"] == [stamp(later(90 * n)) for n in range(k + 1, k + 6)]
        assert job.status["phase"] == "Scheduled"
    # nextRuns travels with nextRunAt: one operator write per run, as before it existed.
    assert job.leader.sink.writes == writes + 3


async def test_the_grid_survives_a_restart_the_run_ids_stay_the_same() -> None:
    first = Watched(EVERY_90S)
    await first.tick_at(later(1))
    # Another replica (or a restart) reads the same object at another time.
    second = Leader(start=later(100))
    second.observe(EVERY_90S, status=first.status)
    await second.tick_at(later(180.005))
    assert await second.queued() == [scheduled_run_id(UID, later(180))]


async def test_not_before_holds_runs_back_and_anchors_the_interval() -> None:
    not_before = later(600.25)  # rounded up to the second for the grid
    job = Watched({**EVERY_90S, "notBefore": not_before.isoformat()})
    assert await job.tick_at(later(1)) == []
    assert job.status["nextRunAt"] == stamp(later(601))
    assert job.status["nextRuns"][1] == stamp(later(691))
    for moment in (later(90.005), later(180.005), later(600.5)):
        assert await job.tick_at(moment) == []
    assert await job.tick_at(later(601.005)) == [scheduled_run_id(UID, later(601))]


async def test_a_cron_job_lists_only_the_runs_before_not_after() -> None:
    job = Watched({"schedule": "* * * * *", "notAfter": later(209.5).isoformat()})
    await job.tick_at(later(1))  # created 09:00:30; notAfter 09:04:00
    assert job.status["nextRuns"] == [stamp(later(30 + 60 * k)) for k in range(3)]


async def test_after_not_after_the_job_is_completed_and_publishes_nothing() -> None:
    job = Watched({**EVERY_90S, "notAfter": later(200).isoformat()})
    assert await job.tick_at(later(90.005)) == [scheduled_run_id(UID, later(90))]
    job.worker_finished(later(90))
    assert job.status["nextRuns"] == [stamp(later(180))]
    assert await job.tick_at(later(180.005)) == [scheduled_run_id(UID, later(180))]
    assert "nextRunAt" not in job.status
    assert "nextRuns" not in job.status
    assert job.status["phase"] == "Scheduled"  # its last run is still on its way
    job.worker_finished(later(180))
    assert await job.tick_at(later(181)) == []
    assert job.status["phase"] == "Completed"
    assert ready(job.status) == (
        "True",
        "Completed",
        "spec.notAfter leaves no run to start (lastRun says how the last one ended)",
    )
    for moment in (later(200), later(270.005), later(3600)):
        assert await job.tick_at(moment) == []
    # A later notAfter brings it back to life, from now on.
    job.edit(notAfter=later(4000).isoformat())
    await job.tick_at(later(3600.5))
    assert job.status["phase"] == "Scheduled"
    assert job.status["nextRunAt"] == stamp(later(3690))


async def test_a_job_created_past_its_not_after_is_completed_at_once() -> None:
    job = Watched({"schedule": "@hourly", "notAfter": later(-60).isoformat()})
    assert await job.tick_at(later(1)) == []
    assert job.status["phase"] == "Completed"
    assert "nextRunAt" not in job.status
    assert ready(job.status)[:2] == ("True", "Completed")
    suspended = Watched(
        {"schedule": "@hourly", "notAfter": later(-60).isoformat(), "suspend": True}
    )
    await suspended.tick_at(later(1))
    assert suspended.status["phase"] == "Completed"  # over, whatever suspend says


async def test_runs_missed_up_to_not_after_are_counted_and_the_latest_started_late() -> None:
    """The watcher was down across notAfter: the latest run due before it starts late
    (no deadline), the rest are counted missed, and then the job is over."""
    leader = Leader(start=later(1000))
    spec = {**EVERY_90S, "notAfter": later(400).isoformat()}
    before = {
        "observedGeneration": 1,
        "lastScheduleTime": stamp(later(90)),
        "nextRunAt": stamp(later(180)),
        "phase": "Scheduled",
    }
    leader.observe(spec, status=before)
    await leader.tick_at(later(1000.5))
    assert await leader.queued() == [scheduled_run_id(UID, later(360))]
    assert leader.sink.status["missedRuns"] == 2  # 180 and 270
    await leader.tick_at(later(1090.005))
    assert len(await leader.queued()) == 1  # nothing more
