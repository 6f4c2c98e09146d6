"""Command tasks through the command runner (issue 14, item 7): a real worker hands
each command to a real `tickwork-command-runner` running as another user (as the
chart runs it, in a container of its own), so a command cannot read the files the
worker was given — the Redis password file, the API credentials — and a timeout
still kills everything the command started."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import (
    Jobs,
    QueueProbe,
    assert_a_timeout_kills_the_whole_group,
    finished,
    publish,
)
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.kube.status import OPERATOR_MANAGER
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
NOBODY = 65534


@pytest.fixture
def shared() -> Iterator[Path]:
    """The volume the worker and the runner share (an emptyDir in the chart)."""
    path = Path(tempfile.mkdtemp(prefix="tickwork-commands-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runner(shared: Path) -> Iterator[Path]:
    """A command runner as another user, without capabilities; its socket."""
    socket = shared / "runner.sock"
    with (shared / "runner.log").open("w") as log:
        process = subprocess.Popen(
            ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "--inh-caps=-all", "--bounding-set=-all", "--",
             console_script("tickwork-command-runner"), "--socket", str(socket)],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        try:
            wait_for(socket.exists, timeout=30, what="the command runner's socket")
            yield socket
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_a_command_runs_as_the_runner_and_cannot_read_the_workers_files(
    start_worker: Start, cluster: Cluster, jobs: Jobs, probe: QueueProbe, runner: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    secret = tmp_path / "redis-password"
    canary = "canary-" + os.urandom(6).hex()
    secret.write_text(canary)
    secret.chmod(0o440)  # as the chart mounts it: readable by the worker's user and group
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true", TICKWORK_WORKER_COMMAND_RUNNER=str(runner))
    script = f"id -u; cat {secret}; cat {cluster.kubeconfig}; echo TOKEN=$TICKWORK_REDIS_URL"
    publish(jobs, probe, "peek", {"retry": {"maxAttempts": 1},
                                  "task": {"command": {"args": ["sh", "-c", script]}}})  # fmt: skip
    last = finished(jobs, "peek")["lastRun"]
    assert isinstance(last, dict)
    output = last["result"] or ""
    assert last["outcome"] == "Succeeded", last  # the echo's exit status
    assert output.startswith(f"exit 0: {NOBODY}\n"), output
    assert f"cat: {secret}: Permission denied" in output
    assert f"cat: {cluster.kubeconfig}: Permission denied" in output
    assert "TOKEN=\n" in output + "\n"  # nothing of the worker's environment
    assert canary not in output


def test_a_timeout_kills_the_whole_group_in_the_runner(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, runner: Path, shared: Path
) -> None:
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true", TICKWORK_WORKER_COMMAND_RUNNER=str(runner))
    pid_file = shared / "grandchild.pid"
    assert_a_timeout_kills_the_whole_group(jobs, probe, pid_file)


def test_without_its_runner_a_command_is_retried_not_run_in_the_worker(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, shared: Path
) -> None:
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true",
                 TICKWORK_WORKER_COMMAND_RUNNER=str(shared / "absent.sock"))  # fmt: skip
    marker = shared / "ran"
    publish(jobs, probe, "orphan", {"retry": {"maxAttempts": 1}, "task": {"command": {
        "args": ["touch", str(marker)]}}})  # fmt: skip
    last = finished(jobs, "orphan")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert "the command runner is not reachable" in last["error"]
    assert not marker.exists()


@pytest.mark.parametrize("terminate", [False, True], ids=["cancel", "terminate"])
def test_a_cancelled_command_is_killed_through_the_runner_with_grace_or_at_once(
    start_worker: Start, cluster: Cluster, jobs: Jobs, probe: QueueProbe, runner: Path,
    shared: Path, terminate: bool,
) -> None:  # fmt: skip
    """A cancel (CancelOther, kubectl tickwork cancel) reaches the program as SIGTERM
    first; TerminateOther kills its process group at once (the worker says ``kill``
    before it hangs up), so a TERM trap never runs."""
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true", TICKWORK_WORKER_COMMAND_RUNNER=str(runner))
    marker, pids = shared / "term", shared / "pids"
    script = f"trap 'echo term >> {marker}; exit 143' TERM; sleep 300 & echo $! > {pids}; wait"
    uid, run_id = publish(jobs, probe, "stoppable", {"retry": {"maxAttempts": 3},
                          "task": {"command": {"args": ["sh", "-c", script]}}})  # fmt: skip
    wait_for(lambda: pids.exists() and pids.read_text().strip(), timeout=30, what="running")
    grandchild = int(pids.read_text())

    async def operator_asks_to_stop() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            request = {"id": run_id, "requestedAt": "2026-12-01T00:00:00Z",
                       "terminate": terminate, "reason": "cancelled: by the test"}  # fmt: skip
            await kube.apply_job_status(jobs.namespace, "stoppable", uid,
                                        {"cancelRequests": [request]},
                                        field_manager=OPERATOR_MANAGER)  # fmt: skip

    asyncio.run(operator_asks_to_stop())
    last = finished(jobs, "stoppable", timeout=30)["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"], last["error"]) == (
        "Cancelled", 1, "cancelled: by the test")  # fmt: skip
    wait_for(lambda: not Path(f"/proc/{grandchild}").exists()
             or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split(")")[-1][:3],
             timeout=15, what="the process group killed")  # fmt: skip
    assert marker.exists() is not terminate
