"""Tickwork's own processes, started from their installed console scripts.

Tests, the demo and the benchmarks run the operator and the worker exactly
as users do — ``tickwork-operator`` and ``tickwork-worker`` — configured
through environment variables, and talk to them over their HTTP endpoints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.errors import StartError

READY_TIMEOUT_SECONDS = 60.0


def console_script(name: str) -> str:
    """The installed entry point next to this interpreter."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise StartError(f"{name} is not installed in {path.parent}: pip install -e .")
    return str(path)


@dataclass
class TickworkProcess:
    """One operator or worker process, with its log and HTTP port."""

    command: str
    env: dict[str, str]
    log_path: Path
    http_port: int = 0
    args: list[str] = field(default_factory=list)
    executable: str | None = None
    """Run this file instead of the console script next to this interpreter."""
    port_env: str | None = None
    """The variable that sets the HTTP port (derived from the command by default)."""
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None  # noqa: S101 - started first
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> TickworkProcess:
        if not self.http_port:
            self.http_port = process.free_port()
        env = {**os.environ, **self.env}
        prefix = "TICKWORK_OPERATOR_" if "operator" in self.command else "TICKWORK_WORKER_"
        env[self.port_env or f"{prefix}HTTP_PORT"] = str(self.http_port)
        self._proc = process.spawn(
            [self.executable or console_script(self.command), *self.args],
            log_path=self.log_path,
            env=env,
        )
        return self

    def get(self, path: str, *, timeout: float = 2.0) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def metric(self, name: str, labels: str = "") -> float | None:
        """One sample from /metrics: ``metric("tickwork_runs_published_total", 'trigger="x"')``."""
        _, text = self.get("/metrics")
        wanted = f"{name}{{{labels}}}" if labels else name
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return None

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        process.wait_until(
            lambda: self.get("/readyz")[0] == 200,  # noqa: PLR2004 - HTTP OK
            what=self.command,
            timeout=timeout,
            proc=self._proc,
            log_path=self.log_path,
        )

    def is_leader(self) -> bool:
        try:
            return self.metric("tickwork_operator_leader") == 1.0
        except OSError:
            return False

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (graceful: release the Lease, drain) and wait; SIGKILL it and the
        commands it started if it has not exited in ``timeout``."""
        if self._proc is None:
            return None
        process.stop(self._proc, timeout=timeout, tree=True)
        return self._proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, of the process and the commands it started (each in a
        session of its own), as when a worker's container ends."""
        if self._proc is not None:
            process.kill(self._proc, tree=True)

    def log(self) -> str:
        return process.log_tail(self.log_path, 200)

    def log_matches(self, pattern: str) -> bool:
        return re.search(pattern, self.log_path.read_text(errors="replace")) is not None


def wait_for(predicate: object, *, timeout: float, interval: float = 0.1, what: str = "") -> None:
    """Poll an outside system (API server, Redis, a process) until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
