"""The leader catching up after an outage and working off backfills, in milliseconds:
the real ticker, publisher, reporter and watch state over the in-memory queue, a clock
moved by hand. What it publishes, in which order, at which pace, what status records,
and that a new leader (or the same one restarted) goes on from status without
publishing anything twice. (The same against the real API server and Redis:
tests/integration/test_catchup.py.)"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest

from tests.unit.test_operator_decisions import NINE, Leader, minute
from tickwork.core.runs import backfill_run_id, scheduled_run_id
from tickwork_operator.pacing import Pace

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

UID = "7c8e4d0a-1111-4222-8333-444455556666"
# Status from before the operator went down: last run 08:55, the next due at 08:56.
DOWN = {
    "observedGeneration": 1,
    "lastScheduleTime": "2026-12-01T08:55:00Z",
    "nextRunAt": "2026-12-01T08:56:00Z",
    "phase": "Scheduled",
}
ALL_OF_THEM = {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "catchup": {"policy": "All"}}


def ids(*minutes: int) -> list[str]:
    return [scheduled_run_id(UID, minute(m)) for m in minutes]


def back(seconds: float) -> dt.datetime:
    """Some time after the operator came back at 09:00:30."""
    return minute(0, 30.01 + seconds)


def successor(previous: Leader, start: dt.datetime) -> Leader:
    """Another replica (or the same one restarted) on the same queue."""
    leader = Leader(start=start)
    leader.queue = leader.ticker.shared.queue = previous.queue  # for every part
    return leader


def paced(leader: Leader, pace: Pace) -> Pace:
    """``leader`` with an operator-wide pace of the test's own (due runs and backfills)."""
    leader.ticker.publisher.pace = leader.ticker.publisher.backfills.pace = pace
    return pace


async def drain(leader: Leader) -> list[str]:
    """Run IDs queued since the last look, oldest first (taken out of the queue)."""
    claims = await leader.queue.claim(consumer="test", lease_seconds=30, count=100)
    for claim in claims:
        await leader.queue.ack(claim)
    return [claim.message.run_id for claim in claims]


async def test_all_publishes_every_missed_run_oldest_first_one_per_tick() -> None:
    leader = Leader()
    leader.observe(ALL_OF_THEM, status=DOWN)
    published: list[str] = []
    for tick in range(6):
        await leader.tick_at(back(tick * 0.2))
        published += await drain(leader)
    assert published == ids(-4, -3, -2, -1, 0)
    status = leader.sink.status
    assert status["lastScheduleTime"] == "2026-12-01T09:00:00Z"
    assert status["nextRunAt"] == "2026-12-01T09:01:00Z"
    assert not status.get("missedRuns")


def republished(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Publishes the queue answered with "I have it already" (deduplicated)."""
    return [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "republished"]


async def test_progress_is_in_status_so_a_restart_mid_catch_up_goes_on_without_repeats(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork_operator.publisher")
    first = Leader()
    first.observe(ALL_OF_THEM, status=DOWN)
    await first.tick_at(back(0))
    await first.tick_at(back(0.2))
    assert await drain(first) == ids(-4, -3)
    written = first.sink.status
    assert (written["lastScheduleTime"], written["nextRunAt"]) == (
        "2026-12-01T08:57:00Z",
        "2026-12-01T08:58:00Z",
    )
    # The operator is killed; a new one (or the standby) starts from what status says.
    second = successor(first, back(5))
    second.observe(ALL_OF_THEM, status=written)
    for tick in range(5):
        await second.tick_at(back(5 + tick * 0.2))
    assert await drain(second) == ids(-2, -1, 0)
    assert republished(caplog) == []  # not even a publish the queue had to deduplicate


@pytest.mark.parametrize(
    ("catchup", "expected", "missed"),
    [
        ({"policy": "None"}, [], 5),
        ({"policy": "Latest"}, [0], 4),
        ({"policy": "All", "windowSeconds": 151}, [-2, -1, 0], 2),
        (None, [0], 4),  # unset: CronJob's way
    ],
)
async def test_the_policy_decides_what_is_published_and_status_counts_the_rest(
    catchup: dict[str, Any] | None, expected: list[int], missed: int
) -> None:
    leader = Leader()
    spec = {"schedule": "* * * * *", "concurrencyPolicy": "Allow"}
    leader.observe(spec if catchup is None else {**spec, "catchup": catchup}, status=DOWN)
    published: list[str] = []
    for tick in range(6):
        await leader.tick_at(back(tick * 0.2))
        published += await drain(leader)
    assert published == ids(*expected)
    assert leader.sink.status["missedRuns"] == missed
    assert leader.sink.status["nextRunAt"] == "2026-12-01T09:01:00Z"
    counted = leader.ticker.publisher.metrics.runs_skipped.labels(reason="missed")
    assert counted._value.get() == missed  # counted once, whichever path


LATEST = {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "catchup": {"policy": "Latest"}}


async def test_a_latest_catch_up_is_in_status_before_its_run_is_queued() -> None:
    first = Leader()
    first.observe(LATEST, status=DOWN)
    at_enqueue: list[dict[str, Any]] = []
    first.queue.during_enqueue = lambda: at_enqueue.append(dict(first.sink.status))
    await first.tick_at(back(0))
    assert await drain(first) == ids(0)
    # What a leader taking over sees if this one dies as the run is queued: the decision.
    [seen] = at_enqueue
    assert (seen["lastScheduleTime"], seen["missedRuns"], seen["queuedRun"]["id"]) == (
        "2026-12-01T09:00:00Z",
        4,
        ids(0)[0],
    )
    # It takes over a minute later (09:01 is due by then): it goes on from the decision,
    # starts 09:01 once and counts nothing more missed (deciding again, it counted 09:00
    # missed and started 09:01 beside it).
    second = successor(first, minute(1, 30))
    second.observe(LATEST, status=seen)
    for tick in range(3):
        await second.tick_at(minute(1, 30 + tick * 0.2))
    assert await drain(second) == ids(1)
    assert second.sink.status["missedRuns"] == 4
    assert second.sink.status["lastScheduleTime"] == "2026-12-01T09:01:00Z"


async def test_a_catch_up_written_while_redis_is_away_is_published_by_the_reconciler() -> None:
    leader = Leader()
    leader.observe(LATEST, status=DOWN)
    leader.queue.down = True
    await leader.tick_at(back(0))
    status = leader.sink.status
    assert (status["queuedRun"]["id"], status["missedRuns"]) == (ids(0)[0], 4)
    leader.queue.down = False
    await leader.tick_at(back(1))
    assert await drain(leader) == []  # not decided again: the decision is made
    await leader.ticker.reconcile()
    [claim] = await leader.queue.claim(consumer="test", lease_seconds=30, count=10)
    assert claim.message.run_id == ids(0)[0]
    assert claim.message.scheduled_at == "2026-12-01T09:00:00+00:00"
    assert leader.sink.status["missedRuns"] == 4


async def test_caught_up_runs_go_at_the_operators_pace_and_runs_on_time_do_not_wait() -> None:
    leader = Leader()
    paced(leader, Pace(per_second=1, burst=1, now=back(0).timestamp()))
    leader.observe(ALL_OF_THEM, status=DOWN)
    await leader.tick_at(back(0))
    await leader.tick_at(back(0.5))  # no token yet
    assert await drain(leader) == ids(-4)
    await leader.tick_at(back(1.0))
    await leader.tick_at(back(1.5))
    assert await drain(leader) == ids(-3)
    for second in range(2, 10):
        await leader.tick_at(back(second))
    assert await drain(leader) == ids(-2, -1, 0)
    # Caught up: the next run is on time, and the empty bucket does not hold it back.
    paced(leader, Pace(per_second=0.001, burst=1, now=back(0).timestamp())).take(
        back(0).timestamp()
    )
    await leader.tick_at(minute(1, 0.005))
    assert await drain(leader) == ids(1)


BACKFILL = {"name": "b1", "from": "2026-12-01T08:00:00Z", "to": "2026-12-01T08:03:00Z"}


def backfilled(*minutes: int, name: str = "b1") -> list[str]:
    return [backfill_run_id(UID, name, minute(m)) for m in minutes]


async def test_a_backfill_publishes_every_run_of_its_range_in_order_and_records_it() -> None:
    leader = Leader(start=NINE + dt.timedelta(seconds=10))
    leader.observe({"schedule": "* * * * *", "concurrencyPolicy": "Allow", "backfills": [BACKFILL]})
    await leader.tick_at(NINE + dt.timedelta(seconds=10))
    assert await drain(leader) == backfilled(-60, -59, -58, -57)
    [progress] = leader.sink.status["backfills"]
    assert progress["name"] == "b1"
    assert progress["doneUntil"] == "2026-12-01T08:03:00Z"
    assert (progress["published"], progress["skipped"]) == (4, 0)
    assert progress["completedAt"] == "2026-12-01T09:00:10Z"
    assert "BackfillComplete" in leader.sink.reasons()
    await leader.tick_at(NINE + dt.timedelta(seconds=20))
    assert await drain(leader) == []  # complete: nothing more


async def test_a_new_leader_goes_on_with_a_backfill_where_the_old_one_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork_operator.publisher")
    hours = [dt.datetime(2026, 12, 1, h, tzinfo=dt.UTC) for h in (1, 2, 3, 4, 5)]
    spec = {
        "schedule": "@every 1h",
        "concurrencyPolicy": "Allow",
        "notBefore": "2026-12-01T00:00:00Z",
        "backfills": [{"name": "b1", "from": "2026-12-01T00:30:00Z", "to": "2026-12-01T05:00:00Z"}],
    }
    first = Leader(start=NINE)
    paced(first, Pace(per_second=1, burst=2, now=NINE.timestamp()))
    first.observe(spec)
    await first.tick_at(NINE + dt.timedelta(seconds=0.1))
    assert await drain(first) == [backfill_run_id(UID, "b1", h) for h in hours[:2]]
    written = first.sink.status
    [progress] = written["backfills"]
    assert (progress["published"], progress["doneUntil"]) == (2, "2026-12-01T02:00:00Z")
    assert "completedAt" not in progress
    second = successor(first, NINE + dt.timedelta(seconds=5))
    second.observe(spec, status=written)
    await second.tick_at(NINE + dt.timedelta(seconds=5))
    assert await drain(second) == [backfill_run_id(UID, "b1", h) for h in hours[2:]]
    assert republished(caplog) == []
    [progress] = second.sink.status["backfills"]
    assert (progress["published"], progress["doneUntil"]) == (5, "2026-12-01T05:00:00Z")
    assert progress["completedAt"] is not None


async def test_a_backfill_follows_the_concurrency_policy() -> None:
    leader = Leader(start=NINE + dt.timedelta(seconds=10))
    leader.observe({"schedule": "* * * * *", "backfills": [BACKFILL]})  # Forbid
    await leader.tick_at(NINE + dt.timedelta(seconds=10))
    # The first run is active (queued): Forbid skips the others, as for scheduled runs.
    assert await drain(leader) == backfilled(-60)
    [progress] = leader.sink.status["backfills"]
    assert (progress["published"], progress["skipped"]) == (1, 3)


async def test_a_backfill_of_too_many_runs_is_refused_with_a_reason() -> None:
    leader = Leader(start=NINE)
    huge = {"name": "huge", "from": "2026-11-01T00:00:00Z", "to": "2026-11-03T00:00:00Z"}
    leader.observe({"schedule": "* * * * *", "concurrencyPolicy": "Allow", "backfills": [huge]})
    await leader.tick_at(NINE + dt.timedelta(seconds=1))
    assert await drain(leader) == []
    [progress] = leader.sink.status["backfills"]
    assert "2881 runs, more than the 1000" in progress["message"]
    assert progress["completedAt"] is not None
    assert "BackfillRefused" in leader.sink.reasons()


async def test_a_suspended_jobs_backfill_waits_for_the_resume() -> None:
    leader = Leader(start=NINE)
    spec = {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "backfills": [BACKFILL]}
    leader.observe({**spec, "suspend": True})
    await leader.tick_at(NINE + dt.timedelta(seconds=1))
    assert await drain(leader) == []
    leader.observe(spec, status=leader.sink.status, generation=2)
    await leader.tick_at(NINE + dt.timedelta(seconds=2))
    assert await drain(leader) == backfilled(-60, -59, -58, -57)
