"""Fixtures of the integration tests that run Tickwork's own processes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client as k8s

from tests.support import Jobs, QueueProbe
from tickwork.devcluster.cluster import Cluster
from tickwork.devcluster.components import TickworkProcess


@pytest.fixture
def probe(redis_url: str, namespace: str) -> QueueProbe:
    return QueueProbe(redis_url, queue=namespace)


@pytest.fixture
def jobs(api_client: k8s.ApiClient, namespace: str, crd: None) -> Jobs:
    return Jobs(api_client, namespace)


@pytest.fixture
def start_operator(
    cluster: Cluster, crd: None, namespace: str, redis_url: str, tmp_path: Path
) -> Iterator[Callable[..., TickworkProcess]]:
    started: list[TickworkProcess] = []

    def start(identity: str = "op-a", **env: str) -> TickworkProcess:
        operator = TickworkProcess(
            command="tickwork-operator",
            env={
                "KUBECONFIG": str(cluster.kubeconfig),
                "TICKWORK_REDIS_URL": redis_url,
                "TICKWORK_REDIS_QUEUE": namespace,
                "TICKWORK_OPERATOR_NAMESPACES": namespace,
                "TICKWORK_OPERATOR_LEASE_NAMESPACE": namespace,
                "TICKWORK_OPERATOR_IDENTITY": identity,
                **env,
            },
            log_path=tmp_path / f"{identity}.log",
        ).start()
        started.append(operator)
        operator.wait_ready()
        return operator

    yield start
    for operator in started:
        operator.kill()


@pytest.fixture
def start_worker(
    cluster: Cluster, crd: None, namespace: str, redis_url: str, tmp_path: Path
) -> Iterator[Callable[..., TickworkProcess]]:
    started: list[TickworkProcess] = []

    def start(name: str = "worker-a", **env: str) -> TickworkProcess:
        worker = TickworkProcess(
            command="tickwork-worker",
            env={
                "KUBECONFIG": str(cluster.kubeconfig),
                "TICKWORK_REDIS_URL": redis_url,
                "TICKWORK_REDIS_QUEUE": namespace,
                "TICKWORK_WORKER_NAME": name,
                "TICKWORK_WORKER_LEASE_SECONDS": "6",
                **env,
            },
            log_path=tmp_path / f"{name}.log",
        ).start()
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.kill()


class Endpoint(BaseHTTPRequestHandler):
    """A real HTTP server for http tasks: answers with the next scripted status."""

    server: ScriptedServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        self.server.requests.append(
            {"path": self.path, "headers": dict(self.headers), "body": body}
        )
        status, delay = self.server.script.pop(0) if self.server.script else (200, 0.0)
        if delay:
            time.sleep(delay)  # a slow endpoint, on the server's own thread
        payload = f"status {status}".encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_PUT = do_POST  # noqa: N815 - the stdlib's naming

    def log_message(self, *_args: object) -> None:
        return  # quiet: the test reads the recorded requests instead


class ScriptedServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Endpoint)
        self.requests: list[dict[str, object]] = []
        self.script: list[tuple[int, float]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


@pytest.fixture
def endpoint() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
