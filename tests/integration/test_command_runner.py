"""Command tasks through the command runner (issue 14, item 7): a real worker hands
each command to a real `tickwork-command-runner` running as another user (as the
chart runs it, in a container of its own), so a command cannot read the files the
worker was given — the Redis password file, the API credentials — and a timeout
still kills everything the command started."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket as sock
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import (
    Jobs,
    QueueProbe,
    alive,
    assert_a_timeout_kills_the_whole_group,
    finished,
    publish,
)
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.kube.status import OPERATOR_MANAGER
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for
from tickwork_worker.command_runner import serve

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
    wait_for(lambda: not alive(grandchild), timeout=15, what="the process group killed")
    assert marker.exists() is not terminate


@pytest.mark.parametrize("through_runner", [False, True], ids=["in-worker", "runner"])
def test_a_stopped_worker_kills_the_commands_it_still_runs_and_hands_their_runs_back(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, runner: Path, shared: Path,
    through_runner: bool,
) -> None:  # fmt: skip
    """SIGTERM: the worker waits its grace period (1 s here), then ends the command's
    whole process group and hands the run back, attempt unspent; nothing it started
    outlives it (checked before the harness could kill anything itself)."""
    more = {"TICKWORK_WORKER_COMMAND_RUNNER": str(runner)} if through_runner else {}
    worker = start_worker(TICKWORK_WORKER_COMMAND_TASKS="true", TICKWORK_WORKER_GRACE_SECONDS="1",
                          **more)  # fmt: skip
    pids = shared / "pids"
    _, run_id = publish(jobs, probe, "long", {"retry": {"maxAttempts": 3}, "task": {"command": {
        "args": ["sh", "-c", f"sleep 300 & echo $! > {pids}; wait"]}}})  # fmt: skip
    wait_for(lambda: pids.exists() and pids.read_text().strip(), timeout=30, what="running")
    grandchild = int(pids.read_text())
    assert worker.stop(timeout=25) == 0  # on its own, well before the harness's SIGKILL
    wait_for(lambda: not alive(grandchild), timeout=5, what="the command's group killed")
    assert probe.locate(run_id) is RunLocation.READY
    [again] = probe.drain()
    assert (again.run_id, again.attempt) == (run_id, 1)


async def _send(socket: Path, args: list[str]) -> asyncio.StreamWriter:
    """Ask the runner at ``socket`` to run ``args``; the connection, to hang up."""
    _, writer = await asyncio.open_unix_connection(str(socket))
    writer.write(json.dumps({"args": args, "env": {"PATH": os.environ["PATH"]}}).encode() + b"\n")
    await writer.drain()
    return writer


@pytest.mark.parametrize("ended_by", ["worker-hangs-up", "second-signal"])
def test_a_stopping_runner_takes_no_new_command_and_leaves_running_ones_to_the_worker(
    tmp_path: Path, ended_by: str
) -> None:
    """Its Pod ending, the runner gets SIGTERM with the worker: it must not kill a
    command the worker still gives its grace period, nor leave one behind — the
    worker's hang-up ends it; a second signal (the runner cancelled) ends it at once."""
    socket, pids = tmp_path / "runner.sock", tmp_path / "pids"

    async def scenario() -> None:
        stop = asyncio.Event()
        server = asyncio.create_task(serve(socket, stop))
        await _until(socket.exists)
        writer = await _send(socket, ["sh", "-c", f"sleep 300 & echo $! > {pids}; wait"])
        await _until(lambda: pids.exists() and bool(pids.read_text().strip()))
        grandchild = int(pids.read_text())
        stop.set()
        await _until(lambda: not _accepts(socket))  # no new command from here on
        assert alive(grandchild)
        assert not server.done()
        if ended_by == "worker-hangs-up":
            writer.close()
            await asyncio.wait_for(server, timeout=10)  # ends once the command has
        else:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(server, timeout=10)
            writer.close()
        await _until(lambda: not alive(grandchild))

    asyncio.run(scenario())


def _accepts(socket: Path) -> bool:
    with sock.socket(sock.AF_UNIX, sock.SOCK_STREAM) as probe:
        try:
            probe.connect(str(socket))
        except OSError:
            return False
        return True


async def _until(condition: Callable[[], bool]) -> None:
    """Wait (up to 10 s) for ``condition``, checking it between turns of the event loop."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 - files and processes: no event to await
            await asyncio.sleep(0.02)
