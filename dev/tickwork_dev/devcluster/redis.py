"""A real ``redis-server`` on a free loopback port, with a password, for tests and the demo;
optionally over TLS, as a replica, or watched by a Redis Sentinel."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.certs import ServerTls
from tickwork_dev.devcluster.errors import StartError

READY_TIMEOUT_SECONDS = 30.0


def _ping(port: int, password: str | None, tls: ServerTls | None = None) -> bool:
    """Speak just enough RESP to learn that the server answers, with no client library."""
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=1))
        if tls is not None:
            context = ssl.create_default_context(cafile=str(tls.ca_cert))
            context.check_hostname = False  # a test may give the server another name
            sock = stack.enter_context(context.wrap_socket(sock, server_hostname="127.0.0.1"))
        auth = f"AUTH {password}\r\n" if password else ""
        sock.sendall(f"{auth}PING\r\n".encode())
        replies = 2 if password else 1
        reply = b""
        while reply.count(b"\r\n") < replies:
            chunk = sock.recv(256)
            if not chunk:
                return False
            reply += chunk
        return reply.endswith(b"+PONG\r\n")


def redis_memory(url: str, *, ca_cert: Path | None = None) -> dict[str, int]:
    """``used_memory`` and ``used_memory_peak`` (bytes) of the server at ``url``."""
    import redis  # noqa: PLC0415 - the dev harness's client, only when asked

    options = {"ssl_ca_certs": str(ca_cert), "ssl_check_hostname": False} if ca_cert else {}
    client = redis.Redis.from_url(url, **options)
    try:
        info = client.info("memory")
    finally:
        client.close()
    return {
        "used_memory_bytes": int(info["used_memory"]),
        "used_memory_peak_bytes": int(info["used_memory_peak"]),
    }


def _binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        raise StartError(
            "redis-server is not installed; on Debian/Ubuntu: apt-get install redis-server"
        )
    return binary


def _tls_config(tls: ServerTls, port: int) -> list[list[str]]:
    """TLS only: no plaintext port; replication and sentinel links speak TLS too."""
    return [
        ["port", "0"],
        ["tls-port", str(port)],
        ["tls-cert-file", str(tls.cert)],
        ["tls-key-file", str(tls.key)],
        ["tls-ca-cert-file", str(tls.ca_cert)],
        ["tls-auth-clients", "no"],
        ["tls-replication", "yes"],
    ]


@dataclass
class RedisServer(process.Started):
    """``redis-server`` in ``workdir``; :meth:`restart` keeps its data directory.

    Servers of one replica set share a password (each uses its own as
    ``masterauth``), so that any of them can become the master.
    """

    workdir: Path
    appendonly: bool = False
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    port: int = 0
    tls: ServerTls | None = None
    """Serve TLS only, with this certificate."""
    replica_of: int | None = None
    """Start as a replica of the server on this loopback port."""
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None  # noqa: S101 - started first
        return self._proc.pid

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.workdir / "redis.log"

    def start(self) -> None:
        binary = _binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = process.free_port()
        config = [
            ["port", str(self.port)],
            ["bind", "127.0.0.1"],
            ["requirepass", self.password],
            ["masterauth", self.password],
            ["dir", str(self.workdir)],
            ["save", ""],
            ["daemonize", "no"],
            ["protected-mode", "yes"],
            # A replica is served at once instead of after waiting 5 s for others.
            ["repl-diskless-sync-delay", "0"],
        ]
        if self.appendonly:
            config += [["appendonly", "yes"], ["appendfsync", "everysec"]]
        if self.tls is not None:
            config += _tls_config(self.tls, self.port)
        if self.replica_of is not None:
            config.append(["replicaof", "127.0.0.1", str(self.replica_of)])
        argv = [binary]
        for name, *values in config:
            argv += [f"--{name}", *values]
        self._proc = process.spawn(argv, log_path=self.log_path)
        process.wait_until(
            lambda: _ping(self.port, self.password, self.tls),
            what="redis-server",
            timeout=READY_TIMEOUT_SECONDS,
            proc=self._proc,
            log_path=self.log_path,
        )

    def memory(self) -> dict[str, int]:
        """What the server holds now and the most it held since it started (``INFO
        memory``), for benchmarks to record beside their figures."""
        return redis_memory(self.url, ca_cert=self.tls.ca_cert if self.tls else None)

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


@dataclass
class RedisSentinel(process.Started):
    """``redis-server --sentinel`` in ``workdir``, watching one master set (quorum 1).

    It reaches the master with the master's password and TLS settings; its
    own ``password`` (``requirepass``), if any, is what clients must give it.
    """

    workdir: Path
    master: RedisServer
    master_name: str = "tickwork"
    password: str | None = None
    down_after_milliseconds: int = 1000
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / "sentinel.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = _binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = process.free_port()
        name = self.master_name
        config = [
            ["port", str(self.port)],
            ["bind", "127.0.0.1"],
            ["dir", str(self.workdir)],
            ["daemonize", "no"],
            ["sentinel", "monitor", name, "127.0.0.1", str(self.master.port), "1"],
            ["sentinel", "auth-pass", name, self.master.password],
            ["sentinel", "down-after-milliseconds", name, str(self.down_after_milliseconds)],
            ["sentinel", "failover-timeout", name, "10000"],
        ]
        if self.password:
            config.append(["requirepass", self.password])
        if self.master.tls is not None:
            config += _tls_config(self.master.tls, self.port)
        # A sentinel rewrites its configuration file, so it needs one of its own.
        path = self.workdir / "sentinel.conf"
        path.write_text("".join(" ".join(entry) + "\n" for entry in config))
        self._proc = process.spawn([binary, str(path), "--sentinel"], log_path=self.log_path)
        process.wait_until(
            lambda: _ping(self.port, self.password, self.master.tls),
            what="redis-server --sentinel",
            timeout=READY_TIMEOUT_SECONDS,
            proc=self._proc,
            log_path=self.log_path,
        )

    def stop(self) -> None:
        if self._proc is not None:
            process.stop(self._proc)
            self._proc = None
