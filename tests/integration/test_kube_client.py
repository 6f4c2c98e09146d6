"""Tickwork's own API client against the real API server, authenticated the way Pods
are: a service account's bearer token (client certificates are what the other
tests use)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubernetes import client as k8s

from tests.support import service_account_kubeconfig
from tickwork.kube.client import KubeApiError, KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster


def test_a_service_account_token_authenticates_every_request(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = service_account_kubeconfig(cluster, api_client, namespace, "runner",
                                            tmp_path / "kubeconfig")  # fmt: skip
    configuration = load_configuration(str(kubeconfig))

    async def calls() -> tuple[dict[str, object], KubeApiError]:
        async with KubeClient(configuration) as kube:
            version = await kube.request("GET", "/version")
            try:
                await kube.request("GET", KubeClient.jobs_path("kube-system"))
            except KubeApiError as exc:
                return version, exc
        raise AssertionError("a service account without RBAC read another namespace")

    version, denied = asyncio.run(calls())
    # Anonymous requests are off: /version answers only an authenticated client,
    # and the refusal names the service account, not system:anonymous.
    assert version["gitVersion"]
    assert denied.status == 403  # Forbidden, not 401 Unauthorized
    assert f"system:serviceaccount:{namespace}:runner" in str(denied)
