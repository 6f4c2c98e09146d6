"""Helpers shared by the integration tests: a synchronous look at the queue, the test
namespace's ScheduledJobs through the real API, and time helpers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import importlib.util
import json
import math
import os
import secrets
import select
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s

from tickwork.api import models
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import Depth, RunLocation, RunMessage
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for
from tickwork_dev.devcluster.controlplane import ControlPlane

ECHO = {"echo": {"message": "hi"}}


class QueueProbe:
    """Synchronous looks at the test's queue."""

    def __init__(self, url: str, queue: str) -> None:
        self.settings = RedisSettings(url=url, queue=queue)

    def _run(self, method: str, *args: Any) -> Any:
        async def call() -> Any:
            queue = RedisRunQueue(create_client(self.settings), self.settings)
            try:
                return await getattr(queue, method)(*args)
            finally:
                await queue.close()

        return asyncio.run(call())

    def locate(self, run_id: str) -> RunLocation | None:
        location: RunLocation | None = self._run("locate", run_id)
        return location

    def depth(self) -> Depth:
        depth: Depth = self._run("depth")
        return depth

    def drain(self) -> list[RunMessage]:
        async def call() -> list[RunMessage]:
            queue = RedisRunQueue(create_client(self.settings), self.settings)
            try:
                claims = await queue.claim(consumer="probe", lease_seconds=3600, count=1000)
                for claim in claims:
                    await queue.ack(claim)
                return [claim.message for claim in claims]
            finally:
                await queue.close()

        return asyncio.run(call())

    def enqueue(self, message: RunMessage) -> None:
        self._run("enqueue", message)

    def enqueue_together(self, messages: list[RunMessage]) -> None:
        """Enqueue ``messages`` at once: the queue sends what is enqueued in one turn
        of the event loop in one script call, so a worker claims them together."""

        async def call() -> None:
            queue = RedisRunQueue(create_client(self.settings), self.settings)
            try:
                await asyncio.gather(*(queue.enqueue(message) for message in messages))
            finally:
                await queue.close()

        asyncio.run(call())

    def dead(self) -> list[Any]:
        letters: list[Any] = self._run("dead_letters")
        return letters

    def cancel(self, run_id: str) -> bool:
        withdrawn: bool = self._run("cancel", run_id)
        return withdrawn


def create_secret(
    api_client: k8s.ApiClient, namespace: str, name: str, data: dict[str, str]
) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    k8s.CoreV1Api(api_client).create_namespaced_secret(
        namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=name), data=encoded)
    )


class Jobs:
    """ScheduledJobs of the test namespace, through the real API."""

    def __init__(self, api_client: k8s.ApiClient, namespace: str) -> None:
        self.api = k8s.CustomObjectsApi(api_client)
        self.core = k8s.CoreV1Api(api_client)
        self.namespace = namespace
        self._args = (models.GROUP, models.VERSION, namespace, models.PLURAL)

    def create(self, name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
        body = {
            "apiVersion": models.API_VERSION,
            "kind": models.KIND,
            "metadata": {"name": name, **metadata},
            "spec": spec,
        }
        created: dict[str, Any] = self.api.create_namespaced_custom_object(*self._args, body)
        return created

    def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api.get_namespaced_custom_object(*self._args, name)
        return found

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = self.api.patch_namespaced_custom_object(*self._args, name, body)
        return patched

    def apply_status_as(self, name: str, status: dict[str, Any], *, manager: str) -> None:
        """Server-side apply of ``status`` as ``manager`` (as a worker writes a run's)."""
        body = {"apiVersion": models.API_VERSION, "kind": models.KIND, "status": status}
        body["metadata"] = {"name": name, "namespace": self.namespace}
        self.api.patch_namespaced_custom_object_status(
            *self._args,
            name,
            body,
            field_manager=manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def delete(self, name: str) -> None:
        self.api.delete_namespaced_custom_object(*self._args, name)

    def exists(self, name: str) -> bool:
        try:
            self.get(name)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def events(self, name: str) -> list[tuple[str, str, str]]:
        found = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        )
        return [(e.type, e.reason, e.message) for e in found.items]


_Server = TypeVar("_Server", bound=ThreadingHTTPServer)


@contextlib.contextmanager
def serving(server: _Server) -> Iterator[_Server]:
    """``server`` answering on a thread of its own until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def lead(operator: TickworkProcess, timeout: float = 30) -> None:
    wait_for(
        operator.is_leader,
        timeout=timeout,
        what=f"{operator.env['TICKWORK_OPERATOR_IDENTITY']} to lead",
    )


@contextlib.contextmanager
def own_control_plane(cluster: Cluster, workdir: Path, why: str) -> Iterator[Cluster]:
    """A local control plane beside the session's, for a test that needs one nothing
    else wrote to; skipped (saying ``why``) when the suite runs against an existing
    cluster, which it cannot start from nothing."""
    if not cluster.is_local:
        pytest.skip(why)
    plane = ControlPlane(workdir=workdir)
    with plane:
        yield Cluster(kubeconfig=plane.kubeconfig, plane=plane)


def create_plain_redis_secret(cluster: Cluster) -> None:
    """The Secret with the Redis password that the plain manifests (manifests/) expect
    the installer to create in the namespace ``tickwork``."""
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "tickwork-redis",
        "-n",
        "tickwork",
        "--from-literal=redis-password=s3cret",
    )


def benchmark_module(script: str) -> ModuleType:
    """``benchmarks/<script>``, imported by its path (the folder is not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / script
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def whole_seconds_from_now(seconds: int) -> dt.datetime:
    now = dt.datetime.now(dt.UTC)
    return dt.datetime.fromtimestamp(math.ceil(now.timestamp()) + seconds, dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def enqueue_run(
    jobs: Jobs, probe: QueueProbe, name: str, uid: str, run_id: str, **fields: Any
) -> str:
    """Put the run ``run_id`` of ``name`` in the queue, as the operator publishes it
    (``fields``: the message's others, e.g. ``scheduled_at``); its run ID."""
    probe.enqueue(RunMessage(run_id=run_id, namespace=jobs.namespace, name=name, uid=uid, **fields))
    return run_id


def enqueue_scheduled(
    jobs: Jobs, probe: QueueProbe, name: str, uid: str, scheduled: dt.datetime, **fields: Any
) -> str:
    """Put the run of ``name`` scheduled at ``scheduled`` in the queue; its run ID."""
    message = scheduled_message(uid, scheduled, namespace=jobs.namespace, name=name, **fields)
    probe.enqueue(message)
    return message.run_id


def scheduled_message(
    uid: str, at: dt.datetime, *, namespace: str = "ns", name: str = "j", **fields: Any
) -> RunMessage:
    """The message of the run of ``name`` scheduled at ``at``, as the operator publishes
    it (``fields``: the message's others, e.g. ``generation``)."""
    from tickwork.core.runs import scheduled_run_id  # noqa: PLC0415 - helpers stay light

    run_id = scheduled_run_id(uid, at)
    return RunMessage(
        run_id=run_id,
        namespace=namespace,
        name=name,
        uid=uid,
        scheduled_at=at.isoformat(),
        **fields,
    )


def apply_as_operator(cluster: Cluster, jobs: Jobs, name: str, uid: str, status: Any) -> None:
    """Server-side apply of ``status`` to the job ``name``, forced, as the operator
    writes its share (a phase, a cancel request)."""
    from tickwork.kube.client import KubeClient, load_configuration  # noqa: PLC0415
    from tickwork.kube.status import OPERATOR_MANAGER  # noqa: PLC0415

    async def apply() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(
                jobs.namespace, name, uid, status, field_manager=OPERATOR_MANAGER, force=True
            )

    asyncio.run(apply())


def publish(jobs: Jobs, probe: QueueProbe, name: str, spec: dict[str, Any]) -> tuple[str, str]:
    """Create a job and put its run in the queue, as the operator would; return (uid, run ID)."""
    if "schedule" not in spec and "runAt" not in spec:
        spec = {"runAt": rfc3339(whole_seconds_from_now(0)), **spec}
    job = jobs.create(name, spec)
    uid = job["metadata"]["uid"]
    scheduled = dt.datetime.fromisoformat(spec.get("runAt") or rfc3339(whole_seconds_from_now(0)))
    return uid, enqueue_scheduled(jobs, probe, name, uid, scheduled)


def publish_manual(
    jobs: Jobs,
    probe: QueueProbe,
    name: str,
    spec: dict[str, Any],
    *,
    token: str = "t1",  # noqa: S107 - a run-now token, not a password
    params: dict[str, str] | None = None,
) -> tuple[str, dt.datetime]:
    """Create a job and put a manual run of it in the queue, as the operator would for
    a trigger with ``params``; return (run ID, the trigger's time)."""
    from tickwork.core.runs import manual_run_id  # noqa: PLC0415 - helpers stay light

    job = jobs.create(name, {"schedule": "0 0 1 1 *", **spec})
    uid = job["metadata"]["uid"]
    at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    fields = {"triggered_at": at.isoformat(), "params": params}
    return enqueue_run(jobs, probe, name, uid, manual_run_id(uid, token), **fields), at


def task_package(folder: Path, source: str) -> str:
    """An installed package registering the Python task ``acme.task`` (function ``task``
    of ``source``), as users ship theirs; returns the PYTHONPATH that installs it."""
    (folder / "acme_tasks.py").write_text(source)
    info = folder / "acme_tasks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tasks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tickwork.tasks]\nacme.task = acme_tasks:task\n")
    return os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])


def finished(jobs: Jobs, name: str, timeout: float = 60) -> dict[str, object]:
    """The job's status once its last run has ended."""
    wait_for(lambda: last_outcome(jobs, name) is not None, timeout=timeout, what=f"{name} to end")
    return jobs.status(name)


def last_outcome(jobs: Jobs, name: str) -> str | None:
    outcome: str | None = (jobs.status(name).get("lastRun") or {}).get("outcome")
    return outcome


def active_state(jobs: Jobs, name: str) -> str | None:
    """The state of the job's first started, unfinished run (``activeRuns``), if any."""
    active = jobs.status(name).get("activeRuns") or []
    return str(active[0]["state"]) if active else None


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
        payload = self.server.body or f"status {status}".encode()
        self.send_response(status)
        for header, value in self.server.headers.items():
            self.send_header(header, value)
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
        self.body: bytes | None = None
        """Answer with this instead of ``status <code>``."""
        self.headers: dict[str, str] = {}
        """More headers of every answer (a ``Content-Encoding`` of the body, say)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Holding(BaseHTTPRequestHandler):
    server: HoldingServer

    def do_POST(self) -> None:
        number = self.server.arrived()
        while not self.server.released.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                self.server.log(("hangup", number))  # the client gave the request up
                return
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        self.server.log(("done", number))

    def log_message(self, *_args: object) -> None:
        return


class HoldingServer(ThreadingHTTPServer):
    """An HTTP endpoint that holds every request until :attr:`released` is set, and
    notes when each arrives, is answered, or is given up by its client: an execution
    counted at the task, and whether it was stopped."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Holding)
        self.released = threading.Event()
        self.events: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hold"

    def arrived(self) -> int:
        with self._lock:
            number = sum(1 for kind, _ in self.events if kind == "start") + 1
            self.events.append(("start", number))
            return number

    def log(self, event: tuple[str, int]) -> None:
        with self._lock:
            self.events.append(event)

    def saw(self, event: tuple[str, int]) -> bool:
        with self._lock:
            return event in self.events

    def close(self) -> None:
        self.released.set()
        self.shutdown()
        self.server_close()


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting for its parent does not)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return "Z" not in stat.read_text().split(")")[-1][:3]
    except FileNotFoundError:
        return False


#: The user the test command runner runs as (another than the worker's).
NOBODY = 65534


def commands_through(runner: Path) -> dict[str, str]:
    """A worker's settings for command tasks through the command runner at ``runner``."""
    return {"TICKWORK_WORKER_COMMAND_TASKS": "true", "TICKWORK_WORKER_COMMAND_RUNNER": str(runner)}


def unique_sleep() -> str:
    """``sleep N`` with an N no other process has: :func:`sleeping` finds it by that."""
    return f"sleep {300 + secrets.randbelow(10**6) / 10**7:.7f}"


def sleeping(command: str) -> list[int]:
    """The living processes running ``command`` (from :func:`unique_sleep`), found in
    /proc: no file to write, which a confined command may not."""
    wanted = command.replace(" ", "\0").encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()  # empty for a zombie
            except OSError:
                continue
            if cmdline == wanted:
                found.append(int(entry.name))
    return found


def assert_a_timeout_kills_the_whole_group(jobs: Jobs, probe: QueueProbe) -> None:
    """A command that leaves a background process and waits, stopped by its 3 s
    timeout: the run fails so, and the background process is killed with it."""
    sleep = unique_sleep()
    spec = {
        "timeoutSeconds": 3,
        "retry": {"maxAttempts": 1},
        "task": {"command": {"args": ["sh", "-c", f"{sleep} & wait"]}},
    }
    publish(jobs, probe, "hang", spec)
    wait_for(lambda: sleeping(sleep), timeout=30, interval=0.05, what="the background sleep")
    last = finished(jobs, "hang", timeout=30)["lastRun"]
    assert isinstance(last, dict)
    assert "timed out after 3s" in last["error"]
    wait_for(lambda: not sleeping(sleep), timeout=15, what="the background sleep to be killed")


def tenant_account(cluster: Cluster, namespace: str) -> str:
    """A ServiceAccount that may create and read ScheduledJobs in ``namespace``, nothing
    else; returns the name to impersonate."""
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "tenant")
    grant_tenant(cluster, namespace, "tenant", "create,get,list")
    return f"system:serviceaccount:{namespace}:tenant"


def grant_tenant(cluster: Cluster, namespace: str, role: str, verbs: str) -> None:
    """Let the ServiceAccount of :func:`tenant_account` do ``verbs`` to the ScheduledJobs
    of ``namespace``, through a Role and a RoleBinding named ``role``."""
    resource = "--resource=scheduledjobs.tickwork.dev"
    cluster.kubectl("-n", namespace, "create", "role", role, f"--verb={verbs}", resource)
    account = f"--serviceaccount={namespace}:tenant"
    cluster.kubectl("-n", namespace, "create", "rolebinding", role, f"--role={role}", account)


def foreign_secret_task(url: str, namespace: str) -> dict[str, Any]:
    """An http task whose header names the Secret ``db`` of another ``namespace``:
    a reference the CRD has no field for."""
    reference = {"name": "db", "key": "password", "namespace": namespace}
    header = {"name": "X-Key", "valueFrom": {"secretKeyRef": reference}}
    return {"http": {"url": url, "headers": [header]}}


def apply_as(
    cluster: Cluster, who: str, namespace: str, obj: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply`` of ``obj`` by ``who`` (impersonated); the caller checks the result."""
    return cluster.kubectl(
        "--as", who, "-n", namespace, "apply", "-f", "-", input_text=json.dumps(obj), check=False
    )


def row(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    """One line of `kubectl get scheduledjobs`, by column."""
    lines = cluster.kubectl("get", "scheduledjobs", "-n", namespace).stdout.splitlines()
    header = lines[0]
    titles = (
        "NAME",
        "SCHEDULE",
        "RUN AT",
        "SUSPEND",
        "PHASE",
        "ACTIVE",
        "LAST",
        "LAST RUN",
        "NEXT RUN",
        "AGE",
    )
    starts = [header.index(title) for title in titles]
    for line in lines[1:]:
        if line.split()[0] == name:
            cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
            return dict(
                zip(
                    [
                        "name",
                        "schedule",
                        "runAt",
                        "suspend",
                        "phase",
                        "active",
                        "last",
                        "lastRun",
                        "nextRun",
                        "age",
                    ],
                    cells,
                    strict=True,
                )
            )
    raise AssertionError(f"{name} not in kubectl get output")


def service_account_kubeconfig(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str, name: str, path: Path
) -> Path:
    """A kubeconfig that authenticates as a new ServiceAccount ``name`` with a bearer
    token from the TokenRequest API, as a Pod's is (no RBAC is granted)."""
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=name))
    )
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    token = core.create_namespaced_service_account_token(name, namespace, request).status.token
    admin = json.loads(cluster.kubeconfig.read_text())
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"]}],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": name}}],
                "current-context": "c",
            }
        )
    )
    return path


def relayed_api_server(cluster: Cluster, path: Path) -> tuple[PausableProxy, Path]:
    """A :class:`PausableProxy` in front of the API server, and a kubeconfig at ``path``
    that goes through it (TLS passes through: the address stays 127.0.0.1)."""
    config = json.loads(cluster.kubeconfig.read_text())
    server = urllib.parse.urlparse(config["clusters"][0]["cluster"]["server"])
    relay = PausableProxy((str(server.hostname), int(server.port or 443)))
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path.write_text(json.dumps(config))
    return relay, path


def relayed_redis(url: str) -> tuple[PausableProxy, str]:
    """A :class:`PausableProxy` in front of the Redis at ``url``, and a URL (with the
    same password and database) that goes through it."""
    parts = urllib.parse.urlsplit(url)
    relay = PausableProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    netloc = f"{parts.netloc.rsplit(':', 1)[0]}:{relay.port}"
    return relay, urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class PausableProxy:
    """A TCP relay on loopback in front of ``target``; :meth:`pause` stops relaying
    (connections stay open and hang, like a stopped API server or a partition)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.held = threading.Event()
        """Set once bytes that arrived while paused wait in the relay: a request hangs."""
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._flowing.set()
            self._listener.close()
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    client.close()
                    return
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed:
                self._flowing.wait()
                data = src.recv(65536)
                if not data:
                    break
                if not self._flowing.is_set():
                    self.held.set()
                self._flowing.wait()  # what arrived while paused waits too
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
