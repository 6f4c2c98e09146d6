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
import time
from pathlib import Path
from typing import Any

from tickwork_dev.demo.workdir import fresh_workdir
from tickwork_dev.devcluster import addons, hostnet, node
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.recorder import EGRESS_VALUES as RECORDER_EGRESS
from tickwork_dev.devcluster.release import Release, cluster_images, merge

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = "demo"
BURST = "burst"
REFRESH_SECONDS = 3.0
MIN_WORKERS, MAX_WORKERS = 1, 6
TARGET_BACKLOG = 8  # runs per worker the autoscaler aims at (the chart's default)
REST_LOOKS = 2  # looks a refresh apart on which the workers must be at rest


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


def _wanted_workers(release: Release) -> int:
    """The replicas the Deployment is asked for now (the autoscaler's last decision;
    its status follows a moment later)."""
    return int((release.deployment("worker").get("spec") or {}).get("replicas") or 0)


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


def _autoscaler(release: Release) -> tuple[float | None, int]:
    """The backlog per worker that the autoscaler last saw (None before its first
    look) and the replicas it last decided on."""
    found = release.cluster.kubectl(
        "-n", release.namespace, "get", "hpa", f"{release.fullname}-worker", "-o", "json"
    )
    status = json.loads(found.stdout).get("status") or {}
    desired = int(status.get("desiredReplicas") or 0)
    for metric in status.get("currentMetrics") or []:
        current = (metric.get("external") or {}).get("current") or {}
        if "averageValue" in current:
            return _quantity(str(current["averageValue"])), desired
    return None, desired


def _backlog_served(release: Release) -> float | None:
    """The backlog as the metrics API serves it now: what the autoscaler's next look
    will see (None while there is none)."""
    items = addons.served_backlog(release.cluster, release.namespace) or []
    return max((_quantity(str(item["value"])) for item in items), default=None)


def _rest_or_why(release: Release, *, per_worker: int) -> str | None:
    """None when the workers are at rest before the burst, else what keeps them busy.

    At rest: every backfill of the examples published and none of their runs queued
    or running; the autoscaler's last decision the minimum, on a backlog it saw at or
    under one worker's share, and the backlog served now (what its next look sees) no
    more than that; the Deployment asked for the minimum and that many ready. Being at
    the minimum is not enough: the workers can step down while a backfill is still
    being published and rise again, and the autoscaler's metric lags the queue by a
    scrape."""
    busy = _examples_busy(release.cluster)
    if busy is not None:
        return busy
    seen, desired = _autoscaler(release)
    if seen is None:
        return "the autoscaler has not seen the queue yet"
    if seen > per_worker or desired != MIN_WORKERS:
        return f"the autoscaler sees a backlog of {seen:g} per worker and wants {desired}"
    served = _backlog_served(release)
    if served is None or served > per_worker:
        return f"the queue's backlog is {'not served' if served is None else f'{served:g}'}"
    wanted, (replicas, ready) = _wanted_workers(release), _workers(release)
    if (wanted, replicas, ready) != (MIN_WORKERS,) * 3:
        return f"{wanted} workers wanted, {replicas} there, {ready} ready"
    return None


def _at_rest(release: Release, *, per_worker: int, timeout: float = 420) -> None:
    """Wait until the examples' own work is done and the workers are back at the
    autoscaler's minimum, all ready, before the burst: the demo shows them rise from
    there. (catch-up.yaml's backfill queues 168 runs; the workers scale for those first.)
    Rest must hold on REST_LOOKS looks a refresh apart: the autoscaler decides every few
    seconds, and one look can fall between its decision and the Deployment's."""
    deadline = time.monotonic() + timeout
    steady = 0
    while True:
        why = _rest_or_why(release, per_worker=per_worker)
        steady = steady + 1 if why is None else 0
        if steady == REST_LOOKS:
            _say(f"The examples are idle and the workers at rest: {MIN_WORKERS}.")
            return
        if why is not None and time.monotonic() > deadline:
            raise RuntimeError(
                f"the workers did not come to rest at {MIN_WORKERS} in {timeout:.0f} s: {why}"
            )
        _say(
            f"waiting for the examples' runs and the workers to settle: "
            f"{why or 'at rest, looking once more'} ..."
        )
        time.sleep(REFRESH_SECONDS)  # a refresh interval for a human watching


def run_pods_demo(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir).resolve()
    hostnet.require_root()
    node.clean_stale(workdir)  # an earlier demo's node, if it was killed
    fresh_workdir(workdir)
    _say("Starting a local Kubernetes node (control plane, kubelet, containerd, DNS) ...")
    with node.local_cluster(workdir) as cluster:
        _say(f"  export KUBECONFIG={cluster.kubeconfig}   # to use kubectl meanwhile")
        return show(cluster, args)


def show(cluster: Cluster, args: argparse.Namespace) -> int:
    """Install everything into ``cluster``, queue the burst and watch it absorbed."""
    _say("Building Tickwork's image and the add-ons' images (cached after the first time) ...")
    images = cluster_images(cluster)
    addons.install_monitoring(
        cluster, prometheus=images.prometheus, adapter=images.prometheus_adapter
    )
    # A CRD that another release installed (and kept) stays that release's.
    crd = cluster.kubectl("get", "crd", "scheduledjobs.tickwork.dev", check=False)
    values = merge(
        images.values(),
        images.demo_values(),  # tickwork.sleep
        RECORDER_EGRESS,
        {
            "crds": {"install": crd.returncode != 0},
            # Scale down 30 s after the burst, all at once: a demo need not wait minutes.
            "autoscaling": {
                "minReplicas": MIN_WORKERS,
                "maxReplicas": MAX_WORKERS,
                "targetBacklogPerWorker": TARGET_BACKLOG,
                "behavior": {"scaleDownStabilizationSeconds": 30, "scaleDownPercent": 100},
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
    release = Release(cluster, "tickwork", values=values)
    _say("helm install tickwork charts/tickwork -n tickwork ...")
    release.install()
    for namespace in (EXAMPLES, BURST):
        cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("apply", "-n", EXAMPLES, "-f", str(ROOT / "manifests" / "examples"))
    _say(
        f"Applied manifests/examples to {EXAMPLES!r} (catch-up.yaml backfills a week of "
        "hourly runs: the workers may scale for those first)."
    )
    _at_rest(release, per_worker=TARGET_BACKLOG)
    items = _burst(args.burst, 20, lead=30)
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )
    _say(
        f"Applied {args.burst} jobs of 20 s each, all due in 30 s, to {BURST!r}. "
        "Ctrl-C stops everything.\n"
    )
    return _watch(cluster, release, args)


def _watch(cluster: Cluster, release: Release, args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.duration if args.duration else None
    scaled_up = False
    try:
        while True:
            table = cluster.kubectl("get", "scheduledjobs", "-n", EXAMPLES, check=False).stdout
            replicas, ready = _workers(release)
            seen, desired = _autoscaler(release)
            phases = _phases(cluster)
            burst = ", ".join(f"{count} {phase}" for phase, count in sorted(phases.items()))
            looked = "-" if seen is None else f"{seen:g}"
            _say(
                f"--- {dt.datetime.now().astimezone():%H:%M:%S}  workers: {replicas} "
                f"({ready} ready; the autoscaler sees {looked} per worker, wants "
                f"{desired})  burst: {burst}\n{table}"
            )
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
