"""A real ``redis-server`` on a free loopback port, with a password, for tests and the demo."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.errors import StartError

READY_TIMEOUT_SECONDS = 30.0


def _ping(port: int, password: str) -> bool:
    """Speak just enough RESP to learn that the server answers, with no client library."""
    with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
        sock.sendall(f"AUTH {password}\r\nPING\r\n".encode())
        reply = b""
        while reply.count(b"\r\n") < 2:  # noqa: PLR2004 - two replies: AUTH, PING
            chunk = sock.recv(256)
            if not chunk:
                return False
            reply += chunk
        return reply.endswith(b"+PONG\r\n")


@dataclass
class RedisServer:
    """``redis-server`` in ``workdir``; :meth:`restart` keeps its data directory."""

    workdir: Path
    appendonly: bool = False
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.workdir / "redis.log"

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

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StartError(
                "redis-server is not installed; on Debian/Ubuntu: apt-get install redis-server"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = process.free_port()
        argv = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--requirepass",
            self.password,
            "--dir",
            str(self.workdir),
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
        ]
        if self.appendonly:
            argv += ["--appendonly", "yes", "--appendfsync", "everysec"]
        self._proc = process.spawn(argv, log_path=self.log_path)
        process.wait_until(
            lambda: _ping(self.port, self.password),
            what="redis-server",
            timeout=READY_TIMEOUT_SECONDS,
            proc=self._proc,
            log_path=self.log_path,
        )

    def stop(self) -> None:
        if self._proc is not None:
            process.stop(self._proc)
            self._proc = None

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self._proc is not None:
            process.kill(self._proc)
            self._proc = None

    def restart(self) -> None:
        """Start again on the same port with the same data directory."""
        self.stop()
        self.start()
