"""Command tasks in real Pods (issue 14, item 7): with `worker.commandTasks.enabled`,
a command runs in the worker Pod's command-runner container, as another user, where
neither the Redis password nor the worker's ServiceAccount token is mounted; the
worker's own container still has both (it keeps working)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pods.support import apply_jobs, seconds_from_now, wait_outcomes
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.release import ClusterImages, Release, merge

NAMESPACE = "tickwork-commands"
pytestmark = pytest.mark.timeout(600)
CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
PASSWORD = "/var/run/secrets/tickwork/redis/password"
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@pytest.fixture(scope="module")
def commands_release(pods_cluster: Cluster, test_images: ClusterImages) -> Iterator[Release]:
    # The CRD may outlive an earlier release (it is kept on uninstall): manage it
    # apart from this release, as GitOps installs often do.
    pods_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    values = merge(test_images.values(), {
        "crds": {"install": False},
        "operator": {"replicas": 1},
        "autoscaling": {"enabled": False},
        "worker": {"replicas": 1, "commandTasks": {"enabled": True},
                   "previews": {"enabled": True}},  # the tests read what commands print
    })  # fmt: skip
    release = Release(pods_cluster, NAMESPACE, values=values)
    release.install()
    yield release
    release.uninstall()


def _run_command(release: Release, name: str, script: str) -> str:
    """Run ``sh -c script`` as a one-shot command job ``name``; its run's result."""
    cluster, namespace = release.cluster, release.namespace
    job = {"apiVersion": "tickwork.dev/v1alpha1", "kind": "ScheduledJob",
           "metadata": {"name": name},
           "spec": {"runAt": seconds_from_now(0), "retry": {"maxAttempts": 1},
                    "task": {"command": {"args": ["sh", "-c", script]}}}}  # fmt: skip
    apply_jobs(cluster, namespace, [job])
    wait_outcomes(cluster, namespace, {name}, "Succeeded", timeout=120)
    status = json.loads(cluster.kubectl("-n", namespace, "get", "scheduledjob", name,
                                        "-o", "json").stdout)["status"]  # fmt: skip
    return str(status["lastRun"]["result"])


def test_a_command_gets_neither_the_redis_password_nor_the_api_token(
    commands_release: Release,
) -> None:
    cluster, namespace = commands_release.cluster, commands_release.namespace
    script = (f"id -u; ls {PASSWORD} {TOKEN} 2>&1; env | grep -c TICKWORK_REDIS; "
              "echo done")  # fmt: skip
    output = _run_command(commands_release, "peek", script)
    lines = output.removeprefix("exit 0: ").splitlines()
    assert lines[0] == "10002", output  # the runner's user, not the worker's (10001)
    assert f"ls: cannot access '{PASSWORD}': No such file or directory" in output
    assert f"ls: cannot access '{TOKEN}': No such file or directory" in output
    assert lines[-2:] == ["0", "done"], output  # no TICKWORK_REDIS_* in its environment
    # The worker's container has both (it reads the job and the queue with them).
    [worker] = [p["metadata"]["name"] for p in commands_release.pods("worker")]
    listed = cluster.kubectl("-n", namespace, "exec", worker, "-c", "worker", "--",
                             "ls", PASSWORD, TOKEN).stdout  # fmt: skip
    assert PASSWORD in listed
    assert TOKEN in listed


PROCESS_STATE = """
import sys
try:
    stat = open(f"/proc/{sys.argv[1]}/stat").read()
except OSError:
    print("gone")
else:
    print(stat[stat.rindex(")") + 2])  # R, S, ... or Z: exited, never reaped
"""


def test_an_orphan_a_command_leaves_is_reaped(commands_release: Release) -> None:
    """A command's own child that outlives it is re-parented to the container's PID 1,
    tini, which reaps it when it exits (a Python PID 1 would leave it a zombie)."""
    cluster, namespace = commands_release.cluster, commands_release.namespace
    result = _run_command(commands_release, "orphan", "(sleep 2 & echo $!); echo done")
    output = result.removeprefix("exit 0: ").split()
    assert output[-1] == "done", output
    orphan = int(output[0])
    [worker] = [p["metadata"]["name"] for p in commands_release.pods("worker")]

    def state() -> str:
        argv = ("exec", worker, "-c", "commands", "--", "python3", "-c", PROCESS_STATE)
        return cluster.kubectl("-n", namespace, *argv, str(orphan)).stdout.strip()

    # It sleeps 2 s, then exits: reaped, its /proc entry goes; a zombie's stays ("Z").
    seen: list[str] = []

    def reaped() -> bool:
        seen.append(state())
        return seen[-1] == "gone"

    try:
        wait_for(reaped, timeout=30, interval=0.5, what=f"the orphan {orphan} to be reaped")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its states: {sorted(set(seen))}") from None
