"""The ``tickwork`` CLI and its ``kubectl tickwork`` plugin form, against the real API
server and Redis."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from tests.support import Jobs, QueueProbe, rfc3339, whole_seconds_from_now
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import console_script


def tickwork(cluster: Cluster, namespace: str, *args: str, redis_url: str = "",
             queue: str = "") -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    if redis_url:
        env |= {"TICKWORK_REDIS_URL": redis_url, "TICKWORK_REDIS_QUEUE": queue}
    return subprocess.run(
        [console_script("tickwork"), "-n", namespace, *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_trigger_suspend_and_resume_edit_the_job(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    jobs.create("nightly", {"schedule": "@daily", "task": {"echo": {}}})
    done = tickwork(cluster, namespace, "trigger", "nightly", "--token", "release-7")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'scheduledjob "nightly" triggered (token release-7)'
    annotations = jobs.get("nightly")["metadata"]["annotations"]
    assert annotations["tickwork.dev/run-now"] == "release-7"

    assert tickwork(cluster, namespace, "suspend", "nightly").returncode == 0
    assert jobs.get("nightly")["spec"]["suspend"] is True
    assert tickwork(cluster, namespace, "resume", "nightly").returncode == 0
    assert jobs.get("nightly")["spec"]["suspend"] is False


def test_a_missing_job_is_a_one_line_error(cluster: Cluster, crd: None, namespace: str) -> None:
    result = tickwork(cluster, namespace, "trigger", "nope")
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f'error: scheduledjob "nope" not found in namespace "{namespace}"'
    )
    assert "Traceback" not in result.stderr


def test_runs_prints_the_history_as_a_table(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    job = jobs.create("report", {"schedule": "@daily", "task": {"echo": {}}})
    uid = job["metadata"]["uid"]
    runs = [
        {"id": f"{uid}.20261201T000000Z", "scheduledAt": "2026-12-01T00:00:00Z",
         "outcome": "Succeeded", "attempts": 1, "startedAt": "2026-12-01T00:00:01Z",
         "finishedAt": "2026-12-01T00:00:03Z", "result": "Executed: report"},
        {"id": f"{uid}.20261130T000000Z", "scheduledAt": "2026-11-30T00:00:00Z",
         "outcome": "Failed", "attempts": 3, "error": "HTTP 500: upstream down"},
    ]  # fmt: skip

    async def write() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(namespace, "report", uid, {"runs": runs},
                                        field_manager="test-writer")  # fmt: skip

    asyncio.run(write())
    result = tickwork(cluster, namespace, "runs", "report")
    assert result.returncode == 0, result.stderr
    header, first, second = result.stdout.splitlines()
    assert header.split() == ["RUN", "SCHEDULED", "OUTCOME", "ATTEMPTS", "STARTED", "DURATION",
                              "RESULT"]  # fmt: skip
    assert first.split()[:3][0] == "20261201T000000Z"
    assert "Succeeded" in first
    assert "2.0s" in first
    assert "Executed: report" in first
    assert "Failed" in second
    # As with kubectl, the namespace may come after the command.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    last = subprocess.run(
        [console_script("tickwork"), "runs", "report", "-n", namespace],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert last.returncode == 0, last.stderr
    assert [line.split()[0] for line in last.stdout.splitlines()] == [
        line.split()[0] for line in result.stdout.splitlines()
    ]
    assert "HTTP 500: upstream down" in second


def test_the_kubectl_plugin_is_the_same_cli(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    jobs.create("plugged", {"runAt": rfc3339(whole_seconds_from_now(3600)), "task": {"echo": {}}})
    env_path = f"{Path(console_script('tickwork')).parent}:{os.environ['PATH']}"
    # kubectl finds `kubectl-tickwork` on PATH; it refuses flags before a plugin's
    # name, so the cluster comes from KUBECONFIG, as it would for a user.
    result = subprocess.run(
        [console_script("kubectl"), "tickwork", "-n", namespace, "suspend", "plugged"],
        env={**os.environ, "PATH": env_path, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.get("plugged")["spec"]["suspend"] is True


def test_dlq_list_requeue_and_purge(
    cluster: Cluster, namespace: str, redis_url: str, probe: QueueProbe
) -> None:
    async def bury_three() -> None:
        settings = RedisSettings(url=redis_url, queue=namespace)
        queue = RedisRunQueue(create_client(settings), settings)
        for n in (1, 2, 3):
            await queue.enqueue(RunMessage(run_id=f"u{n}.20261201T090000Z", namespace=namespace,
                                           name=f"job-{n}", uid=f"u{n}"))  # fmt: skip
            [claim] = await queue.claim(consumer="t", lease_seconds=60)
            await queue.bury(claim, error=f"HTTP 500 from job-{n}\nwith a second line")
        await queue.close()

    asyncio.run(bury_three())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return tickwork(cluster, namespace, "dlq", *args, redis_url=redis_url, queue=namespace)

    listing = cli("list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["RUN", "ID", "JOB", "ATTEMPTS", "FAILED", "ERROR"]
    assert len(lines) == 4
    assert f"{namespace}/job-2" in listing.stdout
    assert "HTTP 500 from job-1 with a second line" in listing.stdout  # one line per run

    assert cli("requeue", "u2.20261201T090000Z").stdout.strip() == "requeued 1 run(s)"
    assert cli("requeue").returncode == 1  # neither a run ID nor --all
    assert cli("purge", "--all").stdout.strip() == "purged 2 run(s)"
    assert cli("list").stdout.strip() == "the dead-letter queue is empty"
    assert [m.run_id for m in probe.drain()] == ["u2.20261201T090000Z"]
