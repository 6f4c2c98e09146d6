"""The worker as users run it — the ``tickwork-worker`` process — executing runs put in a
real Redis queue and reporting to the real API server: task kinds, retries, dead
letters, skips, timeouts, cancellation, draining and crashes."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import (
    Jobs,
    QueueProbe,
    ScriptedServer,
    active_state,
    apply_as_operator,
    assert_a_timeout_kills_the_whole_group,
    enqueue_run,
    enqueue_scheduled,
    finished,
    last_outcome,
    publish,
    publish_manual,
    rfc3339,
    task_package,
    whole_seconds_from_now,
)
from tickwork.core.runs import manual_run_id
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.kube.status import TRIM_MANAGER, run_manager
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for

pytestmark = pytest.mark.timeout(180)
Start = Callable[..., TickworkProcess]


def test_an_echo_run_succeeds_and_status_tells_the_story(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    worker = start_worker()
    _, run_id = publish(jobs, probe, "hello", {"task": {"echo": {"message": "hello"}}})
    status = finished(jobs, "hello")
    last = status["lastRun"]
    assert isinstance(last, dict)
    assert (last["id"], last["outcome"], last["result"], last["attempts"]) == (
        run_id,
        "Succeeded",
        "Executed: hello",
        1,
    )
    assert last["startedAt"] <= last["finishedAt"]
    assert "phase" not in status  # the operator's field (no operator runs here)
    assert not status.get("activeRuns")  # its entry went with the record
    assert [r["id"] for r in status["runs"]] == [run_id]  # type: ignore[index, union-attr]
    assert status["lastSuccessfulTime"] == last["finishedAt"]
    managers = {m["manager"] for m in jobs.get("hello")["metadata"]["managedFields"]}
    # Its place of the history's field manager (a run on time, at its first attempt).
    assert "tickwork-runs-s0" in managers
    assert run_manager(run_id) not in managers
    assert probe.locate(run_id) is RunLocation.DONE
    assert worker.metric("tickwork_runs_total", 'outcome="Succeeded"') == 1.0
    assert (worker.metric("tickwork_queue_wait_seconds_count") or 0) >= 1


def test_an_http_run_sends_its_run_id_as_the_idempotency_key(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    start_worker()
    task = {
        "http": {
            "url": endpoint.url,
            "method": "PUT",
            "body": '{"a": 1}',
            "headers": [{"name": "X-Team", "value": "ops"}],
        }
    }
    _, run_id = publish(jobs, probe, "hook", {"task": task})
    status = finished(jobs, "hook")
    assert status["lastRun"]["result"] == "HTTP 200: status 200"  # type: ignore[index]
    [request] = endpoint.requests
    headers = request["headers"]
    assert isinstance(headers, dict)
    assert headers["Idempotency-Key"] == run_id
    assert headers["X-Team"] == "ops"
    assert headers["X-Tickwork-Attempt"] == "1"
    assert "traceparent" not in {name.lower() for name in headers}  # traces off by default
    assert request["body"] == '{"a": 1}'


TEMPLATE = (
    '{"region": "{{params.region}}", "due": "{{ scheduledTime }}", "try": "{{attempt}}",'
    ' "text": "run {{runId}} of {{namespace}}/{{job}} in {{params.region}}",'
    ' "params": "{{params}}"}'
)


def test_http_runs_say_which_run_they_are_and_fill_in_their_body_template(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer, namespace: str
) -> None:
    start_worker()
    task = {"http": {"url": endpoint.url, "bodyTemplate": TEMPLATE}}
    _, scheduled_id = publish(jobs, probe, "nightly", {"task": task})
    finished(jobs, "nightly")
    [scheduled] = endpoint.requests
    headers = scheduled["headers"]
    assert isinstance(headers, dict)
    assert (headers["Tickwork-Run-Id"], headers["Tickwork-Attempt"]) == (scheduled_id, "1")
    assert "Tickwork-Params" not in headers  # a scheduled run has none
    body = json.loads(str(scheduled["body"]))
    assert (body["region"], body["params"]) == (None, {})

    # A manual run whose parameter tries to leave its JSON string; its first attempt fails.
    endpoint.script = [(503, 0.0)]
    region = 'eu", "admin": true, "x": "'
    retry = {"maxAttempts": 2, "backoffSeconds": 1, "maxBackoffSeconds": 1}
    run_id, at = publish_manual(
        jobs, probe, "templated", {"retry": retry, "task": task}, params={"region": region}
    )
    status = finished(jobs, "templated")
    assert len(endpoint.requests) == 3
    for attempt, request in enumerate(endpoint.requests[1:], 1):
        headers = request["headers"]
        assert isinstance(headers, dict)
        assert headers["Tickwork-Run-Id"] == headers["Idempotency-Key"] == run_id
        assert headers["Tickwork-Scheduled-Time"] == rfc3339(at)  # the trigger's, every attempt
        assert headers["Tickwork-Attempt"] == headers["X-Tickwork-Attempt"] == str(attempt)
        assert headers["Tickwork-Job"] == f"{namespace}/templated"
        assert json.loads(headers["Tickwork-Params"]) == {"region": region}
        assert headers["Content-Type"] == "application/json"
        assert json.loads(str(request["body"])) == {
            "region": region,
            "due": rfc3339(at),
            "try": attempt,
            "text": f"run {run_id} of {namespace}/templated in {region}",
            "params": {"region": region},
        }
    last = status["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Succeeded", 2)
    assert last["params"] == {"region": region}
    assert last["scheduledAt"] == rfc3339(at)
    assert [r["params"] for r in status["runs"]] == [{"region": region}]  # type: ignore[index, union-attr]


def test_a_registered_python_task_is_given_the_run_keywords_it_asks_for(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, tmp_path: Path
) -> None:
    source = (
        "import json\n\n"
        "def task(kind, *, run_id, scheduled_time, attempt, params):\n"
        "    return json.dumps([kind, run_id, scheduled_time.isoformat(), attempt, params])\n"
    )
    start_worker(PYTHONPATH=task_package(tmp_path, source))
    python = {"python": {"name": "acme.task", "args": ["monthly"]}}
    run_id, at = publish_manual(jobs, probe, "report", {"task": python}, params={"region": "eu"})
    result = finished(jobs, "report")["lastRun"]["result"]  # type: ignore[index]
    assert json.loads(result) == ["monthly", run_id, at.isoformat(), 1, {"region": "eu"}]


def test_server_errors_are_retried_with_backoff_then_dead_lettered(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    worker = start_worker()
    endpoint.script = [(500, 0.0)] * 3
    endpoint.body = b"stack trace of internal-service-7f3a"
    spec = {
        "retry": {"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 2},
        "task": {"http": {"url": endpoint.url}},
    }
    _, run_id = publish(jobs, probe, "flaky", spec)
    status = finished(jobs, "flaky")
    last = status["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 3)
    assert "HTTP 500: stack trace of internal-service-7f3a" in last["error"]  # status: yes
    events = jobs.events("flaky")
    assert events
    assert not [e for e in events if "internal-service-7f3a" in e[2]]  # Events: never
    assert "all 3 attempts failed" in last["error"]
    assert not status.get("activeRuns")
    attempts = [r["headers"]["X-Tickwork-Attempt"] for r in endpoint.requests]  # type: ignore[index]
    assert attempts == ["1", "2", "3"]
    # The run's record is written first, then the run is buried, counted and told of.
    wait_for(
        lambda: (
            probe.dead()
            and worker.metric("tickwork_runs_dead_lettered_total") == 1.0
            and "RunFailed" in [reason for _, reason, _ in jobs.events("flaky")]
        ),
        timeout=15,
        interval=0.1,
        what="the run dead-lettered, counted and told of",
    )
    [dead] = probe.dead()
    assert dead.message.run_id == run_id
    reasons = [reason for _, reason, _ in jobs.events("flaky")]
    assert reasons.count("RunRetrying") == 2
    assert "RunFailed" in reasons
    assert worker.metric("tickwork_run_retries_total") == 2.0
    assert worker.metric("tickwork_runs_dead_lettered_total") == 1.0


@pytest.mark.parametrize(
    ("code", "says"), [(404, "retrying cannot help"), (302, "redirects are not followed")]
)
def test_a_client_error_or_a_redirect_fails_at_once(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    endpoint: ScriptedServer,
    code: int,
    says: str,
) -> None:
    start_worker()
    endpoint.script = [(code, 0.0)]
    spec = {"retry": {"maxAttempts": 5}, "task": {"http": {"url": endpoint.url}}}
    publish(jobs, probe, "wrong-url", spec)
    last = finished(jobs, "wrong-url")["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 1)
    assert says in last["error"]
    assert len(endpoint.requests) == 1


def test_throttling_and_timeouts_are_retried(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    start_worker()
    endpoint.script = [(429, 0.0), (200, 4.0), (200, 0.0)]  # throttled, too slow, fine
    spec = {
        "timeoutSeconds": 2,
        "retry": {"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 1},
        "task": {"http": {"url": endpoint.url}},
    }
    publish(jobs, probe, "patient", spec)
    last = finished(jobs, "patient")["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Succeeded", 3)
    reasons = [message for _, reason, message in jobs.events("patient") if reason == "RunRetrying"]
    assert any("HTTP 429" in m for m in reasons)
    assert any("timed out" in m for m in reasons)


def test_python_tasks_get_the_run_id_and_can_fail_permanently(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    start_worker()
    _, run_id = publish(
        jobs, probe, "nap", {"task": {"python": {"name": "tickwork.sleep", "args": ["0.1"]}}}
    )
    publish(
        jobs,
        probe,
        "refuses",
        {
            "retry": {"maxAttempts": 4},
            "task": {"python": {"name": "tickwork.refuse", "kwargs": {"message": "no quota left"}}},
        },
    )
    publish(jobs, probe, "unknown", {"task": {"python": {"name": "acme.missing"}}})
    assert finished(jobs, "nap")["lastRun"]["result"] == f"slept 0.1s in {run_id}"  # type: ignore[index]
    refused = finished(jobs, "refuses")["lastRun"]
    assert isinstance(refused, dict)
    assert (refused["outcome"], refused["attempts"]) == ("Failed", 1)
    assert "no quota left" in refused["error"]
    unknown = finished(jobs, "unknown")["lastRun"]
    assert isinstance(unknown, dict)
    assert "no task named 'acme.missing' is registered" in unknown["error"]
    assert "tickwork.sleep" in unknown["error"]  # it lists what is registered


def test_a_soft_timeout_cancels_a_task_before_the_hard_limit(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    start_worker()
    spec = {
        "timeoutSeconds": 2,
        "retry": {"maxAttempts": 1},
        "task": {"python": {"name": "tickwork.sleep", "args": ["60"]}},
    }
    publish(jobs, probe, "slowpoke", spec)
    last = finished(jobs, "slowpoke", timeout=30)["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert "timed out after 2s" in last["error"]
    assert "abandoned" not in last["error"]  # cancellation worked: it stopped at the soft limit


def test_command_tasks_are_refused_unless_the_installer_enables_them(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    start_worker()
    publish(jobs, probe, "shell", {"task": {"command": {"args": ["true"]}}})
    last = finished(jobs, "shell")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert "command tasks are disabled for jobs in namespace" in last["error"]
    assert "worker.commandTasks.enabled=true" in last["error"]


def test_enabled_command_tasks_run_clean_and_a_timeout_kills_the_whole_group(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, tmp_path: Path
) -> None:
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true")
    _, run_id = publish(
        jobs,
        probe,
        "env",
        {
            "task": {
                "command": {
                    "args": ["sh", "-c", "echo run=$TICKWORK_RUN_ID; env"],
                    "env": [{"name": "GREETING", "value": "hi"}],
                }
            }
        },
    )
    result = finished(jobs, "env")["lastRun"]["result"]  # type: ignore[index]
    assert f"run={run_id}" in result
    assert "GREETING=hi" in result
    assert "TICKWORK_REDIS" not in result  # the worker's secrets stay with the worker

    assert_a_timeout_kills_the_whole_group(jobs, probe)


def test_a_command_cannot_read_the_workers_memory_or_environment(
    cluster: Cluster,
    redis_url: str,
    namespace: str,
    jobs: Jobs,
    probe: QueueProbe,
    tmp_path: Path,
) -> None:
    """The worker runs as in a Pod, without capabilities (setpriv drops them all; it
    stays uid 0 here). A command it starts runs as the same user and could read the
    worker's environment and memory through /proc, the Redis password and API token
    with them, unless the worker is non-dumpable: it is. The command can still read
    its own."""
    canary = "canary-" + os.urandom(6).hex()
    worker = TickworkProcess(
        command="tickwork-worker",
        env={
            "KUBECONFIG": str(cluster.kubeconfig),
            "TICKWORK_REDIS_URL": redis_url,
            "TICKWORK_REDIS_QUEUE": namespace,
            "TICKWORK_WORKER_NAME": "capless",
            "TICKWORK_WORKER_COMMAND_TASKS": "true",
            "TICKWORK_WORKER_PREVIEWS": "true",
            "TICKWORK_CANARY": canary,
        },
        log_path=tmp_path / "capless.log",
        executable="/usr/bin/setpriv",
        args=["--inh-caps=-all", "--bounding-set=-all", "--", console_script("tickwork-worker")],
    ).start()
    try:
        worker.wait_ready()
        own = "cat /proc/self/environ | tr '\\0' '\\n' | grep -c TICKWORK_RUN_ID"
        script = f"{own}; cat /proc/{worker.pid}/environ; head -c 1 /proc/{worker.pid}/mem"
        task = {"command": {"args": ["sh", "-c", script]}}
        publish(jobs, probe, "peek", {"retry": {"maxAttempts": 1}, "task": task})
        last = finished(jobs, "peek")["lastRun"]
        assert isinstance(last, dict)
        output = last["error"]
        assert output.startswith("exit 1: 1\n")  # its own environment: readable
        assert f"cat: /proc/{worker.pid}/environ: Permission denied" in output
        assert f"cannot open '/proc/{worker.pid}/mem' for reading: Permission denied" in output
        assert canary not in output
    finally:
        worker.kill()


def test_runs_that_must_not_execute_are_skipped(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    worker = start_worker()
    gone = jobs.create("gone", {"runAt": rfc3339(whole_seconds_from_now(0)), "task": {"echo": {}}})
    jobs.delete("gone")  # before its run is published: the worker finds nothing to run
    gone_run = f"{gone['metadata']['uid']}.20261201T090000Z"
    enqueue_run(jobs, probe, "gone", gone["metadata"]["uid"], gone_run)
    publish(jobs, probe, "paused", {"schedule": "@daily", "suspend": True, "task": {"echo": {}}})
    wait_for(lambda: probe.locate(gone_run) is RunLocation.DONE, timeout=30, what="ack of gone")
    last = finished(jobs, "paused")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Skipped"
    assert worker.metric("tickwork_runs_skipped_by_worker_total", 'reason="gone"') == 1.0
    # A run ID of another object, under this job's identity: never executed.
    real = jobs.create("real", {"runAt": rfc3339(whole_seconds_from_now(0)), "task": {"echo": {}}})
    foreign_run = "some-other-uid.20261201T090000Z"
    enqueue_run(jobs, probe, "real", real["metadata"]["uid"], foreign_run)
    wait_for(
        lambda: probe.locate(foreign_run) is RunLocation.DONE,
        timeout=30,
        what="ack of the foreign run",
    )
    assert "lastRun" not in jobs.status("real")
    assert worker.metric("tickwork_runs_skipped_by_worker_total", 'reason="foreign"') == 1.0


def test_a_run_queued_before_a_pause_is_skipped_and_one_after_the_resume_runs(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, cluster: Cluster
) -> None:
    worker = start_worker()
    spec = {
        "schedule": "@daily",
        "failurePolicy": {"pauseAfter": 1},
        "task": {"echo": {"message": "after the fix"}},
    }
    uid = jobs.create("flaky", spec)["metadata"]["uid"]

    apply_as_operator(cluster, jobs, "flaky", uid, {"phase": "Paused"})
    enqueue_scheduled(jobs, probe, "flaky", uid, dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    wait_for(lambda: last_outcome(jobs, "flaky") == "Skipped", timeout=30, what="the skip")
    assert "paused after consecutive failed runs" in jobs.status("flaky")["lastRun"]["error"]
    assert worker.metric("tickwork_runs_skipped_by_worker_total", 'reason="paused"') == 1.0
    # Resumed, and at once a run: whatever the worker's watched copy still says, the
    # API server's copy decides (a pause is status: no new generation to wait for).
    apply_as_operator(cluster, jobs, "flaky", uid, {"phase": "Scheduled"})
    after = enqueue_scheduled(jobs, probe, "flaky", uid, dt.datetime(2026, 12, 2, tzinfo=dt.UTC))
    wait_for(lambda: jobs.status("flaky")["lastRun"]["id"] == after, timeout=30, what="the run")
    assert jobs.status("flaky")["lastRun"]["outcome"] == "Succeeded"


def test_a_run_redelivered_after_it_finished_is_not_executed_again(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, cluster: Cluster
) -> None:
    worker = start_worker()
    job = jobs.create(
        "once",
        {"runAt": rfc3339(whole_seconds_from_now(0)), "task": {"echo": {"message": "again?"}}},
    )
    uid = job["metadata"]["uid"]
    run_id = f"{uid}.20261201T090000Z"
    # A previous worker finished the run and wrote status, then died before its ack.
    done = {
        "lastRun": {
            "id": run_id,
            "scheduledAt": "2026-12-01T09:00:00Z",
            "outcome": "Succeeded",
            "result": "done before",
            "finishedAt": "2026-12-01T09:00:01Z",
        }
    }

    async def previous_worker_reported() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(
                jobs.namespace, "once", uid, done, field_manager=run_manager(run_id), force=True
            )

    asyncio.run(previous_worker_reported())
    enqueue_run(
        jobs, probe, "once", uid, run_id, scheduled_at="2026-12-01T09:00:00+00:00", attempt=2
    )
    wait_for(lambda: probe.locate(run_id) is RunLocation.DONE, timeout=30, what="the ack")
    assert worker.metric("tickwork_runs_skipped_by_worker_total", 'reason="already-finished"') == 1
    assert jobs.status("once")["lastRun"]["result"] == "done before"  # not executed again
    # A redelivery is checked against the API server, never only against the watched copy.
    assert (worker.metric("tickwork_worker_job_reads_total", 'source="api"') or 0) >= 1


def test_runs_start_from_the_watched_copy_which_follows_spec_changes(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:

    job = jobs.create(
        "cached",
        {"schedule": "@daily", "concurrencyPolicy": "Allow", "task": {"echo": {"message": "v1"}}},
    )
    uid = job["metadata"]["uid"]
    worker = start_worker()
    wait_for(
        lambda: worker.metric("tickwork_worker_job_cache_synced") == 1.0,
        timeout=30,
        what="the job cache to be listed",
    )
    assert (worker.metric("tickwork_worker_job_cache_objects") or 0) >= 1
    done: list[str] = []

    def run_once() -> str:
        scheduled = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC) + dt.timedelta(days=len(done))
        run_id = enqueue_scheduled(jobs, probe, "cached", uid, scheduled)
        wait_for(
            lambda: (jobs.status("cached").get("lastRun") or {}).get("id") == run_id,
            timeout=30,
            what=f"run {run_id}",
        )
        done.append(run_id)
        return str(jobs.status("cached")["lastRun"]["result"])

    assert run_once() == "Executed: v1"
    jobs.patch("cached", {"spec": {"task": {"echo": {"message": "v2"}}}})
    # The copy follows the watch: within a few runs (milliseconds, really) the new spec runs.
    results = [run_once() for _ in range(2)]
    while results[-1] != "Executed: v2" and len(done) < 8:
        results.append(run_once())
    assert results[-1] == "Executed: v2", results
    # Every run started and finished from memory: not one read of the API server ...
    assert worker.metric("tickwork_worker_job_reads_total", 'source="api"') is None
    assert (worker.metric("tickwork_worker_job_reads_total", 'source="cache"') or 0) >= len(done)
    # ... and the history kept the newest three, oldest first: each run added its own
    # record and let the oldest go, without reading the job.
    history = [r["id"] for r in jobs.status("cached")["runs"]]  # type: ignore[union-attr]
    assert history == done[-3:], (history, done)


def test_sigterm_lets_short_runs_finish_and_hands_long_ones_back(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    worker = start_worker(TICKWORK_WORKER_GRACE_SECONDS="3")
    publish(jobs, probe, "short", {"task": {"python": {"name": "tickwork.sleep", "args": ["1"]}}})
    _, long_run = publish(
        jobs, probe, "long", {"task": {"python": {"name": "tickwork.sleep", "args": ["120"]}}}
    )
    wait_for(lambda: active_state(jobs, "long") == "Running", timeout=30, what="Running")
    wait_for(
        lambda: active_state(jobs, "short") == "Running" or last_outcome(jobs, "short"),
        timeout=30,
        what="short running",
    )
    assert worker.stop(timeout=30) == 0
    assert last_outcome(jobs, "short") == "Succeeded"
    assert last_outcome(jobs, "long") is None
    assert probe.locate(long_run) is RunLocation.READY  # handed back, not left to expire
    [again] = probe.drain()
    assert (again.run_id, again.attempt) == (long_run, 1)  # no attempt was spent


def test_a_killed_worker_loses_no_run(start_worker: Start, jobs: Jobs, probe: QueueProbe) -> None:
    a = start_worker("worker-a")
    _, run_id = publish(
        jobs, probe, "survivor", {"task": {"python": {"name": "tickwork.sleep", "args": ["3"]}}}
    )
    wait_for(lambda: active_state(jobs, "survivor") == "Running", timeout=30, what="Running")
    a.kill()
    start_worker("worker-b")
    last = finished(jobs, "survivor", timeout=60)["lastRun"]
    assert isinstance(last, dict)
    assert (last["id"], last["outcome"], last["attempts"]) == (run_id, "Succeeded", 2)


def test_a_run_named_in_cancel_requests_is_stopped_and_recorded_cancelled(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, cluster: Cluster
) -> None:
    start_worker()
    spec = {
        "concurrencyPolicy": "CancelOther",
        "runAt": rfc3339(whole_seconds_from_now(0)),
        "retry": {"maxAttempts": 3},
        "task": {"python": {"name": "tickwork.sleep", "args": ["120"]}},
    }
    uid, run_id = publish(jobs, probe, "replaceable", spec)
    wait_for(lambda: active_state(jobs, "replaceable") == "Running", timeout=30, what="Running")
    now = rfc3339(whole_seconds_from_now(0))

    reason = "cancelled: a newer run fell due (concurrencyPolicy CancelOther)"
    request = {"id": run_id, "requestedAt": now, "terminate": False, "reason": reason}
    apply_as_operator(cluster, jobs, "replaceable", uid, {"cancelRequests": [request]})
    last = finished(jobs, "replaceable", timeout=30)["lastRun"]
    assert isinstance(last, dict)
    assert (last["id"], last["outcome"], last["attempts"]) == (run_id, "Cancelled", 1)
    assert "concurrencyPolicy CancelOther" in last["error"]
    assert probe.locate(run_id) is RunLocation.DONE  # acknowledged: no retry


def test_the_check_command_reports_liveness(start_worker: Start) -> None:
    worker = start_worker()
    env = {**os.environ, "TICKWORK_WORKER_HTTP_PORT": str(worker.http_port)}
    check = [console_script("tickwork-worker"), "check"]
    assert subprocess.run(check, env=env, capture_output=True, check=False).returncode == 0
    worker.kill()
    dead = subprocess.run(check, env=env, capture_output=True, text=True, check=False)
    assert dead.returncode == 1
    assert "unhealthy" in dead.stderr


def test_demo_tasks_are_registered_only_where_they_are_turned_on(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    spec = {"task": {"python": {"name": "tickwork.sleep", "args": ["0"]}}}
    worker = start_worker("worker-a", TICKWORK_WORKER_DEMO_TASKS="false")  # production
    publish(jobs, probe, "demo-off", spec)
    last = finished(jobs, "demo-off")["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 1)
    assert "no task named 'tickwork.sleep' is registered" in last["error"]
    worker.stop()
    start_worker("worker-b")  # the tests turn them on
    publish(jobs, probe, "demo-on", spec)
    assert finished(jobs, "demo-on")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]


def test_stuck_synchronous_tasks_do_not_starve_name_lookups(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer, tmp_path: Path
) -> None:
    """More blocking Python tasks than the interpreter's default thread pool holds (at
    most 32 threads) run at once; an HTTP task to ``localhost`` still resolves the
    name and succeeds, because tasks have a thread pool of their own."""
    start_worker(TICKWORK_WORKER_CONCURRENCY="40", TICKWORK_WORKER_EGRESS_ALLOW="127.0.0.0/8")
    record = tmp_path / "started.txt"
    blocking = {"name": "tickwork.record", "kwargs": {"path": str(record), "seconds": "60"}}
    for n in range(36):
        publish(
            jobs, probe, f"stuck-{n:02d}", {"timeoutSeconds": 600, "task": {"python": blocking}}
        )
    wait_for(
        lambda: record.exists() and len(record.read_text().split()) == 36,
        timeout=30,
        what="36 blocking tasks running",
    )
    url = endpoint.url.replace("127.0.0.1", "localhost")
    publish(jobs, probe, "lookup", {"task": {"http": {"url": url}}})
    last = finished(jobs, "lookup", timeout=20)["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Succeeded", last


def test_records_past_the_history_limit_leave_four_at_a_time(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    """A history of 1: the worker lets records pile up past the limit until 4 are over,
    then removes them in one patch; the removed runs' managers leave managedFields.
    (Without batching each run would trim: 1 record after every run.)"""
    start_worker()
    job = jobs.create(
        "trimmed",
        {
            "schedule": "0 0 1 1 *",
            "history": {"successfulRuns": 1},
            "task": {"echo": {"message": "hi"}},
        },
    )
    uid = job["metadata"]["uid"]
    seen: list[list[str]] = []
    ids = [manual_run_id(uid, f"t{index}") for index in range(6)]
    for run_id in ids:
        now = dt.datetime.now(dt.UTC).isoformat()
        enqueue_run(jobs, probe, "trimmed", uid, run_id, triggered_at=now)

        def done(run_id: str = run_id) -> bool:  # recorded, trimmed if due, acknowledged
            return probe.locate(run_id) is RunLocation.DONE

        wait_for(done, timeout=30, what=f"run {run_id}")
        assert (jobs.status("trimmed").get("lastRun") or {}).get("id") == run_id
        seen.append([r["id"] for r in jobs.status("trimmed")["runs"]])
    assert [len(runs) for runs in seen] == [1, 2, 3, 4, 1, 2], seen
    assert seen[4] == [ids[4]]  # the newest stays, the four before it went at once
    managers = {m["manager"] for m in jobs.get("trimmed")["metadata"]["managedFields"]}
    assert not {run_manager(run_id) for run_id in ids[:4]} & managers
    assert {run_manager(ids[4]), run_manager(ids[5])} <= managers
    assert TRIM_MANAGER not in managers


def test_a_run_on_time_is_one_write_that_replaces_the_oldest_record_of_its_kind(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    """A history of 2 successes and 1 other run: each run of the schedule writes its
    record in its place (tickwork-runs-s0, -s1, -f0) over the oldest of its kind, with
    lastRun and the next runs, in one write (one new version of the object per run);
    no version ever holds more than the limits, and nothing is trimmed."""
    from kubernetes import watch as k8s_watch  # noqa: PLC0415

    from tickwork.api.models import GROUP, PLURAL, VERSION  # noqa: PLC0415

    job = jobs.create(
        "placed",
        {
            "schedule": "0 9 * * *",
            "concurrencyPolicy": "Allow",
            "history": {"successfulRuns": 2, "failedRuns": 1},
            "task": {"echo": {"message": "hi"}},
        },
    )
    uid = job["metadata"]["uid"]
    worker = start_worker()
    wait_for(
        lambda: worker.metric("tickwork_worker_job_cache_synced") == 1.0,
        timeout=30,
        what="the job cache to be listed",
    )
    stream = k8s_watch.Watch().stream(
        jobs.api.list_namespaced_custom_object,
        GROUP,
        VERSION,
        jobs.namespace,
        PLURAL,
        field_selector="metadata.name=placed",
        resource_version=job["metadata"]["resourceVersion"],
        timeout_seconds=120,
    )
    done: list[str] = []
    for day in range(5):
        scheduled = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC) + dt.timedelta(days=day)
        if day == 3:  # this one is skipped: a run that did not succeed takes f0
            jobs.patch("placed", {"spec": {"suspend": True}})
        run_id = enqueue_scheduled(jobs, probe, "placed", uid, scheduled)
        wait_for(
            lambda run_id=run_id: probe.locate(run_id) is RunLocation.DONE,
            timeout=30,
            what=f"run {run_id}",
        )
        if day == 3:
            jobs.patch("placed", {"spec": {"suspend": False}})
        done.append(run_id)
    versions = []
    for event in stream:
        status = event["object"].get("status") or {}
        versions.append(status)
        if (status.get("lastRun") or {}).get("id") == done[-1]:
            break
    # One change of status per run (the suspend's spec edits change none): its record.
    records = [v for i, v in enumerate(versions) if v and (i == 0 or v != versions[i - 1])]
    assert [v["lastRun"]["id"] for v in records] == done, [v.get("lastRun") for v in versions]
    assert max(len(v.get("runs") or []) for v in versions) <= 3
    final = jobs.get("placed")
    kept = {r["id"]: (r["slot"], r["outcome"]) for r in final["status"]["runs"]}
    assert kept == {
        done[2]: ("s0", "Succeeded"),
        done[4]: ("s1", "Succeeded"),
        done[3]: ("f0", "Skipped"),
    }, kept
    assert records[0]["nextRunAt"] == "2026-12-02T09:00:00Z"  # the run after the first
    managers = {m["manager"] for m in final["metadata"]["managedFields"]}
    assert {"tickwork-runs-s0", "tickwork-runs-s1", "tickwork-runs-f0"} <= managers
    assert not {run_manager(run_id) for run_id in done} & managers
    assert TRIM_MANAGER not in managers


def test_runs_are_counted_by_team_and_a_job_that_opts_in_on_its_own(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    """The per-team metrics of a worker process that ran real runs (issue 51): every run
    counted under its job's namespace, its start lag observed there; the job annotated
    tickwork.dev/metrics: job counted on its own as well, the other not."""
    worker = start_worker()
    _, plain = publish(jobs, probe, "plain", {"task": {"echo": {"message": "hi"}}})
    now = whole_seconds_from_now(0)
    job = jobs.create(
        "counted",
        {"runAt": rfc3339(now), "task": {"echo": {"message": "hi"}}},
        annotations={"tickwork.dev/metrics": "job"},
    )
    counted = enqueue_scheduled(jobs, probe, "counted", job["metadata"]["uid"], now)
    for run_id in (plain, counted):
        wait_for(
            lambda run_id=run_id: probe.locate(run_id) is RunLocation.DONE,
            timeout=30,
            what=f"run {run_id}",
        )
    # The exposition lists labels in alphabetical order.
    team = f'job_namespace="{jobs.namespace}"'
    assert worker.metric("tickwork_namespace_runs_total", f'{team},outcome="Succeeded"') == 2
    assert worker.metric("tickwork_namespace_start_lag_seconds_count", team) == 2
    own = f'job_name="counted",{team},outcome="Succeeded"'
    assert worker.metric("tickwork_job_runs_total", own) == 1
    other = f'job_name="plain",{team},outcome="Succeeded"'
    assert worker.metric("tickwork_job_runs_total", other) is None
