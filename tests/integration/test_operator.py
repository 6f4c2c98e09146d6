"""The operator as users run it — the ``tickwork-operator`` process — against the real
control plane and a real Redis: publishing, suspend and resume, deletion, edits, bad
specs, manual runs, leader election, crashes and restarts.

Each test scopes its operators to its own namespace, Lease and queue, and reads
the queue directly to see what was published (no worker runs here).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis as redis_lib
from kubernetes import watch as k8s_watch

from tests.support import (
    ECHO,
    Jobs,
    QueueProbe,
    enqueue_scheduled,
    lead,
    rfc3339,
    whole_seconds_from_now,
)
from tickwork.api.models import (
    GROUP,
    PLURAL,
    VERSION,
    ActiveRun,
    OperatorStatus,
    RunRecord,
    ScheduledJobStatus,
)
from tickwork.core.runs import manual_run_id, scheduled_run_id
from tickwork.core.states import JobPhase, RunState
from tickwork.kube import status as writes
from tickwork.kube.client import KubeApiError, KubeClient, load_configuration
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster import build
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(240)


def test_a_one_shot_run_is_published_within_a_tick_of_its_time(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    run_at = whole_seconds_from_now(4)
    job = jobs.create("once", {"runAt": rfc3339(run_at), "task": ECHO})
    run_id = scheduled_run_id(job["metadata"]["uid"], run_at)

    wait_for(lambda: probe.locate(run_id) is RunLocation.READY, timeout=30, what="the run")
    [message] = probe.drain()
    assert message.run_id == run_id
    assert message.enqueued_at is not None
    lag = message.enqueued_at - run_at.timestamp()
    assert 0 <= lag < 1.5  # one tick (1 s) and then some

    # The report follows the publish: the operator gives workers a moment to claim first.
    wait_for(lambda: "queuedRun" in jobs.status("once"), timeout=10, what="queuedRun")
    status = jobs.status("once")
    assert status["lastScheduleTime"] == rfc3339(run_at)
    assert status["queuedRun"]["id"] == run_id
    assert "nextRunAt" not in status  # a one-shot job has nothing next


@pytest.mark.timeout(300)
def test_a_cron_job_publishes_successive_runs(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    # Allow: no worker reports the first run finished, and Forbid would wait for that.
    spec = {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "task": ECHO}
    job = jobs.create("every-minute", spec)
    uid = job["metadata"]["uid"]
    wait_for(lambda: "nextRunAt" in jobs.status("every-minute"), timeout=30, what="nextRunAt")
    first_at = dt.datetime.fromisoformat(jobs.status("every-minute")["nextRunAt"])
    runs = [scheduled_run_id(uid, first_at + dt.timedelta(minutes=m)) for m in (0, 1)]
    # No worker: both wait in the queue, one after the other (nothing drains them).
    wait_for(
        lambda: all(probe.locate(run) is RunLocation.READY for run in runs),
        timeout=150,
        interval=0.5,
        what="two runs queued",
    )
    # No record is coming to show the next run, so the operator shows it: past the second.
    second_at = rfc3339(first_at + dt.timedelta(minutes=1))
    wait_for(
        lambda: jobs.status("every-minute").get("nextRunAt", "") > second_at,
        timeout=10,
        what="nextRunAt past the second run",
    )
    assert [m.run_id for m in probe.drain()] == runs  # and no other run was published


def test_suspend_stops_publishing_and_resume_starts_from_now(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    jobs.create("paused", {"schedule": "* * * * *", "suspend": True, "task": ECHO})
    wait_for(
        lambda: jobs.status("paused").get("phase") == "Suspended", timeout=30, what="Suspended"
    )
    status = jobs.status("paused")
    assert "nextRunAt" not in status
    assert {c["type"]: c["status"] for c in status["conditions"]}["Suspended"] == "True"

    resumed_at = dt.datetime.now(dt.UTC)
    jobs.patch("paused", {"spec": {"suspend": False}})
    wait_for(lambda: jobs.status("paused").get("phase") == "Scheduled", timeout=30, what="resume")
    status = jobs.status("paused")
    next_run = dt.datetime.fromisoformat(status["nextRunAt"])
    assert resumed_at < next_run <= resumed_at + dt.timedelta(minutes=1, seconds=1)
    assert {c["type"]: c["status"] for c in status["conditions"]}["Suspended"] == "False"
    assert probe.depth().ready == 0  # no burst of the runs missed while suspended


def test_a_job_deleted_before_its_time_is_never_published(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    run_at = whole_seconds_from_now(4)
    doomed = jobs.create("doomed", {"runAt": rfc3339(run_at), "task": ECHO})
    sentinel_at = run_at + dt.timedelta(seconds=2)
    sentinel = jobs.create("sentinel", {"runAt": rfc3339(sentinel_at), "task": ECHO})
    jobs.delete("doomed")

    sentinel_run = scheduled_run_id(sentinel["metadata"]["uid"], sentinel_at)
    wait_for(lambda: probe.locate(sentinel_run) is not None, timeout=30, what="sentinel")
    assert probe.locate(scheduled_run_id(doomed["metadata"]["uid"], run_at)) is None
    assert probe.depth().ready == 1


def test_editing_the_schedule_moves_the_pending_run(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    later = whole_seconds_from_now(3600)
    job = jobs.create("movable", {"runAt": rfc3339(later), "task": ECHO})
    wait_for(
        lambda: jobs.status("movable").get("nextRunAt") == rfc3339(later),
        timeout=30,
        what="nextRunAt",
    )
    sooner = whole_seconds_from_now(3)
    jobs.patch("movable", {"spec": {"runAt": rfc3339(sooner)}})
    run_id = scheduled_run_id(job["metadata"]["uid"], sooner)
    wait_for(lambda: probe.locate(run_id) is RunLocation.READY, timeout=30, what="moved run")
    assert probe.locate(scheduled_run_id(job["metadata"]["uid"], later)) is None


def test_a_spec_only_the_operator_can_refuse_becomes_a_condition_and_an_event(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    operator = start_operator()
    lead(operator)
    jobs.create("never", {"schedule": "0 0 30 2 *", "task": ECHO})
    jobs.create("mars", {"schedule": "@daily", "timeZone": "Mars/Olympus_Mons", "task": ECHO})

    wait_for(lambda: jobs.status("never").get("phase") == "Invalid", timeout=30, what="Invalid")
    ready = {c["type"]: c for c in jobs.status("never")["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "never fires" in ready["message"]
    wait_for(lambda: jobs.events("never"), timeout=30, what="an Event")
    [(kind, reason, message)] = jobs.events("never")
    assert (kind, reason) == ("Warning", "InvalidSpec")
    assert "fix the spec" in message
    wait_for(lambda: jobs.status("mars").get("phase") == "Invalid", timeout=30, what="Invalid")
    assert "unknown time zone" in json.dumps(jobs.status("mars")["conditions"])

    # The operator did not crash and keeps scheduling the others.
    assert operator.running
    run_at = whole_seconds_from_now(2)
    fine = jobs.create("fine", {"runAt": rfc3339(run_at), "task": ECHO})
    run_id = scheduled_run_id(fine["metadata"]["uid"], run_at)
    wait_for(lambda: probe.locate(run_id) is not None, timeout=30, what="the valid job's run")

    # Fixing the spec makes it Ready again.
    jobs.patch("never", {"spec": {"schedule": "0 0 28 2 *"}})
    wait_for(lambda: jobs.status("never").get("phase") == "Scheduled", timeout=30, what="fixed")


@pytest.fixture(scope="module")
def kstatus() -> str:
    """The health check of Flux and kpt (sigs.k8s.io/cli-utils' kstatus), built here."""
    return str(build.ensure_built(build.kstatus_bundle(), log=False) / "kstatus")


def test_kstatus_tells_a_job_that_needs_a_person_from_a_healthy_or_changing_one(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, kstatus: str
) -> None:
    """What `flux wait`-style checks and kpt read: Current for a healthy job, Failed
    (not InProgress until a timeout) for one no run of which goes right until a person
    acts, InProgress while the operator has not seen the latest spec."""

    def health(name: str) -> tuple[str, str]:
        done = subprocess.run(
            [kstatus],
            input=json.dumps(jobs.get(name)),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        _, state, message = done.stdout.rstrip("\n").split("\t")
        return state, message

    operator = start_operator()
    lead(operator)
    fine = jobs.create("fine", {"schedule": "@daily", "task": ECHO})
    jobs.create("never", {"schedule": "0 0 30 2 *", "task": ECHO})
    wait_for(lambda: jobs.status("never").get("phase") == "Invalid", timeout=30, what="Invalid")
    wait_for(lambda: health("fine")[0] == "Current", timeout=30, what="fine: Current")
    state, message = health("never")
    assert state == "Failed"
    assert "never fires" in message
    # A run that failed for good: the job needs a person too.
    run_id = scheduled_run_id(fine["metadata"]["uid"], dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    record = {
        "id": run_id,
        "scheduledAt": "2026-12-01T00:00:00Z",
        "outcome": "Failed",
        "attempts": 3,
        "finishedAt": "2026-12-01T00:00:09Z",
        "error": "HTTP 500",
    }
    jobs.apply_status_as("fine", {"lastRun": record}, manager="test-worker")
    wait_for(lambda: health("fine")[0] == "Failed", timeout=30, what="fine: Failed")
    assert f"run {run_id} failed: HTTP 500" in health("fine")[1]
    # Fixed: Current again, Stalled left False.
    jobs.patch("never", {"spec": {"schedule": "0 0 28 2 *"}})
    wait_for(lambda: health("never")[0] == "Current", timeout=30, what="never: Current")
    stalled = {c["type"]: c for c in jobs.status("never")["conditions"]}["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("False", "Ready")
    # An edit nobody has acted on yet: InProgress.
    assert operator.stop() is not None
    jobs.patch("never", {"spec": {"schedule": "0 1 28 2 *"}})
    assert health("never")[0] == "InProgress"


def test_run_now_publishes_exactly_one_run_per_distinct_token(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    job = jobs.create("manual", {"schedule": "0 0 1 1 *", "task": ECHO})
    uid = job["metadata"]["uid"]
    annotate = {"metadata": {"annotations": {"tickwork.dev/run-now": "deploy-1"}}}
    jobs.patch("manual", annotate)
    wait_for(
        lambda: probe.locate(manual_run_id(uid, "deploy-1")) is not None,
        timeout=30,
        what="manual run",
    )
    wait_for(
        lambda: jobs.status("manual").get("lastTriggerToken") == "deploy-1",
        timeout=30,
        what="token recorded",
    )
    # The same token again (a re-apply from GitOps, say) does nothing more.
    jobs.patch("manual", {"metadata": {"labels": {"touched": "yes"}}})
    jobs.patch("manual", annotate)
    jobs.patch("manual", {"metadata": {"annotations": {"tickwork.dev/run-now": "deploy-2"}}})
    wait_for(
        lambda: probe.locate(manual_run_id(uid, "deploy-2")) is not None,
        timeout=30,
        what="second manual run",
    )
    runs = probe.drain()
    assert sorted(m.run_id for m in runs) == sorted(
        [manual_run_id(uid, "deploy-1"), manual_run_id(uid, "deploy-2")]
    )


def test_a_one_shot_run_past_its_deadline_is_missed_and_reported(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    long_ago = whole_seconds_from_now(-600)
    jobs.create("late", {"runAt": rfc3339(long_ago), "startingDeadlineSeconds": 60, "task": ECHO})
    wait_for(lambda: jobs.status("late").get("phase") == "Completed", timeout=30, what="Completed")
    status = jobs.status("late")
    assert status["missedRuns"] == 1
    assert status["lastMissedTime"] == rfc3339(long_ago)
    wait_for(lambda: jobs.events("late"), timeout=30, what="an Event")
    assert jobs.events("late")[0][:2] == ("Warning", "MissedRun")
    assert probe.depth().ready == 0


def test_a_finished_one_shot_job_is_deleted_after_its_ttl(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, cluster: Cluster
) -> None:
    lead(start_operator())
    run_at = whole_seconds_from_now(-5)
    job = jobs.create(
        "ephemeral", {"runAt": rfc3339(run_at), "ttlSecondsAfterFinished": 2, "task": ECHO}
    )
    uid = job["metadata"]["uid"]
    wait_for(lambda: "queuedRun" in jobs.status("ephemeral"), timeout=30, what="queuedRun")
    # The run's record, written as the worker writes it.
    run_id = scheduled_run_id(uid, run_at)
    record = RunRecord(
        id=run_id,
        scheduled_at=run_at,
        outcome=RunState.SUCCEEDED,
        finished_at=dt.datetime.now(dt.UTC),
    )
    finished = writes.record_body(record, successful=1, failed=1)

    async def report() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(
                jobs.namespace,
                "ephemeral",
                uid,
                finished,
                field_manager=writes.run_manager(run_id),
                force=True,
            )

    asyncio.run(report())
    wait_for(lambda: not jobs.exists("ephemeral"), timeout=30, what="TTL deletion")


@pytest.mark.timeout(300)
def test_two_operators_one_publishes_and_a_standby_takes_over_within_15_seconds(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    a = start_operator("op-a")
    lead(a)
    b = start_operator("op-b")
    first_at = whole_seconds_from_now(3)
    first = jobs.create("first", {"runAt": rfc3339(first_at), "task": ECHO})
    first_run = scheduled_run_id(first["metadata"]["uid"], first_at)
    wait_for(lambda: probe.locate(first_run) is not None, timeout=30, what="first run")
    assert not b.is_leader()
    assert a.metric("tickwork_runs_published_total", 'trigger="schedule"') == 1.0
    assert b.metric("tickwork_runs_published_total", 'trigger="schedule"') is None

    # Runs that fall due while the leader is dead or just after it died.
    due = [whole_seconds_from_now(s) for s in (2, 6, 10, 25)]
    uids = [
        jobs.create(f"j{i}", {"runAt": rfc3339(t), "task": ECHO})["metadata"]["uid"]
        for i, t in enumerate(due)
    ]
    a.kill()
    killed = time.monotonic()
    wait_for(b.is_leader, timeout=20, interval=0.2, what="op-b to take over")
    takeover = time.monotonic() - killed
    assert takeover <= 15.0, f"standby took {takeover:.1f}s"

    expected = {first_run} | {scheduled_run_id(u, t) for u, t in zip(uids, due, strict=True)}
    wait_for(
        lambda: all(probe.locate(r) is not None for r in expected), timeout=60, what="every run"
    )
    published = {m.run_id for m in probe.drain()}
    assert published == expected  # none lost, none twice (the queue would hold a duplicate)


def test_a_restarted_operator_duplicates_nothing_and_takes_over_at_once(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    a = start_operator("op-a", TICKWORK_OPERATOR_RECONCILE_SECONDS="1")
    lead(a)
    due = [whole_seconds_from_now(s) for s in (2, 3)]
    uids = [
        jobs.create(f"r{i}", {"runAt": rfc3339(t), "task": ECHO})["metadata"]["uid"]
        for i, t in enumerate(due)
    ]
    runs = [scheduled_run_id(u, t) for u, t in zip(uids, due, strict=True)]
    wait_for(
        lambda: all(probe.locate(r) is RunLocation.READY for r in runs),
        timeout=30,
        what="both runs",
    )
    assert a.stop() == 0, a.log()

    b = start_operator("op-b", TICKWORK_OPERATOR_RECONCILE_SECONDS="1")
    started = time.monotonic()
    lead(b)
    assert time.monotonic() - started < 5  # the Lease was released, not left to expire
    # Status says both runs are queued; the new leader checks them against the
    # queue twice over and publishes nothing again.
    wait_for(
        lambda: (b.metric("tickwork_reconciliations_total") or 0) >= 2,
        timeout=30,
        what="two reconciliation passes",
    )
    assert probe.depth().ready == 2
    assert sorted(m.run_id for m in probe.drain()) == sorted(runs)
    assert b.metric("tickwork_runs_published_total", 'trigger="schedule"') is None
    assert b.metric("tickwork_runs_published_total", 'trigger="republish"') is None


def test_a_run_the_queue_lost_is_published_again(
    start_operator: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
    redis_url: str,
    namespace: str,
) -> None:
    lead(start_operator("op-a", TICKWORK_OPERATOR_RECONCILE_SECONDS="1"))
    run_at = whole_seconds_from_now(2)
    job = jobs.create("lost", {"runAt": rfc3339(run_at), "task": ECHO})
    run_id = scheduled_run_id(job["metadata"]["uid"], run_at)
    wait_for(lambda: probe.locate(run_id) is RunLocation.READY, timeout=30, what="the run")
    # Wipe the queue as a Redis without persistence would after a restart.

    with redis_lib.Redis.from_url(redis_url) as raw:
        raw.delete(*raw.keys(f"tickwork:{{{namespace}}}:*"))
    assert probe.locate(run_id) is None
    wait_for(lambda: probe.locate(run_id) is RunLocation.READY, timeout=30, what="re-publish")


def test_each_status_field_has_one_writer_and_overlapping_runs_keep_each_other(
    cluster: Cluster, jobs: Jobs
) -> None:
    """The operator's share and each run's share are applied without force and without
    a precondition, and never conflict: two overlapping runs add and remove only their
    own entries; a record leaves the history by the trim's JSON patch, which also drops
    the manager that owned nothing else from managedFields."""
    job = jobs.create(
        "shared", {"schedule": "@daily", "history": {"successfulRuns": 1}, "task": ECHO}
    )
    uid = job["metadata"]["uid"]
    now = dt.datetime.now(dt.UTC)
    run_a, run_b = manual_run_id(uid, "a"), manual_run_id(uid, "b")
    lifecycle = OperatorStatus(phase=JobPhase.SCHEDULED, observed_generation=1)

    def active(run_id: str) -> ActiveRun:
        return ActiveRun(id=run_id, scheduled_at=now, state=RunState.RUNNING, attempt=1)

    def record(run_id: str) -> RunRecord:
        return RunRecord(
            id=run_id,
            scheduled_at=now,
            outcome=RunState.SUCCEEDED,
            finished_at=dt.datetime.now(dt.UTC),
        )

    async def apply_all() -> dict[str, Any]:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:

            async def apply(
                manager: str, body: dict[str, Any] | None, *, force: bool = False
            ) -> dict[str, Any]:
                return await kube.apply_job_status(
                    jobs.namespace, "shared", uid, body, field_manager=manager, force=force
                )

            await apply(writes.OPERATOR_MANAGER, writes.operator_body(lifecycle))
            await apply(writes.run_manager(run_a), writes.active_body(active(run_a)))
            both = await apply(writes.run_manager(run_b), writes.active_body(active(run_b)))
            assert [r["id"] for r in both["status"]["activeRuns"]] == [run_a, run_b]
            done_a = record(run_a)
            await apply(
                writes.run_manager(run_a), writes.record_body(done_a, successful=1, failed=1)
            )
            # lastRun is run A's now: run B, ending last, takes it over (forced).
            done_b = record(run_b)
            body_b = writes.record_body(done_b, successful=1, failed=1)
            written = await apply(writes.run_manager(run_b), body_b, force=True)
            status = ScheduledJobStatus.model_validate(written["status"])
            assert status.active_runs == []
            assert [r.id for r in status.runs] == [run_a, run_b]  # oldest first, none lost
            # lastRun is atomic: run A kept no share of it (not even the equal outcome).
            assert writes.owned_fields(written["metadata"], writes.run_manager(run_a)) == {"runs"}
            [gone] = writes.to_drop(status.runs, done_b, successful=1, failed=1)
            assert gone == run_a
            # It leaves by the trim's JSON patch, which no manager's apply could do.
            patch = writes.trim_patch(written, [gone])
            return await kube.patch_job_status(
                jobs.namespace, "shared", patch, field_manager=writes.TRIM_MANAGER
            )

    final = asyncio.run(apply_all())
    status = ScheduledJobStatus.model_validate(final["status"])
    assert [r.id for r in status.runs] == [run_b]
    assert status.last_run is not None
    assert status.last_run.id == run_b
    assert status.phase is JobPhase.SCHEDULED  # the operator's field, untouched by the runs
    managers = {m["manager"] for m in final["metadata"]["managedFields"]}
    assert writes.run_manager(run_a) not in managers  # it owned only the removed record
    assert writes.TRIM_MANAGER not in managers  # a removal leaves its patcher nothing
    assert {writes.OPERATOR_MANAGER, writes.run_manager(run_b)} <= managers


def test_one_patch_trims_records_keeps_what_else_their_runs_own_refused_if_moved(
    cluster: Cluster, jobs: Jobs
) -> None:
    """The worker's batched trim against the real API server: one JSON patch removes
    several records of different run managers; what else a removed run owns (its
    ``deadRuns`` entry) stays, with its manager; a manager left with nothing leaves
    managedFields; a patch made from a history that changed since is refused whole
    (422) and removes nothing."""
    job = jobs.create("batched", {"schedule": "@daily", "task": ECHO})
    uid = job["metadata"]["uid"]
    now = dt.datetime.now(dt.UTC)
    ids = [manual_run_id(uid, str(index)) for index in range(5)]

    def record(run_id: str, minute: int, outcome: RunState = RunState.SUCCEEDED) -> RunRecord:
        at = now + dt.timedelta(minutes=minute)
        return RunRecord(id=run_id, scheduled_at=at, outcome=outcome, finished_at=at)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            written: dict[str, Any] = {}
            for index, run_id in enumerate(ids[:4]):
                failed = index == 1  # a dead-lettered run, listed in deadRuns
                body = writes.record_body(
                    record(run_id, index, RunState.FAILED if failed else RunState.SUCCEEDED),
                    successful=20,
                    failed=20,
                    dead_listed=0 if failed else None,
                )
                manager = writes.run_manager(run_id)
                written = await kube.apply_job_status(
                    jobs.namespace, "batched", uid, body, field_manager=manager, force=True
                )
            # Two trims made from this object: one removes run 0, which shifts the
            # records after it; the other, made before that, finds run 2 moved.
            stale = writes.trim_patch(written, [ids[2]])
            await kube.patch_job_status(
                jobs.namespace,
                "batched",
                writes.trim_patch(written, [ids[0]]),
                field_manager=writes.TRIM_MANAGER,
            )
            refused = 0
            try:
                await kube.patch_job_status(
                    jobs.namespace, "batched", stale, field_manager=writes.TRIM_MANAGER
                )
            except KubeApiError as exc:
                refused = exc.status
            unchanged = await kube.get_job(jobs.namespace, "batched")
            fresh = await kube.apply_job_status(
                jobs.namespace,
                "batched",
                uid,
                writes.record_body(record(ids[4], 9), successful=20, failed=20),
                field_manager=writes.run_manager(ids[4]),
                force=True,
            )
            trimmed = await kube.patch_job_status(
                jobs.namespace,
                "batched",
                writes.trim_patch(fresh, [ids[1], ids[3]]),
                field_manager=writes.TRIM_MANAGER,
            )
            return unchanged, trimmed, refused

    unchanged, trimmed, refused = asyncio.run(scenario())
    assert refused == 422
    assert [r["id"] for r in unchanged["status"]["runs"]] == ids[1:4]  # the refused one: none
    status = ScheduledJobStatus.model_validate(trimmed["status"])
    assert [r.id for r in status.runs] == [ids[2], ids[4]]
    assert status.last_run is not None
    assert status.last_run.id == ids[4]
    assert [d.id for d in status.dead_runs] == [ids[1]]  # listed until requeued or purged
    metadata = trimmed["metadata"]
    assert writes.owned_fields(metadata, writes.run_manager(ids[1])) == {"deadRuns"}
    managers = {m["manager"] for m in metadata["managedFields"]}
    assert writes.run_manager(ids[3]) not in managers  # it owned only its record
    assert writes.run_manager(ids[0]) not in managers
    assert writes.TRIM_MANAGER not in managers


def test_the_operator_indexes_what_its_informer_lists_and_watches_as_it_arrives(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs
) -> None:
    """40 jobs listed in pages of 4 at a start: the operator indexes each page as it
    arrives and writes every first status; its informer then watches from the list's
    resourceVersion, and the operator indexes the changes made after it (a suspend, a
    new job, a deletion) as they arrive, without listing again."""
    names = [f"listed-{number:02d}" for number in range(40)]
    for name in names:
        jobs.create(name, {"schedule": "@daily", "task": ECHO})
    operator = start_operator(TICKWORK_OPERATOR_LIST_PAGE_SIZE="4")
    lead(operator)
    wait_for(lambda: operator.metric("tickwork_index_jobs") == 40, timeout=60, what="40 jobs")
    wait_for(
        lambda: all("nextRunAt" in jobs.status(name) for name in names),
        timeout=60,
        what="every job's status",
    )
    assert operator.metric("tickwork_operator_events_total", 'type="LISTED"') == 40

    jobs.patch("listed-00", {"spec": {"suspend": True}})
    jobs.create("after-the-list", {"schedule": "@daily", "task": ECHO})
    jobs.delete("listed-01")
    wait_for(
        lambda: jobs.status("listed-00").get("phase") == "Suspended",
        timeout=30,
        what="the suspend, through the watch",
    )
    wait_for(
        lambda: "nextRunAt" in jobs.status("after-the-list"),
        timeout=30,
        what="the job created after the list",
    )
    wait_for(
        lambda: operator.metric("tickwork_index_jobs") == 40,
        timeout=30,
        what="the deleted job forgotten",
    )
    assert operator.metric("tickwork_operator_events_total", 'type="LISTED"') == 40  # no relist
    assert operator.metric("tickwork_operator_events_total", 'type="ADDED"') == 1
    assert operator.metric("tickwork_operator_events_total", 'type="DELETED"') == 1
    modified = operator.metric("tickwork_operator_events_total", 'type="MODIFIED"')
    assert modified is not None
    assert modified >= 41  # the 40 first statuses, the suspend, ...


def test_a_second_release_leaves_a_claimed_namespace_alone_until_its_claim_expires(
    start_operator: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
    redis_url: str,
    namespace: str,
) -> None:
    """Two releases over one namespace (each its own leader Lease and queue: what `helm
    template` or the plain manifests beside a release make): the first to claim the
    namespace schedules it; the other publishes nothing there, and takes it over, losing
    no run, once the first is gone for the claim's duration."""
    claims = {
        "TICKWORK_OPERATOR_CLAIM_DURATION_SECONDS": "4",
        "TICKWORK_OPERATOR_CLAIM_RENEW_SECONDS": "1",
    }
    one = start_operator("one-0", TICKWORK_OPERATOR_LEASE_NAME="one", **claims)
    lead(one)
    wait_for(
        lambda: one.metric("tickwork_namespace_claims", 'state="held"') == 1.0,
        timeout=30,
        what="release one's claim",
    )
    two = start_operator(
        "two-0",
        TICKWORK_OPERATOR_LEASE_NAME="two",
        TICKWORK_REDIS_QUEUE=f"{namespace}-two",
        **claims,
    )
    lead(two)  # its own release's leader
    other = QueueProbe(redis_url, queue=f"{namespace}-two")
    wait_for(
        lambda: two.metric("tickwork_namespace_claims", 'state="elsewhere"') == 1.0,
        timeout=30,
        what="release two to find the namespace claimed",
    )
    assert two.metric("tickwork_namespace_claims", 'state="held"') == 0.0
    assert "another Tickwork release, one/one" not in two.log()  # named by namespace/lease
    assert f"another Tickwork release, {namespace}/one, schedules it" in two.log()

    first_at = whole_seconds_from_now(2)
    first = jobs.create("first", {"runAt": rfc3339(first_at), "task": ECHO})
    first_run = scheduled_run_id(first["metadata"]["uid"], first_at)
    wait_for(lambda: probe.locate(first_run) is not None, timeout=30, what="the first run")
    # Release two saw the run fall due and held it back: release one published it.
    wait_for(
        lambda: (
            (two.metric("tickwork_runs_held_back_total", 'reason="claimed_elsewhere"') or 0) >= 1
        ),
        timeout=30,
        what="release two to hold the run back",
    )
    assert two.metric("tickwork_runs_published_total", 'trigger="schedule"') is None
    assert other.depth().ready == 0
    wait_for(
        lambda: jobs.status("first").get("lastScheduleTime") is not None,
        timeout=30,
        what="release one's report",
    )

    # Release one is gone: its claim expires and release two schedules the namespace,
    # the runs that fell due meanwhile too.
    second_at = whole_seconds_from_now(2)
    second = jobs.create("second", {"runAt": rfc3339(second_at), "task": ECHO})
    second_run = scheduled_run_id(second["metadata"]["uid"], second_at)
    one.kill()
    wait_for(
        lambda: two.metric("tickwork_namespace_claims", 'state="held"') == 1.0,
        timeout=30,
        what="release two to take the namespace over",
    )
    assert two.metric("tickwork_namespace_claims", 'state="elsewhere"') == 0.0
    wait_for(lambda: other.locate(second_run) is not None, timeout=30, what="the second run")
    # The first run sat in release one's queue and no worker of it ran: status still
    # shows it queued, so release two publishes it again (none lost with a release).
    wait_for(lambda: other.locate(first_run) is not None, timeout=30, what="the first again")
    assert sorted(m.run_id for m in other.drain()) == sorted([first_run, second_run])
    assert [m.run_id for m in probe.drain()] == [first_run]


@pytest.mark.timeout(300)
def test_by_default_a_run_is_one_write_that_shows_the_next_run_and_a_new_leader_goes_on(
    start_operator: Callable[..., TickworkProcess],
    start_worker: Callable[..., TickworkProcess],
    jobs: Jobs,
) -> None:
    """The defaults: the operator publishes each run of a recurring job without a status
    write of its own; the worker's record is the run's one write, and it shows the next
    run (``nextRunAt``, ``nextRuns``: every version of the object that names run k
    last names run k + 1 next). Status never shows lastScheduleTime or queuedRun. A
    standby started after the first run picks up after it, follows the runs' records,
    and, leading once the first operator is gone, goes on with the next run: none
    missed, none twice."""
    a = start_operator("op-a")
    lead(a)
    start_worker()
    spec = {
        "schedule": "@every 10s",
        "concurrencyPolicy": "Allow",
        "history": {"successfulRuns": 0, "failedRuns": 0},
        "task": ECHO,
    }
    created = jobs.create("lean", spec)
    uid = created["metadata"]["uid"]
    versions: list[dict[str, Any]] = []  # every version of the object, as the watch brings it
    stop = threading.Event()

    failed: list[BaseException] = []

    def watch() -> None:
        stream = k8s_watch.Watch().stream(
            jobs.api.list_namespaced_custom_object,
            GROUP,
            VERSION,
            jobs.namespace,
            PLURAL,
            field_selector="metadata.name=lean",
            resource_version=created["metadata"]["resourceVersion"],
            timeout_seconds=240,
        )
        try:
            for event in stream:
                if stop.is_set():
                    return
                versions.append(event["object"])
        except Exception as exc:  # noqa: BLE001 - the API server stops after the test
            if not stop.is_set():
                failed.append(exc)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    recorded: list[str] = []

    def runs_recorded(count: int) -> Callable[[], bool]:
        def enough() -> bool:
            last = (jobs.status("lean").get("lastRun") or {}).get("id")
            if last and last not in recorded:
                recorded.append(last)
            return len(recorded) >= count

        return enough

    wait_for(runs_recorded(1), timeout=60, interval=0.2, what="the first run's record")
    b = start_operator("op-b")  # a standby: it finds the first run's record
    wait_for(runs_recorded(3), timeout=60, interval=0.2, what="three runs' records")
    assert a.stop() == 0, a.log()  # the Lease is released: b leads at once
    lead(b)
    wait_for(runs_recorded(6), timeout=60, interval=0.2, what="three more runs, b leading")
    stop.set()
    assert failed == []
    assert (b.metric("tickwork_runs_published_total", 'trigger="schedule"') or 0) >= 1
    # One run every 10 s, none left out, across the change of leader.
    first = dt.datetime.strptime(recorded[0].split(".")[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    assert recorded == [
        scheduled_run_id(uid, first + dt.timedelta(seconds=10 * i)) for i in range(len(recorded))
    ]
    status = jobs.status("lean")
    assert "missedRuns" not in status, status
    assert not [e for e in jobs.events("lean") if e[1] == "MissedRuns"]
    # Each run's one write carries its record and the next run, and nothing else writes.
    seen = [version.get("status") or {} for version in versions]
    assert not [shown for shown in seen if {"lastScheduleTime", "queuedRun"} & set(shown)]
    with_records = [shown for shown in seen if shown.get("lastRun")]
    for shown in with_records:
        due = dt.datetime.fromisoformat(shown["lastRun"]["scheduledAt"])
        after = (due + dt.timedelta(seconds=10)).isoformat().replace("+00:00", "Z")
        assert (shown.get("nextRunAt"), shown["nextRuns"][0]) == (after, after), shown
    runs = {shown["lastRun"]["id"] for shown in with_records}
    first_record = next(i for i, shown in enumerate(seen) if shown.get("lastRun"))
    assert len(seen) - first_record <= len(runs) + 1, (  # +1: op-b's first write, if any
        f"{len(seen) - first_record} versions for {len(runs)} runs"
    )


def test_a_late_run_breaks_the_jobs_objective(
    start_operator: Callable[..., TickworkProcess],
    start_worker: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
) -> None:
    """A run that a worker starts a minute after it was due (a catch-up, say), of a job
    whose spec.slo allows 5 s: the operator reads the record, sets OnTime False with
    how late, and names the job in tickwork_job_late."""
    operator = start_operator()
    lead(operator)
    start_worker()
    job = jobs.create("slow", {"schedule": "0 0 1 1 *", "slo": {"maxLagSeconds": 5}, "task": ECHO})
    due = whole_seconds_from_now(-60)
    enqueue_scheduled(jobs, probe, "slow", job["metadata"]["uid"], due)

    def on_time() -> dict[str, Any]:
        conditions = jobs.status("slow").get("conditions") or []
        return next((c for c in conditions if c["type"] == "OnTime"), {})

    wait_for(lambda: on_time().get("status") == "False", timeout=30, what="OnTime False")
    assert on_time()["reason"] == "StartedLate"
    assert "after it was due, over spec.slo's 5 s" in on_time()["message"]
    named = f'job_name="slow",job_namespace="{jobs.namespace}"'
    wait_for(
        lambda: operator.metric("tickwork_job_late", named) == 1.0,
        timeout=15,
        what="tickwork_job_late",
    )
