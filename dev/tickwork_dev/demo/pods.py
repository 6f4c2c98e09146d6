"""``make demo DEMO_ARGS=--pods``: Tickwork as users run it, in Pods on a local node.

Starts the local control plane with a node (root), builds Tickwork's image here,
installs Prometheus + prometheus-adapter and the Helm chart (the default HPA
mode), applies ``manifests/examples/`` and a burst of one-shot jobs that each
sleep, and prints ``kubectl get scheduledjobs`` with the worker replica count as
the autoscaler absorbs the burst. Ctrl-C stops and removes everything.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import shutil
import time
from pathlib import Path
from typing import Any

from tickwork_dev.devcluster import addons, node
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.recorder import EGRESS_VALUES as RECORDER_EGRESS
from tickwork_dev.devcluster.release import Release, cluster_images, merge

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = "demo"
BURST = "burst"
REFRESH_SECONDS = 3.0
MIN_WORKERS, MAX_WORKERS = 1, 6
TARGET_BACKLOG = 8  # runs per worker the autoscaler aims at (the chart's default)


def _say(text: str) -> None:
    print(text, flush=True)  # noqa: T201 - the demo talks to its user


def _burst(count: int, seconds: int, lead: int) -> list[dict[str, Any]]:
    run_at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=lead)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {
            "apiVersion": "tickwork.dev/v1alpha1",
            "kind": "ScheduledJob",
            "metadata": {"name": f"nap-{index:03d}", "namespace": BURST},
            "spec": {
                "runAt": run_at,
                "description": f"one of {count} runs due at once, {seconds} s each",
                "task": {"python": {"name": "tickwork.sleep", "args": [str(seconds)]}},
            },
        }
        for index in range(count)
    ]


def _phases(cluster: Cluster) -> collections.Counter[str]:
    found = cluster.kubectl("get", "sj", "-n", BURST, "-o", "json", check=False)
    if found.returncode != 0:
        return collections.Counter()
    items = json.loads(found.stdout)["items"]
    return collections.Counter(
        ((i.get("status") or {}).get("activeRuns") or [{}])[0].get("state")
        or ((i.get("status") or {}).get("lastRun") or {}).get("outcome")
        or "New"
        for i in items
    )


def _workers(release: Release) -> tuple[int, int]:
    status = release.deployment("worker").get("status") or {}
    return int(status.get("replicas") or 0), int(status.get("readyReplicas") or 0)


def _quantity(text: str) -> float:
    """A Kubernetes quantity as the HPA reports metric values ("0", "8", "2500m")."""
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _examples_busy(cluster: Cluster) -> str | None:
    """What of the examples still queues or runs work, or None when nothing does."""
    found = cluster.kubectl("get", "sj", "-n", EXAMPLES, "-o", "json")
    for item in json.loads(found.stdout)["items"]:
        name, status = item["metadata"]["name"], item.get("status") or {}
        if status.get("activeRuns"):
            return f"{name} has runs queued or running"
        progress = {b["name"]: b for b in status.get("backfills") or []}
        for backfill in item["spec"].get("backfills") or []:
            if not (progress.get(backfill["name"]) or {}).get("completedAt"):
                return f"{name}'s backfill {backfill['name']} is being published"
    return None


def _backlog_seen(release: Release) -> float | None:
    """The backlog per worker that the autoscaler last saw, None before its first look."""
    found = release.cluster.kubectl("-n", release.namespace, "get", "hpa",
                                    f"{release.fullname}-worker", "-o", "json")  # fmt: skip
    for metric in (json.loads(found.stdout).get("status") or {}).get("currentMetrics") or []:
        current = (metric.get("external") or {}).get("current") or {}
        if "averageValue" in current:
            return _quantity(str(current["averageValue"]))
    return None


def _at_rest(release: Release, *, per_worker: int, timeout: float = 420) -> None:
    """Wait until the examples' own work is done and the workers are back at the
    autoscaler's minimum, all ready, before the burst: the demo shows them rise from
    there. (catch-up.yaml's backfill queues 168 runs; the workers scale for those first.)

    Being at the minimum is not enough: the workers can step down while the backfill is
    still being published and rise again. So: every backfill published, no example run
    queued or running, and the autoscaler itself seeing a backlog that asks for no more
    than the minimum (its metric lags the queue by a scrape)."""
    deadline = time.monotonic() + timeout
    while True:
        busy = _examples_busy(release.cluster)
        seen = _backlog_seen(release)
        replicas, ready = _workers(release)
        if busy is None and seen is not None and seen <= per_worker and (
            replicas, ready) == (MIN_WORKERS, MIN_WORKERS):  # fmt: skip
            _say(f"The examples are idle and the workers at rest: {replicas}.")
            return
        why = busy or ("the autoscaler has not seen the queue yet" if seen is None
                       else f"the autoscaler sees a backlog of {seen:g} per worker")  # fmt: skip
        if time.monotonic() > deadline:
            raise RuntimeError(f"the workers did not come to rest at {MIN_WORKERS} in "
                               f"{timeout:.0f} s: {why}; workers {replicas} "
                               f"({ready} ready)")  # fmt: skip
        _say(f"waiting for the examples' runs and the workers to settle: {why}; "
             f"workers {replicas} ({ready} ready) ...")  # fmt: skip
        time.sleep(REFRESH_SECONDS)  # a refresh interval for a human watching


def run_pods_demo(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir).resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    _say("Starting a local Kubernetes node (control plane, kubelet, containerd, DNS) ...")
    with node.local_cluster(workdir) as cluster:
        _say(f"  export KUBECONFIG={cluster.kubeconfig}   # to use kubectl meanwhile")
        return show(cluster, args)


def show(cluster: Cluster, args: argparse.Namespace) -> int:
    """Install everything into ``cluster``, queue the burst and watch it absorbed."""
    _say("Building Tickwork's image and the add-ons' images (cached after the first time) ...")
    images = cluster_images(cluster)
    addons.install_monitoring(cluster, prometheus=images.prometheus,
                              adapter=images.prometheus_adapter)  # fmt: skip
    # A CRD that another release installed (and kept) stays that release's.
    crd = cluster.kubectl("get", "crd", "scheduledjobs.tickwork.dev", check=False)
    values = merge(images.values(), images.demo_values(), RECORDER_EGRESS, {  # tickwork.sleep
        "crds": {"install": crd.returncode != 0},
        # Scale down 30 s after the burst, all at once: a demo need not wait minutes.
        "autoscaling": {"minReplicas": MIN_WORKERS, "maxReplicas": MAX_WORKERS,
                        "targetBacklogPerWorker": TARGET_BACKLOG,
                        "behavior": {"scaleDownStabilizationSeconds": 30,
                                     "scaleDownPercent": 100}},
        "networkPolicy": {"metricsFrom": [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": addons.MONITORING_NAMESPACE}}}]},
    })  # fmt: skip
    release = Release(cluster, "tickwork", values=values)
    _say("helm install tickwork charts/tickwork -n tickwork ...")
    release.install()
    for namespace in (EXAMPLES, BURST):
        cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("apply", "-n", EXAMPLES, "-f", str(ROOT / "manifests" / "examples"))
    _say(f"Applied manifests/examples to {EXAMPLES!r} (catch-up.yaml backfills a week of "
         "hourly runs: the workers may scale for those first).")  # fmt: skip
    _at_rest(release, per_worker=TARGET_BACKLOG)
    items = _burst(args.burst, 20, lead=30)
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1",
                    "kind": "List", "items": items}))  # fmt: skip
    _say(f"Applied {args.burst} jobs of 20 s each, all due in 30 s, to {BURST!r}. "
         "Ctrl-C stops everything.\n")  # fmt: skip
    return _watch(cluster, release, args)


def _watch(cluster: Cluster, release: Release, args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.duration if args.duration else None
    scaled_up = False
    try:
        while True:
            table = cluster.kubectl("get", "scheduledjobs", "-n", EXAMPLES, check=False).stdout
            replicas, ready = _workers(release)
            phases = _phases(cluster)
            burst = ", ".join(f"{count} {phase}" for phase, count in sorted(phases.items()))
            _say(f"--- {dt.datetime.now().astimezone():%H:%M:%S}  workers: {replicas} "
                 f"({ready} ready)  burst: {burst}\n{table}")  # fmt: skip
            scaled_up = scaled_up or replicas > MIN_WORKERS
            drained = phases.get("Succeeded", 0) == args.burst
            if args.until_scaled and scaled_up and drained and replicas == MIN_WORKERS:
                _say("The workers scaled up, absorbed the burst and scaled back down.")
                return 0
            if deadline is not None and time.monotonic() > deadline:
                _say("Time is up.")
                return 1 if args.until_scaled else 0
            time.sleep(REFRESH_SECONDS)  # a refresh interval for a human watching
    except KeyboardInterrupt:
        _say("\nStopping ...")
        return 0
