"""The workers' way to the API server, kept by the operator.

The workers' egress NetworkPolicy admits the cluster DNS, Redis and public
addresses; the API server has a private address that only the cluster knows.
The chart can look it up at install (``helm install``), but not where it only
renders (``helm template``, Argo CD, the plain manifests), and an address looked
up once goes stale when the control plane moves. So the operator keeps a second
NetworkPolicy for the worker Pods whose one rule admits the addresses and ports of
the ``kubernetes`` EndpointSlice, as they are now: NetworkPolicies add up, so the
workers reach exactly those, and nothing else of the cluster on the API server's
ports. It is owned by the chart's own egress policy (the garbage collector removes
it with the release) and checked every minute.

:func:`api_server_policy` decides (a pure function of the slice); :func:`keep_once`
reads, compares and writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.kube.client import KubeApiError, KubeClient

logger = logging.getLogger(__name__)

MANAGER = "tickwork-operator"


@dataclass(frozen=True)
class PolicyTarget:
    """Which policy to keep: its name and namespace, the worker Pods' labels, and the
    chart's egress policy it belongs to."""

    name: str
    namespace: str
    selector: Mapping[str, str]
    owner: str
    endpoint_slice: str = "default/kubernetes"
    """The API server's EndpointSlice (``namespace/name``): the one the chart looks up."""

    @property
    def path(self) -> str:
        return f"/apis/networking.k8s.io/v1/namespaces/{self.namespace}/networkpolicies"

    @property
    def slice_path(self) -> str:
        namespace, name = self.endpoint_slice.split("/", 1)
        return f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}"


def api_server_policy(
    target: PolicyTarget, endpoint_slice: Mapping[str, Any], owner_uid: str
) -> dict[str, Any]:
    """The NetworkPolicy admitting the worker Pods to the addresses and ports of
    ``endpoint_slice``; no rule (so nothing more admitted) if it names none."""
    addresses = sorted(
        {
            address
            for endpoint in endpoint_slice.get("endpoints") or []
            for address in endpoint.get("addresses") or []
        }
    )
    ports = sorted({port["port"] for port in endpoint_slice.get("ports") or [] if port.get("port")})
    rules = []
    if addresses and ports:
        rules.append(
            {
                "to": [
                    {"ipBlock": {"cidr": f"{a}/128" if ":" in a else f"{a}/32"}} for a in addresses
                ],
                "ports": [{"port": port, "protocol": "TCP"} for port in ports],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": target.name,
            "namespace": target.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGER},
            "ownerReferences": [
                {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "name": target.owner,
                    "uid": owner_uid,
                }
            ],
        },
        "spec": {
            "podSelector": {"matchLabels": dict(target.selector)},
            "policyTypes": ["Egress"],
            "egress": rules,
        },
    }


async def keep_once(kube: KubeClient, target: PolicyTarget) -> str | None:
    """Bring the policy in line with the API server's addresses now; what was done
    ("created", "updated") or None. Raises KubeApiError (the owner or the slice
    missing, no rights)."""
    owner = await kube.request("GET", f"{target.path}/{target.owner}")
    endpoint_slice = await kube.request("GET", target.slice_path)
    wanted = api_server_policy(target, endpoint_slice, owner["metadata"]["uid"])
    try:
        held = await kube.request("GET", f"{target.path}/{target.name}")
    except KubeApiError as exc:
        if not exc.not_found:
            raise
        await kube.request("POST", target.path, body=wanted)
        return "created"
    if held.get("spec") == wanted["spec"]:
        return None
    wanted["metadata"]["resourceVersion"] = held["metadata"]["resourceVersion"]
    await kube.request("PUT", f"{target.path}/{target.name}", body=wanted)
    return "updated"


async def keep(
    kube: KubeClient, target: PolicyTarget, stop: asyncio.Event, *, every: float = 60.0
) -> None:
    """:func:`keep_once` at start and every ``every`` seconds until ``stop``; a
    failure is logged and tried again next time (the policy in place stays)."""
    while not stop.is_set():
        try:
            done = await keep_once(kube, target)
        except KubeApiError as exc:
            logger.warning(
                "cannot keep the workers' NetworkPolicy %s/%s for the API server: %s",
                target.namespace,
                target.name,
                exc,
            )
        else:
            if done:
                logger.info(
                    "%s the workers' NetworkPolicy %s/%s for the API server",
                    done,
                    target.namespace,
                    target.name,
                )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(every):
                await stop.wait()
