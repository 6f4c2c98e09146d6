"""The workers' autoscaler in real Pods: one burst absorbed by the HPA and by KEDA.

    python benchmarks/autoscaling.py [--jobs 300] [--seconds 20] [--modes hpa keda]

On the local node (as root; or any cluster through TICKWORK_TEST_KUBECONFIG and
TICKWORK_TEST_IMAGE), for each autoscaling mode of the chart:

* ``hpa``: Prometheus scrapes the operator, prometheus-adapter serves the
  External metric ``tickwork_queue_backlog`` (the rule of docs/operations.md),
  the chart's HPA scales the worker Deployment;
* ``keda``: KEDA reads the ready list and the in-flight set from Redis and adds
  them up (the chart's ScaledObject).

``--jobs`` one-shot jobs fall due in the same second; each is an HTTP call to
the recorder Pod that lasts ``--seconds``. Measured from the moment they fall
due: the first extra worker Ready, peak replicas, every run succeeded (drained),
workers back at the minimum; runs lost and runs executed more often than
attempted, counted at the recorder. The chart's defaults apply except
maxReplicas (10) and the scale-down window (30 s instead of 300 s, so that a run
takes minutes). Writes benchmarks/results/autoscaling.json and a plot.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tickwork_dev.devcluster import addons, node
from tickwork_dev.devcluster.cluster import Cluster, existing_cluster
from tickwork_dev.devcluster.measure import CRDS, benchmark_parser, save_figure, save_report
from tickwork_dev.devcluster.recorder import EGRESS_VALUES as RECORDER_EGRESS
from tickwork_dev.devcluster.recorder import deploy as deploy_recorder
from tickwork_dev.devcluster.release import ClusterImages, Release, cluster_images, merge
from tickwork_dev.devcluster.scaling import run_burst

MIN_WORKERS = 1
MAX_WORKERS = 10
SCALE_DOWN_SECONDS = 30


@contextlib.contextmanager
def _cluster(workdir: Path) -> Iterator[Cluster]:
    existing = existing_cluster()
    if existing is not None:
        yield existing
        return
    with node.local_cluster(workdir) as cluster:
        yield cluster


def _values(images: ClusterImages, mode: str) -> dict[str, object]:
    return merge(
        images.values(),
        RECORDER_EGRESS,
        {
            "crds": {"install": False},
            "autoscaling": {
                "enabled": True,
                "mode": mode,
                "minReplicas": MIN_WORKERS,
                "maxReplicas": MAX_WORKERS,
                "behavior": {"scaleDownStabilizationSeconds": SCALE_DOWN_SECONDS},
            },
            "networkPolicy": {
                "metricsFrom": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {
                                "kubernetes.io/metadata.name": addons.MONITORING_NAMESPACE
                            }
                        }
                    }
                ]
            },
        },
    )


def measure(
    cluster: Cluster, images: ClusterImages, mode: str, jobs: int, seconds: float
) -> dict[str, Any]:
    recorder = deploy_recorder(cluster, images.tickwork)
    if mode == "hpa":
        addons.install_monitoring(
            cluster, prometheus=images.prometheus, adapter=images.prometheus_adapter
        )
    else:
        operator, adapter = images.keda()
        addons.uninstall_monitoring(cluster)
        addons.install_keda(cluster, operator=operator, adapter=adapter)
    release = Release(cluster, f"bench-{mode}", values=_values(images, mode))
    release.install()
    try:
        burst = run_burst(
            release, recorder, jobs=jobs, task_seconds=seconds, min_replicas=MIN_WORKERS
        )
        return {**burst.summary(), "redis_memory": release.redis_memory()}
    finally:
        release.uninstall()


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - only when plotting

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(
        1, len(results["modes"]), figsize=(6 * len(results["modes"]), 4), squeeze=False, sharey=True
    )
    for axis, (mode, burst) in zip(axes[0], results["modes"].items(), strict=True):
        samples = burst["samples"]
        at = [s["at"] for s in samples]
        axis.step(at, [s["replicas"] for s in samples], where="post", label="worker replicas")
        axis.step(at, [s["ready"] for s in samples], where="post", label="ready", linestyle=":")
        twin = axis.twinx()
        twin.plot(
            at,
            [s["executing"] for s in samples],
            color="tab:gray",
            alpha=0.6,
            label="runs executing",
        )
        twin.set_ylabel("runs executing")
        axis.set_title(
            f"{mode}: {burst['jobs']} runs of {burst['task_seconds']:g} s, "
            f"peak {burst['peak_replicas']}"
        )
        axis.set_xlabel("seconds after the burst fell due")
        axis.set_ylabel("workers")
        axis.legend(loc="upper right")
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "autoscaling")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--modes", nargs="+", choices=["hpa", "keda"], default=["hpa", "keda"])
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    results: dict[str, Any] = {
        "benchmark": "autoscaling",
        "commit": commit,
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version()},
        "settings": {
            "min_replicas": MIN_WORKERS,
            "max_replicas": MAX_WORKERS,
            "scale_down_stabilization_s": SCALE_DOWN_SECONDS,
            "worker_concurrency": 8,
            "fair_share_per_namespace": 0.5,  # the chart's default: all jobs in one namespace
            "hpa_sync_period_s": 5,
        },
        "modes": {},
    }
    with (
        tempfile.TemporaryDirectory(prefix="tickwork-autoscaling-") as scratch,
        _cluster(Path(scratch)) as cluster,
    ):
        cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
        images = cluster_images(cluster)
        for mode in args.modes:
            summary = measure(cluster, images, mode, args.jobs, args.seconds)
            results["modes"][mode] = summary
            brief = {key: value for key, value in summary.items() if key != "samples"}
            print(json.dumps(brief), flush=True)
    save_report(results, args.out, args)
    plot(results, args.plot)
    failed = [m for m, s in results["modes"].items() if s["lost"] or s["back_to_min_s"] is None]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
