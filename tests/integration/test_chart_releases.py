"""Several releases of the chart in one cluster, against a real API server: each
namespace of jobs is served by one operator, and an install or upgrade that would give
a namespace a second one is refused before it creates anything."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.support import create_plain_redis_secret, own_control_plane
from tickwork_dev.devcluster import manifests
from tickwork_dev.devcluster.cluster import Cluster

CHART = manifests.CHART
pytestmark = pytest.mark.timeout(300)
Answer = subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Cluster]:
    """A control plane of its own: the check reads every operator in the cluster."""
    workdir = tmp_path_factory.mktemp("releases-controlplane")
    why = "needs a control plane that holds no other Tickwork operator"
    with own_control_plane(cluster, workdir, why) as here:
        for namespace in ("team-a", "team-b", "team-c"):
            here.kubectl("create", "namespace", namespace)
        yield here


def _helm(plane: Cluster, verb: str, release: str, *values: str) -> Answer:
    """``helm install`` or ``upgrade`` of ``release`` into a namespace of its own."""
    argv = [
        manifests.helm(),
        "--kubeconfig",
        str(plane.kubeconfig),
        verb,
        release,
        str(CHART),
        "--namespace",
        f"tw-{release}",
        "--set",
        "image.tag=test",
        *values,
    ]
    if verb == "install":
        argv.append("--create-namespace")
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _watching(*namespaces: str) -> list[str]:
    """Values that watch ``namespaces`` (none: every namespace), the CRD left to the first."""
    listed = json.dumps(namespaces)
    return ["--set-json", f"watchNamespaces={listed}", "--set", "crds.install=false"]


def _operators(plane: Cluster) -> set[str]:
    each = "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}"
    listed = plane.kubectl(
        "get",
        "deployments",
        "--all-namespaces",
        "-l",
        "app.kubernetes.io/component=operator",
        "-o",
        each,
    )
    return set(listed.stdout.split())


def test_a_namespace_gets_a_second_operator_only_when_the_installer_says(plane: Cluster) -> None:
    first = _helm(plane, "install", "one", "--set", "watchNamespaces={team-a,team-b}")
    assert first.returncode == 0, first.stderr
    assert _operators(plane) == {"tw-one/one-tickwork-operator"}

    # A list that shares a namespace: refused, naming the other operator and the namespace.
    shared = _helm(plane, "install", "two", *_watching("team-b", "team-c"))
    assert shared.returncode != 0
    assert "tw-one/one-tickwork-operator (watching team-a, team-b) in team-b" in shared.stderr
    assert "every run would execute twice" in shared.stderr
    assert _operators(plane) == {"tw-one/one-tickwork-operator"}  # nothing of it was created

    # A disjoint list is fine; the release's own operator never counts against an upgrade.
    disjoint = _helm(plane, "install", "two", *_watching("team-c"))
    assert disjoint.returncode == 0, disjoint.stderr
    again = _helm(plane, "upgrade", "two", *_watching("team-c"))
    assert again.returncode == 0, again.stderr
    # Renamed, its operator is a new Deployment; the old one is still its own (Helm's
    # annotations say so) while the upgrade is rendered.
    renamed = _helm(plane, "upgrade", "two", *_watching("team-c"), "--set", "fullnameOverride=two")
    assert renamed.returncode == 0, renamed.stderr
    assert _operators(plane) == {"tw-one/one-tickwork-operator", "tw-two/two-operator"}

    # An upgrade that widens into another release's namespace is refused like an install.
    widened = _helm(plane, "upgrade", "one", "--set", "watchNamespaces={team-a,team-c}")
    assert widened.returncode != 0
    assert "tw-two/two-operator (watching team-c) in team-c" in widened.stderr

    # Every namespace overlaps every release: both are named.
    everywhere = _helm(plane, "install", "three", *_watching())
    assert everywhere.returncode != 0
    assert "watchNamespaces (every namespace) overlap" in everywhere.stderr
    assert "tw-one/one-tickwork-operator (watching team-a, team-b) in team-a, team-b" in (
        everywhere.stderr
    )
    assert "tw-two/two-operator (watching team-c) in team-c" in everywhere.stderr
    assert _operators(plane) == {"tw-one/one-tickwork-operator", "tw-two/two-operator"}

    # The installer may still decide otherwise, and a later release sees that one too.
    allowed = _helm(
        plane, "install", "three", *_watching(), "--set", "refuseOverlappingReleases=false"
    )
    assert allowed.returncode == 0, allowed.stderr
    later = _helm(plane, "install", "four", *_watching("team-d"))
    assert later.returncode != 0
    assert "tw-three/three-tickwork-operator (watching every namespace) in team-d" in later.stderr


def test_the_plain_manifests_operator_counts_as_a_release(plane: Cluster) -> None:
    plane.kubectl("create", "namespace", "tickwork")
    create_plain_redis_secret(plane)
    plane.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(manifests.ROOT / "manifests")
    )
    try:
        alongside = _helm(plane, "install", "five", *_watching("team-e"))
        assert alongside.returncode != 0
        assert "tickwork/tickwork-operator (watching every namespace) in team-e" in (
            alongside.stderr
        )
    finally:
        plane.kubectl("delete", "deployment", "tickwork-operator", "-n", "tickwork")
