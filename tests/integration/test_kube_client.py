"""Tickwork's own API client against the real API server, authenticated the way Pods
are: a service account's bearer token (client certificates are what the other
tests use)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from kubernetes import client as k8s

from tickwork.devcluster.cluster import Cluster
from tickwork.kube.client import KubeApiError, KubeClient, load_configuration


def _token_kubeconfig(cluster: Cluster, token: str, path: Path) -> Path:
    admin = json.loads(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "sa"}}],
        "current-context": "c",
    }))  # fmt: skip
    return path


def test_a_service_account_token_authenticates_every_request(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="runner"))
    )
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    token = core.create_namespaced_service_account_token("runner", namespace, request).status.token
    assert base64.urlsafe_b64decode(token.split(".")[1] + "==")  # a JWT, as a Pod's token is
    configuration = load_configuration(str(_token_kubeconfig(cluster, token, tmp_path / "kc")))

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
