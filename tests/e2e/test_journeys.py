"""User journeys, end to end: the real control plane and Redis, the operator and the
worker as the processes users run, kubectl and the tickwork CLI as users type them."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.support import (
    Jobs,
    QueueProbe,
    ScriptedServer,
    last_outcome,
    lead,
    rfc3339,
    row,
    whole_seconds_from_now,
)
from tickwork.core.runs import scheduled_run_id
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork_dev import argocd
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for

ROOT = Path(__file__).resolve().parents[2]
Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(300)
#: The grid of the self-pausing job: room for the pause to land before its next run.
GRID = dt.timedelta(seconds=20)


@pytest.fixture
def tickwork(start_operator: Start, start_worker: Start) -> tuple[TickworkProcess, TickworkProcess]:
    operator = start_operator()
    lead(operator)
    return operator, start_worker()


def test_apply_the_job_example_and_it_succeeds_with_its_result(
    tickwork: tuple[TickworkProcess, TickworkProcess],
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
) -> None:
    # Applied as it is written: its runAt has passed, so it runs at once.
    example = yaml.safe_load((ROOT / "manifests/examples/job.yaml").read_text())
    cluster.kubectl("apply", "-n", namespace, "-f", str(ROOT / "manifests/examples/job.yaml"))
    name = example["metadata"]["name"]
    before = row(cluster, namespace, name)
    assert before["runAt"] == example["spec"]["runAt"]
    assert before["suspend"] == "false"

    wait_for(lambda: last_outcome(jobs, name) == "Succeeded", timeout=60, what="success")
    status = jobs.status(name)
    assert status["lastRun"]["result"] == "Executed: hello from Tickwork"
    # The operator's lifecycle follows the run's record: the one-shot job is over.
    wait_for(
        lambda: row(cluster, namespace, name)["phase"] == "Completed", timeout=10, what="Completed"
    )
    after = row(cluster, namespace, name)
    assert (after["active"], after["last"], after["nextRun"]) == ("", "Succeeded", "")
    assert after["lastRun"].endswith("d")  # when it was due: days ago
    assert status["lastRun"]["scheduledAt"] == example["spec"]["runAt"]


@pytest.mark.timeout(420)
def test_a_recurring_job_runs_three_times_and_stays_scheduled(
    tickwork: tuple[TickworkProcess, TickworkProcess],
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
) -> None:
    """Three runs 10 s apart (a cron minute's cadence on real parts is the chart's
    `test_the_cron_job_ran_three_times_once_a_minute` in Pods, and the demo's
    `every-minute` job in `test_the_demo_runs_until_its_jobs_succeed`)."""
    jobs.create("thrice", {"schedule": "@every 10s", "task": {"echo": {"message": "tick"}}})
    wait_for(
        lambda: row(cluster, namespace, "thrice")["nextRun"] != "", timeout=30, what="Next Run"
    )
    assert row(cluster, namespace, "thrice")["phase"] == "Scheduled"
    shown: set[tuple[str, str]] = set()

    def three_runs() -> bool:
        line = row(cluster, namespace, "thrice")
        shown.add((line["phase"], line["last"]))
        runs = jobs.status("thrice").get("runs") or []
        return sum(r["outcome"] == "Succeeded" for r in runs) >= 3

    wait_for(three_runs, timeout=90, interval=0.2, what="three runs")
    status = jobs.status("thrice")
    runs = status["runs"]
    scheduled = sorted(dt.datetime.fromisoformat(r["scheduledAt"]) for r in runs)
    # Every instant on the 10 s grid either ran or is counted missed: an operator held
    # up longer than ON_TIME_SECONDS (a loaded CI machine) skips to the latest run,
    # CronJob's way, and says so in status. Nothing falls between the two.
    created = dt.datetime.fromisoformat(jobs.get("thrice")["metadata"]["creationTimestamp"])
    gaps = [
        (b - a) / dt.timedelta(seconds=10) for a, b in itertools.pairwise([created, *scheduled])
    ]
    skipped = sum(gap - 1 for gap in gaps)  # the grid starts at the creation time
    assert all(gap >= 1 and gap.is_integer() for gap in gaps), runs
    assert skipped == (status.get("missedRuns") or 0), (runs, status.get("missedRuns"))
    assert skipped <= 1, runs  # one held-up tick at most, or the operator is broken
    assert len(runs) == 3  # history keeps successfulRuns: 3
    assert ("Scheduled", "Succeeded") in shown  # a recurring job stays Scheduled
    assert {phase for phase, _ in shown} == {"Scheduled"}
    assert row(cluster, namespace, "thrice")["lastRun"] != ""


def test_a_failing_webhook_is_retried_dead_lettered_then_requeued_and_succeeds(
    tickwork: tuple[TickworkProcess, TickworkProcess],
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
    endpoint: ScriptedServer,
    redis_url: str,
) -> None:
    endpoint.script = [(503, 0.0)] * 3
    jobs.create(
        "webhook",
        {
            "runAt": rfc3339(whole_seconds_from_now(2)),
            "retry": {"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 2},
            "task": {"http": {"url": endpoint.url}},
        },
    )
    wait_for(lambda: last_outcome(jobs, "webhook") == "Failed", timeout=90, what="dead letter")
    assert row(cluster, namespace, "webhook")["last"] == "Failed"
    wait_for(
        lambda: row(cluster, namespace, "webhook")["phase"] == "Completed",
        timeout=10,
        what="Completed",
    )
    assert len(endpoint.requests) == 3

    def ready() -> dict[str, str]:
        conditions = jobs.status("webhook").get("conditions") or []
        return next((c for c in conditions if c["type"] == "Ready"), {})

    # The job's health says so: Ready is False while its last run failed.
    wait_for(lambda: ready().get("reason") == "LastRunFailed", timeout=10, what="LastRunFailed")
    assert ready()["status"] == "False"
    assert "HTTP 503" in ready()["message"]
    # ... and so does Argo CD's view of it (the shipped health check on the real object).
    assert argocd.health(jobs.get("webhook"))[0] == "Degraded"

    # The dead letter, through the Kubernetes API alone: no Redis address or password.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_REDIS")}
    env["KUBECONFIG"] = str(cluster.kubeconfig)
    cli = [console_script("tickwork"), "-n", namespace, "dlq"]
    run_id = jobs.status("webhook")["lastRun"]["id"]
    assert [d["id"] for d in jobs.status("webhook")["deadRuns"]] == [run_id]
    listing = subprocess.run([*cli, "list"], env=env, capture_output=True, text=True, check=True)
    assert run_id in listing.stdout
    assert "HTTP 503" in listing.stdout
    assert asyncio.run(dead_letter_ids(redis_url, namespace)) == [run_id]

    endpoint.script = []  # the receiver is fixed
    requeued = subprocess.run(
        [*cli, "requeue", run_id], env=env, capture_output=True, text=True, check=True
    )
    assert requeued.stdout.startswith("asked the operator to requeue 1 dead run(s)")
    wait_for(lambda: last_outcome(jobs, "webhook") == "Succeeded", timeout=60, what="success")
    assert not jobs.status("webhook").get("deadRuns")  # it left the list as it started again
    assert asyncio.run(dead_letter_ids(redis_url, namespace)) == []
    assert row(cluster, namespace, "webhook")["last"] == "Succeeded"
    wait_for(lambda: ready().get("status") == "True", timeout=10, what="Ready again")
    assert ready()["reason"] == "Completed"
    assert argocd.health(jobs.get("webhook")) == ("Healthy", "The one-shot run is over: Succeeded")
    assert len(endpoint.requests) == 4
    assert endpoint.requests[-1]["headers"]["Idempotency-Key"] == run_id  # type: ignore[index]


async def dead_letter_ids(redis_url: str, queue_name: str) -> list[str]:
    settings = RedisSettings(url=redis_url, queue=queue_name)
    queue = RedisRunQueue(create_client(settings), settings)
    try:
        return [letter.message.run_id for letter in await queue.dead_letters()]
    finally:
        await queue.close()


def _run_events(process: TickworkProcess, run_id: str) -> list[dict[str, object]]:
    """The JSON log lines of ``process`` about ``run_id``, in order."""
    lines = [
        json.loads(line)
        for line in process.log_path.read_text().splitlines()
        if line.startswith("{")
    ]
    return [line for line in lines if line.get("run_id") == run_id and "event" in line]


def test_one_run_can_be_followed_across_the_operators_and_the_workers_json_logs(
    start_operator: Start, start_worker: Start, jobs: Jobs, namespace: str
) -> None:
    operator = start_operator(TICKWORK_OPERATOR_LOG_FORMAT="json")
    lead(operator)
    worker = start_worker(TICKWORK_WORKER_LOG_FORMAT="json")
    run_at = whole_seconds_from_now(3)
    retry = {"maxAttempts": 2, "backoffSeconds": 1, "maxBackoffSeconds": 1}
    ok = jobs.create("fine", {"runAt": rfc3339(run_at), "task": {"echo": {"message": "x"}}})
    bad = jobs.create(
        "broken",
        {"runAt": rfc3339(run_at), "retry": retry, "task": {"python": {"name": "tickwork.fail"}}},
    )
    wait_for(lambda: last_outcome(jobs, "fine") == "Succeeded", timeout=60, what="success")
    wait_for(lambda: last_outcome(jobs, "broken") == "Failed", timeout=60, what="dead letter")
    expected = {
        "fine": ([("claimed", 1), ("started", 1), ("finished", 1)], "Succeeded"),
        "broken": (
            [
                ("claimed", 1),
                ("started", 1),
                ("retrying", 1),
                ("claimed", 2),
                ("started", 2),
                ("dead-lettered", 2),
            ],
            "Failed",
        ),
    }
    for job in (ok, bad):
        name = job["metadata"]["name"]
        events, outcome = expected[name]
        run_id = scheduled_run_id(job["metadata"]["uid"], run_at)
        count = len(events)
        wait_for(
            lambda run_id=run_id, count=count: len(_run_events(worker, run_id)) >= count,
            timeout=10,
            what="the worker's log lines",
        )
        published, seen = _run_events(operator, run_id), _run_events(worker, run_id)
        assert [e["event"] for e in published] == ["published"]
        assert [(e["event"], e["attempt"]) for e in seen] == events
        for event in [*published, *seen]:  # fields, not words inside the message
            assert (event["namespace"], event["job"]) == (namespace, name)
        assert seen[-1]["outcome"] == outcome
        assert isinstance(seen[-1]["duration_seconds"], float | int)


def test_suspending_a_job_while_its_run_is_queued_skips_the_run(
    start_operator: Start,
    start_worker: Start,
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
) -> None:
    lead(start_operator())
    jobs.create(
        "paused",
        {
            "runAt": rfc3339(whole_seconds_from_now(2)),
            "task": {"echo": {"message": "should not run"}},
        },
    )
    wait_for(lambda: "queuedRun" in jobs.status("paused"), timeout=30, what="queuedRun")
    jobs.patch("paused", {"spec": {"suspend": True}})
    wait_for(
        lambda: row(cluster, namespace, "paused")["phase"] == "Suspended",
        timeout=30,
        what="Suspended",
    )
    start_worker()  # a worker comes along and finds the run
    wait_for(lambda: last_outcome(jobs, "paused") == "Skipped", timeout=60, what="skip")
    assert jobs.status("paused")["lastRun"]["error"] == "skipped: the job is suspended"
    # Its one run is over (a resume would not bring back a time that has passed).
    wait_for(
        lambda: row(cluster, namespace, "paused")["phase"] == "Completed",
        timeout=10,
        what="Completed",
    )
    assert row(cluster, namespace, "paused")["last"] == "Skipped"
    assert row(cluster, namespace, "paused")["suspend"] == "true"


def test_a_manual_trigger_runs_once_per_token(
    tickwork: tuple[TickworkProcess, TickworkProcess],
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
) -> None:
    jobs.create("on-demand", {"schedule": "0 0 1 1 *", "task": {"echo": {"message": "now"}}})
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    trigger = [console_script("tickwork"), "-n", namespace, "trigger", "on-demand"]
    subprocess.run([*trigger, "--token", "t1"], env=env, capture_output=True, check=True)
    wait_for(lambda: last_outcome(jobs, "on-demand") == "Succeeded", timeout=60, what="run")
    status = jobs.status("on-demand")
    assert status["lastRun"]["id"].endswith(".manual.t1")
    subprocess.run([*trigger, "--token", "t1"], env=env, capture_output=True, check=True)
    subprocess.run([*trigger, "--token", "t2"], env=env, capture_output=True, check=True)
    wait_for(
        lambda: len(jobs.status("on-demand").get("runs") or []) == 2,
        timeout=60,
        what="the second token's run",
    )
    ids = sorted(r["id"].rsplit(".", 1)[-1] for r in jobs.status("on-demand")["runs"])
    assert ids == ["t1", "t2"]
    assert row(cluster, namespace, "on-demand")["nextRun"].startswith(
        f"{dt.datetime.now(dt.UTC).year + 1}-01-01"
    )


def test_a_manual_run_with_parameters_reaches_the_webhook_and_the_program(
    start_operator: Start,
    start_worker: Start,
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
    endpoint: ScriptedServer,
) -> None:
    lead(start_operator())
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true")
    template = '{"region": "{{ params.region }}", "run": "{{runId}}", "due": "{{scheduledTime}}"}'
    script = (
        'echo "$TICKWORK_JOB in $TICKWORK_PARAM_REGION at $TICKWORK_SCHEDULED_TIME, '
        'attempt $TICKWORK_ATTEMPT of $TICKWORK_RUN_ID"'
    )
    never = "0 0 1 1 *"  # runs only when triggered
    http = {"url": endpoint.url, "bodyTemplate": template}
    jobs.create("export", {"schedule": never, "task": {"http": http}})
    jobs.create("script", {"schedule": never, "task": {"command": {"args": ["sh", "-c", script]}}})
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    cli = [console_script("tickwork"), "-n", namespace]
    for name in ("export", "script"):
        subprocess.run(
            [*cli, "trigger", name, "--token", "eu-1", "--param", "region=eu"],
            env=env,
            capture_output=True,
            check=True,
        )
    for name in ("export", "script"):
        wait_for(
            lambda name=name: last_outcome(jobs, name) == "Succeeded",
            timeout=60,
            what=f"{name} to succeed",
        )

    # The webhook got the run's headers and its body filled in with the parameter.
    status = jobs.status("export")
    last = status["lastRun"]
    run_id, due = last["id"], last["scheduledAt"]
    assert run_id.endswith(".manual.eu-1")
    assert due == status["queuedRun"]["scheduledAt"]  # when the operator published it
    [request] = endpoint.requests
    headers = request["headers"]
    assert isinstance(headers, dict)
    assert (headers["Tickwork-Run-Id"], headers["Tickwork-Scheduled-Time"]) == (run_id, due)
    assert headers["Tickwork-Params"] == '{"region":"eu"}'
    assert json.loads(str(request["body"])) == {"region": "eu", "run": run_id, "due": due}
    # The run's history says what it was given (and the operator's queuedRun, too).
    assert last["params"] == status["runs"][0]["params"] == {"region": "eu"}
    assert status["queuedRun"]["params"] == {"region": "eu"}
    described = subprocess.run(
        [*cli, "describe", run_id], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "Parameters: region=eu\n" in described

    # The program got them in its environment.
    script_run = jobs.status("script")["lastRun"]
    assert script_run["result"] == (
        f"exit 0: script in eu at {script_run['scheduledAt']}, attempt 1 of {script_run['id']}"
    )
    assert script_run["params"] == {"region": "eu"}


@pytest.mark.parametrize("queue", ["redis", "memory"])
@pytest.mark.timeout(400)
def test_the_demo_runs_until_its_jobs_succeed(tmp_path: Path, queue: str) -> None:
    result = subprocess.run(
        [
            console_script("tickwork-demo"),
            "--queue",
            queue,
            "--until-succeeded",
            "--duration",
            "240",
            "--workdir",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        timeout=360,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "The demo jobs succeeded." in result.stdout
    assert "kubectl get scheduledjobs" in result.stdout


def test_quick_runs_stay_succeeded_after_the_operator_reports_them(
    tickwork: tuple[TickworkProcess, TickworkProcess], jobs: Jobs
) -> None:
    """Workers finish an echo in milliseconds, often before the operator has reported the
    run Queued: that report must not overwrite the worker's Succeeded."""
    run_at = rfc3339(whole_seconds_from_now(4))
    names = [f"quick-{i:02d}" for i in range(30)]
    for name in names:
        jobs.create(name, {"runAt": run_at, "task": {"echo": {"message": name}}})

    def all_reported() -> bool:
        statuses = [jobs.status(name) for name in names]
        return all(
            (s.get("lastRun") or {}).get("outcome") == "Succeeded"
            and (s.get("queuedRun") or {}).get("id") == s["lastRun"]["id"]
            for s in statuses
        )

    # Both sides have written: the worker its outcome, the operator its queuedRun.
    wait_for(all_reported, timeout=90, interval=0.5, what="every run reported by both")
    wait_for(
        lambda: {jobs.status(name).get("phase") for name in names} == {"Completed"},
        timeout=30,
        what="every job Completed",
    )
    assert not any(jobs.status(name).get("activeRuns") for name in names)


@pytest.mark.timeout(420)
def test_a_job_whose_runs_keep_failing_pauses_itself_until_it_is_resumed(
    tickwork: tuple[TickworkProcess, TickworkProcess],
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
    endpoint: ScriptedServer,
    probe: QueueProbe,
) -> None:
    endpoint.script = [(503, 0.0)] * 10  # the receiver is broken until the script ends
    # Runs on a 10 s grid from notBefore (docs/scheduling.md): the instants are known.
    anchor = whole_seconds_from_now(8)
    job = jobs.create(
        "flaky",
        {
            "schedule": f"@every {GRID.seconds}s",
            "notBefore": rfc3339(anchor),
            "failurePolicy": {"pauseAfter": 2},
            "retry": {"maxAttempts": 1},
            "task": {"http": {"url": endpoint.url}},
        },
    )
    uid = job["metadata"]["uid"]
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{Path(console_script('tickwork')).parent}:{os.environ['PATH']}",
    }
    # A manual run fails first (a failure is a failure), then the next scheduled one.
    subprocess.run(
        [console_script("tickwork"), "-n", namespace, "trigger", "flaky"],
        env=env,
        capture_output=True,
        check=True,
    )
    wait_for(
        lambda: jobs.status("flaky").get("phase") == "Paused",
        timeout=200,
        interval=0.5,
        what="the pause",
    )

    status = jobs.status("flaky")
    failed = [r["id"] for r in status["runs"] if r["outcome"] == "Failed"]
    assert len(failed) == 2
    assert len(endpoint.requests) == 2  # exactly two runs, then none
    assert status["failureStreak"]["count"] == 2
    assert sorted(status["failureStreak"]["runIds"]) == sorted(failed)
    assert "nextRunAt" not in status
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Paused"]["status"], conditions["Paused"]["reason"]) == (
        "True",
        "ConsecutiveFailures",
    )
    assert all(run_id in conditions["Paused"]["message"] for run_id in failed)
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "Paused")
    assert row(cluster, namespace, "flaky")["phase"] == "Paused"
    assert argocd.health(jobs.get("flaky"))[0] == "Degraded"

    def paused_events() -> list[tuple[str, str, str]]:
        return [e for e in jobs.events("flaky") if e[1] == "Paused"]

    wait_for(lambda: paused_events() != [], timeout=30, what="the Paused Event")
    [(kind, _, message)] = paused_events()
    assert kind == "Warning"
    assert all(run_id in message for run_id in failed)

    # The next run of the grid is never published: a one-shot job due just after it
    # runs, and by then the paused job's run would have been in the queue.
    passed = (dt.datetime.now(dt.UTC) - anchor) // GRID + 1
    skipped = anchor + passed * GRID
    jobs.create(
        "sentinel",
        {
            "runAt": rfc3339(skipped + dt.timedelta(seconds=2)),
            "task": {"echo": {"message": "after the paused minute"}},
        },
    )
    wait_for(
        lambda: last_outcome(jobs, "sentinel") == "Succeeded",
        timeout=120,
        what="the sentinel's run",
    )
    assert probe.locate(scheduled_run_id(uid, skipped)) is None
    assert len(endpoint.requests) == 2

    # Fixed elsewhere (the receiver), so no spec change: kubectl tickwork resume.
    endpoint.script = []
    resumed = subprocess.run(
        [console_script("kubectl"), "tickwork", "-n", namespace, "resume", "flaky"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert resumed.stdout.startswith('scheduledjob "flaky" resumed (token ')
    wait_for(
        lambda: jobs.status("flaky").get("phase") == "Scheduled", timeout=30, what="the resume"
    )
    status = jobs.status("flaky")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Paused"] == "False"
    assert status["failureStreak"]["count"] == 0
    assert "pausedAt" not in status["failureStreak"]
    assert status["lastResumeToken"] == resumed.stdout.split("token ")[1].rstrip(")\n")
    next_run = dt.datetime.fromisoformat(status["nextRunAt"])
    assert next_run <= dt.datetime.now(dt.UTC) + GRID  # from now on
    wait_for(
        lambda: last_outcome(jobs, "flaky") == "Succeeded",
        timeout=120,
        what="a run after the resume",
    )
    assert jobs.status("flaky")["lastRun"]["scheduledAt"] == rfc3339(next_run)
    assert len(endpoint.requests) == 3
    wait_for(
        lambda: any(e[1] == "Resumed" for e in jobs.events("flaky")),
        timeout=30,
        what="the Resumed Event",
    )
