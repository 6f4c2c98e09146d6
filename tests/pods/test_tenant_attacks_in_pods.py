"""The attack suite against the chart in real Pods, on its production defaults
(issue 46): a hostile tenant — a ServiceAccount that may only create and read
ScheduledJobs in its namespace, impersonated — and a hostile server on an address
the workers count as public (a network namespace of the local node's own: on the
defaults the workers reach public addresses only). No value is changed but the
images (no registry here), the local node's DNS port, and the CRD managed apart
from the release (it outlives other releases of these tests; this module's name
sorts after test_chart_in_pods.py, whose release installs the CRD with Helm's
ownership and would refuse one applied here first).

Each attack succeeded on the code before issue 46: a reply of a few hundred bytes
restarted a worker past its 512 Mi limit; an internal error page was in status for
anyone with `view`; one namespace's long runs held every slot of the workers that
existed (the old default limit was 40 a namespace).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pods.support import seconds_from_now, wait_outcomes
from tests.support import apply_as, tenant_account
from tickwork_dev.devcluster import hostnet
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.release import ClusterImages, Release, merge

NAMESPACE = "tickwork-attacks"
JOBS = "tickwork-attacks-jobs"
OTHERS = "tickwork-attacks-others"
PORT = 8080
SERVER = f"http://{hostnet.PUBLIC_ADDRESS}:{PORT}"
CANARY = "canary-" + os.urandom(6).hex()
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def hostile(pods_cluster: Cluster) -> Iterator[str]:
    """The hostile server, on the public address; its URL."""
    if pods_cluster.node is None:
        raise AssertionError("the attack suite in Pods needs the local node's public address")
    hostnet.public_up()
    server = subprocess.Popen(
        ["ip", "netns", "exec", hostnet.PUBLIC_NETNS, sys.executable, "-m",
         "tickwork_dev.devcluster.hostile", str(PORT), CANARY],
    )  # fmt: skip
    try:
        yield SERVER
    finally:
        server.kill()
        server.wait()
        hostnet.public_down()


@pytest.fixture(scope="module")
def defaults(pods_cluster: Cluster, test_images: ClusterImages, hostile: str) -> Iterator[Release]:
    """The chart on its production defaults."""
    crds = Path(__file__).resolve().parents[2] / "manifests" / "crds"
    pods_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    values = merge(test_images.values(), {"crds": {"install": False}})
    release = Release(pods_cluster, NAMESPACE, values=values)
    release.install()
    for namespace in (JOBS, OTHERS):
        pods_cluster.kubectl("create", "namespace", namespace)
    try:
        yield release
    finally:
        release.uninstall()
        pods_cluster.kubectl("delete", "namespace", JOBS, OTHERS, "--wait=false")


@pytest.fixture(scope="module")
def tenant(defaults: Release) -> str:
    return tenant_account(defaults.cluster, JOBS)


def _http_job(name: str, path: str) -> dict[str, Any]:
    return {"apiVersion": "tickwork.dev/v1alpha1", "kind": "ScheduledJob",
            "metadata": {"name": name},
            "spec": {"runAt": seconds_from_now(0), "retry": {"maxAttempts": 1},
                     "timeoutSeconds": 600,
                     "task": {"http": {"url": f"{SERVER}{path}", "method": "GET"}}}}  # fmt: skip


def _submit(cluster: Cluster, who: str, namespace: str, job: dict[str, Any]) -> None:
    result = apply_as(cluster, who, namespace, job)
    assert result.returncode == 0, result.stderr


def _restarts(release: Release) -> int:
    return sum(c["restartCount"] for p in release.pods("worker")
               for c in p["status"]["containerStatuses"])  # fmt: skip


def test_a_reply_bomb_leaves_every_worker_standing(defaults: Release, tenant: str) -> None:
    cluster = defaults.cluster
    before = _restarts(defaults)
    _submit(cluster, tenant, JOBS, _http_job("bomb", "/bomb"))
    wait_outcomes(cluster, JOBS, {"bomb"}, "Succeeded", timeout=120)
    _submit(cluster, tenant, JOBS, _http_job("after-bomb", "/ok"))
    wait_outcomes(cluster, JOBS, {"after-bomb"}, "Succeeded", timeout=120)
    assert _restarts(defaults) == before  # no worker went past its memory limit


def test_a_viewer_reads_no_reply_body_in_status(defaults: Release, tenant: str) -> None:
    cluster = defaults.cluster
    cluster.kubectl("-n", JOBS, "create", "serviceaccount", "viewer")
    cluster.kubectl("-n", JOBS, "create", "rolebinding", "viewer", "--clusterrole=view",
                    f"--serviceaccount={JOBS}:viewer")  # fmt: skip
    _submit(cluster, tenant, JOBS, _http_job("error-page", "/canary"))
    wait_outcomes(cluster, JOBS, {"error-page"}, "Failed", timeout=120)
    seen = cluster.kubectl("--as", f"system:serviceaccount:{JOBS}:viewer", "-n", JOBS, "get",
                           "scheduledjob", "error-page", "-o", "json").stdout  # fmt: skip
    last = json.loads(seen)["status"]["lastRun"]
    assert "500" in last["error"], last
    assert CANARY not in seen


def test_a_tenant_flooding_long_runs_leaves_slots_for_the_others(
    defaults: Release, tenant: str
) -> None:
    """As many runs that hold their slot for 300 s as the workers have slots: the
    tenant gets half of them, and another namespace's run goes through meanwhile."""
    cluster = defaults.cluster
    workers = len(defaults.pods("worker"))
    slots = workers * 8  # worker.concurrency's default
    for i in range(slots):
        _submit(cluster, tenant, JOBS, _http_job(f"hog-{i}", "/slow"))

    def holding() -> int:
        jobs = json.loads(cluster.kubectl("-n", JOBS, "get", "scheduledjobs", "-o",
                                          "json").stdout)["items"]  # fmt: skip
        return sum(len(j.get("status", {}).get("activeRuns") or []) for j in jobs
                   if j["metadata"]["name"].startswith("hog-"))  # fmt: skip

    wait_for(lambda: holding() >= slots // 2, timeout=120, interval=1,
             what="the tenant's runs holding their share")  # fmt: skip
    other = tenant_account(cluster, OTHERS)
    _submit(cluster, other, OTHERS, _http_job("innocent", "/ok"))
    # Well within the hogs' 300 s: it did not wait for one of them to end.
    wait_outcomes(cluster, OTHERS, {"innocent"}, "Succeeded", timeout=90)
    assert holding() <= len(defaults.pods("worker")) * 8 // 2  # of the slots there are now
