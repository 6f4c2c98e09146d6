"""The chart's `autoscaling.mode: keda`, for real: KEDA (built from its Go module, with
its own manifests) scales the workers on ready + in-flight runs, read from Redis.

KEDA and prometheus-adapter both serve external.metrics.k8s.io, so the monitoring
add-on's APIService is removed first; this module runs after the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwork_dev.devcluster import addons
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.recorder import EGRESS_VALUES as RECORDER_EGRESS
from tickwork_dev.devcluster.recorder import Recorder
from tickwork_dev.devcluster.release import ClusterImages, Release, merge
from tickwork_dev.devcluster.scaling import run_burst

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
NAMESPACE = "tickwork-keda"
MIN_WORKERS = 1
CONCURRENCY = 8  # the chart's worker.concurrency
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def keda_release(pods_cluster: Cluster, test_images: ClusterImages) -> Iterator[Release]:
    operator, adapter = test_images.keda()
    addons.uninstall_monitoring(pods_cluster)
    addons.install_keda(pods_cluster, operator=operator, adapter=adapter)
    # The CRD may outlive an earlier release (it is kept on uninstall): manage it
    # apart from this release, as GitOps installs often do.
    pods_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    values = merge(
        test_images.values(),
        RECORDER_EGRESS,
        {
            "crds": {"install": False},
            "operator": {"replicas": 1},
            "autoscaling": {
                "enabled": True,
                "mode": "keda",
                "minReplicas": MIN_WORKERS,
                "maxReplicas": 5,
                "behavior": {"scaleDownStabilizationSeconds": 15, "scaleDownPercent": 100},
            },
        },
    )
    release = Release(pods_cluster, NAMESPACE, values=values)
    release.install()
    yield release
    release.uninstall()


def test_keda_scales_the_workers_on_ready_and_in_flight_runs_and_back(
    keda_release: Release, recorder: Recorder
) -> None:
    cluster = keda_release.cluster
    ready = "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status}"
    scaled = cluster.kubectl("-n", NAMESPACE, "get", "scaledobject", "-o", ready)
    assert scaled.stdout == "True", "KEDA did not accept the chart's ScaledObject"
    wait_for(
        lambda: keda_release.deployment("worker")["status"].get("replicas") == MIN_WORKERS,
        timeout=180,
        what="workers at the minimum before the burst",
    )
    burst = run_burst(keda_release, recorder, jobs=40, task_seconds=20, min_replicas=MIN_WORKERS)
    assert burst.peak_replicas >= 3, burst.summary()
    assert burst.drained is not None, burst.summary()
    assert burst.back_to_min is not None, burst.summary()
    assert not burst.lost, burst.lost
    assert not burst.executed_more_than_attempts, burst.executed_more_than_attempts
    # Busy workers are not scaled away: while more runs were executing than the
    # minimum of workers can hold, there were more workers than the minimum.
    # (Counting the ready list alone drops to the minimum as soon as it is empty.)
    crowded = [s for s in burst.samples if s.executing > MIN_WORKERS * CONCURRENCY]
    assert crowded
    assert all(s.replicas > MIN_WORKERS for s in crowded), burst.summary()
