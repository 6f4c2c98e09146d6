"""Attack: one tenant's command outlives its run, takes over the command runner's
socket, and reads or kills other tenants' commands (issue 46, item 3).

On the code before: a command that forked, called ``setsid`` and kept running
survived its run's process-group kill; it ran as the runner's user, so it could
replace ``runner.sock`` (and answer later commands with forged results, their
environment in hand), read ``/proc/<pid>/environ`` of any other command running
beside it, and kill it. Now every command runs under a supervisor that kills
everything it left when it ends, inside a Landlock sandbox: no file outside its own
directory, no signal, trace or /proc memory/environment of a process outside it.
Real worker, command runner (as another user, no capabilities, as the chart runs
it), API server and Redis.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import (
    Jobs,
    QueueProbe,
    commands_through,
    finished,
    publish,
    sleeping,
    unique_sleep,
)
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]

TAKEOVER = """
import json, os, socket, sys
path = sys.argv[1]
os.unlink(path)
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
while True:
    conn, _ = server.accept()
    conn.makefile().readline()  # a later command: its arguments and environment
    conn.sendall(json.dumps({"code": 0, "output": "forged"}).encode() + b"\\n")
    conn.close()
"""


def test_a_command_leaves_nothing_running_and_cannot_take_the_runners_socket(
    command_runner: Path, start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    start_worker(**commands_through(command_runner))
    before = command_runner.stat().st_ino
    sleep = unique_sleep()
    escape = (
        f"setsid {sleep} </dev/null >/dev/null 2>&1 & "
        f"setsid python3 -c '{TAKEOVER}' {command_runner} </dev/null >/dev/null 2>&1 & "
        "echo left"
    )
    task = {"command": {"args": ["sh", "-c", escape]}}
    publish(jobs, probe, "squatter", {"retry": {"maxAttempts": 1}, "task": task})
    last = finished(jobs, "squatter")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Succeeded", last
    # Killed as the run ended, not later: the takeover, had it lived, would be bound.
    wait_for(lambda: not sleeping(sleep), timeout=5, what="what the command left to be killed")
    assert command_runner.is_socket()
    assert command_runner.stat().st_ino == before

    publish(
        jobs,
        probe,
        "victim",
        {
            "retry": {"maxAttempts": 1},
            "task": {"command": {"args": ["sh", "-c", "echo genuine $TICKWORK_JOB"]}},
        },
    )
    victim = finished(jobs, "victim")["lastRun"]
    assert isinstance(victim, dict)
    assert victim["result"] == "exit 0: genuine victim", victim


def test_a_command_cannot_read_or_kill_another_command_running_beside_it(
    command_runner: Path, start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    start_worker(**commands_through(command_runner))
    canary = "canary-" + os.urandom(6).hex()
    sleep = unique_sleep()
    publish(
        jobs,
        probe,
        "victim",
        {
            "retry": {"maxAttempts": 1},
            "task": {
                "command": {"args": sleep.split(), "env": [{"name": "TOKEN", "value": canary}]}
            },
        },
    )
    wait_for(lambda: sleeping(sleep), timeout=30, interval=0.05, what="the victim's command")
    [victim] = sleeping(sleep)
    steal = (
        f"cat /proc/{victim}/environ | tr '\\0' '\\n' | grep TOKEN; "
        f"cat /proc/{victim}/cmdline; echo; kill -9 {victim}; echo tried"
    )
    task = {"command": {"args": ["sh", "-c", steal]}}
    publish(jobs, probe, "thief", {"retry": {"maxAttempts": 1}, "task": task})
    last = finished(jobs, "thief")["lastRun"]
    assert isinstance(last, dict)
    told = last.get("result") or last.get("error") or ""
    assert "tried" in told, last
    assert canary not in told
    assert "Permission denied" in told  # the environment
    assert "Operation not permitted" in told  # the kill
    assert sleeping(sleep) == [victim]  # still runs
