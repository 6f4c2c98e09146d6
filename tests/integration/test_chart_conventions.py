"""The chart's conventions (issue 16, item 2), as the KEDA and cert-manager charts have
them: ServiceAccounts the installer may bring, pod labels and scheduling, extra volumes
and environment, probe timing, `global` values for a parent chart, a bound on every
number, a PodDisruptionBudget only where it can be met, and ScheduledJobs in the
default `view`/`edit`/`admin` roles, the last proven on a real API server with
kube-controller-manager's aggregation."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tickwork_dev.devcluster import manifests
from tickwork_dev.devcluster.cluster import Cluster

CHART = manifests.CHART
CONVENTIONS = CHART / "ci" / "conventions-values.yaml"
SCHEMA = CHART / "values.schema.json"
COMPONENTS = ("operator", "worker")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="session")
def helm() -> str:
    return manifests.helm()


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, check=False)


def _render(helm: str, *extra: str, release: str = "tw") -> list[dict[str, Any]]:
    result = _run(helm, "template", release, str(CHART), "--namespace", "tickwork", *extra)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _pod(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    template: dict[str, Any] = _one(objects, "Deployment", f"tw-tickwork-{component}")["spec"][
        "template"
    ]
    return template


def _bound_accounts(objects: list[dict[str, Any]], role_prefix: str) -> set[tuple[str, str]]:
    """(binding kind, ServiceAccount) of every binding of the component's roles."""
    return {
        (o["kind"], s["name"])
        for o in objects
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and o["roleRef"]["name"].startswith(role_prefix)
        for s in o["subjects"]
    }


# -- ServiceAccounts ----------------------------------------------------------


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize("namespaces", [[], ["team-a", "team-b"]], ids=["cluster", "namespaced"])
def test_roles_bind_the_service_account_the_installer_brings(
    helm: str, component: str, namespaces: list[str]
) -> None:
    where = ["--set", f"watchNamespaces={{{','.join(namespaces)}}}"] if namespaces else []
    prefix = f"tw-tickwork-{component}"

    own = _render(helm, *where)
    assert _one(own, "ServiceAccount", prefix)
    assert _pod(own, component)["spec"]["serviceAccountName"] == prefix
    assert {name for _, name in _bound_accounts(own, prefix)} == {prefix}

    borrowed = _render(
        helm,
        *where,
        "--set",
        f"{component}.serviceAccount.create=false",
        "--set",
        f"{component}.serviceAccount.name=ops-{component}",
    )
    assert [
        o for o in borrowed if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == prefix
    ] == []
    assert _pod(borrowed, component)["spec"]["serviceAccountName"] == f"ops-{component}"
    assert {name for _, name in _bound_accounts(borrowed, prefix)} == {f"ops-{component}"}
    # The same roles as with the chart's own account: least privilege does not change.
    roles = {
        (o["kind"], o["metadata"].get("namespace"), json.dumps(o.get("rules")))
        for o in own
        if o["kind"] in ("Role", "ClusterRole")
    }
    assert roles == {
        (o["kind"], o["metadata"].get("namespace"), json.dumps(o.get("rules")))
        for o in borrowed
        if o["kind"] in ("Role", "ClusterRole")
    }

    renamed = _render(helm, *where, "--set", f"{component}.serviceAccount.name=tickwork-x")
    assert _one(renamed, "ServiceAccount", "tickwork-x")
    assert {name for _, name in _bound_accounts(renamed, prefix)} == {"tickwork-x"}


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_borrowed_service_account_must_be_named(helm: str, component: str) -> None:
    result = _run(
        helm, "template", "tw", str(CHART), "--set", f"{component}.serviceAccount.create=false"
    )
    assert result.returncode != 0
    assert (
        f"{component}.serviceAccount.name is required when "
        f"{component}.serviceAccount.create is false"
    ) in result.stderr


def test_service_account_annotations_add_to_the_shared_ones(helm: str) -> None:
    objects = _render(helm, "-f", str(CONVENTIONS))
    worker = _one(objects, "ServiceAccount", "tw-tickwork-worker")
    assert worker["metadata"]["annotations"] == {
        "iam.example.com/role": "tickwork-worker",
        "shared.example.com/owner": "platform",
    }
    assert worker["automountServiceAccountToken"] is True


# -- Pods ---------------------------------------------------------------------


def test_pod_conventions_reach_the_operators_pods(helm: str) -> None:
    pod = _pod(_render(helm, "-f", str(CONVENTIONS)), "operator")
    labels = pod["metadata"]["labels"]
    assert labels["team"] == "platform"
    assert labels["app.kubernetes.io/component"] == "operator"  # the chart's label wins
    spec = pod["spec"]
    assert spec["priorityClassName"] == "tickwork-operator"  # its own, over the global one
    assert spec["imagePullSecrets"] == [{"name": "global-pull"}, {"name": "chart-pull"}]
    [spread] = spec["topologySpreadConstraints"]
    assert spread["labelSelector"] == {
        "matchLabels": {
            "app.kubernetes.io/name": "tickwork",
            "app.kubernetes.io/instance": "tw",
            "app.kubernetes.io/component": "operator",
        }
    }
    assert "podAntiAffinity" in spec["affinity"]  # the default spread over nodes stays
    [container] = spec["containers"]
    assert container["envFrom"] == [{"configMapRef": {"name": "operator-settings"}}]
    assert container["env"][-1] == {"name": "EXTRA", "value": "1"}
    assert {"name": "ca", "mountPath": "/etc/ssl/corporate", "readOnly": True} in (
        container["volumeMounts"]
    )
    assert {"name": "ca", "configMap": {"name": "corporate-ca"}} in spec["volumes"]
    assert container["startupProbe"] == {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 5,
        "timeoutSeconds": 5,
        "failureThreshold": 120,
    }
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 20,
        "timeoutSeconds": 3,
        "failureThreshold": 5,
        "initialDelaySeconds": 1,
    }
    assert container["readinessProbe"]["successThreshold"] == 2
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    _assert_locked_down(spec)


def test_pod_conventions_reach_the_workers_container_but_not_the_command_runner(
    helm: str,
) -> None:
    pod = _pod(_render(helm, "-f", str(CONVENTIONS)), "worker")
    assert pod["metadata"]["labels"]["team"] == "platform"
    spec = pod["spec"]
    assert spec["priorityClassName"] == "tickwork-global"  # none of its own
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"][0]["key"] == "dedicated"
    assert "nodeAffinity" in spec["affinity"]
    [spread] = spec["topologySpreadConstraints"]
    assert spread["labelSelector"] == {"matchLabels": {"team": "platform"}}  # kept as given
    worker, runner = spec["containers"]
    assert worker["envFrom"] == [{"secretRef": {"name": "task-settings"}}]
    assert {"name": "scratch", "mountPath": "/scratch"} in worker["volumeMounts"]
    assert "envFrom" not in runner
    assert "scratch" not in {m["name"] for m in runner["volumeMounts"]}
    assert worker["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 30,
        "timeoutSeconds": 10,
        "failureThreshold": 2,
    }
    _assert_locked_down(spec)


def _assert_locked_down(spec: dict[str, Any]) -> None:
    assert spec["securityContext"]["runAsNonRoot"] is True
    for container in spec["containers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert "exec" not in container.get(probe, {})


def test_the_defaults_keep_the_probes_and_add_no_scheduling_fields(helm: str) -> None:
    objects = _render(helm)
    for component in COMPONENTS:
        spec = _pod(objects, component)["spec"]
        assert not {
            "priorityClassName",
            "topologySpreadConstraints",
            "imagePullSecrets",
            "nodeSelector",
            "tolerations",
        } & set(spec)
        assert "envFrom" not in spec["containers"][0]
    worker = _pod(objects, "worker")["spec"]["containers"][0]
    assert worker["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 15,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    }


# -- A subchart ---------------------------------------------------------------


def test_the_chart_works_as_a_subchart_with_global_values(helm: str, tmp_path: Path) -> None:
    parent = tmp_path / "platform"
    (parent / "charts").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "tickwork")
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    (parent / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "dependencies": [{"name": "tickwork", "version": version}],
            }
        )
    )
    (parent / "values.yaml").write_text(
        yaml.safe_dump(
            {
                "global": {
                    "imagePullSecrets": [{"name": "platform-pull"}],
                    "priorityClassName": "platform-critical",
                    "imageRegistryOfAnotherChart": "mirror.example.com",
                },
                "tickwork": {"operator": {"replicas": 3}},
            }
        )
    )

    linted = _run(helm, "lint", "--strict", str(parent))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    result = _run(helm, "template", "eng", str(parent), "--namespace", "platform")
    assert result.returncode == 0, result.stderr
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert set(deployments) == {"eng-tickwork-operator", "eng-tickwork-worker"}
    assert deployments["eng-tickwork-operator"]["spec"]["replicas"] == 3
    for deployment in deployments.values():
        spec = deployment["spec"]["template"]["spec"]
        assert spec["imagePullSecrets"] == [{"name": "platform-pull"}]
        assert spec["priorityClassName"] == "platform-critical"

    bad = _run(helm, "template", "eng", str(parent), "--set", "tickwork.operator.httpPort=0")
    assert bad.returncode != 0
    assert "/operator/httpPort" in bad.stderr  # the subchart's schema still applies


# -- Bounds -------------------------------------------------------------------


def _numbers(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every numeric schema under ``schema``, with its values path."""
    found: list[tuple[str, dict[str, Any]]] = []
    types = schema.get("type", [])
    if {"integer", "number"} & set(types if isinstance(types, list) else [types]):
        found.append((path, schema))
    for key, sub in schema.get("properties", {}).items():
        found += _numbers(sub, f"{path}/{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += _numbers(schema[key], f"{path}/*")
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            found += _numbers(sub, path)
    return found


def test_every_number_in_the_values_schema_is_bounded() -> None:
    numbers = _numbers(json.loads(SCHEMA.read_text()))
    assert len(numbers) > 40
    unbounded = [path for path, s in numbers if "minimum" not in s and "exclusiveMinimum" not in s]
    assert unbounded == [], "give these a minimum in values.schema.json"
    capped = ("port", "percent")
    uncapped = [
        path
        for path, s in numbers
        if any(word in path.lower() for word in capped) and "maximum" not in s
    ]
    assert uncapped == [], "ports and percentages need a maximum too"


BAD_VALUES = [
    (["operator.httpPort=0"], "at '/operator/httpPort': minimum: got 0, want 1"),
    (["worker.httpPort=70000"], "at '/worker/httpPort': maximum: got 70,000, want 65,535"),
    (["networkPolicy.workerEgress.dnsPorts={0}"], "/networkPolicy/workerEgress/dnsPorts/0"),
    (["operator.replicas=0"], "at '/operator/replicas': minimum: got 0, want 1"),
    (["worker.replicas=-1"], "at '/worker/replicas': minimum: got -1, want 0"),
    (["worker.concurrency=0"], "at '/worker/concurrency': minimum"),
    (["operator.tickSeconds=0"], "at '/operator/tickSeconds': exclusiveMinimum"),
    (["worker.leaseSeconds=1"], "at '/worker/leaseSeconds': minimum: got 1, want 3"),
    (["autoscaling.minReplicas=0"], "at '/autoscaling/minReplicas': minimum: got 0, want 1"),
    (
        ["autoscaling.behavior.scaleDownPercent=101"],
        "at '/autoscaling/behavior/scaleDownPercent': maximum: got 101, want 100",
    ),
    (["autoscaling.behavior.scaleUpPercent=0"], "/autoscaling/behavior/scaleUpPercent"),
    (
        ["autoscaling.behavior.scaleDownStabilizationSeconds=-1"],
        "/autoscaling/behavior/scaleDownStabilizationSeconds",
    ),
    (
        ["operator.livenessProbe.periodSeconds=0"],
        "at '/operator/livenessProbe/periodSeconds': minimum: got 0, want 1",
    ),
    (["worker.readinessProbe.failureThreshold=0"], "/worker/readinessProbe/failureThreshold"),
    (
        ["worker.livenessProbe.exec=true"],
        "at '/worker/livenessProbe': additional properties 'exec' not allowed",
    ),
    (
        ["operator.podDisruptionBudget.minAvailable=150%"],
        "/operator/podDisruptionBudget/minAvailable': '150%' does not match pattern",
    ),
    (
        ["operator.podDisruptionBudget.minAvailable=-1"],
        "/operator/podDisruptionBudget/minAvailable",
    ),
    (["worker.commandTasks.runAsUser=0"], "at '/worker/commandTasks/runAsUser': minimum"),
    (["worker.commandTasks.isolation=none"], "at '/worker/commandTasks/isolation'"),
    (
        [
            "worker.topologySpreadConstraints[0].maxSkew=0",
            "worker.topologySpreadConstraints[0].topologyKey=zone",
            "worker.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
        ],
        "/worker/topologySpreadConstraints/0/maxSkew",
    ),
    (["operator.serviceAccount.name=Not_A_Name"], "/operator/serviceAccount/name"),
    (["traces.otlpEndpoint=collector:4318"], "at '/traces/otlpEndpoint'"),
    (
        ["traces.otlpEndpoint=http://collector:4318"],
        "traces.collectorPeers: say where the OTLP collector runs",
    ),
    (
        ["autoscaling.minReplicas=5", "autoscaling.maxReplicas=3"],
        "autoscaling.maxReplicas (3) must be at least autoscaling.minReplicas (5)",
    ),
]


@pytest.mark.parametrize(
    ("settings", "message"), BAD_VALUES, ids=[" ".join(s) for s, _ in BAD_VALUES]
)
def test_bad_values_are_refused_with_a_clear_message(
    helm: str, settings: list[str], message: str
) -> None:
    argv = [arg for setting in settings for arg in ("--set", setting)]
    result = _run(helm, "template", "tw", str(CHART), *argv)
    assert result.returncode != 0
    assert message in result.stderr


GOOD_EDGES = [
    ["autoscaling.mode=keda", "autoscaling.minReplicas=0"],  # KEDA scales to zero
    ["autoscaling.enabled=false", "worker.replicas=0"],
    ["operator.podDisruptionBudget.minAvailable=50%"],
    ["operator.httpPort=65535", "worker.httpPort=1"],
    ["autoscaling.behavior.scaleUpPercent=900"],
]


@pytest.mark.parametrize("settings", GOOD_EDGES, ids=[" ".join(s) for s in GOOD_EDGES])
def test_values_at_the_edges_are_accepted(helm: str, settings: list[str]) -> None:
    _render(helm, *[arg for setting in settings for arg in ("--set", setting)])


# -- The operator's PodDisruptionBudget ---------------------------------------


PDB_CASES = [
    (2, "1", True, True),
    (3, "2", True, True),
    (1, "1", True, False),  # one replica: the budget would block every drain
    (2, "2", True, False),
    (2, "3", True, False),
    (3, "0", True, True),
    (2, "50%", True, True),  # one of two
    (2, "100%", True, False),
    (3, "67%", True, False),  # 67% of 3 rounds up to 3
    (3, "66%", True, True),
    (2, "1", False, False),
]


@pytest.mark.parametrize(("replicas", "min_available", "enabled", "rendered"), PDB_CASES)
def test_the_operators_budget_is_rendered_only_when_it_can_be_met(
    helm: str, replicas: int, min_available: str, enabled: bool, rendered: bool
) -> None:
    set_min = "--set-string" if min_available.endswith("%") else "--set"
    budget = "operator.podDisruptionBudget"
    objects = _render(
        helm,
        "--set",
        f"operator.replicas={replicas}",
        set_min,
        f"{budget}.minAvailable={min_available}",
        "--set",
        f"{budget}.enabled={str(enabled).lower()}",
    )
    budgets = _budgets(objects, "operator")
    assert bool(budgets) is rendered
    if budgets:
        assert str(budgets[0]["spec"]["minAvailable"]) == min_available


def _budgets(objects: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if o["kind"] == "PodDisruptionBudget"
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]


# -- The workers' PodDisruptionBudget -----------------------------------------


@pytest.mark.parametrize(
    ("settings", "max_unavailable"),
    [
        ([], 1),  # by default: a drain takes one worker down at a time
        (["--set", "worker.podDisruptionBudget.maxUnavailable=3"], 3),
        (["--set-string", "worker.podDisruptionBudget.maxUnavailable=25%"], "25%"),
        (["--set", "worker.podDisruptionBudget.enabled=false"], None),
    ],
)
def test_the_workers_budget_lets_a_drain_take_them_down_a_few_at_a_time(
    helm: str, settings: list[str], max_unavailable: int | str | None
) -> None:
    objects = _render(helm, *settings)
    budgets = _budgets(objects, "worker")
    if max_unavailable is None:
        assert budgets == []
        return
    [budget] = budgets
    assert budget["spec"]["maxUnavailable"] == max_unavailable
    # It selects the worker pods, and only them.
    labels = _pod(objects, "worker")["metadata"]["labels"]
    selector = budget["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    assert selector["app.kubernetes.io/component"] == "worker"


@pytest.mark.parametrize("value", ["0", "0%", "-1", "150%"])
def test_a_workers_budget_that_could_block_every_drain_is_refused(helm: str, value: str) -> None:
    set_it = "--set-string" if value.endswith("%") else "--set"
    result = _run(
        helm,
        "template",
        "tw",
        str(CHART),
        set_it,
        f"worker.podDisruptionBudget.maxUnavailable={value}",
    )
    assert result.returncode != 0
    assert "/worker/podDisruptionBudget/maxUnavailable" in result.stderr


def test_traces_reach_the_operator_and_the_workers_only_when_an_endpoint_is_set(
    helm: str,
) -> None:
    def endpoints(*extra: str) -> dict[str, str | None]:
        objects = _render(helm, *extra)
        found = {}
        for component in ("operator", "worker"):
            [container, *_] = _pod(objects, component)["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            found[component] = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return found

    assert endpoints() == {"operator": None, "worker": None}  # off by default
    url = "http://otel-collector.observability:4318"
    peers = '[{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}]'
    on = ("--set", f"traces.otlpEndpoint={url}", "--set-json", f"traces.collectorPeers={peers}")
    assert endpoints(*on) == {"operator": url, "worker": url}
    # The workers' egress policy admits the collector, where it runs, on its port.
    [policy] = [
        o
        for o in _render(helm, *on)
        if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "tw-tickwork-worker-egress"
    ]
    [rule] = [r for r in policy["spec"]["egress"] if r.get("to") == json.loads(peers)]
    assert rule["ports"] == [{"port": 4318, "protocol": "TCP"}]


def test_pull_secrets_reach_every_pod_redis_included(helm: str) -> None:
    objects = _render(helm, "-f", str(CONVENTIONS))
    redis = _one(objects, "StatefulSet", "tw-tickwork-redis")["spec"]["template"]["spec"]
    pods = [_pod(objects, component)["spec"] for component in COMPONENTS]
    for spec in [*pods, redis]:
        assert spec["imagePullSecrets"] == [{"name": "global-pull"}, {"name": "chart-pull"}]
    assert (
        "imagePullSecrets"
        not in _one(_render(helm), "StatefulSet", "tw-tickwork-redis")["spec"]["template"]["spec"]
    )


# -- ScheduledJobs in the default user-facing roles ---------------------------


def _aggregated(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o
        for o in objects
        if o["kind"] == "ClusterRole"
        and any(
            k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in o["metadata"]["labels"]
        )
    }


def test_the_default_roles_cover_scheduledjobs_unless_turned_off(helm: str) -> None:
    roles = _aggregated(_render(helm))
    assert set(roles) == {"tw-tickwork-view", "tw-tickwork-edit"}

    def aggregates_to(role: dict[str, Any]) -> set[str]:
        prefix = "rbac.authorization.k8s.io/aggregate-to-"
        return {
            k.removeprefix(prefix)
            for k, v in role["metadata"]["labels"].items()
            if k.startswith(prefix) and v == "true"
        }

    view, edit = roles["tw-tickwork-view"], roles["tw-tickwork-edit"]
    assert aggregates_to(view) == {"view", "edit", "admin"}
    assert aggregates_to(edit) == {"edit", "admin"}
    assert view["rules"] == [
        {
            "apiGroups": ["tickwork.dev"],
            "resources": ["scheduledjobs", "scheduledjobs/status", "calendars"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert edit["rules"] == [
        {
            "apiGroups": ["tickwork.dev"],
            "resources": ["scheduledjobs", "calendars"],
            "verbs": ["create", "update", "patch", "delete", "deletecollection"],
        }
    ]
    assert _aggregated(_render(helm, "--set", "rbac.aggregateToDefaultRoles=false")) == {}
    # Namespaced installs extend the default roles too: users are bound per namespace.
    assert set(_aggregated(_render(helm, "--set", "watchNamespaces={team-a}"))) == set(roles)


def _can_i(cluster: Cluster, who: str, *question: str) -> bool:
    answer = cluster.kubectl("auth", "can-i", f"--as={who}", *question, check=False)
    return answer.stdout.strip() == "yes"


def test_namespace_users_reach_scheduledjobs_through_their_default_roles(
    helm: str, controller_manager: Cluster, crd: None, namespace: str
) -> None:
    """kube-controller-manager's clusterrole-aggregation controller copies the rules
    into `view`, `edit` and `admin`: the users below are bound to those alone."""
    cluster = controller_manager
    release = f"agg-{secrets.token_hex(3)}"
    roles = list(_aggregated(_render(helm, release=release)).values())
    manifest = yaml.safe_dump_all(roles)
    cluster.kubectl("apply", "-f", "-", input_text=manifest)
    try:
        for user, role in (("viewer", "view"), ("editor", "edit"), ("owner", "admin")):
            cluster.kubectl(
                "create",
                "rolebinding",
                f"{user}-{role}",
                f"--clusterrole={role}",
                f"--user={user}",
                "-n",
                namespace,
            )
        jobs = "scheduledjobs.tickwork.dev"
        deadline = time.monotonic() + 60
        while not (
            _can_i(cluster, "viewer", "list", jobs, "-n", namespace)
            and _can_i(cluster, "editor", "create", jobs, "-n", namespace)
        ):
            assert time.monotonic() < deadline, "view/edit never got the ScheduledJob rules"
            time.sleep(0.5)  # the aggregation controller announces nothing to wait on

        view = json.loads(cluster.kubectl("get", "clusterrole", "view", "-o", "json").stdout)
        resources = ["scheduledjobs", "scheduledjobs/status", "calendars"]
        assert {
            "apiGroups": ["tickwork.dev"],
            "resources": resources,
            "verbs": ["get", "list", "watch"],
        } in view["rules"]
        for verb in ("get", "list", "watch"):
            assert _can_i(cluster, "viewer", verb, jobs, "-n", namespace)
        for verb in ("create", "update", "patch", "delete"):
            assert not _can_i(cluster, "viewer", verb, jobs, "-n", namespace)
        for user in ("editor", "owner"):
            for verb in ("get", "list", "create", "update", "patch", "delete", "deletecollection"):
                assert _can_i(cluster, user, verb, jobs, "-n", namespace), (user, verb)
            # The status is Tickwork's to write, and the grant ends at the namespace.
            assert not _can_i(cluster, user, "patch", jobs, "--subresource=status", "-n", namespace)
            assert not _can_i(cluster, user, "list", jobs, "-n", "default")
        # Calendars go with the jobs: a team reads and manages its own.
        calendars = "calendars.tickwork.dev"
        assert _can_i(cluster, "viewer", "list", calendars, "-n", namespace)
        assert not _can_i(cluster, "viewer", "create", calendars, "-n", namespace)
        assert _can_i(cluster, "editor", "create", calendars, "-n", namespace)
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input_text=manifest)
