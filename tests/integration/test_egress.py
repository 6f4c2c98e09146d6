"""No request forgery by default: a worker refuses HTTP tasks aimed at loopback or at
a link-local address (here, one inside a network namespace of the test's own), the
server sees no request, and the run fails at once with "address not allowed"; with the
installer's allowance the same job succeeds."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import Jobs, QueueProbe, ScriptedServer, finished, publish
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
LINK_LOCAL = "169.254.77.2"


def refused_once(jobs: Jobs, name: str) -> str:
    last = finished(jobs, name)["lastRun"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 1)  # permanent: not retried
    return str(last["error"])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_is_refused_unless_the_installer_allows_it(
    host: str, start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    url = endpoint.url.replace("127.0.0.1", host)
    spec = {"retry": {"maxAttempts": 3}, "task": {"http": {"url": url}}}
    worker = start_worker("worker-a", TICKWORK_WORKER_EGRESS_ALLOW="")  # the defaults
    publish(jobs, probe, "forged", spec)
    error = refused_once(jobs, "forged")
    assert "address not allowed" in error
    if host == "localhost":  # a name: what it resolves to is not told to the tenant
        assert "localhost (it resolves only to addresses that are not public" in error
        assert "127.0.0.1" not in error
    else:
        assert "127.0.0.1 is in 127.0.0.0/8" in error
    assert endpoint.requests == []  # the server never saw a request
    worker.stop()
    start_worker("worker-b")  # the fixture's allowance: 127.0.0.1/32
    publish(jobs, probe, "allowed", spec)
    assert finished(jobs, "allowed")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]
    assert len(endpoint.requests) == 1


@contextlib.contextmanager
def link_local_server(tmp_path: Path) -> Iterator[Path]:
    """An HTTP server on a link-local address inside a network namespace made here,
    reached over a veth pair; yields its request log."""
    if os.geteuid() != 0:
        pytest.fail("network namespaces need root (CI runs as root)")
    suffix = secrets.token_hex(3)
    netns, host_end, ns_end = f"tw-egress-{suffix}", f"twe{suffix}h", f"twe{suffix}n"
    log = tmp_path / "requests.log"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    server: subprocess.Popen[bytes] | None = None
    try:
        ip("netns", "add", netns)
        ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end, "netns", netns)
        ip("addr", "add", "169.254.77.1/24", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("-n", netns, "addr", "add", f"{LINK_LOCAL}/24", "dev", ns_end)
        ip("-n", netns, "link", "set", ns_end, "up")
        ip("-n", netns, "link", "set", "lo", "up")
        with log.open("wb") as sink:
            server = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    netns,
                    sys.executable,
                    "-m",
                    "http.server",
                    "--bind",
                    LINK_LOCAL,
                    "8080",
                    "--directory",
                    str(tmp_path),
                ],
                stdout=sink,
                stderr=sink,
            )
        wait_for(lambda: "Serving HTTP" in log.read_text(), timeout=15, what="the server")
        yield log
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", host_end], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], check=False, capture_output=True)


def test_a_link_local_address_is_refused_unless_the_installer_allows_it(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, tmp_path: Path
) -> None:
    with link_local_server(tmp_path) as log:
        spec = {"task": {"http": {"url": f"http://{LINK_LOCAL}:8080/", "method": "GET"}}}
        worker = start_worker("worker-a")  # loopback allowed, link-local not
        publish(jobs, probe, "metadata", spec)
        error = refused_once(jobs, "metadata")
        assert f"{LINK_LOCAL} is in 169.254.0.0/16" in error
        assert '"GET /' not in log.read_text()  # the server never saw a request
        worker.stop()
        start_worker("worker-b", TICKWORK_WORKER_EGRESS_ALLOW="169.254.77.0/24")
        publish(jobs, probe, "allowed", spec)
        assert finished(jobs, "allowed")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]
        assert log.read_text().count('"GET / HTTP/1.1" 200') == 1
