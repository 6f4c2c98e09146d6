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
import socket as sock
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import (
    NOBODY,
    Jobs,
    QueueProbe,
    apply_as_operator,
    assert_a_timeout_kills_the_whole_group,
    commands_through,
    finished,
    publish,
    sleeping,
    unique_sleep,
)
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for
from tickwork_worker.command_runner import serve

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]


def test_a_command_runs_as_the_runner_and_cannot_read_the_workers_files(
    start_worker: Start,
    cluster: Cluster,
    jobs: Jobs,
    probe: QueueProbe,
    command_runner: Path,
    tmp_path: Path,
) -> None:
    secret = tmp_path / "redis-password"
    canary = "canary-" + os.urandom(6).hex()
    secret.write_text(canary)
    secret.chmod(0o440)  # as the chart mounts it: readable by the worker's user and group
    start_worker(**commands_through(command_runner))
    script = f"id -u; cat {secret}; cat {cluster.kubeconfig}; echo TOKEN=$TICKWORK_REDIS_URL"
    publish(
        jobs,
        probe,
        "peek",
        {"retry": {"maxAttempts": 1}, "task": {"command": {"args": ["sh", "-c", script]}}},
    )
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
    start_worker: Start, jobs: Jobs, probe: QueueProbe, command_runner: Path
) -> None:
    start_worker(**commands_through(command_runner))
    assert_a_timeout_kills_the_whole_group(jobs, probe)


def test_without_its_runner_a_command_is_retried_not_run_in_the_worker(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, commands_volume: Path
) -> None:
    start_worker(
        TICKWORK_WORKER_COMMAND_TASKS="true",
        TICKWORK_WORKER_COMMAND_RUNNER=str(commands_volume / "absent.sock"),
    )
    marker = commands_volume / "ran"
    publish(
        jobs,
        probe,
        "orphan",
        {"retry": {"maxAttempts": 1}, "task": {"command": {"args": ["touch", str(marker)]}}},
    )
    last = finished(jobs, "orphan")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert "the command runner is not reachable" in last["error"]
    assert not marker.exists()


@pytest.mark.parametrize("terminate", [False, True], ids=["cancel", "terminate"])
def test_a_cancelled_command_is_killed_through_the_runner_with_grace_or_at_once(
    start_worker: Start,
    cluster: Cluster,
    jobs: Jobs,
    probe: QueueProbe,
    command_runner: Path,
    terminate: bool,
) -> None:
    """A cancel (CancelOther, kubectl tickwork cancel) reaches the program as SIGTERM
    first; TerminateOther kills it and all it started at once (the worker says
    ``kill`` before it hangs up), so a TERM trap never runs. The trap tells the test
    over loopback TCP: a confined command can write no file outside its own."""
    start_worker(**commands_through(command_runner))
    sleep = unique_sleep()
    with sock.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        tell = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\""
        script = f"term() {{ {tell}; exit 143; }}; trap term TERM; {sleep} & wait"
        uid, run_id = publish(
            jobs,
            probe,
            "stoppable",
            {"retry": {"maxAttempts": 3}, "task": {"command": {"args": ["sh", "-c", script]}}},
        )
        wait_for(lambda: sleeping(sleep), timeout=30, interval=0.05, what="running")

        request = {
            "id": run_id,
            "requestedAt": "2026-12-01T00:00:00Z",
            "terminate": terminate,
            "reason": "cancelled: by the test",
        }
        apply_as_operator(cluster, jobs, "stoppable", uid, {"cancelRequests": [request]})
        last = finished(jobs, "stoppable", timeout=30)["lastRun"]
        assert isinstance(last, dict)
        assert (last["outcome"], last["attempts"], last["error"]) == (
            "Cancelled",
            1,
            "cancelled: by the test",
        )
        wait_for(lambda: not sleeping(sleep), timeout=15, what="everything it started killed")
        listener.settimeout(0 if terminate else 10)
        try:
            listener.accept()[0].close()
            trapped = True
        except OSError:
            trapped = False
    assert trapped is not terminate


@pytest.mark.parametrize("through_runner", [False, True], ids=["in-worker", "runner"])
def test_a_stopped_worker_kills_the_commands_it_still_runs_and_hands_their_runs_back(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    command_runner: Path,
    through_runner: bool,
) -> None:
    """SIGTERM: the worker waits its grace period (1 s here), then ends the command's
    whole process group and hands the run back, attempt unspent; nothing it started
    outlives it (checked before the harness could kill anything itself)."""
    more = {"TICKWORK_WORKER_COMMAND_RUNNER": str(command_runner)} if through_runner else {}
    worker = start_worker(
        TICKWORK_WORKER_COMMAND_TASKS="true", TICKWORK_WORKER_GRACE_SECONDS="1", **more
    )
    sleep = unique_sleep()
    _, run_id = publish(
        jobs,
        probe,
        "long",
        {
            "retry": {"maxAttempts": 3},
            "task": {"command": {"args": ["sh", "-c", f"{sleep} & wait"]}},
        },
    )
    wait_for(lambda: sleeping(sleep), timeout=30, interval=0.05, what="running")
    assert worker.stop(timeout=25) == 0  # on its own, well before the harness's SIGKILL
    wait_for(lambda: not sleeping(sleep), timeout=5, what="the command's group killed")
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
    socket, sleep = tmp_path / "runner.sock", unique_sleep()

    async def scenario() -> None:
        stop = asyncio.Event()
        server = asyncio.create_task(serve(socket, stop, worker_uid=os.getuid()))
        await _until(socket.exists)
        writer = await _send(socket, ["sh", "-c", f"{sleep} & wait"])
        await _until(lambda: bool(sleeping(sleep)))
        stop.set()
        await _until(lambda: not _accepts(socket))  # no new command from here on
        assert sleeping(sleep)
        assert not server.done()
        if ended_by == "worker-hangs-up":
            writer.close()
            await asyncio.wait_for(server, timeout=10)  # ends once the command has
        else:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(server, timeout=10)
            writer.close()
        await _until(lambda: not sleeping(sleep))

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


ASK = """
import json, os, socket, sys
client = socket.socket(socket.AF_UNIX)
client.connect(sys.argv[1])
request = {"args": ["sh", "-c", "echo ran"], "env": {"PATH": os.environ["PATH"]}}
try:
    client.sendall(json.dumps(request).encode() + b"\\n")
    print(client.makefile().readline().strip() or "hung up")
except ConnectionError:  # reset, or a broken pipe: closed before it was all read
    print("hung up")
"""


@pytest.mark.parametrize("asker", ["worker", "runner-user"])
def test_the_runner_answers_the_worker_only_not_a_process_of_its_own_user(
    command_runner: Path, asker: str
) -> None:
    """A command runs as the runner's user: it may connect to the runner's socket (in
    the chart it can read /run), but the runner takes no request from that user."""
    as_user = ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    prefix = as_user if asker == "runner-user" else []
    said = subprocess.run(
        [*prefix, "/usr/bin/python3", "-c", ASK, str(command_runner)],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    if asker == "worker":
        assert json.loads(said) == {"code": 0, "output": "ran\n"}
    else:
        assert said == "hung up"
