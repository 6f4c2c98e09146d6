"""The operator keeps the workers' NetworkPolicy for the API server from the
``kubernetes`` EndpointSlice, on the real API server: it creates it, leaves it alone
while right, puts it back when someone widens it, and follows the slice when the
control plane moves. (This control plane advertises a loopback address, for which
the API server keeps no endpoints: the test writes such a slice in its own
namespace, and points the operator at it.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client as k8s

from tickwork.kube.client import KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_operator.api_server_policy import PolicyTarget, keep_once

pytestmark = pytest.mark.timeout(60)


def test_the_policy_follows_the_api_servers_endpoint_slice(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str
) -> None:
    networking = k8s.NetworkingV1Api(api_client)
    networking.create_namespaced_network_policy(
        namespace,
        {
            "metadata": {"name": "tw-worker-egress"},
            "spec": {"podSelector": {"matchLabels": {"app": "worker"}}, "policyTypes": ["Egress"]},
        },
    )
    target = PolicyTarget(
        name="tw-worker-apiserver",
        namespace=namespace,
        selector={"app": "worker"},
        owner="tw-worker-egress",
        endpoint_slice=f"{namespace}/kubernetes",
    )
    discovery = k8s.DiscoveryV1Api(api_client)
    _slice(discovery, namespace, ["10.11.0.5", "10.11.0.6"], 6443)

    async def keep() -> str | None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            return await keep_once(kube, target)

    def egress() -> list[dict[str, Any]]:
        policy = networking.read_namespaced_network_policy(target.name, namespace)
        return api_client.sanitize_for_serialization(policy.spec.egress or [])  # type: ignore[no-any-return]

    assert asyncio.run(keep()) == "created"
    [rule] = egress()
    assert rule == {
        "to": [{"ipBlock": {"cidr": "10.11.0.5/32"}}, {"ipBlock": {"cidr": "10.11.0.6/32"}}],
        "ports": [{"port": 6443, "protocol": "TCP"}],
    }
    assert asyncio.run(keep()) is None  # right as it is: not written again

    networking.patch_namespaced_network_policy(
        target.name, namespace, {"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}}
    )
    assert asyncio.run(keep()) == "updated"
    assert egress() == [rule]
    owner = networking.read_namespaced_network_policy(target.name, namespace).metadata
    assert [o.name for o in owner.owner_references] == ["tw-worker-egress"]

    _slice(discovery, namespace, ["10.12.0.9"], 443)  # a new control plane
    assert asyncio.run(keep()) == "updated"
    assert egress() == [
        {"to": [{"ipBlock": {"cidr": "10.12.0.9/32"}}], "ports": [{"port": 443, "protocol": "TCP"}]}
    ]


def _slice(discovery: k8s.DiscoveryV1Api, namespace: str, addresses: list[str], port: int) -> None:
    """Write an EndpointSlice ``kubernetes`` in ``namespace``, as the API server's is."""
    body: dict[str, Any] = {
        "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": addresses}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }
    try:
        held = discovery.read_namespaced_endpoint_slice("kubernetes", namespace)
    except k8s.ApiException:
        discovery.create_namespaced_endpoint_slice(namespace, body)
        return
    body["metadata"]["resourceVersion"] = held.metadata.resource_version
    discovery.replace_namespaced_endpoint_slice("kubernetes", namespace, body)
