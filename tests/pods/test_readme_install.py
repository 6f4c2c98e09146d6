"""The README's install line and quick start, run as written against a registry.

The chart and the images are pushed to a local OCI registry on loopback, as the
release workflow pushes them to ghcr.io; the README's commands are then run
with only the registry host replaced, and the node's containerd pulls the images
from that registry. Beyond the README's own flags, :data:`OVERRIDES` adds only
what this machine differs in from a cluster that reaches ghcr.io and Docker Hub.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tickwork_dev.devcluster import addons, images
from tickwork_dev.devcluster.cluster import Cluster, kubectl_binary
from tickwork_dev.devcluster.registry import LocalRegistry
from tickwork_dev.devcluster.release import Release, helm_binary

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CHART = ROOT / "charts" / "tickwork"
CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())
PUBLIC_REGISTRY = "ghcr.io"
NAMESPACE = "tickwork"  # the README's -n
RELEASE = "tickwork"
CRDS = ("scheduledjobs.tickwork.dev", "calendars.tickwork.dev")
#: Where the quick start's job lands: the kubeconfig's namespace.
JOB_NAMESPACE = "default"
pytestmark = pytest.mark.timeout(600)


def install_line() -> str:
    """The README's `helm install` line under "Installing in a cluster"."""
    [line] = re.findall(r"^helm install tickwork oci://\S+ --version .*$", README, re.MULTILINE)
    return line


def quick_start() -> list[str]:
    """The commands of the README's quick start, in order, without their `$ ` prompt."""
    section = README.split("### Quick start on a real cluster", 1)[1]
    [block] = re.findall(r"^```console\n(.*?)^```", section, re.MULTILINE | re.DOTALL)[:1]
    return [line[2:] for line in block.splitlines() if line.startswith("$ ")]


def overrides(host: str, redis: images.Image) -> list[str]:
    """What the test adds to the README's `helm install`, each for a reason of this machine:

    * ``global.imageRegistry``: Tickwork's images come from the local registry (the
      README's mirror setting); repository and tag stay the chart's own
      (``tickwork/tickwork:<appVersion>``).
    * ``redis.image.*``: no Docker Hub here; Debian's redis-server, built here
      (:func:`images.redis_image`) and pushed to the local registry, stands in for
      ``docker.io/library/redis``.
    * ``networkPolicy.workerEgress.dnsPorts``: the local node's CoreDNS Pods listen on
      1053, not 53 (kind's and most clusters' listen on 53, the default).
    """
    dns = ",".join(str(port) for port in (53, addons.COREDNS_POD_PORT))
    return [
        "--set",
        f"global.imageRegistry={host}",
        "--set",
        f"redis.image.repository={host}/{redis_repository(redis)}",
        "--set",
        f"redis.image.tag={redis.tag}",
        "--set",
        f"networkPolicy.workerEgress.dnsPorts={{{dns}}}",
    ]


def redis_repository(redis: images.Image) -> str:
    return redis.repository.removeprefix("localhost/")


def test_the_quick_start_installs_the_same_chart_as_the_install_line() -> None:
    """Only the install line pins a version; the quick start's takes the newest."""
    [quick_install] = [c for c in quick_start() if c.startswith("helm install")]
    pinned = shlex.split(install_line())
    version = pinned.index("--version")
    assert pinned[version + 1] == CHART_META["version"]
    assert shlex.split(quick_install, comments=True) == [*pinned[:version], *pinned[version + 2 :]]


@dataclass
class Published:
    """The registry with the chart and images pushed, and how to run commands as a user."""

    cluster: Cluster
    registry: LocalRegistry
    redis: images.Image
    tickwork_digest: str
    env: dict[str, str]

    def user_argv(self, command: str) -> list[str]:
        """A README command as a user runs it, with ghcr.io replaced by the local registry,
        and for `helm install` the overrides added."""
        argv = shlex.split(command, comments=True)
        if argv[:2] == ["helm", "install"]:
            [url] = [a for a in argv if a.startswith(f"oci://{PUBLIC_REGISTRY}/")]
            argv[argv.index(url)] = url.replace(PUBLIC_REGISTRY, self.registry.host, 1)
            argv += overrides(self.registry.host, self.redis)
        return argv

    def run(self, command: str, *, timeout: float = 300) -> str:
        argv = self.user_argv(command)
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self.env,
            cwd=ROOT,
        )
        assert result.returncode == 0, f"{shlex.join(argv)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout


def _user_env(cluster: Cluster, home: Path) -> dict[str, str]:
    """helm, kubectl and the kubectl plugin on PATH, the cluster's kubeconfig, and helm's
    and kubectl's caches in a directory of their own."""
    tools = [Path(helm_binary()).parent, Path(kubectl_binary()).parent, Path(sys.executable).parent]
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "KUBECACHEDIR": str(home / "kube"),
        "PATH": os.pathsep.join([*map(str, tools), os.environ.get("PATH", "")]),
    }
    for name in ("CACHE", "CONFIG", "DATA"):
        env[f"HELM_{name}_HOME"] = str(home / f"helm-{name.lower()}")
    return env


@pytest.fixture(scope="module")
def published(
    pods_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Published]:
    node = pods_cluster.node
    if node is None:
        pytest.skip("the local registry is on this machine's loopback: local node only")
    workdir = tmp_path_factory.mktemp("registry")
    env = _user_env(pods_cluster, workdir)
    redis = images.redis_image()
    tickwork = images.tickwork_image().image
    with LocalRegistry(workdir) as registry, _crd_lent_to_the_release(pods_cluster):
        started = time.monotonic()
        registry.push_chart(CHART, "tickwork/charts", helm=helm_binary(), env=env)
        version = CHART_META["appVersion"]
        pushed = registry.push_image(tickwork.archive, "tickwork/tickwork", version)
        registry.push_image(redis.archive, redis_repository(redis), redis.tag)
        print(f"pushed the chart and two images in {time.monotonic() - started:.1f}s")  # noqa: T201
        node.trust_plain_http_registry(registry.host)
        try:
            yield Published(pods_cluster, registry, redis, pushed.rsplit("@", 1)[1], env)
        finally:
            node.forget_registry(registry.host)


@contextlib.contextmanager
def _crd_lent_to_the_release(cluster: Cluster) -> Iterator[None]:
    """Let the README's release own the CRDs while this module runs, and leave them as
    found.

    An earlier release in this session keeps the CRDs on uninstall, still annotated as
    its own, and Helm refuses to install over another release's object; a user's new
    cluster has none. A CRD this module installed is deleted at the end.
    """
    annotations = {
        "meta.helm.sh/release-name": RELEASE,
        "meta.helm.sh/release-namespace": NAMESPACE,
    }
    before: dict[str, dict[str, str] | None] = {}
    for crd in CRDS:
        found = cluster.kubectl("get", "crd", crd, "-o", "json", check=False)
        before[crd] = (
            json.loads(found.stdout)["metadata"].get("annotations", {})
            if found.returncode == 0
            else None
        )
    _clean(cluster)
    for crd, held in before.items():
        if held is not None:
            lent = (f"{k}={v}" for k, v in annotations.items())
            cluster.kubectl("annotate", "crd", crd, "--overwrite", *lent)
            cluster.kubectl("label", "crd", crd, "--overwrite", "app.kubernetes.io/managed-by=Helm")
    try:
        yield
    finally:
        _clean(cluster)
        for crd, held in before.items():
            if held is None:
                cluster.kubectl("delete", "crd", crd, "--ignore-not-found", timeout=120)
            else:
                restore = [f"{k}={held[k]}" if k in held else f"{k}-" for k in annotations]
                cluster.kubectl("annotate", "crd", crd, "--overwrite", *restore)


def _clean(cluster: Cluster) -> None:
    """Remove the README's release, its namespace, the Redis volume and the quick start's
    job: what a release named tickwork in namespace tickwork left (the Pods demo's too)."""
    release = Release(cluster, NAMESPACE, name=RELEASE)
    if release.helm("list", "--short").strip():
        release.uninstall()
    cluster.kubectl(
        "-n",
        JOB_NAMESPACE,
        "delete",
        "scheduledjob",
        "hello-once",
        "--ignore-not-found",
        check=False,
    )
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", timeout=300)
    claim = f"data-{release.fullname}-redis-0"
    cluster.kubectl(
        "delete", "persistentvolume", f"{NAMESPACE}-{claim}", "--ignore-not-found", timeout=120
    )
    if cluster.plane is not None:
        shutil.rmtree(
            cluster.plane.workdir.parent / "volumes" / f"{NAMESPACE}-{RELEASE}-redis",
            ignore_errors=True,
        )


@pytest.fixture
def readme_release(published: Published) -> Iterator[Release]:
    """The README's release, torn down (with its namespace and volume) after each test."""
    release = Release(published.cluster, NAMESPACE, name=RELEASE)
    release.provide_redis_volume()  # the local node has no storage provisioner
    try:
        yield release
    finally:
        _clean(published.cluster)


def test_the_install_line_installs_the_pinned_chart_from_the_registry(
    published: Published, readme_release: Release
) -> None:
    out = published.run(install_line())
    assert f"Tickwork {CHART_META['appVersion']} is installed in namespace {NAMESPACE}" in out
    [listed] = json.loads(readme_release.helm("list", "-o", "json"))
    assert listed["chart"] == f"tickwork-{CHART_META['version']}"
    assert listed["status"] == "deployed"


def _watch_until(
    published: Published, command: str, done: re.Pattern[str], *, timeout: float
) -> list[str]:
    """Run a `-w` command until a line of its output matches ``done``; its lines."""
    argv = published.user_argv(command)
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=published.env,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not any(done.search(line) for line in lines):
                left = deadline - time.monotonic()
                assert left > 0, f"{command}: no line matched {done.pattern}:\n" + "\n".join(lines)
                if selector.select(timeout=left):
                    line = proc.stdout.readline()
                    assert line, f"{command} ended:\n" + "\n".join(lines)
                    lines.append(line.rstrip("\n"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        proc.stdout.close()
    return lines


def test_the_quick_start_runs_the_example_job_in_pods_pulled_from_the_registry(
    published: Published, readme_release: Release
) -> None:
    install, apply, watch, result = quick_start()
    started = time.monotonic()
    published.run(install)
    published.run(apply)
    # The README's comment on the watch: "LAST Succeeded, PHASE Completed".
    finished = re.compile(r"^hello-once\s.*\bCompleted\b.*\bSucceeded\b")
    try:
        rows = _watch_until(published, watch, finished, timeout=300)
    except AssertionError as exc:
        job = published.cluster.kubectl(
            "-n",
            JOB_NAMESPACE,
            "get",
            "sj",
            "hello-once",
            "-o",
            "yaml",
            "--show-managed-fields",
            check=False,
        )
        now = f"the job now (who wrote what, when):\n{job.stdout}"
        raise AssertionError(f"{exc}\n\n{now}") from None
    print(f"installed and ran the example in {time.monotonic() - started:.0f}s")  # noqa: T201
    assert rows[0].split()[:2] == ["NAME", "SCHEDULE"], rows
    assert published.run(result) == "Executed: hello from Tickwork"
    # The README's `kubectl tickwork runs`, on the quick start's job.
    [runs] = re.findall(r"^\$ (kubectl tickwork runs) \S+", README, re.MULTILINE)
    history = published.run(f"{runs} hello-once")
    assert "Succeeded" in history, history

    # Every Pod runs an image pulled from the registry: operator and workers Tickwork's,
    # at the chart's appVersion, Redis the one pushed beside it.
    host = published.registry.host
    expected = {
        "operator": f"{host}/tickwork/tickwork:{CHART_META['appVersion']}",
        "worker": f"{host}/tickwork/tickwork:{CHART_META['appVersion']}",
        "redis": f"{host}/{redis_repository(published.redis)}:{published.redis.tag}",
    }
    for component, image in expected.items():
        pods = readme_release.pods(component)
        assert pods, component
        for pod in pods:
            [status] = pod["status"]["containerStatuses"]
            assert pod["spec"]["containers"][0]["image"] == image
            assert status["imageID"].startswith(f"{image.rsplit(':', 1)[0]}@sha256:"), status
    [operator] = readme_release.pods("operator")[:1]
    assert operator["status"]["containerStatuses"][0]["imageID"].endswith(published.tickwork_digest)
    node = published.cluster.node
    assert node is not None
    held = node.ctr("images", "list", "--quiet").stdout.split()
    assert expected["operator"] in held
    assert expected["redis"] in held
