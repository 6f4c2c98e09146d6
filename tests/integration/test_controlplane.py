"""The control plane the tests run on is a real one: namespaces, CRDs with a status
subresource, RBAC, kubectl and the controller-manager all behave as in a cluster."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from tickwork_dev.devcluster import build
from tickwork_dev.devcluster.cluster import Cluster

_GROUP = "smoke.tickwork.dev"


def test_version_is_the_pinned_kubernetes_release(cluster: Cluster) -> None:
    if not cluster.is_local:
        pytest.skip("an existing cluster reports its own version")
    pinned = build.controlplane_bundle().versions["kubernetes"]
    version = cluster.version()
    assert version["gitVersion"] == pinned
    assert version["minor"] == pinned.split(".")[1]


def test_namespaces_are_created_listed_and_deleted(api_client: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(api_client)
    name = f"smoke-{secrets.token_hex(3)}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {name, "default", "kube-system"} <= names
    core.delete_namespace(name)
    assert core.read_namespace(name).status.phase == "Terminating"


@pytest.fixture
def widget_crd(api_client: k8s.ApiClient) -> Iterator[str]:
    """A tiny CRD with a status subresource, established before the test runs."""
    ext = k8s.ApiextensionsV1Api(api_client)
    plural = f"widgets{secrets.token_hex(3)}"
    name = f"{plural}.{_GROUP}"
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }
    ext.create_custom_resource_definition(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": _GROUP,
                "scope": "Namespaced",
                "names": {"plural": plural, "singular": plural, "kind": f"W{plural}"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": schema},
                        "subresources": {"status": {}},
                    }
                ],
            },
        }
    )
    stream = k8s_watch.Watch().stream(
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        timeout_seconds=60,
    )
    for event in stream:
        conditions = event["object"].status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            break
    yield plural
    ext.delete_custom_resource_definition(name)


def test_status_subresource_separates_spec_and_status_writes(
    api_client: k8s.ApiClient, namespace: str, widget_crd: str
) -> None:
    custom = k8s.CustomObjectsApi(api_client)
    args = (_GROUP, "v1", namespace, widget_crd)
    custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": f"{_GROUP}/v1",
            "kind": f"W{widget_crd}",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        },
    )

    patched = custom.patch_namespaced_custom_object(
        *args, "w", {"spec": {"size": 2}, "status": {"phase": "Ignored"}}
    )
    assert patched["spec"]["size"] == 2
    assert "status" not in patched  # the main resource ignores status

    patched = custom.patch_namespaced_custom_object_status(
        *args, "w", {"spec": {"size": 3}, "status": {"phase": "Ready"}}
    )
    assert patched["status"]["phase"] == "Ready"
    assert patched["spec"]["size"] == 2  # and /status ignores spec


def test_pypi_kubectl_talks_to_the_control_plane(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("-n", namespace, "create", "configmap", "hello", "--from-literal=a=b")
    result = cluster.kubectl("-n", namespace, "get", "configmaps", "hello", "-o", "json")
    assert json.loads(result.stdout)["data"] == {"a": "b"}
    client_version = json.loads(cluster.kubectl("version", "--client", "-o", "json").stdout)
    assert re.fullmatch(r"v1\.\d+\.\d+", client_version["clientVersion"]["gitVersion"])


def test_rbac_denies_an_unprivileged_service_account(
    cluster: Cluster, api_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="nobody"))
    )
    who = f"--as=system:serviceaccount:{namespace}:nobody"

    denied = cluster.kubectl(who, "-n", namespace, "get", "secrets", check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr
    assert 'cannot list resource "secrets"' in denied.stderr

    can_i = cluster.kubectl(who, "-n", namespace, "auth", "can-i", "list", "secrets", check=False)
    assert can_i.stdout.strip() == "no"
    # The admin, in contrast, may.
    assert (
        cluster.kubectl("-n", namespace, "auth", "can-i", "list", "secrets").stdout.strip() == "yes"
    )

    with k8s.ApiClient(api_client.configuration) as impersonating:
        impersonating.set_default_header(
            "Impersonate-User", f"system:serviceaccount:{namespace}:nobody"
        )
        with pytest.raises(ApiException) as excinfo:
            k8s.CoreV1Api(impersonating).list_namespaced_secret(namespace)
    assert excinfo.value.status == 403


def test_controller_manager_turns_a_deployment_into_a_replicaset(
    controller_manager: Cluster, api_client: k8s.ApiClient, namespace: str
) -> None:
    apps = k8s.AppsV1Api(api_client)
    labels = {"app": "smoke"}
    apps.create_namespaced_deployment(
        namespace,
        k8s.V1Deployment(
            metadata=k8s.V1ObjectMeta(name="smoke"),
            spec=k8s.V1DeploymentSpec(
                replicas=1,
                selector=k8s.V1LabelSelector(match_labels=labels),
                template=k8s.V1PodTemplateSpec(
                    metadata=k8s.V1ObjectMeta(labels=labels),
                    spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox")]),
                ),
            ),
        ),
    )
    stream = k8s_watch.Watch().stream(
        apps.list_namespaced_replica_set, namespace, timeout_seconds=90
    )
    owners: list[str] = []
    for event in stream:
        replica_set = event["object"]
        owners = [ref.name for ref in replica_set.metadata.owner_references or []]
        if owners:
            break
    assert owners == ["smoke"]
