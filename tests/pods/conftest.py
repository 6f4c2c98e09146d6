"""Fixtures for Tickwork in real Pods: a cluster with a node, the images, the add-ons.

On this machine the cluster is the local control plane plus a node
(:func:`tickwork_dev.devcluster.node.local_cluster`), and every image is built here
and imported into the node. With ``TICKWORK_TEST_KUBECONFIG`` the same tests run
against an existing cluster (kind): ``TICKWORK_TEST_IMAGE`` names Tickwork's
image already loaded there (``scripts/kind-e2e.sh`` builds and loads it), and
the add-ons use the public images (see :mod:`tickwork_dev.devcluster.release`). A
missing part fails, it never skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tickwork_dev.devcluster import addons, node
from tickwork_dev.devcluster.cluster import Cluster, existing_cluster
from tickwork_dev.devcluster.recorder import Recorder
from tickwork_dev.devcluster.recorder import deploy as deploy_recorder
from tickwork_dev.devcluster.release import ClusterImages, cluster_images

_STARTED: list[Cluster] = []
_DIAGNOSED: list[str] = []


@pytest.fixture(scope="session")
def pods_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    existing = existing_cluster()
    if existing is not None:
        _STARTED.append(existing)
        yield existing
        return
    with node.local_cluster(tmp_path_factory.mktemp("node")) as cluster:
        _STARTED.append(cluster)
        try:
            yield cluster
        finally:
            _STARTED.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """On the first failure of a Pods test, record what the cluster looked like then
    (Pods stuck, their reasons, warnings, the runtime's errors) while it still runs: a
    section of that failure's report, printed with it (from any xdist worker too)."""
    report = yield
    if report.failed and _STARTED and not _DIAGNOSED:  # type: ignore[attr-defined]
        _DIAGNOSED.append(f"{item.nodeid} ({call.when})")
        report.sections.append(  # type: ignore[attr-defined]
            ("the cluster at the first Pods failure", _STARTED[0].diagnose())
        )
    return report


@pytest.fixture(scope="session")
def test_images(pods_cluster: Cluster) -> ClusterImages:
    """Tickwork's image (and a rebuild of it), Redis, and the add-ons' images."""
    return cluster_images(pods_cluster)


@pytest.fixture(scope="session")
def monitoring(pods_cluster: Cluster, test_images: ClusterImages) -> str:
    """Prometheus + prometheus-adapter (the chart's default HPA mode); their namespace."""
    addons.install_monitoring(
        pods_cluster, prometheus=test_images.prometheus, adapter=test_images.prometheus_adapter
    )
    return addons.MONITORING_NAMESPACE


@pytest.fixture(scope="session")
def recorder(pods_cluster: Cluster, test_images: ClusterImages) -> Recorder:
    """Counts executions where they happen: HTTP tasks call it."""
    return deploy_recorder(pods_cluster, test_images.tickwork)
