"""The leader's decisions in milliseconds: the real ticker, publisher, reporter and
watch state over the in-memory queue, a clock moved by hand, and a sink for status
writes and Events in place of the API server. (The same behaviour against the real
API server and Redis: tests/integration/test_operator.py.)

Due, missed and caught up, Forbid, Allow, jitter, suspend, run-now, leader loss,
dead letters, the pause after runs failed in a row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import scheduled_message
from tickwork.core.annotations import (
    PURGE_ANNOTATION,
    REQUEUE_ANNOTATION,
    RESUME_ANNOTATION,
    RUN_NOW_ANNOTATION,
    RUN_PARAMS_ANNOTATION,
)
from tickwork.core.buckets import BucketIndex
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.runs import jitter_seconds, manual_run_id, scheduled_run_id
from tickwork.kube.client import KubeApiError
from tickwork.kube.status import run_manager
from tickwork.queue.memory import MemoryRunQueue
from tickwork.queue.messages import EnqueueOutcome, RunMessage
from tickwork_operator.clock import Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import LIST_QUIET_SECONDS, WatchState
from tickwork_operator.ticker import Ticker

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

UID = "7c8e4d0a-1111-4222-8333-444455556666"
T0 = dt.datetime(2026, 12, 1, 9, 0, 30, tzinfo=dt.UTC)  # created half a minute past 09:00


NINE = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def minute(m: int, second: float = 0.0) -> dt.datetime:
    return NINE + dt.timedelta(minutes=m, seconds=second)


class Sink:
    """Stands in for the API server's status subresource and Events: records what the
    operator sends and answers as the API server would (a new resourceVersion)."""

    def __init__(self) -> None:
        self.status: dict[str, Any] = {}
        self.writes = 0
        self.events: list[tuple[str, str]] = []
        self.echo: Callable[[dict[str, Any]], None] | None = None
        """The watch event of a write, when it arrives before the write's answer."""
        self.run_applies: list[tuple[str, dict[str, Any] | None]] = []
        self.job: dict[str, Any] | None = None
        """What a read of the job returns (None: it is gone)."""
        self.patches: list[dict[str, Any]] = []
        self.shown_by_run = False
        """Did a run's record write the next runs last (so that they are its manager's)?"""

    async def apply_job_status(self, *job: Any, **options: Any) -> dict[str, Any]:
        # Called as (namespace, name, uid, body, field_manager=..., ...).
        status: dict[str, Any] = job[3]
        if options["field_manager"] != "tickwork-operator":  # as one run (purging it)
            assert options["field_manager"].startswith("tickwork-run-")
            # A purge gives entries up (force False); a record of a run the operator
            # cancelled takes lastRun over, as its worker's record would (force True).
            assert options.get("force", True) is False or (status and "lastRun" in status)
            self.run_applies.append((options["field_manager"], status))
            return {"metadata": {}}
        self.writes += 1
        # Server-side apply: the operator's apply states all its fields; one left out goes,
        # except the next runs a run's record wrote last (the operator does not hold them).
        shown = {k: self.status[k] for k in SHOWN if k in self.status and self.shown_by_run}
        self.status = {**shown, **{k: v for k, v in status.items() if v is not None}}
        self.shown_by_run = self.shown_by_run and not set(SHOWN) & set(status)
        if self.echo is not None:
            self.echo(dict(self.status))
        return {
            "metadata": {"uid": UID, "resourceVersion": str(100 + self.writes)},
            "status": dict(self.status),
        }

    async def merge_job_status(self, *job: Any, **options: Any) -> dict[str, Any]:
        status: dict[str, Any] = job[2]
        assert options["field_manager"] == "tickwork-operator"
        self.patches.append(status)
        for key, value in status.items():
            assert value is None  # only ever a removal
            self.status.pop(key, None)
        self.shown_by_run = False
        return {"metadata": {"uid": UID}, "status": dict(self.status)}

    def record_shown(self, status: dict[str, Any]) -> dict[str, Any]:
        """A run's record arrived with the next runs (the worker's one write): ``status``
        as the watch brings it, and the next runs held by that run from now on."""
        self.status = {**self.status, **{k: v for k, v in status.items() if k in SHOWN}}
        self.shown_by_run = any(k in status for k in SHOWN)
        return status

    async def get_job(self, *job: str) -> dict[str, Any]:
        if self.job is not None:
            return self.job
        raise KubeApiError(404, "NotFound", f"{job} is gone")

    async def delete_job(self, *job: str) -> None:
        raise KubeApiError(404, "NotFound", f"{job} is gone")

    async def post(self, job: Any, *, type_: str, reason: str, message: str) -> None:
        assert job.uid == UID
        assert type_ in {"Normal", "Warning"}
        self.events.append((reason, message))

    def reasons(self) -> list[str]:
        return [reason for reason, _ in self.events]


class FlakyQueue(MemoryRunQueue):
    """The in-memory queue, unreachable while ``down`` (as Redis in an outage);
    ``during_enqueue`` runs while a publish waits for it (as a watch event may)."""

    down = False
    during_enqueue: Callable[[], None] | None = None

    async def enqueue(self, message: RunMessage) -> EnqueueOutcome:
        if self.during_enqueue is not None:
            self.during_enqueue()
        if self.down:
            raise QueueUnavailableError("Redis is down")
        return await super().enqueue(message)


class Claims:
    """The namespaces' claims (operator/tickwork_operator/claims.py), held or not by hand."""

    def __init__(self) -> None:
        self.held = False
        self.on_claimed: Callable[[str], None] = lambda _namespace: None

    def holds(self, namespace: str) -> bool:
        assert namespace == "ns"
        return self.held

    def retry_in(self, namespace: str) -> float:
        del namespace
        return 5.0

    def why_not(self, namespace: str) -> str:
        del namespace
        return "claimed_elsewhere"


class Leader:
    """One operator replica, leading unless told otherwise, with a hand-moved clock."""

    def __init__(
        self,
        start: dt.datetime = T0,
        *,
        claims: Claims | None = None,
        schedule_in_status: bool = True,
    ) -> None:
        self.t = start.timestamp()
        self.leading = True
        self.queue = FlakyQueue(clock=lambda: self.t)
        self.sink = Sink()
        self.state = WatchState(
            index=BucketIndex(start=self.t, width=1.0), schedule_in_status=schedule_in_status
        )
        self.ticker = Ticker(
            state=self.state,
            queue=self.queue,
            kube=self.sink,  # type: ignore[arg-type]
            events=self.sink,  # type: ignore[arg-type]
            metrics=OperatorMetrics(),
            tick_seconds=1.0,
            reconcile_seconds=3600,
            holds_lease=lambda: self.leading,
            clock=Clock(wall=lambda: self.t, monotonic=lambda: self.t),
            report_hold_seconds=0,
            claims=claims,  # type: ignore[arg-type]
        )

    def observe(
        self,
        spec: dict[str, Any],
        *,
        status: dict[str, Any] | None = None,
        generation: int = 1,
        annotations: dict[str, str] | None = None,
        name: str = "j",
        uid: str = UID,
    ) -> None:
        body = {
            "metadata": {
                "namespace": "ns",
                "name": name,
                "uid": uid,
                "generation": generation,
                "creationTimestamp": T0.isoformat(),
                "resourceVersion": "7",
                "annotations": annotations or {},
            },
            "spec": {"task": {"http": {"url": "https://example.com/"}}, **spec},
            "status": status or {},
        }
        self.state.observe(body, now=dt.datetime.fromtimestamp(self.t, dt.UTC))

    async def tick_at(self, when: dt.datetime) -> None:
        self.t = when.timestamp()
        await self.ticker.tick()
        await self.ticker.reporter.idle()

    async def publish(self, run_at: dt.datetime, *, uid: str = UID) -> RunMessage:
        """Put the run of ``run_at`` in the queue, as a publish does."""
        message = scheduled_message(uid, run_at)
        await self.queue.enqueue(message)
        return message

    async def queued(self) -> list[str]:
        """The run IDs waiting in the queue, oldest first (taken out to look)."""
        claims = await self.queue.claim(consumer="test", lease_seconds=30, count=100)
        for claim in claims:
            await self.queue.release(claim)
        return [claim.message.run_id for claim in claims]


EVERY_MINUTE = {"schedule": "* * * * *"}
SHOWN = ("nextRunAt", "nextRuns")


async def test_a_run_is_published_when_it_falls_due_and_not_before() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE)
    await leader.tick_at(minute(0, 59.9))
    assert await leader.queued() == []
    await leader.tick_at(minute(1, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(1))]
    status = leader.sink.status
    assert status["phase"] == "Scheduled"  # the lifecycle; what its runs do is the workers'
    assert status["queuedRun"]["id"] == scheduled_run_id(UID, minute(1))
    assert status["nextRunAt"] == "2026-12-01T09:02:00Z"


async def test_no_owed_status_is_written_while_a_list_comes_in() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE)  # a new job: it owes its first status
    leader.state.listed_at = leader.t  # what the watch handler notes for a listed object
    await leader.tick_at(T0 + dt.timedelta(seconds=1))
    assert leader.sink.writes == 0
    assert leader.state.dirty  # still owed
    # No listed object for LIST_QUIET_SECONDS: the list is over, the write goes out.
    await leader.tick_at(T0 + dt.timedelta(seconds=1 + LIST_QUIET_SECONDS))
    assert leader.sink.writes == 1
    assert leader.sink.status["phase"] == "Scheduled"
    assert not leader.state.dirty


async def test_the_queue_is_maintained_once_per_tick_period_not_on_every_woken_tick() -> None:
    """Watch events wake ticks between the regular ones (a status owed, a trigger):
    those make no Redis round trips for reaping and promotion; the next period's
    first tick does."""
    leader = Leader()
    leader.observe(EVERY_MINUTE)
    maintained: list[float] = []
    reap = leader.queue.reap_expired

    async def counted() -> int:
        maintained.append(leader.t)
        return await reap()

    leader.queue.reap_expired = counted  # type: ignore[method-assign]
    for second in (0.005, 0.3, 0.6, 0.95):
        await leader.tick_at(minute(1, second))
    assert maintained == [minute(1, 0.005).timestamp()]
    # A run claimed with a one-second lease, never acknowledged (its worker died).
    (claim,) = await leader.queue.claim(consumer="w", lease_seconds=1, count=1)
    await leader.tick_at(minute(1, 2.1))
    assert len(maintained) == 2
    assert await leader.queued() == [claim.run_id]  # reaped: ready again


async def test_a_tick_repeated_publishes_nothing_twice() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE)
    await leader.tick_at(minute(1, 0.005))
    await leader.tick_at(minute(1, 0.5))
    await leader.tick_at(minute(1, 0.9))
    assert await leader.queued() == [scheduled_run_id(UID, minute(1))]


async def test_after_downtime_the_latest_missed_run_is_published_and_the_rest_counted() -> None:
    # Status from before the operator went down: last run 08:55, the next due at 08:56.
    leader = Leader()
    before = {
        "observedGeneration": 1,
        "lastScheduleTime": "2026-12-01T08:55:00Z",
        "nextRunAt": "2026-12-01T08:56:00Z",
        "phase": "Scheduled",
    }
    leader.observe(EVERY_MINUTE, status=before)
    await leader.tick_at(minute(0, 30.01))
    assert await leader.queued() == [scheduled_run_id(UID, minute(0))]  # 09:00, the latest
    assert leader.sink.status["missedRuns"] == 4  # 08:56 .. 08:59
    assert "MissedRuns" in leader.sink.reasons()


async def test_past_the_starting_deadline_nothing_is_published_and_the_miss_is_told() -> None:
    leader = Leader()
    before = {
        "observedGeneration": 1,
        "lastScheduleTime": "2026-12-01T08:55:00Z",
        "nextRunAt": "2026-12-01T08:56:00Z",
    }
    leader.observe({**EVERY_MINUTE, "startingDeadlineSeconds": 10}, status=before)
    await leader.tick_at(minute(0, 30.01))  # 09:00 is 30 s late, past the 10 s deadline
    assert await leader.queued() == []
    assert leader.sink.status["missedRuns"] == 5
    assert "MissedRun" in leader.sink.reasons()
    await leader.tick_at(minute(1, 0.005))  # the next one is on time again
    assert await leader.queued() == [scheduled_run_id(UID, minute(1))]


async def test_a_missed_one_shot_completes_even_if_the_watch_outruns_the_write() -> None:
    """The watch event of the operator's own report arrives before the report's answer;
    the lifecycle it brings (Completed) must still be written, not lost as "done"."""
    leader = Leader()
    spec = {"runAt": minute(-10).isoformat(), "startingDeadlineSeconds": 60}
    leader.sink.echo = lambda status: leader.observe(spec, status=status)
    leader.observe(spec)
    await leader.tick_at(minute(0, 31))
    assert leader.sink.status["missedRuns"] == 1
    await leader.tick_at(minute(0, 32))
    assert leader.sink.status["phase"] == "Completed"
    ready = leader.sink.status["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "Missed")
    assert not leader.state.dirty  # and then nothing more is owed


def running(run_at: dt.datetime) -> dict[str, Any]:
    return {
        "activeRuns": [
            {
                "id": scheduled_run_id(UID, run_at),
                "state": "Running",
                "scheduledAt": run_at.isoformat(),
                "attempt": 1,
            }
        ]
    }


async def worker_took(leader: Leader, run_at: dt.datetime) -> None:
    """A worker claimed the run of ``run_at`` and is running it."""
    message = await leader.publish(run_at)
    [claim] = await leader.queue.claim(consumer="worker", lease_seconds=300)
    assert claim.message.run_id == message.run_id


async def test_forbid_skips_a_run_while_the_previous_one_is_still_running() -> None:
    leader = Leader()
    await worker_took(leader, minute(0))
    leader.observe({**EVERY_MINUTE, "concurrencyPolicy": "Forbid"}, status=running(minute(0)))
    await leader.tick_at(minute(1, 0.005))
    assert await leader.queued() == []
    assert "RunSkipped" in leader.sink.reasons()
    assert leader.sink.status["missedRuns"] == 1
    # Allow publishes next to it.
    allowing = Leader()
    await worker_took(allowing, minute(0))
    allowing.observe({**EVERY_MINUTE, "concurrencyPolicy": "Allow"}, status=running(minute(0)))
    await allowing.tick_at(minute(1, 0.005))
    assert await allowing.queued() == [scheduled_run_id(UID, minute(1))]


async def test_jitter_delays_the_publish_within_its_bound_and_keeps_the_run_id() -> None:
    leader = Leader()
    leader.observe({**EVERY_MINUTE, "jitterSeconds": 30})
    run_id = scheduled_run_id(UID, minute(1))
    delay = jitter_seconds(run_id, 30)
    assert 0 < delay <= 30
    await leader.tick_at(minute(1, delay - 0.01))
    assert await leader.queued() == []
    await leader.tick_at(minute(1, delay + 0.01))
    assert await leader.queued() == [run_id]  # the nominal time's ID, published late


# 2027-11-07 in New York: 01:00-01:59 happens twice, at -04:00 and then at -05:00.
FALL_BACK = dt.datetime(2027, 11, 7, 4, 0, tzinfo=dt.UTC)  # 00:00 EDT
FIRST_0130, SECOND_0130 = FALL_BACK + dt.timedelta(minutes=90), FALL_BACK + dt.timedelta(hours=2.5)


@pytest.mark.parametrize(
    ("daylight_saving", "published"),
    [
        (None, [FIRST_0130]),  # Debian cron's rule for a fixed-time job
        ({"repeated": "First", "skipped": "Skip"}, [FIRST_0130]),
        ({"repeated": "Last", "skipped": "Skip"}, [SECOND_0130]),
        ({"repeated": "Both", "skipped": "Shift"}, [FIRST_0130, SECOND_0130]),
    ],
    ids=["default", "first", "last", "both"],
)
async def test_a_repeated_time_is_published_as_the_daylight_saving_choice_says(
    daylight_saving: dict[str, str] | None, published: list[dt.datetime]
) -> None:
    leader = Leader(start=FALL_BACK)
    # Allow: no worker finishes the first run here, and Forbid would skip the second.
    spec: dict[str, Any] = {
        "schedule": "30 1 * * *",
        "timeZone": "America/New_York",
        "concurrencyPolicy": "Allow",
    }
    if daylight_saving is not None:
        spec["daylightSaving"] = daylight_saving
    leader.observe(
        spec, status={"observedGeneration": 1, "lastScheduleTime": "2027-11-06T05:30:00Z"}
    )
    await leader.tick_at(FALL_BACK + dt.timedelta(seconds=1))
    assert leader.sink.status["nextRunAt"] == published[0].isoformat().replace("+00:00", "Z")
    for instant in (FIRST_0130, SECOND_0130):
        await leader.tick_at(instant + dt.timedelta(milliseconds=5))
    assert await leader.queued() == [scheduled_run_id(UID, at) for at in published]
    # The next run is the next night's 01:30 (EST), whatever the choice.
    assert leader.sink.status["nextRunAt"] == "2027-11-08T06:30:00Z"


async def test_a_suspended_job_publishes_nothing_and_a_resume_starts_from_now() -> None:
    leader = Leader()
    leader.observe({**EVERY_MINUTE, "suspend": True})
    await leader.tick_at(minute(3, 0.005))
    assert await leader.queued() == []
    assert leader.sink.status["phase"] == "Suspended"
    leader.observe(EVERY_MINUTE, generation=2, status=leader.sink.status)  # resumed at 09:03
    await leader.tick_at(minute(3, 0.5))
    assert await leader.queued() == []  # no burst of the minutes it was suspended
    await leader.tick_at(minute(4, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(4))]


async def test_run_now_publishes_one_manual_run_per_token() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE, annotations={RUN_NOW_ANNOTATION: "tok-1"})
    await leader.tick_at(minute(0, 40))
    manual = manual_run_id(UID, "tok-1")
    assert await leader.queued() == [manual]
    assert leader.sink.status["queuedRun"]["manual"] is True
    assert "RunNow" in leader.sink.reasons()
    # The same token seen again (every later watch event carries it): nothing new.
    leader.observe(
        EVERY_MINUTE, annotations={RUN_NOW_ANNOTATION: "tok-1"}, status=leader.sink.status
    )
    await leader.tick_at(minute(0, 41))
    assert await leader.queued() == [manual]


async def test_run_now_on_a_suspended_job_is_refused_with_an_event() -> None:
    leader = Leader()
    leader.observe({**EVERY_MINUTE, "suspend": True}, annotations={RUN_NOW_ANNOTATION: "t"})
    await leader.tick_at(minute(0, 40))
    assert await leader.queued() == []
    assert "RunNowIgnored" in leader.sink.reasons()


async def messages(leader: Leader) -> list[RunMessage]:
    """The messages waiting in the queue (taken out to look)."""
    claims = await leader.queue.claim(consumer="test", lease_seconds=30, count=100)
    for claim in claims:
        await leader.queue.release(claim)
    return [claim.message for claim in claims]


async def test_run_now_passes_its_parameters_and_trigger_time_to_the_run() -> None:
    leader = Leader()
    asked = {RUN_NOW_ANNOTATION: "tok-1", RUN_PARAMS_ANNOTATION: '{"region":"eu"}'}
    leader.observe(EVERY_MINUTE, annotations=asked)
    await leader.tick_at(minute(0, 40))
    [message] = await messages(leader)
    assert (message.run_id, message.params) == (manual_run_id(UID, "tok-1"), {"region": "eu"})
    assert message.scheduled_at is None  # still a manual run to workers of older versions
    assert message.triggered_at == minute(0, 40).isoformat()
    queued = leader.sink.status["queuedRun"]
    assert (queued["params"], queued["scheduledAt"]) == ({"region": "eu"}, "2026-12-01T09:00:40Z")
    told = f"manual run {message.run_id} published (token 'tok-1', parameters region)"
    assert ("RunNow", told) in leader.sink.events
    # The next token without parameters (the CLI removes the annotation) passes none.
    await leader.queue.ack((await leader.queue.claim(consumer="w", lease_seconds=30))[0])
    leader.observe(
        EVERY_MINUTE, annotations={RUN_NOW_ANNOTATION: "tok-2"}, status=leader.sink.status
    )
    await leader.tick_at(minute(0, 41))
    [second] = await messages(leader)
    assert (second.run_id, second.params) == (manual_run_id(UID, "tok-2"), None)
    assert "params" not in leader.sink.status["queuedRun"]


@pytest.mark.parametrize(
    ("annotation", "why"),
    [
        ("region=eu", "tickwork.dev/run-params must be a JSON object of strings"),
        ('{"bad name": "x"}', "parameter name 'bad name' must be a letter followed by"),
        ('{"note": "' + "x" * 300 + '"}', "at most 128 characters in all"),
    ],
)
async def test_run_now_with_unusable_parameters_is_refused_once_saying_why(
    annotation: str, why: str
) -> None:
    leader = Leader()
    annotations = {RUN_NOW_ANNOTATION: "tok", RUN_PARAMS_ANNOTATION: annotation}
    leader.observe(EVERY_MINUTE, annotations=annotations)
    await leader.tick_at(minute(0, 40))
    assert await leader.queued() == []
    [(reason, message)] = leader.sink.events
    assert reason == "RunNowIgnored"
    assert message.startswith("run-now 'tok' ignored: ")
    assert why in message
    assert message.endswith("; fix the parameters and use a new token")
    assert leader.sink.status["lastTriggerToken"] == "tok"  # acted on: not refused again
    leader.observe(EVERY_MINUTE, annotations=annotations, status=leader.sink.status)
    await leader.tick_at(minute(0, 41))
    assert len(leader.sink.events) == 1


async def test_a_manual_run_the_queue_lost_is_published_again_with_its_parameters() -> None:
    leader = Leader()
    run_id = manual_run_id(UID, "tok")
    status = {
        "observedGeneration": 1,
        "queuedRun": {
            "id": run_id,
            "scheduledAt": "2026-12-01T09:00:10Z",
            "queuedAt": "2026-12-01T09:00:10Z",
            "manual": True,
            "params": {"region": "eu"},
        },
    }
    leader.observe(EVERY_MINUTE, status=status, annotations={RUN_NOW_ANNOTATION: "tok"})
    leader.t = minute(0, 40).timestamp()
    assert await leader.ticker.reconciler.reconcile() == 1
    [message] = await messages(leader)
    assert (message.run_id, message.params) == (run_id, {"region": "eu"})
    assert (message.scheduled_at, message.triggered_at) == (None, "2026-12-01T09:00:10+00:00")


async def test_a_run_the_queue_lost_is_published_again_with_its_priority_and_key() -> None:
    """A run re-published from status (Redis lost it) still waits for its concurrency
    key and keeps its priority: without them it would run past the key's limit."""
    leader = Leader()
    run_id = manual_run_id(UID, "tok")
    status = {
        "observedGeneration": 1,
        "activeRuns": [
            {
                "id": run_id,
                "scheduledAt": "2026-12-01T09:00:10Z",
                "state": "Retrying",
                "attempt": 2,
                "manual": True,
            }
        ],
    }
    spec = {**EVERY_MINUTE, "priority": "High", "concurrency": {"key": "db", "limit": 2}}
    leader.observe(spec, status=status, annotations={RUN_NOW_ANNOTATION: "tok"})
    leader.t = minute(0, 40).timestamp()
    assert await leader.ticker.reconciler.reconcile() == 1
    [message] = await messages(leader)
    assert (message.run_id, message.attempt, message.priority) == (run_id, 2, "High")
    assert (message.concurrency_key, message.concurrency_limit) == ("ns/db", 2)


async def test_a_leader_that_lost_its_lease_publishes_nothing_until_it_holds_it_again() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE, annotations={RUN_NOW_ANNOTATION: "tok"})
    leader.leading = False
    await leader.tick_at(minute(1, 0.005))
    await leader.tick_at(minute(1, 2))
    assert await leader.queued() == []
    assert leader.sink.reasons() == []
    leader.leading = True  # the due run and the trigger were kept, not dropped
    await leader.tick_at(minute(1, 3.5))
    assert sorted(await leader.queued()) == sorted(
        [scheduled_run_id(UID, minute(1)), manual_run_id(UID, "tok")]
    )


async def test_a_redis_outage_keeps_the_due_run_and_publishes_it_after() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE)
    leader.queue.down = True
    await leader.tick_at(minute(1, 0.005))
    leader.queue.down = False
    assert await leader.queued() == []
    await leader.tick_at(minute(1, 1.5))
    assert await leader.queued() == [scheduled_run_id(UID, minute(1))]


def finished(run_at: dt.datetime, outcome: str, error: str | None = None) -> dict[str, Any]:
    record = {
        "id": scheduled_run_id(UID, run_at),
        "scheduledAt": run_at.isoformat(),
        "outcome": outcome,
        **({"error": error} if error else {}),
    }
    return {
        "observedGeneration": 1,
        "lastScheduleTime": run_at.isoformat(),
        "lastRun": record,
        "nextRunAt": minute(1).isoformat(),
        "phase": "Scheduled",
    }


SCHEDULE_FIELDS = ("nextRunAt", "nextRuns", "lastScheduleTime", "queuedRun")


def stamp(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def shown_after(run_at: dt.datetime) -> dict[str, Any]:
    """The next runs an every-minute job's record shows after the run of ``run_at``."""
    runs = [stamp(run_at + dt.timedelta(minutes=m)) for m in range(1, 6)]
    return {"nextRunAt": runs[0], "nextRuns": runs}


def ended(
    run_at: dt.datetime, status: dict[str, Any] | None = None, *, shows: bool = False
) -> dict[str, Any]:
    """``status`` (as written so far) with the worker's record of the run of ``run_at``
    (``shows``: and the next runs, as the worker's one write carries them)."""
    record = {
        "id": scheduled_run_id(UID, run_at),
        "scheduledAt": run_at.isoformat(),
        "outcome": "Succeeded",
        "finishedAt": (run_at + dt.timedelta(seconds=1)).isoformat(),
    }
    shown = shown_after(run_at) if shows else {}
    return {
        **(status or {"observedGeneration": 1, "phase": "Scheduled"}),
        "lastRun": record,
        **shown,
    }


async def test_by_default_a_run_on_time_costs_no_operator_write() -> None:
    """The default: the operator writes a recurring job's status once (its first, with
    the next runs), and then nothing per run; each run is its worker's one write, which
    shows the next runs (DESIGN.md invariant 10)."""
    leader = Leader(schedule_in_status=False)
    leader.observe(EVERY_MINUTE)
    await leader.tick_at(T0 + dt.timedelta(seconds=1))
    assert leader.sink.writes == 1  # the first status: phase, conditions, the next runs
    assert leader.sink.status["phase"] == "Scheduled"
    assert leader.sink.status["nextRunAt"] == stamp(minute(1))
    assert leader.sink.status["nextRuns"] == [stamp(minute(m)) for m in range(1, 6)]
    for m in (1, 2, 3):
        await leader.tick_at(minute(m, 0.005))
        assert scheduled_run_id(UID, minute(m)) in await leader.queued()
        await leader.tick_at(minute(m, 0.5))  # the run is on its way: nothing to show
        status = leader.sink.record_shown(ended(minute(m), leader.sink.status, shows=True))
        leader.observe(EVERY_MINUTE, status=status)
        await leader.tick_at(minute(m, 2))
    assert leader.sink.writes == 1
    assert leader.sink.status["nextRunAt"] == stamp(minute(4))
    assert not {"lastScheduleTime", "queuedRun"} & set(leader.sink.status)
    # The same runs with the schedule in status: a write per run.
    keeping = Leader(schedule_in_status=True)
    keeping.observe(EVERY_MINUTE)
    for m in (1, 2, 3):
        await keeping.tick_at(minute(m, 0.005))
    assert keeping.sink.writes == 3  # the first status went out with the first run's
    assert keeping.sink.status["nextRunAt"] == minute(4).isoformat().replace("+00:00", "Z")


async def test_a_run_published_while_the_one_before_is_on_its_way_shows_the_next() -> None:
    """No worker takes the runs (a backlog): the record that would show the next runs
    does not come, so each run published behind another costs the operator a write of
    them; runs that end in time cost none (above)."""
    leader = Leader(schedule_in_status=False)
    leader.observe({**EVERY_MINUTE, "concurrencyPolicy": "AllowAll"})
    await leader.tick_at(T0 + dt.timedelta(seconds=1))
    await leader.tick_at(minute(1, 0.005))
    assert leader.sink.writes == 1  # the first run: the one before it is none
    await leader.tick_at(minute(2, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(m)) for m in (1, 2)]
    assert leader.sink.writes == 2
    assert leader.sink.status["nextRunAt"] == stamp(minute(3))
    assert not {"lastScheduleTime", "queuedRun"} & set(leader.sink.status)


async def test_a_record_that_shows_no_next_runs_gets_them_from_the_operator() -> None:
    """A worker of an older version writes its record alone: the operator, with no run
    on its way to show them, writes the next runs itself, once."""
    leader = Leader(schedule_in_status=False)
    leader.observe(EVERY_MINUTE)
    await leader.tick_at(T0 + dt.timedelta(seconds=1))
    await leader.tick_at(minute(1, 0.005))
    shown = leader.sink.record_shown(ended(minute(1), leader.sink.status, shows=False))
    leader.observe(EVERY_MINUTE, status={**shown, **shown_after(minute(0))})
    await leader.tick_at(minute(1, 2))
    assert leader.sink.writes == 2
    assert leader.sink.status["nextRunAt"] == stamp(minute(2))
    leader.observe(EVERY_MINUTE, status=dict(leader.sink.status))
    await leader.tick_at(minute(1, 3))
    assert leader.sink.writes == 2  # shown now: nothing more


async def test_a_suspend_takes_the_next_runs_a_record_showed_away() -> None:
    """The next runs a run's record wrote are that run's manager's: the operator's
    apply cannot leave them out, so a merge patch removes them (before the apply that
    says Suspended) when none is next."""
    leader = Leader(schedule_in_status=False)
    leader.sink.echo = lambda status: leader.observe(EVERY_MINUTE, status=status)
    leader.observe(EVERY_MINUTE)
    await leader.tick_at(T0 + dt.timedelta(seconds=1))
    await leader.tick_at(minute(1, 0.005))
    leader.sink.echo = None
    status = leader.sink.record_shown(ended(minute(1), leader.sink.status, shows=True))
    leader.observe(EVERY_MINUTE, status=status)
    suspended = {**EVERY_MINUTE, "suspend": True}
    leader.sink.echo = lambda status: leader.observe(suspended, status=status, generation=2)
    leader.observe(suspended, status=status, generation=2)
    await leader.tick_at(minute(1, 2))
    assert leader.sink.status["phase"] == "Suspended"
    assert leader.sink.patches == [{"nextRunAt": None, "nextRuns": None}]
    assert not set(SCHEDULE_FIELDS) & set(leader.sink.status)
    writes = leader.sink.writes
    await leader.tick_at(minute(2, 2))
    assert (leader.sink.writes, len(leader.sink.patches)) == (writes, 1)


async def test_without_the_schedule_in_status_a_restart_goes_on_after_the_last_run() -> None:
    """A new leader (a restart) finds no nextRunAt: the run after the last one status
    shows is next, not the first after the job's creation (which would count every
    run since as missed)."""
    leader = Leader(minute(5, 40), schedule_in_status=False)
    leader.observe(EVERY_MINUTE, status=ended(minute(5)))
    await leader.tick_at(minute(6, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(6))]
    assert "MissedRuns" not in leader.sink.reasons()
    assert "missedRuns" not in leader.sink.status
    # A run published and not yet ended (queued, or running) is published again, as
    # the same run: the queue keeps it once.
    again = Leader(minute(6, 40), schedule_in_status=False)
    again.observe(EVERY_MINUTE, status=ended(minute(5)))
    await again.publish(minute(6))
    await again.tick_at(minute(6, 41))
    assert await again.queued() == [scheduled_run_id(UID, minute(6))]
    assert "MissedRuns" not in again.sink.reasons()


async def test_without_the_schedule_in_status_a_standby_follows_the_runs_records() -> None:
    """A standby indexes the jobs as the leader does, from the watch alone: without
    nextRunAt and lastScheduleTime in status, it moves each job's next run on as the
    records of the leader's runs arrive, so that taking over counts nothing missed."""
    standby = Leader(minute(0, 40), schedule_in_status=False)
    standby.observe(EVERY_MINUTE, status=ended(minute(0)))
    for m in (1, 2, 3):  # the leader's runs, as their records arrive (a standby never ticks)
        standby.t = minute(m, 2).timestamp()
        standby.observe(EVERY_MINUTE, status=ended(minute(m)))
    # The leader is gone; this replica leads now.
    await standby.tick_at(minute(4, 0.005))
    assert await standby.queued() == [scheduled_run_id(UID, minute(4))]
    assert "MissedRuns" not in standby.sink.reasons()


async def test_without_the_schedule_in_status_a_catch_up_is_still_written_first() -> None:
    """A decision the clock would change (runs counted missed) names its run in status
    before it is published, as with the schedule in status; the next run on time
    takes that name out again (a stale queuedRun would look active)."""
    leader = Leader(schedule_in_status=False)
    before = {
        "observedGeneration": 1,
        "lastScheduleTime": "2026-12-01T08:55:00Z",
        "nextRunAt": "2026-12-01T08:56:00Z",
        "phase": "Scheduled",
    }
    leader.sink.echo = lambda status: leader.observe(EVERY_MINUTE, status=status)
    leader.observe(EVERY_MINUTE, status=before)
    await leader.tick_at(minute(0, 30.01))
    assert await leader.queued() == [scheduled_run_id(UID, minute(0))]
    status = leader.sink.status
    assert status["missedRuns"] == 4
    assert status["queuedRun"]["id"] == scheduled_run_id(UID, minute(0))
    assert status["nextRunAt"] == stamp(minute(1))  # shown with the decision's write
    leader.sink.echo = None
    leader.observe(
        EVERY_MINUTE, status=leader.sink.record_shown(ended(minute(0), status, shows=True))
    )
    await leader.tick_at(minute(1, 0.005))
    leader.observe(
        EVERY_MINUTE,
        status=leader.sink.record_shown(ended(minute(1), leader.sink.status, shows=True)),
    )
    await leader.tick_at(minute(1, 2))
    assert scheduled_run_id(UID, minute(1)) in await leader.queued()
    assert not {"lastScheduleTime", "queuedRun"} & set(leader.sink.status)
    assert leader.sink.status["nextRunAt"] == stamp(minute(2))
    assert leader.sink.status["missedRuns"] == 4
    writes = leader.sink.writes
    leader.observe(
        EVERY_MINUTE,
        status=leader.sink.record_shown(ended(minute(2), leader.sink.status, shows=True)),
    )
    await leader.tick_at(minute(2, 2))
    assert leader.sink.writes == writes  # and then none per run


async def test_turning_the_schedule_in_status_off_takes_its_fields_out_of_status() -> None:
    """A job whose status an operator with the setting on wrote: the next runs it shows
    are right, so nothing is written at once; lastScheduleTime and queuedRun leave with
    the operator's first write, at the next run, which is the one nextRunAt named."""
    keeping = Leader(schedule_in_status=True)
    keeping.observe(EVERY_MINUTE)
    await keeping.tick_at(minute(1, 0.005))
    written = ended(minute(1), keeping.sink.status)
    assert set(SCHEDULE_FIELDS) <= set(written)
    leader = Leader(minute(1, 30), schedule_in_status=False)
    leader.sink.status = dict(written)
    # The echo of each write: the operator's share, beside the worker's record.
    leader.sink.echo = lambda status: leader.observe(
        EVERY_MINUTE, status={**status, "lastRun": written["lastRun"]}
    )
    leader.observe(EVERY_MINUTE, status=written)
    await leader.tick_at(minute(1, 31))
    assert leader.sink.writes == 0
    await leader.tick_at(minute(2, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(2))]
    leader.observe(
        EVERY_MINUTE,
        status=leader.sink.record_shown(ended(minute(2), leader.sink.status, shows=True)),
    )
    await leader.tick_at(minute(2, 2))
    assert leader.sink.writes == 1
    assert not {"lastScheduleTime", "queuedRun"} & set(leader.sink.status)
    assert leader.sink.status["nextRunAt"] == stamp(minute(3))
    leader.sink.echo = None
    leader.observe(
        EVERY_MINUTE,
        status=leader.sink.record_shown(ended(minute(3), leader.sink.status, shows=True)),
    )
    await leader.tick_at(minute(3, 2))
    assert leader.sink.writes == 1  # and then none per run


async def test_without_the_schedule_in_status_a_restart_does_not_decide_a_skip_again() -> None:
    """A skip is written (it counts a run missed): a new leader goes on after it, not
    after the run that made it skip, and counts each skipped run once."""
    leader = Leader(schedule_in_status=False)
    await worker_took(leader, minute(0))
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "Forbid"}
    leader.observe(spec, status=running(minute(0)))
    await leader.tick_at(minute(1, 0.005))
    assert leader.sink.status["missedRuns"] == 1
    assert leader.sink.status["lastScheduleTime"] == "2026-12-01T09:01:00Z"
    restarted = Leader(minute(1, 30), schedule_in_status=False)
    restarted.queue = restarted.ticker.shared.queue = leader.queue
    restarted.observe(spec, status={**leader.sink.status, **running(minute(0))})
    await restarted.tick_at(minute(2, 0.005))  # the run of 09:00 still runs: 09:02 skipped
    assert restarted.sink.status["missedRuns"] == 2
    assert "MissedRuns" not in restarted.sink.reasons()


async def test_without_the_schedule_in_status_a_lost_run_is_published_again_at_its_time() -> None:
    """Status names no queued run: the leader's own note of it does, and its ID says
    when it was scheduled."""
    leader = Leader(schedule_in_status=False)
    leader.observe(EVERY_MINUTE)
    await leader.tick_at(minute(1, 0.005))
    leader.queue = FlakyQueue(clock=lambda: leader.t)  # Redis lost everything
    leader.ticker.shared.queue = leader.queue
    assert await leader.ticker.reconciler.reconcile() == 1
    [message] = await messages(leader)
    assert message.run_id == scheduled_run_id(UID, minute(1))
    assert message.scheduled_at == minute(1).isoformat()


async def test_ready_goes_false_while_the_last_run_failed_and_back_when_one_succeeds() -> None:
    leader = Leader()
    leader.observe(EVERY_MINUTE, status=finished(minute(0), "Succeeded"))
    await leader.tick_at(minute(0, 30))
    [ready] = leader.sink.status["conditions"]
    assert (ready["status"], ready["reason"]) == ("True", "Scheduled")
    leader.observe(EVERY_MINUTE, status=finished(minute(0), "Failed", "HTTP 503 from the URL"))
    await leader.tick_at(minute(0, 31))
    ready, stalled = leader.sink.status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "LastRunFailed")
    run_id = scheduled_run_id(UID, minute(0))
    assert ready["message"] == f"run {run_id} failed: HTTP 503 from the URL"
    # kstatus (Flux, kpt) reads Stalled: the same reason and message.
    assert stalled == {**ready, "type": "Stalled", "status": "True"}
    assert leader.sink.status["phase"] == "Scheduled"  # the lifecycle is not the health
    leader.observe(
        EVERY_MINUTE,
        status={**finished(minute(0), "Succeeded"), "conditions": leader.sink.status["conditions"]},
    )
    await leader.tick_at(minute(0, 32))
    ready, stalled = leader.sink.status["conditions"]
    assert (ready["status"], ready["reason"]) == ("True", "Scheduled")
    assert (stalled["type"], stalled["status"], stalled["reason"]) == ("Stalled", "False", "Ready")


async def dead_letter(leader: Leader, run_at: dt.datetime, *, uid: str = UID) -> str:
    """A run of ``run_at`` that failed for good: in the queue's dead letters."""
    message = await leader.publish(run_at, uid=uid)
    [claim] = await leader.queue.claim(consumer="worker", lease_seconds=300)
    assert await leader.queue.bury(claim, error="HTTP 500")
    return message.run_id


def listed_dead(*run_ids: str) -> dict[str, Any]:
    return {
        "observedGeneration": 1,
        "phase": "Scheduled",
        "deadRuns": [
            {
                "id": run_id,
                "scheduledAt": "2026-12-01T08:00:00Z",
                "failedAt": "2026-12-01T08:01:00Z",
                "attempts": 3,
                "error": "HTTP 500",
            }
            for run_id in run_ids
        ],
    }


async def test_a_requeue_annotation_requeues_the_jobs_dead_runs_once_per_token() -> None:
    leader = Leader()
    first, second = await dead_letter(leader, minute(-60)), await dead_letter(leader, minute(-30))
    status = listed_dead(first, second)
    leader.observe(EVERY_MINUTE, status=status, annotations={REQUEUE_ANNOTATION: "t1"})
    await leader.tick_at(minute(0, 10))
    assert (await leader.queue.depth()).dead == 0
    assert sorted(await leader.queued()) == sorted([first, second])
    assert leader.sink.status["lastRequeueToken"] == "t1"
    assert "DeadRunsRequeued" in leader.sink.reasons()
    # Both fail again; the same token, seen again (with its status), does nothing more.
    for claim in await leader.queue.claim(consumer="worker", lease_seconds=300, count=10):
        assert await leader.queue.bury(claim, error="HTTP 500")
    leader.observe(
        EVERY_MINUTE,
        status={**status, "lastRequeueToken": "t1"},
        annotations={REQUEUE_ANNOTATION: "t1"},
    )
    await leader.tick_at(minute(0, 20))
    assert (await leader.queue.depth()).dead == 2
    # A new token naming one run requeues that run alone.
    leader.observe(
        EVERY_MINUTE,
        status={**status, "lastRequeueToken": "t1"},
        annotations={REQUEUE_ANNOTATION: f"t2:{second}"},
    )
    await leader.tick_at(minute(0, 30))
    assert await leader.queued() == [second]
    assert leader.sink.status["lastRequeueToken"] == "t2"


async def test_a_run_of_another_job_is_refused_and_left_alone() -> None:
    leader = Leader()
    foreign = await dead_letter(leader, minute(-60), uid="someone-else")
    leader.observe(
        EVERY_MINUTE, status=listed_dead(), annotations={REQUEUE_ANNOTATION: f"t1:{foreign}"}
    )
    await leader.tick_at(minute(0, 10))
    assert (await leader.queue.depth()).dead == 1
    assert "DeadLetterRequestRefused" in leader.sink.reasons()
    assert leader.sink.status["lastRequeueToken"] == "t1"  # acted on: refused once


async def test_a_purge_forgets_the_run_in_the_queue_and_takes_it_out_of_status() -> None:
    leader = Leader()
    run_id = await dead_letter(leader, minute(-60))
    status = listed_dead(run_id)
    leader.sink.job = {
        "metadata": {
            "managedFields": [
                {
                    "manager": run_manager(run_id),
                    "subresource": "status",
                    "fieldsV1": {"f:status": {"f:deadRuns": {}, "f:lastRun": {}}},
                }
            ]
        },
        "status": {
            **status,
            "lastRun": {"id": run_id, "scheduledAt": "2026-12-01T08:00:00Z", "outcome": "Failed"},
        },
    }
    leader.observe(EVERY_MINUTE, status=status, annotations={PURGE_ANNOTATION: f"p1:{run_id}"})
    await leader.tick_at(minute(0, 10))
    assert (await leader.queue.depth()).dead == 0
    assert await leader.queued() == []
    # As the run's own manager: what it still owns (lastRun), without its deadRuns entry.
    [(manager, body)] = leader.sink.run_applies
    assert manager == run_manager(run_id)
    assert body is not None
    assert "deadRuns" not in body
    assert body["lastRun"]["id"] == run_id
    assert leader.sink.status["lastPurgeToken"] == "p1"


# -- the pause after runs failed in a row ---------------------------------------------

PAUSE_AFTER_2 = {**EVERY_MINUTE, "failurePolicy": {"pauseAfter": 2}}


class Runs:
    """The workers' share of status: each run a worker took from the queue and ended."""

    def __init__(self, leader: Leader, spec: dict[str, Any]) -> None:
        self.leader = leader
        self.spec = spec
        self.records: list[dict[str, Any]] = []
        self.generation = 1
        self.annotations: dict[str, str] = {}

    def show(self) -> None:
        """The watch brings the job: the operator's last write and the runs' records."""
        history = {"lastRun": self.records[-1], "runs": self.records} if self.records else {}
        self.leader.observe(
            self.spec,
            status={**self.leader.sink.status, **history},
            generation=self.generation,
            annotations=self.annotations,
        )

    async def end_queued(self, outcome: str, *, after: float = 2.0) -> str:
        """A worker takes the queued run and it ends with ``outcome`` ``after`` seconds."""
        [claim] = await self.leader.queue.claim(consumer="worker", lease_seconds=30)
        await self.leader.queue.ack(claim)
        finished = dt.datetime.fromtimestamp(self.leader.t + after, dt.UTC)
        self.leader.t += after
        self.records.append(
            {
                "id": claim.run_id,
                "outcome": outcome,
                "attempts": 1,
                "scheduledAt": claim.message.scheduled_at or finished.isoformat(),
                "finishedAt": finished.isoformat(),
            }
        )
        self.show()
        return claim.run_id


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


async def paused_after_two(leader: Leader) -> tuple[Runs, list[str]]:
    """A job with pauseAfter 2 whose runs of 09:01 and 09:02 failed."""
    runs = Runs(leader, PAUSE_AFTER_2)
    runs.show()
    failed = []
    for m in (1, 2):
        await leader.tick_at(minute(m, 0.005))
        failed.append(await runs.end_queued("Failed"))
    await leader.tick_at(minute(2, 3))
    return runs, failed


async def test_runs_failing_in_a_row_pause_the_job_and_nothing_more_is_published() -> None:
    leader = Leader()
    runs, failed = await paused_after_two(leader)
    assert failed == [scheduled_run_id(UID, minute(1)), scheduled_run_id(UID, minute(2))]
    status = leader.sink.status
    assert status["phase"] == "Paused"
    assert "nextRunAt" not in status
    assert status["failureStreak"]["count"] == 2
    assert status["failureStreak"]["runIds"] == failed
    paused = condition(status, "Paused")
    assert (paused["status"], paused["reason"]) == ("True", "ConsecutiveFailures")
    assert all(run_id in paused["message"] for run_id in failed)
    ready = condition(status, "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "Paused",
        paused["message"],
    )
    assert ("Paused", paused["message"]) in leader.sink.events
    for m in (3, 4, 5):
        await leader.tick_at(minute(m, 0.005))
        runs.show()  # every later watch event: still paused, nothing more told
    assert await leader.queued() == []
    assert leader.sink.reasons().count("Paused") == 1
    assert leader.sink.status["failureStreak"]["count"] == 2


async def test_a_success_or_a_skip_between_failures_keeps_the_job_running() -> None:
    leader = Leader()
    runs = Runs(leader, PAUSE_AFTER_2)
    runs.show()
    for m, outcome in enumerate(["Failed", "Succeeded", "Failed", "Skipped", "Cancelled"], 1):
        await leader.tick_at(minute(m, 0.005))
        await runs.end_queued(outcome)
    await leader.tick_at(minute(6, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(6))]
    assert leader.sink.status["phase"] == "Scheduled"
    assert leader.sink.status["failureStreak"]["count"] == 1


async def test_run_now_on_a_paused_job_is_refused_with_an_event() -> None:
    leader = Leader()
    runs, _ = await paused_after_two(leader)
    runs.annotations = {RUN_NOW_ANNOTATION: "try-again"}
    runs.show()
    await leader.tick_at(minute(2, 30))
    assert await leader.queued() == []
    [message] = [m for r, m in leader.sink.events if r == "RunNowIgnored"]
    assert "paused" in message
    assert "kubectl tickwork resume" in message


async def test_a_resume_token_ends_the_pause_once_and_runs_start_from_now() -> None:
    leader = Leader()
    runs, _ = await paused_after_two(leader)
    phases: list[str | None] = []
    enqueue = leader.queue.enqueue

    async def noting_the_status(message: RunMessage) -> EnqueueOutcome:
        phases.append(leader.sink.status.get("phase"))
        return await enqueue(message)

    leader.queue.enqueue = noting_the_status  # type: ignore[method-assign]
    leader.t = minute(6, 59.9).timestamp()  # resumed a tenth of a second before a run
    runs.annotations = {RESUME_ANNOTATION: "fixed"}
    runs.show()
    await leader.tick_at(minute(7, 0.005))
    # No burst of the minutes it was paused; the next run, and status said so first.
    assert await leader.queued() == [scheduled_run_id(UID, minute(7))]
    assert phases == ["Scheduled"]
    status = leader.sink.status
    assert status["lastResumeToken"] == "fixed"
    assert status["failureStreak"]["count"] == 0
    assert "pausedAt" not in status["failureStreak"]
    paused = condition(status, "Paused")
    assert (paused["status"], paused["reason"]) == ("False", "Resumed")
    resumed = "resumed (a new tickwork.dev/resume token, 'fixed'): runs are published again"
    assert ("Resumed", f"{resumed}, from now on") in leader.sink.events
    # The same token again (every later watch event carries it) resumes nothing more:
    # two more failures pause the job again.
    await runs.end_queued("Failed")
    await leader.tick_at(minute(8, 0.005))
    await runs.end_queued("Failed")
    await leader.tick_at(minute(8, 5))
    assert leader.sink.status["phase"] == "Paused"
    assert leader.sink.reasons().count("Paused") == 2


async def test_a_new_spec_ends_the_pause_and_starts_a_new_count() -> None:
    leader = Leader()
    runs, _ = await paused_after_two(leader)
    leader.t = minute(4, 10).timestamp()
    runs.spec = {**PAUSE_AFTER_2, "task": {"http": {"url": "https://example.com/fixed"}}}
    runs.generation = 2
    runs.show()
    await leader.tick_at(minute(4, 11))
    status = leader.sink.status
    assert status["phase"] == "Scheduled"
    assert status["nextRunAt"] == "2026-12-01T09:05:00Z"
    assert status["failureStreak"] == {
        "count": 0,
        "runIds": [],
        "countedUntil": "2026-12-01T09:02:02.005000Z",
    }
    resumed = "resumed (the spec changed, generation 2): runs are published again"
    assert ("Resumed", f"{resumed}, from now on") in leader.sink.events
    await leader.tick_at(minute(5, 0.005))
    assert await leader.queued() == [scheduled_run_id(UID, minute(5))]


async def test_a_restarted_operator_keeps_the_pause_and_tells_it_once() -> None:
    leader = Leader()
    runs, _ = await paused_after_two(leader)
    again = Leader(start=minute(3, 30))
    again.sink.status = dict(leader.sink.status)
    runs.leader = again
    runs.show()
    for m in (4, 5):
        await again.tick_at(minute(m, 0.005))
    assert await again.queued() == []
    assert again.sink.writes == 0  # status already says it all
    assert again.sink.reasons() == []


async def test_a_one_shot_whose_worker_reports_first_still_completes() -> None:
    """The worker's result reaches the watch before the leader's report of the publish:
    the one-shot run is not planned again, and the job ends Completed, nothing next."""
    leader = Leader()
    run_at = minute(-10)
    spec = {"runAt": run_at.isoformat()}
    done = {
        "lastRun": {
            "id": scheduled_run_id(UID, run_at),
            "scheduledAt": run_at.isoformat(),
            "outcome": "Succeeded",
        }
    }
    leader.observe(spec)
    leader.t = minute(0, 31).timestamp()
    await leader.ticker.tick()  # published; its report has not gone out yet
    leader.observe(spec, status=done)  # the worker's write is watched first
    await leader.ticker.reporter.idle()
    assert leader.sink.status["phase"] == "Completed"
    assert "nextRunAt" not in leader.sink.status

    # The watch event of each write may arrive while the leader publishes.
    def watched() -> None:
        leader.observe(spec, status={**done, **leader.sink.status})

    leader.queue.during_enqueue = watched
    for second in range(32, 40):
        watched()
        await leader.tick_at(minute(0, second))
    assert leader.sink.status["phase"] == "Completed"
    assert "nextRunAt" not in leader.sink.status
    assert not leader.state.dirty


async def test_a_watch_event_during_a_publish_loses_none_of_it() -> None:
    """The watch replaces the job's entry while the leader publishes its run: what the
    publish changed (the run published, the next one) must hold for the new entry."""
    leader = Leader()
    spec = {**EVERY_MINUTE, "concurrencyPolicy": "Allow"}  # no worker takes the runs
    leader.observe(spec)
    leader.queue.during_enqueue = lambda: leader.observe(spec, status=leader.sink.status)
    await leader.tick_at(minute(1, 0.005))
    status = leader.sink.status
    assert status["queuedRun"]["id"] == scheduled_run_id(UID, minute(1))
    assert status["lastScheduleTime"] == "2026-12-01T09:01:00Z"
    assert status["nextRunAt"] == "2026-12-01T09:02:00Z"
    await leader.tick_at(minute(2, 0.005))
    assert leader.sink.status["lastScheduleTime"] == "2026-12-01T09:02:00Z"
    assert "missedRuns" not in leader.sink.status
    assert leader.state.index.due_of(("run", "ns", "j")) == minute(3).timestamp()


async def test_a_run_the_queue_finished_is_settled_on_the_entry_a_watch_replaced_it_with() -> None:
    """The reconciler asks the queue where an active run is; a watch event may replace
    the job's entry meanwhile. A run the queue says is done is settled on the live
    entry, so the job is no longer held active (Skip would skip every later run)."""
    leader = Leader()
    run_id = scheduled_run_id(UID, minute(0))
    status = {
        "observedGeneration": 1,
        "queuedRun": {
            "id": run_id,
            "scheduledAt": "2026-12-01T09:00:00Z",
            "queuedAt": "2026-12-01T09:00:00Z",
        },
    }
    leader.observe(EVERY_MINUTE, status=status)
    await leader.publish(minute(0))
    [claim] = await leader.queue.claim(consumer="w", lease_seconds=30, count=1)
    await leader.queue.ack(claim)  # done, but its record never reached status
    located = leader.queue.locate

    async def locate_while_the_watch_moves(run: str) -> Any:
        leader.observe(EVERY_MINUTE, status=status)  # a watch event: a new entry
        return await located(run)

    leader.queue.locate = locate_while_the_watch_moves  # type: ignore[method-assign]
    before = leader.state.jobs[("ns", "j")]
    await leader.ticker.reconciler.reconcile()
    live = leader.state.jobs[("ns", "j")]
    assert live is not before
    assert run_id in live.settled_run_ids
    assert live.active_run_id() is None


async def test_a_settled_run_is_let_go_once_its_record_reaches_status() -> None:
    """The IDs of runs the queue reported done before status did are kept only until
    status shows the run finished and no longer active: they would otherwise pile up,
    one per lost write, for the job's lifetime."""
    leader = Leader()
    run_id = scheduled_run_id(UID, minute(0))
    queued = {
        "id": run_id,
        "scheduledAt": "2026-12-01T09:00:00Z",
        "queuedAt": "2026-12-01T09:00:00Z",
    }
    leader.observe(EVERY_MINUTE, status={"observedGeneration": 1, "queuedRun": queued})
    await leader.publish(minute(0))
    [claim] = await leader.queue.claim(consumer="w", lease_seconds=30, count=1)
    await leader.queue.ack(claim)
    await leader.ticker.reconciler.reconcile()
    assert leader.state.jobs[("ns", "j")].settled_run_ids == {run_id}
    # A write of the operator's own share: the run is still unheard of.
    leader.observe(EVERY_MINUTE, status={"observedGeneration": 1, "queuedRun": queued})
    assert leader.state.jobs[("ns", "j")].settled_run_ids == {run_id}
    # Its record arrives while status still lists it active: kept.
    record = {
        "id": run_id,
        "scheduledAt": "2026-12-01T09:00:00Z",
        "outcome": "Succeeded",
        "finishedAt": "2026-12-01T09:00:02Z",
    }
    active = {"id": run_id, "scheduledAt": "2026-12-01T09:00:00Z", "state": "Running", "attempt": 1}
    leader.observe(
        EVERY_MINUTE,
        status={
            "observedGeneration": 1,
            "lastRun": record,
            "runs": [record],
            "activeRuns": [active],
        },
    )
    assert leader.state.jobs[("ns", "j")].settled_run_ids == {run_id}
    leader.observe(
        EVERY_MINUTE, status={"observedGeneration": 1, "lastRun": record, "runs": [record]}
    )
    entry = leader.state.jobs[("ns", "j")]
    assert entry.settled_run_ids == frozenset()
    assert run_id in entry.finished_run_ids()
    assert entry.active_run_id() is None


async def test_a_namespace_another_release_holds_gets_no_run_and_no_status_until_claimed() -> None:
    """The leader of a release that does not hold the namespace's claim publishes none of
    its runs and writes none of its status (the other release does), looks again every
    few seconds, and does both at once when the claim becomes its own."""
    claims = Claims()
    leader = Leader(claims=claims)
    held_back = leader.ticker.metrics.runs_held_back.labels(reason="claimed_elsewhere")
    leader.observe(EVERY_MINUTE)  # a new job: it owes its first status
    await leader.tick_at(minute(1, 0.005))
    assert await leader.queued() == []
    assert leader.sink.writes == 0
    assert leader.state.dirty  # still owed, to be written once the namespace is ours
    assert held_back._value.get() == 1
    await leader.tick_at(minute(1, 1.005))  # not looked at again on every tick
    assert held_back._value.get() == 1

    claims.held = True
    claims.on_claimed("ns")
    await leader.tick_at(minute(1, 5.01))
    assert await leader.queued() == [scheduled_run_id(UID, minute(1))]
    assert leader.sink.status["queuedRun"]["id"] == scheduled_run_id(UID, minute(1))
    assert not leader.state.dirty


async def test_an_owed_status_goes_out_once_the_namespace_is_claimed() -> None:
    """A new job owes its first status; nothing of it falls due for a year. Not written
    while another release holds the namespace, and not looked at again on every tick;
    written once the claim becomes this release's."""
    claims = Claims()
    leader = Leader(claims=claims)
    leader.observe({"schedule": "0 0 1 1 *"})
    await leader.tick_at(T0 + dt.timedelta(seconds=1))
    await leader.tick_at(T0 + dt.timedelta(seconds=2))
    assert leader.sink.writes == 0
    assert leader.state.dirty
    claims.held = True
    await leader.tick_at(T0 + dt.timedelta(seconds=3))
    assert leader.sink.writes == 0  # held now, but nobody said so: the job is not looked at
    claims.on_claimed("ns")
    await leader.tick_at(T0 + dt.timedelta(seconds=4))
    assert leader.sink.writes == 1
    assert leader.sink.status["phase"] == "Scheduled"
    assert not leader.state.dirty
