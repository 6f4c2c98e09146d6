"""Fixtures for Tickwork in real Pods: a cluster with a node, the images, the add-ons.

On this machine the cluster is the local control plane plus a node
(:func:`tickwork.devcluster.node.local_cluster`), and every image is built here
and imported into the node. With ``TICKWORK_TEST_KUBECONFIG`` the same tests run
against an existing cluster (kind): ``TICKWORK_TEST_IMAGE`` names Tickwork's
image already loaded there (``scripts/kind-e2e.sh`` builds and loads it), and
the add-ons use the public images. A missing part fails, it never skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pods.support import PodImages
from tickwork.devcluster import addons, images, node
from tickwork.devcluster.cluster import Cluster, existing_cluster
from tickwork.devcluster.errors import StartError
from tickwork.devcluster.recorder import Recorder
from tickwork.devcluster.recorder import deploy as deploy_recorder

HERE = Path(__file__).parent
IMAGE_ENV = "TICKWORK_TEST_IMAGE"
UPGRADE_IMAGE_ENV = "TICKWORK_TEST_UPGRADE_IMAGE"


@pytest.fixture(scope="session")
def pods_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    existing = existing_cluster()
    if existing is not None:
        yield existing
        return
    with node.local_cluster(tmp_path_factory.mktemp("node")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def test_images(pods_cluster: Cluster) -> PodImages:
    """Tickwork's image (and a rebuild of it), Redis, and the add-ons' images."""
    local = pods_cluster.node
    if local is None:
        image = os.environ.get(IMAGE_ENV)
        if not image:
            raise StartError(f"{IMAGE_ENV} must name Tickwork's image loaded into the cluster")
        return PodImages(image, os.environ.get(UPGRADE_IMAGE_ENV, image), None,
                          addons.public_images())  # fmt: skip
    built = [images.tickwork_image().image, images.tickwork_image(tag_suffix="upgrade").image,
             images.redis_image(), addons.coredns_image(), *addons.monitoring_images()]  # fmt: skip
    for image in built:
        local.load_image(image)
    tickwork, upgrade, redis, coredns, prometheus, adapter = built
    return PodImages(
        tickwork.ref, upgrade.ref, redis.ref,
        addons.AddonImages(coredns=coredns.ref, prometheus=prometheus.ref,
                           prometheus_adapter=adapter.ref, keda="", keda_adapter=""),
    )  # fmt: skip


@pytest.fixture(scope="session")
def monitoring(pods_cluster: Cluster, test_images: PodImages) -> str:
    """Prometheus + prometheus-adapter (the chart's default HPA mode); their namespace."""
    addons.install_monitoring(pods_cluster, prometheus=test_images.addons.prometheus,
                              adapter=test_images.addons.prometheus_adapter)  # fmt: skip
    return addons.MONITORING_NAMESPACE


@pytest.fixture(scope="session")
def recorder(pods_cluster: Cluster, test_images: PodImages) -> Recorder:
    """Counts executions where they happen: HTTP tasks call it."""
    return deploy_recorder(pods_cluster, test_images.tickwork)
