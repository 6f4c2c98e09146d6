"""Container tasks against a real API server: the chart's ValidatingAdmissionPolicy lets
only whoever may create Jobs in a namespace create or change a ScheduledJob with a
container task there (users impersonated), refuses every container task when the
installer turned the kind off, and the workers get Job and Pod access only with it on,
only where the chart's tenancy settings say."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support import apply_as, grant_tenant, tenant_account
from tickwork_dev.devcluster import manifests
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for

CHART = manifests.CHART
POLICY_TEMPLATE = "templates/container-tasks-policy.yaml"
pytestmark = pytest.mark.timeout(300)
REFUSED = "needs the right to create Jobs there"
OFF = "container tasks are turned off in this installation"


def _render(namespace: str, *extra: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [manifests.helm(), "template", "tw", str(CHART), "--namespace", namespace, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [o for o in yaml.safe_load_all(result.stdout) if o]


def _job(name: str, task: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": name},
        "spec": {"schedule": "@daily", "task": task},
    }


CONTAINER = {"container": {"image": "busybox:1.36", "args": ["true"]}}
HTTP = {"http": {"url": "https://example.com/hook"}}


@pytest.fixture
def install_policy(cluster: Cluster, crd: None, namespace: str) -> Iterator[Any]:
    """Apply the chart's policy and binding (bound to ``namespace`` only, as a chart
    with watchNamespaces renders it), with ``extra`` values; removed afterwards."""
    applied: list[str] = []

    def install(*extra: str) -> None:
        objects = _render(
            namespace,
            "--show-only",
            POLICY_TEMPLATE,
            "--set",
            f"watchNamespaces={{{namespace}}}",
            "--set",
            "worker.containerTasks.enabled=true",
            *extra,
        )
        assert [o["kind"] for o in objects] == [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
        text = yaml.safe_dump_all(objects)
        cluster.kubectl("apply", "-f", "-", input_text=text)
        applied[:] = [f"{o['kind'].lower()}/{o['metadata']['name']}" for o in objects]

    yield install
    if applied:
        cluster.kubectl("delete", "--ignore-not-found", *applied)


def _job_creator(cluster: Cluster, namespace: str) -> str:
    """A ServiceAccount that may create ScheduledJobs and Jobs in ``namespace``."""
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "batcher")
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "role",
        "batcher",
        "--verb=create,get,list",
        "--resource=scheduledjobs.tickwork.dev,jobs.batch",
    )
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "rolebinding",
        "batcher",
        "--role=batcher",
        f"--serviceaccount={namespace}:batcher",
    )
    return f"system:serviceaccount:{namespace}:batcher"


def _refused_until(cluster: Cluster, who: str, namespace: str, expect: str) -> None:
    """Wait until the API server enforces the policy just applied (its informer syncs
    within a second or so), probing with a server-side dry run."""

    def refused() -> bool:
        result = cluster.kubectl(
            "--as",
            who,
            "-n",
            namespace,
            "apply",
            "--dry-run=server",
            "-f",
            "-",
            input_text=yaml.safe_dump(_job("probe", CONTAINER)),
            check=False,
        )
        return result.returncode != 0 and expect in result.stderr

    wait_for(refused, timeout=30, interval=0.2, what="the admission policy in force")


def test_only_who_may_create_jobs_may_create_a_container_task(
    cluster: Cluster, namespace: str, install_policy: Any
) -> None:
    tenant = tenant_account(cluster, namespace)  # create scheduledjobs, no jobs
    batcher = _job_creator(cluster, namespace)
    install_policy()
    _refused_until(cluster, tenant, namespace, REFUSED)

    refused = apply_as(cluster, tenant, namespace, _job("export", CONTAINER))
    assert refused.returncode != 0
    assert REFUSED in refused.stderr
    assert f"which {tenant} does not have" in refused.stderr
    # The same tenant's other task kinds are not the policy's business.
    allowed = apply_as(cluster, tenant, namespace, _job("hook", HTTP))
    assert allowed.returncode == 0, allowed.stderr
    # Whoever may create the Job directly may have Tickwork create it.
    created = apply_as(cluster, batcher, namespace, _job("export", CONTAINER))
    assert created.returncode == 0, created.stderr


def test_a_task_cannot_be_changed_into_a_container_by_who_may_not_create_jobs(
    cluster: Cluster, namespace: str, install_policy: Any
) -> None:
    tenant = tenant_account(cluster, namespace)
    grant_tenant(cluster, namespace, "tenant-update", "update,patch")
    install_policy()
    _refused_until(cluster, tenant, namespace, REFUSED)
    assert apply_as(cluster, tenant, namespace, _job("hook", HTTP)).returncode == 0
    changed = apply_as(cluster, tenant, namespace, _job("hook", CONTAINER))
    assert changed.returncode != 0
    assert REFUSED in changed.stderr


def test_with_the_kind_turned_off_every_container_task_is_refused(
    cluster: Cluster, namespace: str, install_policy: Any
) -> None:
    batcher = _job_creator(cluster, namespace)
    install_policy("--set", "worker.containerTasks.enabled=false")
    _refused_until(cluster, batcher, namespace, OFF)
    for who in (batcher, "admin"):  # "admin": the test cluster's administrator
        args = ("--as", who) if who != "admin" else ()
        result = cluster.kubectl(
            *args,
            "-n",
            namespace,
            "apply",
            "-f",
            "-",
            input_text=yaml.safe_dump(_job("export", CONTAINER)),
            check=False,
        )
        assert result.returncode != 0, who
        assert OFF in result.stderr
    allowed = apply_as(cluster, batcher, namespace, _job("hook", HTTP))
    assert allowed.returncode == 0, allowed.stderr


# -- what the chart grants the workers (rendered; the install is test_chart's) ---------


def _worker_rules(*extra: str) -> dict[tuple[str, str], list[list[str]]]:
    """The worker's RBAC rules for Jobs and Pods, by (kind, namespace)."""
    out: dict[tuple[str, str], list[list[str]]] = {}
    for obj in _render("tickwork", *extra):
        if obj["kind"] in ("Role", "ClusterRole") and obj["metadata"]["name"].endswith("-worker"):
            rules = [
                sorted(rule["verbs"])
                for rule in obj["rules"]
                if set(rule["resources"]) & {"jobs", "pods", "pods/log"}
            ]
            out[obj["kind"], obj["metadata"].get("namespace", "")] = rules
    return out


def test_the_workers_may_manage_jobs_only_with_container_tasks_on_and_where_jobs_live() -> None:
    granted = [["create", "delete", "get", "list", "watch"], ["get", "list", "watch"], ["get"]]
    on = ("--set", "worker.containerTasks.enabled=true")
    assert _worker_rules(*on) == {("ClusterRole", ""): granted}
    assert _worker_rules() == {("ClusterRole", ""): []}  # off by default
    assert _worker_rules("--set", "worker.containerTasks.enabled=false") == {
        ("ClusterRole", ""): []
    }
    scoped = _worker_rules(*on, "--set", "watchNamespaces={team-a,team-b}")
    assert set(scoped) == {("Role", "team-a"), ("Role", "team-b")}
    assert all(rules == granted for rules in scoped.values())


def test_the_workers_are_told_the_kinds_state_and_the_jobs_ttl() -> None:
    def env(*extra: str) -> dict[str, str | None]:
        rendered = _render("tickwork", *extra)
        [deployment] = [
            o
            for o in rendered
            if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-worker")
        ]
        return {
            e["name"]: e.get("value")
            for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        }

    assert env()["TICKWORK_WORKER_CONTAINER_TASKS"] == "false"  # off by default
    turned_on = env(
        "--set",
        "worker.containerTasks.enabled=true",
        "--set",
        "worker.containerTasks.ttlSecondsAfterFinished=60",
    )
    assert turned_on["TICKWORK_WORKER_CONTAINER_TASKS"] == "true"
    assert turned_on["TICKWORK_WORKER_CONTAINER_TTL_SECONDS"] == "60"
