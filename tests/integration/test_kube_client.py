"""Tickwork's own API client against the real API server, authenticated the way Pods
are: a service account's bearer token (client certificates are what the other
tests use)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path

from kubernetes import client as k8s

from tests.support import relayed_api_server, service_account_kubeconfig
from tickwork.kube.client import KubeApiError, KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster


def test_a_service_account_token_authenticates_every_request(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = service_account_kubeconfig(
        cluster, api_client, namespace, "runner", tmp_path / "kubeconfig"
    )
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


def test_a_watch_given_up_on_an_unanswering_api_server_leaves_no_socket_open(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """A watch cancelled while the API server does not answer (a partition, the
    moment a worker gives up on it and lists again) closes its TLS connection at
    once: no socket waits for a shutdown handshake the server never answers, to be
    found unclosed by the garbage collector. One was, per abandoned watch
    (python/cpython#118960); it surfaced as a ResourceWarning in whichever test ran
    next."""
    relay, through_relay = relayed_api_server(cluster, tmp_path / "relayed.kubeconfig")
    configuration = load_configuration(str(through_relay))
    k8s.CoreV1Api(api_client).create_namespaced_config_map(
        namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="watched"))
    )

    async def give_up_a_watch() -> None:
        async with KubeClient(configuration) as kube:
            streaming = asyncio.Event()

            async def follow() -> None:
                params = {"allowWatchBookmarks": "true", "resourceVersion": "0"}
                path = f"/api/v1/namespaces/{namespace}/configmaps"
                async for _ in kube.watch(path, params, idle_timeout=60):
                    streaming.set()

            watching = asyncio.create_task(follow())
            await asyncio.wait_for(streaming.wait(), 30)  # its ADDED came through
            relay.pause()
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
        relay.resume()

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for _ in range(3):
                asyncio.run(give_up_a_watch())
            gc.collect()
    finally:
        relay.close()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
