"""Command tasks in real Pods (issue 14, item 7): with `worker.commandTasks.enabled`,
a command runs in the worker Pod's command-runner container, as another user, where
neither the Redis password nor the worker's ServiceAccount token is mounted; the
worker's own container still has both (it keeps working)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pods.support import apply_jobs, one_of_each, right_now, wait_outcomes
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.release import ClusterImages, Release

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
    values = one_of_each(
        test_images,
        commandTasks={"enabled": True},
        previews={"enabled": True},  # the tests read what commands print
    )
    release = Release(pods_cluster, NAMESPACE, values=values)
    release.install()
    yield release
    release.uninstall()


def _run_command(release: Release, name: str, script: str) -> str:
    """Run ``sh -c script`` as a one-shot command job ``name``; its run's result."""
    cluster, namespace = release.cluster, release.namespace
    apply_jobs(cluster, namespace, [right_now(name, {"command": {"args": ["sh", "-c", script]}})])
    wait_outcomes(cluster, namespace, {name}, "Succeeded", timeout=120)
    status = json.loads(
        cluster.kubectl("-n", namespace, "get", "scheduledjob", name, "-o", "json").stdout
    )["status"]
    return str(status["lastRun"]["result"])


def test_a_command_gets_neither_the_redis_password_nor_the_api_token(
    commands_release: Release,
) -> None:
    cluster, namespace = commands_release.cluster, commands_release.namespace
    script = f"id -u; ls {PASSWORD} {TOKEN} 2>&1; env | grep -c TICKWORK_REDIS; echo done"
    output = _run_command(commands_release, "peek", script)
    lines = output.removeprefix("exit 0: ").splitlines()
    assert lines[0] == "10002", output  # the runner's user, not the worker's (10001)
    assert f"ls: cannot access '{PASSWORD}': No such file or directory" in output
    assert f"ls: cannot access '{TOKEN}': No such file or directory" in output
    assert lines[-2:] == ["0", "done"], output  # no TICKWORK_REDIS_* in its environment
    # The worker's container has both (it reads the job and the queue with them).
    [worker] = [p["metadata"]["name"] for p in commands_release.pods("worker")]
    listed = cluster.kubectl(
        "-n", namespace, "exec", worker, "-c", "worker", "--", "ls", PASSWORD, TOKEN
    ).stdout
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


SOCKET = "/run/tickwork/commands/runner.sock"
ASK = """
import json, socket, sys
client = socket.socket(socket.AF_UNIX)
client.connect(sys.argv[1])
try:
    client.sendall(json.dumps({"args": ["true"], "env": {}}).encode() + b"\\n")
    print(client.makefile().readline().strip() or "hung up")
except ConnectionError:  # reset, or a broken pipe: closed before it was all read
    print("hung up")
"""


def test_a_command_leaves_nothing_behind_and_cannot_touch_the_runners_socket(
    commands_release: Release,
) -> None:
    """In the chart's command runner, on a real node: what a command starts in a
    session of its own is gone when its run has ended; it can neither remove the
    runner's socket nor hand the runner a command of its own; Landlock is there
    (the runner refuses commands otherwise, and this one ran)."""
    cluster, namespace = commands_release.cluster, commands_release.namespace
    script = (
        f"setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; "
        f"rm -f {SOCKET} 2>&1; python3 -c '{ASK}' {SOCKET}; echo done"
    )
    output = _run_command(commands_release, "squatter", script).removeprefix("exit 0: ")
    lines = output.splitlines()
    assert lines[-1] == "done", output
    left = int(lines[0])
    assert f"rm: cannot remove '{SOCKET}': Permission denied" in output
    assert lines[-2] == "hung up", output  # the runner answers the worker's user only
    [worker] = [p["metadata"]["name"] for p in commands_release.pods("worker")]
    argv = ("exec", worker, "-c", "commands", "--", "python3", "-c", PROCESS_STATE, str(left))
    # Already gone when the run was recorded: killed before the runner answered.
    assert cluster.kubectl("-n", namespace, *argv).stdout.strip() == "gone"
    assert _run_command(commands_release, "after", "echo fine") == "exit 0: fine"
