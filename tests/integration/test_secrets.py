"""Secrets by reference (issue 14, item 2), against the real API server with the RBAC
the chart renders: a job takes header values, its body and command env from Secrets of
its own namespace, and from no other; values never reach status, Events or logs.

The tenant is a ServiceAccount that may only create ScheduledJobs in its namespace
(its requests are made by impersonation); the worker authenticates as the chart's
worker ServiceAccount, with exactly the Roles the chart renders for it.
"""

from __future__ import annotations

import json
import secrets as token
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.support import (
    Jobs,
    QueueProbe,
    ScriptedServer,
    apply_as,
    create_secret,
    enqueue_scheduled,
    finished,
    foreign_secret_task,
    tenant_account,
)
from tests.support import service_account_kubeconfig as account_kubeconfig
from tickwork_dev.devcluster import manifests
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
TOKEN_A = "a-token-" + token.token_hex(8)
TOKEN_B = "b-token-" + token.token_hex(8)
PAYLOAD = '{"report": "nightly", "key": "payload-' + token.token_hex(4) + '"}'


def _chart_worker(
    cluster: Cluster, api_client: k8s.ApiClient, watched: str, tmp_path: Path, *values: str
) -> Path:
    """The worker's Roles as the chart renders them for ``watched`` (release namespace
    ``watched`` too), applied; a kubeconfig of the chart's worker ServiceAccount."""
    rendered = subprocess.run(
        [
            manifests.helm(),
            "template",
            "tw",
            str(manifests.CHART),
            "--namespace",
            watched,
            "--set",
            f"watchNamespaces={{{watched}}}",
            *values,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    rbac = [
        doc
        for doc in yaml.safe_load_all(rendered)
        if doc
        and doc["kind"] in ("Role", "RoleBinding")
        and doc["metadata"]["name"].endswith("-worker")
    ]
    assert rbac, "the chart rendered no Role for the worker"
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}),
    )
    return account_kubeconfig(
        cluster, api_client, watched, "tw-tickwork-worker", tmp_path / "worker.kubeconfig"
    )


def _job(name: str, task: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": name},
        "spec": {"schedule": "@daily", "retry": {"maxAttempts": 1}, "task": task},
    }


def test_a_job_reads_secrets_of_its_own_namespace_and_of_no_other(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    cluster: Cluster,
    api_client: k8s.ApiClient,
    namespace: str,
    other_namespace: str,
    endpoint: ScriptedServer,
    tmp_path: Path,
) -> None:
    create_secret(api_client, namespace, "api", {"token": TOKEN_A, "payload": PAYLOAD})
    create_secret(api_client, other_namespace, "api", {"token": TOKEN_B})
    create_secret(api_client, other_namespace, "db", {"password": TOKEN_B})
    kubeconfig = _chart_worker(
        cluster, api_client, namespace, tmp_path, "--set", "worker.secrets.enabled=true"
    )
    worker = start_worker(KUBECONFIG=str(kubeconfig), TICKWORK_WORKER_NAMESPACES=namespace)
    tenant = tenant_account(cluster, namespace)
    # The tenant cannot read any Secret itself, here or there.
    for where in (namespace, other_namespace):
        answer = cluster.kubectl(
            "auth", "can-i", f"--as={tenant}", "get", "secrets", "-n", where, check=False
        )
        assert answer.stdout.strip() == "no"

    # A reference has no namespace: naming another tenant's is refused at apply.
    sneaky = _job("sneaky", foreign_secret_task(endpoint.url, other_namespace))
    refused = apply_as(cluster, tenant, namespace, sneaky)
    assert refused.returncode != 0
    assert 'unknown field "spec.task.http.headers[0].valueFrom.secretKeyRef.namespace"' in (
        refused.stderr
    )

    # Its own namespace's Secret: the header and the body arrive, and the target echoing
    # the token back does not get it written into status.
    endpoint.body = f"accepted, token {TOKEN_A}".encode()
    own = _job(
        "own",
        {
            "http": {
                "url": endpoint.url,
                "method": "POST",
                "headers": [
                    {
                        "name": "Authorization",
                        "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}},
                    }
                ],
                "bodyFrom": {"secretKeyRef": {"name": "api", "key": "payload"}},
            }
        },
    )
    assert apply_as(cluster, tenant, namespace, own).returncode == 0
    _publish_existing(jobs, probe, "own")
    last = finished(jobs, "own")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Succeeded"
    [request] = endpoint.requests
    assert request["headers"]["Authorization"] == TOKEN_A  # type: ignore[index]
    assert request["body"] == PAYLOAD
    assert last["result"] == "HTTP 200: accepted, token [redacted]"

    # A Secret only the other tenant has: not found here, nothing sent.
    foreign = _job(
        "foreign",
        {
            "http": {
                "url": endpoint.url,
                "headers": [
                    {
                        "name": "X-Key",
                        "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
                    }
                ],
            }
        },
    )
    assert apply_as(cluster, tenant, namespace, foreign).returncode == 0
    _publish_existing(jobs, probe, "foreign")
    last = finished(jobs, "foreign")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert last["error"].startswith(f"Secret {namespace}/db not found")
    assert len(endpoint.requests) == 1

    # No value anywhere it could be read: status, Events, the worker's log.
    for name in ("own", "foreign"):
        seen = json.dumps([jobs.get(name), jobs.events(name)])
        assert TOKEN_A not in seen
        assert TOKEN_B not in seen
        assert PAYLOAD not in seen
    log = worker.log_path.read_text(errors="replace")
    assert TOKEN_A not in log
    assert TOKEN_B not in log


def test_without_the_chart_value_a_secret_reference_fails_and_says_how_to_allow_it(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    cluster: Cluster,
    api_client: k8s.ApiClient,
    namespace: str,
    endpoint: ScriptedServer,
    tmp_path: Path,
) -> None:
    create_secret(api_client, namespace, "api", {"token": TOKEN_A})
    kubeconfig = _chart_worker(cluster, api_client, namespace, tmp_path)  # the default
    start_worker(KUBECONFIG=str(kubeconfig), TICKWORK_WORKER_NAMESPACES=namespace)
    reference = {"secretKeyRef": {"name": "api", "key": "token"}}
    task = {
        "http": {
            "url": endpoint.url,
            "headers": [{"name": "Authorization", "valueFrom": reference}],
        }
    }
    jobs.create("locked", _job("locked", task)["spec"])
    _publish_existing(jobs, probe, "locked")
    last = finished(jobs, "locked")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert "worker.secrets.enabled=true" in last["error"]
    assert endpoint.requests == []


def _publish_existing(jobs: Jobs, probe: QueueProbe, name: str) -> str:
    """Put a run of the existing job ``name`` in the queue, as the operator would."""
    import datetime as dt  # noqa: PLC0415

    job = jobs.get(name)
    uid = job["metadata"]["uid"]
    scheduled = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    return enqueue_scheduled(
        jobs, probe, name, uid, scheduled, generation=job["metadata"]["generation"]
    )
