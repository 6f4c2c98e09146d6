"""Fixtures with real parts: a kube-apiserver + etcd control plane and a redis-server.

Nothing here mocks Kubernetes or Redis. When a part cannot be built or
started the fixture raises with the build's or the server's own error, so the
test errors loudly instead of skipping.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.support import NOBODY, Jobs, QueueProbe, ScriptedServer, serving
from tickwork_dev.devcluster.cluster import Cluster, existing_cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.redis import RedisServer

_TESTS = Path(__file__).parent
_CRDS = _TESTS.parent / "manifests" / "crds"
_MARK_BY_FOLDER = {
    "unit": "unit",
    "integration": "integration",
    "faults": "integration",
    "attacks": "integration",
    "e2e": "e2e",
    "pods": "pods",
}


_SPENT: dict[str, float] = {}
_TESTS_RUN: dict[str, int] = {}
_BY_WORKER: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add a test's setup, call and teardown to its folder's time and to its xdist
    worker's (summary below)."""
    parts = report.nodeid.split("::", 1)[0].split("/")
    folder = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    _SPENT[folder] = _SPENT.get(folder, 0.0) + report.duration
    if report.when == "call":
        _TESTS_RUN[folder] = _TESTS_RUN.get(folder, 0) + 1
    worker = getattr(getattr(report, "node", None), "gateway", None)
    if worker is not None:
        _BY_WORKER[worker.id] = _BY_WORKER.get(worker.id, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the suite's time goes, per folder and per xdist worker: the first test of a
    folder also pays for the session fixtures it is the first to need (the control
    plane, the node); with workers the folders' times add up to more than the run."""
    if not _SPENT:
        return
    terminalreporter.write_sep("=", "time per folder (setup, call and teardown)")
    for folder, seconds in sorted(_SPENT.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(
            f"{folder:<12} {_TESTS_RUN.get(folder, 0):>6} tests {seconds:>9.1f} s"
        )
    for worker, seconds in sorted(_BY_WORKER.items()):
        terminalreporter.write_line(f"worker {worker:<5} {seconds:>21.1f} s")


# Modules that start the local node or change the host's network as it does: with
# `make test`'s workers (pytest-xdist) they run in the node's lane, one after another.
NODE_LANE_MODULES = {"integration/test_devcluster.py", "integration/test_egress.py"}
NODE_LANE = "node"


def lane_of(nodeid: str) -> str:
    """Where a test runs with workers: in the node's lane (tests/pods and the modules
    above), or in a unit of its module's own (its module-scoped fixtures set up once,
    in one worker)."""
    module = nodeid.split("::", 1)[0].removeprefix("tests/")
    return NODE_LANE if module.startswith("pods/") or module in NODE_LANE_MODULES else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test`'s scheduling (``--dist loadgroup``): the node's lane is one unit of
    work, every other module one each; a worker takes the next unit when it is free.
    (xdist's own ``xdist_group`` marks do not work with pytest 9.2: xdist renames a
    test's nodeid to group it, and pytest 9.2 no longer reads the attribute it sets.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - only with workers

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane_of(nodeid)

    return Lanes(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the folder it lives in, so `-m unit` and friends just work.
    With workers the node's lane goes first, being the longest (the scheduler hands
    out units in the order the workers collected them: `--no-loadscope-reorder`)."""
    for item in items:
        try:
            relative = Path(item.path).relative_to(_TESTS)
        except ValueError:
            continue
        marker = _MARK_BY_FOLDER.get(relative.parts[0])
        if marker:
            item.add_marker(marker)
    distributed = config.getoption("dist", "no") != "no" or hasattr(config, "workerinput")
    if distributed:
        items.sort(key=lambda item: lane_of(item.nodeid) != NODE_LANE)


# -- Kubernetes -------------------------------------------------------------


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster under test: an existing one, or a fresh local control plane."""
    existing = existing_cluster()
    if existing is not None:
        yield existing
        return
    plane = ControlPlane(workdir=tmp_path_factory.mktemp("controlplane"))
    with plane:
        yield Cluster(kubeconfig=plane.kubeconfig, plane=plane)


@pytest.fixture(scope="session")
def controller_manager(cluster: Cluster) -> Cluster:
    """The cluster with kube-controller-manager running (started on first use)."""
    if cluster.plane is not None:
        cluster.plane.start_controller_manager()
    return cluster


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> None:
    """The CRDs (ScheduledJob, Calendar), installed from manifests/crds and established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(_CRDS))
    cluster.wait_established("scheduledjobs.tickwork.dev", "calendars.tickwork.dev")


@pytest.fixture
def api_client(cluster: Cluster) -> Iterator[k8s.ApiClient]:
    """A Kubernetes API client authenticated as the cluster admin."""
    api = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
    with api:
        yield api


def _fresh_namespace(api_client: k8s.ApiClient) -> Iterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    core = k8s.CoreV1Api(api_client)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


@pytest.fixture
def namespace(api_client: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    yield from _fresh_namespace(api_client)


@pytest.fixture
def other_namespace(api_client: k8s.ApiClient) -> Iterator[str]:
    """A second fresh namespace: another tenant's."""
    yield from _fresh_namespace(api_client)


# -- Redis ------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server (with a password) for the whole session."""
    with RedisServer(workdir=tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, flushed before each test (the rq habit)."""
    with redis_lib.Redis.from_url(redis_server.url) as connection:
        connection.flushall()
    return redis_server.url


# -- Tickwork's own processes -------------------------------------------------


@pytest.fixture
def probe(redis_url: str, namespace: str) -> QueueProbe:
    return QueueProbe(redis_url, queue=namespace)


@pytest.fixture
def jobs(api_client: k8s.ApiClient, namespace: str, crd: None) -> Jobs:
    return Jobs(api_client, namespace)


@contextlib.contextmanager
def _starter(
    command: str, identity_env: str, base_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., TickworkProcess]]:
    """Start ``command`` processes named by ``identity_env``; kill them after the test."""
    started: list[TickworkProcess] = []

    def start(identity: str, **env: str) -> TickworkProcess:
        process = TickworkProcess(
            command=command,
            env={**base_env, identity_env: identity, **env},
            log_path=tmp_path / f"{identity}.log",
        ).start()
        started.append(process)
        process.wait_ready()
        return process

    try:
        yield start
    finally:
        for process in started:
            process.kill()


@pytest.fixture
def start_operator(
    cluster: Cluster, crd: None, namespace: str, redis_url: str, tmp_path: Path
) -> Iterator[Callable[..., TickworkProcess]]:
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis_url,
        "TICKWORK_REDIS_QUEUE": namespace,
        "TICKWORK_OPERATOR_NAMESPACES": namespace,
        "TICKWORK_OPERATOR_LEASE_NAMESPACE": namespace,
    }
    with _starter("tickwork-operator", "TICKWORK_OPERATOR_IDENTITY", env, tmp_path) as start:
        yield lambda identity="op-a", **more: start(identity, **more)


@pytest.fixture
def start_worker(
    cluster: Cluster, crd: None, namespace: str, redis_url: str, tmp_path: Path
) -> Iterator[Callable[..., TickworkProcess]]:
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis_url,
        "TICKWORK_REDIS_QUEUE": namespace,
        "TICKWORK_WORKER_LEASE_SECONDS": "6",
        # The tests' HTTP endpoints listen on loopback, which workers refuse by default.
        "TICKWORK_WORKER_EGRESS_ALLOW": "127.0.0.1/32",
        "TICKWORK_WORKER_DEMO_TASKS": "true",  # tickwork.sleep and friends
        # Outputs in status: many tests read what a task printed or answered.
        "TICKWORK_WORKER_PREVIEWS": "true",
    }
    with _starter("tickwork-worker", "TICKWORK_WORKER_NAME", env, tmp_path) as start:
        yield lambda name="worker-a", **more: start(name, **more)


@pytest.fixture
def endpoint() -> Iterator[ScriptedServer]:
    with serving(ScriptedServer()) as server:
        yield server


@pytest.fixture
def commands_volume() -> Iterator[Path]:
    """The volume the worker and its command runner share (an emptyDir in the chart)."""
    path = Path(tempfile.mkdtemp(prefix="tickwork-commands-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def command_runner(commands_volume: Path) -> Iterator[Path]:
    """A command runner as another user (nobody), without capabilities, as the chart
    runs it in a container of its own; its socket."""
    socket = commands_volume / "runner.sock"
    with (commands_volume / "runner.log").open("w") as log:
        process = subprocess.Popen(
            [
                "/usr/bin/setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
                console_script("tickwork-command-runner"),
                "--socket",
                str(socket),
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            wait_for(socket.exists, timeout=30, what="the command runner's socket")
            yield socket
        finally:
            process.terminate()
            process.wait(timeout=10)
