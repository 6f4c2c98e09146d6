"""Child server processes that cannot outlive their parent.

Every server is started in its own process group with ``PR_SET_PDEATHSIG``,
so that it is killed when the process that started it dies, even by SIGKILL
(an interrupted pytest, a killed ``make demo``): no orphans are left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from tickwork_dev.devcluster.errors import StartError

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


#: Where free_port looks: above the node's own ports (the kubelet's 10250), below the
#: kernel's ephemeral range (32768 and up by default)
#: and below Kubernetes' NodePorts (30000-32767), which the local node's proxy claims.
_PORTS = range(11000, 30000)


def free_port() -> int:
    """A TCP port free right now on every address, outside the kernel's ephemeral
    range. A port the kernel hands out for ``bind(0)`` is one it also gives outgoing
    connections: between this check and the server's own bind, any client of the busy
    machine could take it (a worker once failed to start on "address already in
    use" that way). Only another server can take one of these."""
    for _ in range(200):
        port = random.choice(_PORTS)  # noqa: S311 - spreading ports, not a secret
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("0.0.0.0", port))  # noqa: S104 - only to see that it is free
            except OSError:
                continue
            return port
    raise StartError(f"no free TCP port in {_PORTS.start}-{_PORTS.stop - 1}")


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    die_with_parent: bool = True,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,  # noqa: PLW1509 - no threads are started before the servers
        )


def _parents() -> dict[int, list[int]]:
    """Every living process's children, by parent PID, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def children(pid: int) -> list[int]:
    """The living processes ``pid`` started itself."""
    return _parents().get(pid, [])


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children, their children, ...)."""
    tree = _parents()
    found: list[int] = []
    todo = [pid]
    while todo:
        below = tree.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group and every process group its descendants started (a
    worker runs each command in a session of its own), as a container's end would.
    The descendants are found first: once the parent is gone they belong to init."""
    below = descendants(proc.pid)
    groups = {proc.pid}
    for pid in below:
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgid(0))  # never our own (pytest's) group
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    for pid in below:  # any that joined a group outside the tree
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop(proc: subprocess.Popen[bytes], *, timeout: float = 10.0, tree: bool = False) -> None:
    """SIGTERM the process group, then SIGKILL it (``tree``: and every group it
    started) if it has not exited in ``timeout``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        if tree:
            kill_tree(proc)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


def kill(proc: subprocess.Popen[bytes], *, tree: bool = False) -> None:
    """SIGKILL the process group at once (for crash drills); ``tree``: and every
    process group it started, as a container's end kills every process in it."""
    if tree:
        kill_tree(proc)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    ready: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
    log_path: Path | None = None,
    interval: float = 0.1,
) -> None:
    """Poll ``ready`` until it returns true; fail with the server's log otherwise.

    Polling is the only way to learn that a foreign server is ready; the
    interval is short and the wait ends as soon as the server answers.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            tail = log_tail(log_path) if log_path else ""
            raise StartError(f"{what} exited with code {proc.returncode} while starting:\n{tail}")
        with contextlib.suppress(Exception):
            if ready():
                return
        if time.monotonic() > deadline:
            tail = log_tail(log_path) if log_path else ""
            raise StartError(f"{what} was not ready after {timeout:.0f}s:\n{tail}")
        time.sleep(interval)


class Started:
    """A server the harness starts and stops: ``with Server(...) as server:`` starts it
    and stops it on the way out, whatever happened inside."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
