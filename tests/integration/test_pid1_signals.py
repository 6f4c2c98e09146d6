"""The operator and the worker as a container's first process: SIGTERM ends them at
once, also before their own handlers are installed.

Each runs as PID 1 of a new PID namespace (``unshare --pid``, as runc starts a
container's process) and waits for a "Redis" on loopback that accepts connections and
never answers, as it would for a Redis Pod that is not up yet. The kernel drops a
signal to an init without a handler for it, so without tickwork.pid1 the process
ignores the SIGTERM and goes on waiting for a minute.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwork.pid1 import EXIT_STATUS
from tickwork_dev.devcluster.components import console_script


@pytest.fixture
def silent_redis() -> Iterator[tuple[str, socket.socket]]:
    """A listening socket nobody answers on: the process connects and waits."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)
    try:
        yield f"redis://:secret@127.0.0.1:{server.getsockname()[1]}/0", server
    finally:
        server.close()


def _unshare() -> list[str]:
    argv = ["unshare", "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:  # an unprivileged user namespace lends the capability
        argv[1:1] = ["--user", "--map-root-user"]
    return argv


def _child(pid: int) -> int:
    [child] = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(child)


@pytest.mark.parametrize("entry", ["tickwork-operator", "tickwork-worker"])
def test_sigterm_ends_pid_1_while_it_waits_for_redis(
    entry: str, silent_redis: tuple[str, socket.socket], tmp_path: Path
) -> None:
    url, server = silent_redis
    env = {
        **os.environ,
        "TICKWORK_REDIS_URL": url,
        "KUBECONFIG": str(tmp_path / "none"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    process = subprocess.Popen(
        [*_unshare(), console_script(entry)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        connection, _ = server.accept()  # past its imports, pinging "Redis"
        with connection:
            inner = _child(process.pid)  # the process that connected
            [pids] = [
                line.split()[1:]
                for line in Path(f"/proc/{inner}/status").read_text().splitlines()
                if line.startswith("NSpid:")
            ]
            assert pids[-1] == "1"  # its PID in the innermost namespace
            os.kill(inner, signal.SIGTERM)
            # Without a handler it would go on waiting for Redis, and give up (status 1)
            # only after a minute.
            output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == EXIT_STATUS, output
