"""Faults on the worker's side of a run, with real processes (``tickwork-worker``), the
real API server and Redis, and executions counted at the task where it matters:
issue 13's items 1 to 5 and 9.

* long results and errors are cut, never re-executed (1); any exception from a
  task is a failed attempt under the retry policy (2);
* a worker cut off from Redis, or frozen (SIGSTOP), stops its attempt and writes
  nothing; only the next attempt is recorded (3) — the reaper's grace after a
  Redis restart is in tests/integration/test_queue_resilience.py;
* a run never starts from a copy of the job older than the one it was published
  from, nor after a suspend or delete that reached the API server before its
  claim (4) — the queued runs the operator withdraws on suspend and delete are in
  test_operator_faults.py, random event orders in tests/unit/test_job_cache.py;
* runs of one job ending together keep every record (5);
* a job the worker may not read is dead-lettered, not redelivered forever (9);
* huge and slow HTTP responses end once, capped, under the timeout.

Kills of workers, Redis and the API server in the middle of a stream of runs are
the drills (tests/e2e/test_drills.py, ``make drills``).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from tests.support import (
    HoldingServer,
    Jobs,
    PausableProxy,
    QueueProbe,
    ScriptedServer,
    enqueue_run,
    enqueue_scheduled,
    finished,
    publish,
    relayed_api_server,
    relayed_redis,
    service_account_kubeconfig,
)
from tickwork.queue.messages import RunLocation, RunMessage
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(180)
Start = Callable[..., TickworkProcess]


def test_a_result_longer_than_status_holds_is_cut_and_the_run_succeeds_once(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    worker = start_worker()
    # The echo result is "Executed: " + the message: 1,034 characters, over the 1,024
    # that status keeps. It once failed validation after the run had succeeded, and
    # the run was executed again until its attempts ran out.
    _, run_id = publish(jobs, probe, "long", {"task": {"echo": {"message": "x" * 1024}}})
    last = finished(jobs, "long")["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Succeeded", 1)
    assert len(last["result"]) == 1024
    assert last["result"].startswith("Executed: xxx")
    assert last["result"].endswith("… [truncated]")
    assert probe.locate(run_id) is RunLocation.DONE
    assert worker.metric("tickwork_runs_total", 'outcome="Succeeded"') == 1.0


def test_any_exception_from_a_task_is_a_failed_attempt_under_the_retry_policy(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    worker = start_worker()
    # httpx cannot encode a non-ASCII header value: UnicodeEncodeError, which is no
    # HTTP error. It used to escape and leave the run to wait out its lease.
    task = {"http": {"url": endpoint.url, "headers": [{"name": "X-Team", "value": "café"}]}}
    spec = {"retry": {"maxAttempts": 2, "backoffSeconds": 1, "maxBackoffSeconds": 1}, "task": task}
    publish(jobs, probe, "accented", spec)
    last = finished(jobs, "accented", timeout=30)["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 2)
    assert last["error"].startswith("UnicodeEncodeError")
    assert "all 2 attempts failed" in last["error"]
    assert endpoint.requests == []
    assert worker.metric("tickwork_run_retries_total") == 1.0
    assert worker.metric("tickwork_worker_internal_errors_total") == 0.0


def test_a_job_the_worker_may_not_read_is_dead_lettered_not_redelivered(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    cluster: Cluster,
    api_client: k8s.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    # A worker whose RBAC does not cover the namespace (a token without any grant).
    kubeconfig = service_account_kubeconfig(
        cluster, api_client, namespace, "no-rbac", tmp_path / "kubeconfig"
    )
    start_worker(KUBECONFIG=str(kubeconfig), TICKWORK_WORKER_JOB_CACHE="false")
    _, run_id = publish(jobs, probe, "unreadable", {"task": {"echo": {}}})
    # Before: a 403 was treated like an unreachable API server, and the run was
    # redelivered after every lease, forever.
    wait_for(lambda: probe.locate(run_id) is RunLocation.DEAD, timeout=5, what="dead letter")
    [dead] = probe.dead()
    assert dead.message.run_id == run_id
    assert "403" in dead.error
    assert "RBAC" in dead.error


@pytest.mark.parametrize("fault", ["redis-unreachable", "worker-paused"])
def test_a_worker_that_loses_its_lease_stops_the_attempt_and_writes_nothing(
    fault: str, start_worker: Start, jobs: Jobs, probe: QueueProbe, redis_url: str
) -> None:
    """Worker A cannot renew its lease — Redis is cut off from it alone (a partition),
    or A is frozen (SIGSTOP) — so the run goes to worker B as attempt 2. A must have
    stopped its attempt (the endpoint sees A's request given up) before B's arrives,
    and must write nothing: the history holds B's record alone."""
    relay, through_relay = relayed_redis(redis_url)
    endpoint = HoldingServer()
    try:
        a = start_worker(
            "worker-a", TICKWORK_REDIS_URL=through_relay, TICKWORK_WORKER_LEASE_SECONDS="3"
        )
        _, run_id = publish(
            jobs,
            probe,
            "held",
            {"timeoutSeconds": 120, "task": {"http": {"url": endpoint.url, "method": "POST"}}},
        )
        wait_for(lambda: endpoint.saw(("start", 1)), timeout=30, what="A's request")
        if fault == "redis-unreachable":
            relay.pause()
            wait_for(lambda: endpoint.saw(("hangup", 1)), timeout=15, what="A to give up")
        else:
            os.kill(a.pid, signal.SIGSTOP)
        start_worker("worker-b", TICKWORK_WORKER_LEASE_SECONDS="3")
        wait_for(lambda: endpoint.saw(("start", 2)), timeout=30, what="B's request")
        if fault == "worker-paused":
            os.kill(a.pid, signal.SIGCONT)
            wait_for(lambda: endpoint.saw(("hangup", 1)), timeout=10, what="A to give up")
        assert endpoint.events.index(("hangup", 1)) < len(endpoint.events)
        if fault == "redis-unreachable":  # never two executions of the run at once
            assert endpoint.events.index(("hangup", 1)) < endpoint.events.index(("start", 2))
        endpoint.released.set()
        relay.resume()
        last = finished(jobs, "held")["lastRun"]
        assert isinstance(last, dict)
        assert (last["id"], last["outcome"], last["attempts"]) == (run_id, "Succeeded", 2)
        wait_for(
            lambda: a.metric("tickwork_worker_leases_lost_total") == 1.0,
            timeout=10,
            what="A to count the lost lease",
        )
        assert [(r["id"], r["attempts"]) for r in jobs.status("held")["runs"]] == [(run_id, 2)]
        assert [e for e in endpoint.events if e[0] == "start"] == [("start", 1), ("start", 2)]
        assert probe.locate(run_id) is RunLocation.DONE
    finally:
        relay.close()
        endpoint.close()


def test_a_run_never_starts_from_a_copy_older_than_the_one_it_was_published_from(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, cluster: Cluster, tmp_path: Path
) -> None:
    """The worker's watch is held back (its connection to the API server stalls) while
    the job is edited and a run is published from the edited spec, as the operator
    does. A warm worker must not start the run from its older copy: each run executes
    the spec it was published from, every time."""

    relay, through_relay = relayed_api_server(cluster, tmp_path / "through-relay.kubeconfig")
    job = jobs.create(
        "edited",
        {"schedule": "@daily", "concurrencyPolicy": "Allow", "task": {"echo": {"message": "v1"}}},
    )
    uid = job["metadata"]["uid"]
    try:
        worker = start_worker(KUBECONFIG=str(through_relay))
        wait_for(
            lambda: worker.metric("tickwork_worker_job_cache_synced") == 1.0,
            timeout=30,
            what="the job cache to be listed",
        )
        results = []
        for version in range(2, 7):
            relay.pause()  # the worker's watch (and anything else it asks) stalls here
            edited = jobs.patch("edited", {"spec": {"task": {"echo": {"message": f"v{version}"}}}})
            scheduled = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC) + dt.timedelta(days=version)
            run_id = enqueue_scheduled(
                jobs, probe, "edited", uid, scheduled, generation=edited["metadata"]["generation"]
            )
            wait_for(
                lambda run_id=run_id: probe.locate(run_id) is RunLocation.IN_FLIGHT,
                timeout=30,
                what="the worker to claim the run",
            )
            relay.resume()
            wait_for(
                lambda run_id=run_id: (
                    (jobs.status("edited").get("lastRun") or {}).get("id") == run_id
                ),
                timeout=30,
                what=f"run {run_id}",
            )
            results.append(jobs.status("edited")["lastRun"]["result"])
        assert results == [f"Executed: v{version}" for version in range(2, 7)]
    finally:
        relay.close()


@pytest.fixture
def watched_through_a_relay(
    start_worker: Start, jobs: Jobs, cluster: Cluster, tmp_path: Path
) -> Iterator[tuple[TickworkProcess, PausableProxy]]:
    """A worker whose every request to the API server (its watch, its checks) goes
    through a relay the test can pause, its copy holding this test's namespace alone
    (its size tells what the watch brought), listed and watching."""
    relay, through_relay = relayed_api_server(cluster, tmp_path / "through-relay.kubeconfig")
    try:
        worker = start_worker(
            KUBECONFIG=str(through_relay), TICKWORK_WORKER_NAMESPACES=jobs.namespace
        )
        wait_for(
            lambda: worker.metric("tickwork_worker_job_cache_synced") == 1.0,
            timeout=30,
            what="the job cache to be listed",
        )
        yield worker, relay
    finally:
        relay.close()


@pytest.mark.parametrize("change", ["suspend", "delete", "delete-held-by-a-finalizer"])
def test_a_suspend_or_delete_between_publish_and_claim_stops_the_run(
    change: str,
    watched_through_a_relay: tuple[TickworkProcess, PausableProxy],
    jobs: Jobs,
    probe: QueueProbe,
    endpoint: ScriptedServer,
) -> None:
    """The operator publishes a run; before a warm worker claims it, the job is
    suspended or deleted — and the worker's watch has not brought that yet (its
    connection to the API server stalls). Five times over, the run must not execute:
    the suspend or delete was visible before the claim. (Before, the worker started
    the run from its copy, which matched the generation in the message.)"""

    worker, relay = watched_through_a_relay
    spec = {"schedule": "@daily", "task": {"http": {"url": endpoint.url, "method": "POST"}}}
    finalizers = ["example.com/hold"] if change == "delete-held-by-a-finalizer" else []
    for round_ in range(5):
        name = f"stopped-{round_}"
        known = round_ if change == "suspend" else 0  # deleted jobs leave the copy

        def copied(count: int) -> bool:
            return worker.metric("tickwork_worker_job_cache_objects") == float(count)

        wait_for(lambda known=known: copied(known), timeout=30, what="the copy settled")
        job = jobs.create(name, spec, finalizers=finalizers)
        uid, generation = job["metadata"]["uid"], job["metadata"]["generation"]
        # The worker's watch brought the job: it would start the run from its copy.
        wait_for(
            lambda known=known: copied(known + 1), timeout=30, what="the worker's copy of the job"
        )
        relay.pause()  # the worker's watch (and anything else it asks) stalls here
        if change == "suspend":
            jobs.patch(name, {"spec": {"suspend": True}})
        else:
            jobs.delete(name)
        scheduled = dt.datetime(2026, 12, 2, 9, tzinfo=dt.UTC)
        run_id = enqueue_scheduled(jobs, probe, name, uid, scheduled, generation=generation)
        wait_for(
            lambda run_id=run_id: probe.locate(run_id) is RunLocation.IN_FLIGHT,
            timeout=30,
            what="the worker to claim the run",
        )
        relay.resume()
        wait_for(
            lambda run_id=run_id: probe.locate(run_id) is RunLocation.DONE,
            timeout=30,
            what=f"run {run_id} to end",
        )
        assert endpoint.requests == [], f"round {round_}: executed after the {change}"
        if change == "suspend":
            last = jobs.status(name)["lastRun"]
            assert (last["id"], last["outcome"]) == (run_id, "Skipped")
        elif finalizers:
            jobs.patch(name, {"metadata": {"finalizers": None}})
    reason = {"suspend": "suspended", "delete": "gone"}.get(change, "deleting")
    skipped = worker.metric("tickwork_runs_skipped_by_worker_total", f'reason="{reason}"')
    assert skipped == 5.0


def test_claims_checked_together_stop_only_the_runs_of_a_suspended_or_deleted_job(
    watched_through_a_relay: tuple[TickworkProcess, PausableProxy],
    jobs: Jobs,
    probe: QueueProbe,
    endpoint: ScriptedServer,
) -> None:
    """Four runs of four jobs are claimed together while the worker's watch stalls,
    after one job was suspended and another deleted: the claims share one check (a
    consistent list of the namespace's jobs, tickwork_worker.start_checks), and it
    stops exactly the runs of those two jobs — the other two execute."""
    from tickwork.core.runs import scheduled_run_id  # noqa: PLC0415

    worker, relay = watched_through_a_relay
    created = {}
    for name in ("kept-a", "suspended", "deleted", "kept-b"):
        task = {"http": {"url": f"{endpoint.url}/{name}", "method": "POST"}}
        spec = {"schedule": "@daily", "task": task}
        created[name] = jobs.create(name, spec)["metadata"]
    wait_for(
        lambda: worker.metric("tickwork_worker_job_cache_objects") == 4.0,
        timeout=30,
        what="the worker's copy of the four jobs",
    )
    relay.pause()  # the worker's watch (and the check) stalls here
    jobs.patch("suspended", {"spec": {"suspend": True}})
    jobs.delete("deleted")
    scheduled = dt.datetime(2026, 12, 2, 9, tzinfo=dt.UTC)
    messages = {
        name: RunMessage(
            run_id=scheduled_run_id(meta["uid"], scheduled),
            namespace=jobs.namespace,
            name=name,
            uid=meta["uid"],
            scheduled_at=scheduled.isoformat(),
            generation=meta["generation"],
        )
        for name, meta in created.items()
    }
    probe.enqueue_together(list(messages.values()))
    wait_for(
        lambda: all(probe.locate(m.run_id) is RunLocation.IN_FLIGHT for m in messages.values()),
        timeout=30,
        what="the worker to claim the four runs",
    )
    relay.resume()
    wait_for(
        lambda: all(probe.locate(m.run_id) is RunLocation.DONE for m in messages.values()),
        timeout=30,
        what="the four runs to end",
    )
    assert sorted(str(r["path"]) for r in endpoint.requests) == ["/hook/kept-a", "/hook/kept-b"]
    last = jobs.status("suspended")["lastRun"]
    assert (last["id"], last["outcome"]) == (messages["suspended"].run_id, "Skipped")
    for reason in ("suspended", "gone"):
        labels = f'reason="{reason}"'
        assert worker.metric("tickwork_runs_skipped_by_worker_total", labels) == 1.0
    # One read answered the claims (a namespace's list), not one read per run.
    assert worker.metric("tickwork_worker_start_checks_total", 'read="namespace"') == 1.0
    assert worker.metric("tickwork_worker_start_checks_answered_total", 'read="namespace"') == 4.0
    assert worker.metric("tickwork_worker_start_checks_total", 'read="job"') in (None, 0.0)


def test_runs_of_one_job_ending_together_keep_every_record(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    """Two runs of an Allow job (and a manual one next to them) execute at once and
    end in the same moment, three times over: every record stays in the history and
    no run clears the other's current run (each write builds on what is there)."""
    from tickwork.core.runs import manual_run_id, scheduled_run_id  # noqa: PLC0415

    endpoint = HoldingServer()
    job = jobs.create(
        "overlapping",
        {
            "schedule": "@daily",
            "concurrencyPolicy": "Allow",
            "history": {"successfulRuns": 20},
            "task": {"http": {"url": endpoint.url, "method": "POST"}},
        },
    )
    uid = job["metadata"]["uid"]
    start_worker(TICKWORK_WORKER_RUNNING_AFTER_SECONDS="0")
    expected: list[str] = []
    try:
        for round_ in range(3):
            endpoint.released.clear()
            base = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC) + dt.timedelta(days=2 * round_)
            ids = [
                scheduled_run_id(uid, base),
                scheduled_run_id(uid, base + dt.timedelta(days=1)),
                manual_run_id(uid, f"by-hand-{round_}"),
            ]
            for run_id in ids:
                scheduled_at = None
                if "by-hand" not in run_id:
                    stamp = run_id.split(".")[1]
                    at = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
                    scheduled_at = at.isoformat()
                enqueue_run(jobs, probe, "overlapping", uid, run_id, scheduled_at=scheduled_at)
            arrived = 3 * (round_ + 1)
            wait_for(
                lambda arrived=arrived: endpoint.saw(("start", arrived)),
                timeout=30,
                what="all three requests held at once",
            )
            # Each run's own entry, side by side: none overwrote another's.
            wait_for(
                lambda ids=ids: (
                    {r["id"] for r in jobs.status("overlapping").get("activeRuns") or []}
                    == set(ids)
                ),
                timeout=10,
                what="three active runs",
            )
            endpoint.released.set()  # all three end together
            expected += ids
            wait_for(
                lambda ids=ids: all(probe.locate(r) is RunLocation.DONE for r in ids),
                timeout=30,
                what="the three runs acknowledged",
            )
            history = {r["id"] for r in jobs.status("overlapping").get("runs", [])}
            assert set(expected) <= history, sorted(set(expected) - history)
            assert not jobs.status("overlapping").get("activeRuns")
    finally:
        endpoint.close()


def test_a_huge_response_ends_the_run_once_with_a_capped_result(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    endpoint.body = b"x" * (16 * 1024 * 1024)  # 16 MiB
    start_worker()
    _, run_id = publish(jobs, probe, "huge", {"task": {"http": {"url": endpoint.url}}})
    last = finished(jobs, "huge")["lastRun"]
    assert isinstance(last, dict)
    assert (last["id"], last["outcome"], last["attempts"]) == (run_id, "Succeeded", 1)
    assert len(last["result"]) <= 1024
    assert len(endpoint.requests) == 1  # executed once
    assert probe.locate(run_id) is RunLocation.DONE


def test_a_response_slower_than_the_timeout_is_one_execution_per_attempt(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    endpoint.script = [(200, 6.0), (200, 6.0)]  # each answer comes after the timeout
    start_worker()
    spec = {
        "timeoutSeconds": 2,
        "task": {"http": {"url": endpoint.url}},
        "retry": {"maxAttempts": 2, "backoffSeconds": 1, "maxBackoffSeconds": 1},
    }
    _, run_id = publish(jobs, probe, "slow", spec)
    last = finished(jobs, "slow", timeout=60)["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 2)
    assert "timed out after 2s" in last["error"]
    assert len(endpoint.requests) == 2  # one execution per attempt, no more
    assert [d.message.run_id for d in probe.dead()] == [run_id]
    assert [r["attempts"] for r in jobs.status("slow")["runs"]] == [2]
