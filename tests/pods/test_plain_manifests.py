"""The plain manifests (`manifests/tickwork.yaml`) applied as their header says, on a
real node (issue 46, item 5). They are the chart rendered without cluster lookups,
as `helm template` and Argo CD render it, so they cannot know the API server's
addresses: the workers' egress policy must still be no wider than the chart's own.
Tickwork runs a job from them; the operator keeps the policy for the API server's
addresses from the `kubernetes` EndpointSlice; a worker reaches the API server and
Redis, and neither another Pod nor the node's other ports.

Only what this machine needs is changed in what is applied: the images (there is no
registry here: the ones built for the tests, never pulled) and the port of the local
node's DNS Pods (1053 beside 53), as for every release in these tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.pods.support import apply_jobs, connect, prober, seconds_from_now, wait_outcomes
from tickwork_dev.devcluster import addons
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.hostnet import NODE_ADDRESS
from tickwork_dev.devcluster.release import ClusterImages, Release

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "tickwork.yaml"
NAMESPACE = "tickwork"  # the manifests' own
JOBS = "tickwork-plain-jobs"
pytestmark = pytest.mark.timeout(600)


def adapted(images: ClusterImages) -> list[dict[str, Any]]:
    """The manifests' objects, with this cluster's images and DNS port."""
    assert images.redis is not None
    objects = [o for o in yaml.safe_load_all(MANIFESTS.read_text()) if o]
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            ours = container["image"].startswith("ghcr.io/tickwork/")
            container["image"] = images.tickwork if ours else images.redis
            container["imagePullPolicy"] = "Never"
        if obj["kind"] == "NetworkPolicy" and obj["metadata"]["name"] == "tickwork-worker-egress":
            [dns] = [
                rule
                for rule in obj["spec"]["egress"]
                if any(p["port"] == 53 for p in rule.get("ports", []))
            ]
            dns["ports"] += [
                {"port": addons.COREDNS_POD_PORT, "protocol": proto} for proto in ("UDP", "TCP")
            ]
    return objects


@pytest.fixture(scope="module")
def plain(pods_cluster: Cluster, test_images: ClusterImages) -> Iterator[Release]:
    """Tickwork from the plain manifests; a Release only to find its Pods (no helm)."""
    cluster = pods_cluster
    objects = adapted(test_images)
    namespace, rest = objects[0], objects[1:]
    assert namespace["kind"] == "Namespace"
    # Applied, not created: an earlier release of these tests may have left the
    # namespace (and Redis's claim: a PVC outlives its StatefulSet).
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "tickwork-redis", "namespace": NAMESPACE},
        "stringData": {"redis-password": "plain-manifests-test"},
    }
    cluster.kubectl("apply", "-f", "-", input_text=_listed([namespace, secret]))
    found = Release(cluster, NAMESPACE)
    found.provide_redis_volume()
    try:
        cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input_text=_listed(rest),
            timeout=300,
        )
        for workload in (
            "deployment/tickwork-operator",
            "deployment/tickwork-worker",
            "statefulset/tickwork-redis",
        ):
            cluster.kubectl(
                "-n", NAMESPACE, "rollout", "status", workload, "--timeout=300s", timeout=330
            )
        yield found
    finally:
        # Everything applied but the CRD (kept, as on uninstall) and the namespace
        # (a later test may install there): gone before the next test starts.
        gone = [o for o in rest if o["kind"] != "CustomResourceDefinition"] + [secret]
        cluster.kubectl(
            "delete", "--ignore-not-found", "-f", "-", input_text=_listed(gone), timeout=300
        )
        cluster.kubectl("delete", "namespace", JOBS, "--ignore-not-found", "--wait=false")


def _listed(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def test_the_plain_manifests_run_a_job_and_keep_the_workers_egress_narrow(
    plain: Release, test_images: ClusterImages
) -> None:
    cluster = plain.cluster
    cluster.kubectl("create", "namespace", JOBS)
    job = {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": "hello"},
        "spec": {"runAt": seconds_from_now(0), "task": {"echo": {"message": "hi"}}},
    }
    apply_jobs(cluster, JOBS, [job])
    wait_outcomes(cluster, JOBS, {"hello"}, "Succeeded", timeout=120)

    # Rendered without lookups, the chart's policy names no API server address; the
    # operator keeps a second one with the addresses the EndpointSlice has.
    api_slice = json.loads(
        cluster.kubectl("-n", "default", "get", "endpointslice", "kubernetes", "-o", "json").stdout
    )
    addresses = sorted(a for e in api_slice["endpoints"] for a in e["addresses"])

    def kept() -> list[str]:
        found = cluster.kubectl(
            "-n",
            NAMESPACE,
            "get",
            "networkpolicy",
            "tickwork-worker-apiserver",
            "-o",
            "json",
            check=False,
        )
        if found.returncode != 0:
            return []
        [rule] = json.loads(found.stdout)["spec"]["egress"]
        return sorted(peer["ipBlock"]["cidr"].split("/")[0] for peer in rule["to"])

    wait_for(lambda: kept() == addresses, timeout=60, what="the operator's API server policy")
    # A bystander serving on the API server's port, DNS's and another: the old
    # rendering let workers reach any address on the first two.
    ports = sorted({int(p["port"]) for p in api_slice["ports"]} | {53, 8080})
    serve = " & ".join(f"python3 -m http.server {port} >/dev/null 2>&1" for port in ports)
    bystander = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bystander", "namespace": JOBS},
        "spec": {
            "containers": [
                {
                    "name": "serve",
                    "image": test_images.tickwork,
                    "command": ["sh", "-c", f"{serve} & wait"],
                    "imagePullPolicy": "Never",
                    "securityContext": {"runAsUser": 0},  # port 53
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(bystander))
    cluster.kubectl(
        "-n", JOBS, "wait", "--for=condition=Ready", "pod/bystander", "--timeout=60s", timeout=90
    )
    address = json.loads(
        cluster.kubectl("-n", JOBS, "get", "pod", "bystander", "-o", "json").stdout
    )["status"]["podIP"]
    outsider = prober(cluster, JOBS, test_images.tickwork)  # no egress policy
    for port in ports:
        wait_for(
            lambda port=port: connect(cluster, JOBS, outsider, address, port) == "open",
            timeout=30,
            what=f"the bystander serving on {port}",
        )
    worker = plain.staying_pod("worker")
    api = "kubernetes.default.svc.cluster.local"
    wait_for(
        lambda: connect(cluster, NAMESPACE, worker, api, 443) == "open",
        timeout=30,
        what="a worker reaching the API server by name",
    )
    redis = f"tickwork-redis.{NAMESPACE}.svc.cluster.local"
    assert connect(cluster, NAMESPACE, worker, redis, 6379) == "open"
    for _ in range(3):  # ... but not another Pod on any of those ports, nor the kubelet
        for port in ports:
            assert connect(cluster, NAMESPACE, worker, address, port).startswith("closed"), port
        assert connect(cluster, NAMESPACE, worker, NODE_ADDRESS, 10250).startswith("closed")
