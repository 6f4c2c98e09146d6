"""The Helm chart and the plain manifests against a real API server: lint, every ci/
scenario validated by server-side dry run, a real install with least-privilege RBAC
proven by impersonation, the HPA, CRDs kept on uninstall, and generated files current."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import create_plain_redis_secret, own_control_plane
from tickwork_dev.devcluster import build, chartdocs, manifests
from tickwork_dev.devcluster.cluster import Cluster

CHART = manifests.CHART
SCENARIOS = sorted((CHART / "ci").glob("*.yaml"))
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="session")
def helm() -> str:
    return manifests.helm()


def run(*argv: str, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), input=input_text, capture_output=True, text=True, timeout=120, check=False
    )


def render(helm: str, namespace: str, *extra: str) -> str:
    result = run(helm, "template", "tw", str(CHART), "--namespace", namespace, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="session")
def third_party_crds(cluster: Cluster) -> None:
    """Prometheus Operator and KEDA CRDs, so that objects of those kinds can be validated."""
    for path in build.third_party_crds():
        cluster.kubectl("apply", "--server-side", "-f", str(path))
    for name in (
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
        "scaledobjects.keda.sh",
        "triggerauthentications.keda.sh",
    ):
        cluster.wait_established(name)


@pytest.mark.parametrize("values", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_helm_lint_passes(helm: str, values: Path) -> None:
    result = run(helm, "lint", "--strict", str(CHART), "-f", str(values))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_values_schema_catches_typos_and_bad_choices(helm: str) -> None:
    typo = run(helm, "template", "tw", str(CHART), "--set", "operator.replica=3")
    assert typo.returncode != 0
    assert "replica" in typo.stderr
    mode = run(helm, "template", "tw", str(CHART), "--set", "autoscaling.mode=magic")
    assert mode.returncode != 0
    assert "/autoscaling/mode" in mode.stderr
    assert "'hpa', 'keda'" in mode.stderr
    external = run(helm, "template", "tw", str(CHART), "--set", "redis.enabled=false")
    assert external.returncode != 0
    assert "externalRedis" in external.stderr


def test_the_worker_lists_and_watches_jobs_only_for_its_job_cache(helm: str) -> None:
    def worker_view(*extra: str) -> tuple[list[str], str]:
        objects = _objects(render(helm, "tickwork", *extra))
        [role] = [
            o
            for o in objects
            if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-worker")
        ]
        [verbs] = [r["verbs"] for r in role["rules"] if r["resources"] == ["scheduledjobs"]]
        [deployment] = [
            o
            for o in objects
            if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-worker")
        ]
        env = {
            e["name"]: e.get("value")
            for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        return verbs, env["TICKWORK_WORKER_JOB_CACHE"]

    assert worker_view() == (["get", "list", "watch"], "true")
    assert worker_view("--set", "worker.jobCache.enabled=false") == (["get"], "false")


#: Where a Secret keeps the Redis password.
_PASSWORD_PATH = "jsonpath={.data.redis-password}"


def _worker_env(helm: str, *extra: str) -> dict[str, str | None]:
    """The worker container's environment as the chart renders it with ``extra``."""
    return _env(helm, "worker", *extra)


def _env(helm: str, component: str, *extra: str) -> dict[str, str | None]:
    """The ``component``'s container environment as the chart renders it with ``extra``."""
    [deployment] = [
        o
        for o in _objects(render(helm, "tickwork", *extra))
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith(f"-{component}")
    ]
    return {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }


def test_a_tenant_gets_half_the_live_slots_unless_the_installer_says(helm: str) -> None:
    def limits(*extra: str) -> tuple[str | None, str | None, str | None]:
        env = _worker_env(helm, *extra)
        return (
            env["TICKWORK_WORKER_SHARE_PER_NAMESPACE"],
            env["TICKWORK_WORKER_MAX_RUNS_PER_NAMESPACE"],
            env["TICKWORK_WORKER_RUNS_PER_MINUTE_PER_NAMESPACE"],
        )

    # A share of the slots that exist, never a number sized for workers that may not.
    assert limits() == ("0.5", "0", "0")
    assert limits(
        "--set",
        "worker.fairShare.sharePerNamespace=0.25",
        "--set",
        "worker.fairShare.maxRunsPerNamespace=7",
        "--set",
        "worker.fairShare.runsPerMinutePerNamespace=120",
    ) == ("0.25", "7", "120")
    refused = subprocess.run(
        [helm, "template", "tickwork", str(CHART), "--set", "worker.fairShare.sharePerNamespace=2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0


def test_status_keeps_what_tasks_bring_back_only_when_the_installer_asks(helm: str) -> None:
    previews = "TICKWORK_WORKER_PREVIEWS"
    assert _worker_env(helm)[previews] == "false"  # `view` reads status: nothing of a task's
    assert _worker_env(helm, "--set", "worker.previews.enabled=true")[previews] == "true"


def test_the_workers_egress_policy_follows_their_egress_rules(helm: str) -> None:
    def egress(*extra: str) -> list[dict[str, Any]] | None:
        found = [
            o
            for o in _objects(render(helm, "tickwork", *extra))
            if o["kind"] == "NetworkPolicy" and "Egress" in o["spec"]["policyTypes"]
        ]
        if not found:
            return None
        [policy] = found
        assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
            "worker"
        )
        rules: list[dict[str, Any]] = policy["spec"]["egress"]
        return rules

    def blocks(rule: dict[str, Any]) -> list[str]:
        return [peer["ipBlock"]["cidr"] for peer in rule.get("to", []) if "ipBlock" in peer]

    dns, redis, public, *rest = egress() or []
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    # The cluster DNS only: port 53 elsewhere is a way out (a tunnel over DNS, say).
    assert dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    # No cluster to look the API server up in: no rule for it here (never its ports at
    # any address); the operator keeps a policy of its own with its addresses.
    assert redis["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "redis"
    assert blocks(public) == ["0.0.0.0/0", "::/0"]
    refused = public["to"][0]["ipBlock"]["except"] + public["to"][1]["ipBlock"]["except"]
    for private in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "127.0.0.0/8",
        "100.64.0.0/10",
        "fc00::/7",
        "fe80::/10",
    ):
        assert private in refused
    assert rest == []

    peer = {"to": [{"podSelector": {"matchLabels": {"app": "recorder"}}}]}
    *_, allowed, more = (
        egress(
            "--set",
            "worker.egress.allow={10.20.0.0/16,*.svc.cluster.local,192.168.7.7}",
            "--set-json",
            'worker.tenants={"a": {"egressAllow": ["fd00::5", "x.example"]}}',
            "--set-json",
            f"networkPolicy.workerEgress.extra=[{json.dumps(peer)}]",
            "--set",
            "networkPolicy.workerEgress.apiServerCIDRs={10.1.2.3/32}",
            "--set",
            "networkPolicy.workerEgress.apiServerPorts={6443}",
        )
        or []
    )
    assert blocks(allowed) == ["10.20.0.0/16", "192.168.7.7/32", "fd00::5/128"]  # no patterns
    assert more == peer
    api = (egress("--set", "networkPolicy.workerEgress.apiServerCIDRs={10.1.2.3/32}") or [])[1]
    assert (blocks(api), [p["port"] for p in api["ports"]]) == (["10.1.2.3/32"], [443, 6443])
    local = {"ipBlock": {"cidr": "169.254.20.10/32"}}
    dns = (
        egress("--set-json", f"networkPolicy.workerEgress.dnsPeers=[{json.dumps(local)}]") or []
    )[0]
    assert dns["to"] == [local]
    refused = run(
        helm,
        "template",
        "tw",
        str(CHART),
        "--set",
        "networkPolicy.workerEgress.keepApiServerAddresses=false",
    )
    assert refused.returncode != 0
    assert "the API server's addresses are not known here" in refused.stderr
    assert egress("--set", "networkPolicy.workerEgress.enabled=false") is None
    assert egress("--set", "networkPolicy.enabled=false") is None


def test_commands_get_a_container_without_tickworks_credentials(helm: str) -> None:
    def pod(*extra: str) -> dict[str, Any]:
        [deployment] = [
            o
            for o in _objects(render(helm, "tickwork", *extra))
            if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-worker")
        ]
        spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
        return spec

    def mounts(container: dict[str, Any]) -> set[str]:
        return {m["mountPath"] for m in container.get("volumeMounts", [])}

    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    password = "/var/run/secrets/tickwork/redis"
    off = pod()
    assert [c["name"] for c in off["containers"]] == ["worker"]
    assert "automountServiceAccountToken" not in off
    for extra in (
        ("--set", "worker.commandTasks.enabled=true"),
        ("--set-json", 'worker.tenants={"a": {"commandTasks": true}}'),
    ):
        on = pod(*extra)
        worker, runner = on["containers"]
        assert (worker["name"], runner["name"]) == ("worker", "commands")
        assert on["automountServiceAccountToken"] is False
        assert {token, password} <= mounts(worker)
        assert not {token, password} & mounts(runner)
        assert runner["command"] == ["tini", "--", "tickwork-command-runner"]
        assert runner["securityContext"]["runAsUser"] == 10002
        assert runner["securityContext"]["readOnlyRootFilesystem"] is True
        env = {e["name"]: e.get("value") for e in worker["env"]}
        assert env["TICKWORK_WORKER_COMMAND_RUNNER"] == "/run/tickwork/commands/runner.sock"
        assert not any(e["name"].startswith("TICKWORK_REDIS") for e in runner["env"])
        runner_env = {e["name"]: e.get("value") for e in runner["env"]}
        assert runner_env["TICKWORK_COMMAND_RUNNER_ISOLATION"] == "required"
        assert runner_env["TICKWORK_COMMAND_RUNNER_WORKER_UID"] == "10001"  # the worker's
    accepting = pod(
        "--set",
        "worker.commandTasks.enabled=true",
        "--set",
        "worker.commandTasks.isolation=bestEffort",
    )
    runner_env = {e["name"]: e.get("value") for e in accepting["containers"][1]["env"]}
    assert runner_env["TICKWORK_COMMAND_RUNNER_ISOLATION"] == "bestEffort"


def test_the_workers_may_run_their_own_image_and_the_operator_keeps_tickworks(
    helm: str,
) -> None:
    def images(*extra: str) -> dict[str, list[str]]:
        return {
            o["metadata"]["name"].rsplit("-", 1)[-1]: [
                c["image"] for c in o["spec"]["template"]["spec"]["containers"]
            ]
            for o in _objects(render(helm, "tickwork", "--set", "image.tag=1.2.3", *extra))
            if o["kind"] == "Deployment"
        }

    assert images() == {
        "operator": ["ghcr.io/tickwork/tickwork:1.2.3"],
        "worker": ["ghcr.io/tickwork/tickwork:1.2.3"],
    }
    own = images(
        "--set",
        "worker.image.repository=example.com/acme/tasks",
        "--set",
        "worker.image.tag=4.5",
        "--set",
        "worker.commandTasks.enabled=true",
    )
    assert own == {
        "operator": ["ghcr.io/tickwork/tickwork:1.2.3"],
        "worker": ["example.com/acme/tasks:4.5", "example.com/acme/tasks:4.5"],
    }


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("values", "operator", "worker"),
    [
        ([], "ghcr.io/tickwork/tickwork:{app}", "ghcr.io/tickwork/tickwork:{app}"),
        (
            [
                "image.registry=registry.example.com",
                "image.repository=acme/tickwork",
                "image.tag=1.2.3",
            ],
            "registry.example.com/acme/tickwork:1.2.3",
            "registry.example.com/acme/tickwork:1.2.3",
        ),
        (
            [f"image.digest={DIGEST}", "image.tag=1.2.3"],
            f"ghcr.io/tickwork/tickwork@{DIGEST}",
            f"ghcr.io/tickwork/tickwork@{DIGEST}",
        ),
        (
            ["global.imageRegistry=mirror.example.com:5000", "image.registry=registry.example.com"],
            "mirror.example.com:5000/tickwork/tickwork:{app}",
            "mirror.example.com:5000/tickwork/tickwork:{app}",
        ),
        # Values written when the repository held the registry name the same image.
        (
            ["image.repository=ghcr.io/tickwork/tickwork", "image.tag=0.0.9"],
            "ghcr.io/tickwork/tickwork:0.0.9",
            "ghcr.io/tickwork/tickwork:0.0.9",
        ),
        (
            ["image.repository=localhost/tickwork", "image.tag=dev"],
            "localhost/tickwork:dev",
            "localhost/tickwork:dev",
        ),
        # No registry: the repository alone, as `kind load docker-image tickwork:dev` names it.
        (
            ["image.registry=", "image.repository=tickwork", "image.tag=dev"],
            "tickwork:dev",
            "tickwork:dev",
        ),
        (
            ["worker.image.repository=acme/tasks", "worker.image.tag=4.5"],
            "ghcr.io/tickwork/tickwork:{app}",
            "ghcr.io/acme/tasks:4.5",
        ),
        (
            [
                "worker.image.registry=docker.io",
                "worker.image.repository=acme/tasks",
                f"worker.image.digest={DIGEST}",
                "worker.image.tag=4.5",
            ],
            "ghcr.io/tickwork/tickwork:{app}",
            f"docker.io/acme/tasks@{DIGEST}",
        ),
        (
            ["global.imageRegistry=mirror.example.com", "worker.image.repository=acme/tasks"],
            "mirror.example.com/tickwork/tickwork:{app}",
            "mirror.example.com/acme/tasks:{app}",
        ),
    ],
)
def test_images_are_named_by_registry_repository_and_tag_or_digest(
    helm: str, values: list[str], operator: str, worker: str
) -> None:
    """The digest wins over the tag, global.imageRegistry over each registry, and an
    empty worker.image is Tickwork's image, all of it."""
    app = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    rendered = render(helm, "tickwork", *[a for v in values for a in ("--set", v)])
    images = {
        o["metadata"]["name"].rsplit("-", 1)[-1]: o["spec"]["template"]["spec"]["containers"][0][
            "image"
        ]
        for o in _objects(rendered)
        if o["kind"] == "Deployment"
    }
    assert images == {"operator": operator.format(app=app), "worker": worker.format(app=app)}


def test_the_values_schema_refuses_a_digest_that_is_not_sha256(helm: str) -> None:
    for key in ("image.digest", "worker.image.digest"):
        result = run(helm, "template", "tw", str(CHART), "--set", f"{key}=latest")
        assert result.returncode != 0
        assert "sha256" in result.stderr


def test_workers_get_secrets_only_when_the_installer_allows_it(helm: str) -> None:
    def secret_rules(*extra: str) -> dict[str, list[list[str]]]:
        """The workers' rules on Secrets, by the Role's (or ClusterRole's) namespace."""
        found: dict[str, list[list[str]]] = {}
        for obj in _objects(render(helm, "tickwork", *extra)):
            if obj["kind"] in ("Role", "ClusterRole") and obj["metadata"]["name"].endswith(
                ("-worker", "-worker-secrets")
            ):
                where = obj["metadata"].get("namespace", "*")
                found[where] = [r["verbs"] for r in obj["rules"] if "secrets" in r["resources"]]
        return found

    assert secret_rules() == {"*": []}
    assert secret_rules(
        "--set", "worker.secrets.enabled=true", "--set", "watchNamespaces={team-a,team-b}"
    ) == {"team-a": [["get"]], "team-b": [["get"]]}
    # Every namespace watched: Secrets only where the installer names them, never all.
    assert secret_rules(
        "--set", "worker.secrets.enabled=true", "--set", "worker.secrets.namespaces={team-a}"
    ) == {"*": [], "team-a": [["get"]]}
    refused = subprocess.run(
        [helm, "template", "tickwork", str(CHART), "--set", "worker.secrets.enabled=true"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0
    assert "would let the workers read every Secret of the cluster" in refused.stderr


def test_the_operator_may_claim_only_the_namespaces_it_schedules(helm: str) -> None:
    def lease_rules(*extra: str) -> dict[str, list[tuple[list[str], list[str] | None]]]:
        """The operator's rules on Leases outside its leader Role, by namespace."""
        found: dict[str, list[tuple[list[str], list[str] | None]]] = {}
        for obj in _objects(render(helm, "tickwork", *extra)):
            if obj["kind"] in ("Role", "ClusterRole") and obj["metadata"]["name"].endswith(
                "-operator"
            ):
                where = obj["metadata"].get("namespace", "*")
                found[where] = [
                    (r["verbs"], r.get("resourceNames"))
                    for r in obj["rules"]
                    if "leases" in r["resources"]
                ]
        return found

    claim = [(["create"], None), (["get", "update"], ["tickwork-scheduler"])]
    assert lease_rules() == {"*": claim}
    assert lease_rules("--set", "watchNamespaces={team-a,team-b}") == {
        "team-a": claim,
        "team-b": claim,
    }
    assert lease_rules("--set", "namespaceClaims=false") == {"*": []}


def test_the_schedule_in_status_is_the_installers_choice(helm: str) -> None:
    def operator_env(*extra: str) -> dict[str, str | None]:
        return _env(helm, "operator", *extra)

    assert operator_env()["TICKWORK_OPERATOR_SCHEDULE_IN_STATUS"] == "false"
    on = operator_env("--set", "operator.scheduleInStatus=true")
    assert on["TICKWORK_OPERATOR_SCHEDULE_IN_STATUS"] == "true"
    wrong = run(helm, "template", "tw", str(CHART), "--set-string", "operator.scheduleInStatus=no")
    assert wrong.returncode != 0
    assert "scheduleInStatus" in wrong.stderr


@pytest.mark.parametrize("values", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_is_accepted_by_the_api_server(
    helm: str, cluster: Cluster, namespace: str, third_party_crds: None, values: Path
) -> None:
    scenario = yaml.safe_load(values.read_text()) or {}
    for extra in scenario.get("watchNamespaces", []):
        exists = cluster.kubectl("get", "namespace", extra, check=False).returncode == 0
        if not exists:
            cluster.kubectl("create", "namespace", extra)
    rendered = render(helm, namespace, "-f", str(values))
    applied = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input_text=rendered, check=False
    )
    assert applied.returncode == 0, applied.stderr
    kinds = {doc["kind"] for doc in yaml.safe_load_all(rendered) if doc}
    assert len(applied.stdout.splitlines()) == sum(1 for d in yaml.safe_load_all(rendered) if d)
    if scenario.get("autoscaling", {}).get("mode") == "keda":
        assert {"ScaledObject", "TriggerAuthentication"} <= kinds
        assert "HorizontalPodAutoscaler" not in kinds
    if scenario.get("watchNamespaces"):
        # Tickwork's own grants are per namespace; cluster-wide are only the rules it
        # adds to the default user roles (rbac.aggregateToDefaultRoles).
        assert "ClusterRoleBinding" not in kinds
        cluster_roles = {
            d["metadata"]["name"]
            for d in yaml.safe_load_all(rendered)
            if d and d["kind"] == "ClusterRole"
        }
        assert cluster_roles <= {"tw-tickwork-view", "tw-tickwork-edit"}


@pytest.fixture(scope="module")
def fresh_cluster(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Cluster]:
    """A control plane of its own, so the chart can install its CRD from scratch."""
    workdir = tmp_path_factory.mktemp("chart-controlplane")
    with own_control_plane(
        cluster, workdir, "needs a control plane the test can start from nothing"
    ) as plane:
        yield plane


def _assert_the_password_is_a_file(deployment: dict[str, Any]) -> None:
    """The Redis password is a file from the Secret: not a literal, and not in the
    environment (which what runs as the same user could read through /proc)."""
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert "TICKWORK_REDIS_PASSWORD" not in env
    path = env["TICKWORK_REDIS_PASSWORD_FILE"]["value"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    [mount] = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["secret"]["secretName"] == "tw-tickwork-redis"
    assert volumes[mount["name"]]["secret"]["defaultMode"] == 0o440


def _can_i(cluster: Cluster, who: str, *question: str) -> bool:
    answer = cluster.kubectl("auth", "can-i", f"--as={who}", *question, check=False)
    return answer.stdout.strip() == "yes"


def _objects(rendered: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def test_helm_install_creates_everything_with_least_privilege(
    helm: str, fresh_cluster: Cluster
) -> None:
    cluster = fresh_cluster
    env_kube = ["--kubeconfig", str(cluster.kubeconfig)]
    installed = run(
        helm,
        *env_kube,
        "install",
        "tw",
        str(CHART),
        "--namespace",
        "tickwork",
        "--create-namespace",
        "--set",
        "image.tag=test",
    )
    assert installed.returncode == 0, installed.stderr
    assert "kubectl get scheduledjobs -w" in installed.stdout  # NOTES.txt tells what is next

    manifest = run(helm, *env_kube, "get", "manifest", "tw", "--namespace", "tickwork")
    objects = _objects(manifest.stdout)
    for obj in objects:
        meta = obj["metadata"]
        where = ["-n", meta["namespace"]] if "namespace" in meta else []
        cluster.kubectl("get", f"{obj['kind'].lower()}/{meta['name']}", *where)
    kinds = {obj["kind"] for obj in objects}
    assert {
        "CustomResourceDefinition",
        "Deployment",
        "StatefulSet",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Secret",
        "ClusterRole",
    } <= kinds
    # One budget each for the operator and the workers, taken by the API server.
    assert sorted(
        obj["metadata"]["name"] for obj in objects if obj["kind"] == "PodDisruptionBudget"
    ) == ["tw-tickwork-operator", "tw-tickwork-worker"]

    operator = "system:serviceaccount:tickwork:tw-tickwork-operator"
    worker = "system:serviceaccount:tickwork:tw-tickwork-worker"
    everywhere = "--all-namespaces"
    for question in (
        ("watch", "scheduledjobs.tickwork.dev", everywhere),
        ("patch", "scheduledjobs.tickwork.dev", "--subresource=status", "-n", "any"),
        ("delete", "scheduledjobs.tickwork.dev", "-n", "any"),
        ("create", "events", "-n", "any"),
        ("create", "leases.coordination.k8s.io", "-n", "tickwork"),
        ("update", "leases.coordination.k8s.io/tw-tickwork-operator", "-n", "tickwork"),
        # The claim on each namespace it schedules (cluster-wide: any).
        ("create", "leases.coordination.k8s.io", "-n", "any"),
        ("update", "leases.coordination.k8s.io/tickwork-scheduler", "-n", "any"),
        ("get", "leases.coordination.k8s.io/tickwork-scheduler", "-n", "any"),
        # The workers' NetworkPolicy for the API server, and where it is.
        ("get", "endpointslices.discovery.k8s.io/kubernetes", "-n", "default"),
        ("create", "networkpolicies.networking.k8s.io", "-n", "tickwork"),
        (
            "update",
            "networkpolicies.networking.k8s.io/tw-tickwork-worker-apiserver",
            "-n",
            "tickwork",
        ),
    ):
        assert _can_i(cluster, operator, *question), f"operator may not {question}"
    for question in (
        ("get", "secrets", "-n", "tickwork"),
        ("list", "pods", everywhere),
        ("create", "deployments.apps", "-n", "tickwork"),
        ("update", "leases.coordination.k8s.io/other", "-n", "tickwork"),
        ("update", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"),
        ("get", "leases.coordination.k8s.io/other", "-n", "any"),
        ("list", "leases.coordination.k8s.io", everywhere),
        ("patch", "scheduledjobs.tickwork.dev", "-n", "any"),
        ("get", "configmaps", "-n", "tickwork"),
        ("get", "endpointslices.discovery.k8s.io/other", "-n", "default"),
        ("list", "endpointslices.discovery.k8s.io", "-n", "default"),
        ("update", "networkpolicies.networking.k8s.io/tw-tickwork-redis", "-n", "tickwork"),
        ("create", "networkpolicies.networking.k8s.io", "-n", "any"),
    ):
        assert not _can_i(cluster, operator, *question), f"operator may {question}"
    # Workers read jobs (list + watch for their job cache); they never change a spec.
    for question in (
        ("get", "scheduledjobs.tickwork.dev", "-n", "any"),
        ("list", "scheduledjobs.tickwork.dev", everywhere),
        ("watch", "scheduledjobs.tickwork.dev", everywhere),
        ("patch", "scheduledjobs.tickwork.dev", "--subresource=status", "-n", "any"),
        ("create", "events", "-n", "any"),
    ):
        assert _can_i(cluster, worker, *question), f"worker may not {question}"
    for question in (
        ("patch", "scheduledjobs.tickwork.dev", "-n", "any"),
        ("update", "scheduledjobs.tickwork.dev", "-n", "any"),
        ("delete", "scheduledjobs.tickwork.dev", "-n", "any"),
        ("get", "secrets", "-n", "tickwork"),
        ("create", "pods", "-n", "any"),
        ("delete", "pods", "-n", "any"),
        ("patch", "jobs.batch", "-n", "any"),
        # Container tasks are off by default: no Jobs, no Pods, no logs.
        ("create", "jobs.batch", "-n", "any"),
        ("list", "pods", everywhere),
        ("get", "pods", "--subresource=log", "-n", "any"),
        ("create", "pods", "--subresource=exec", "-n", "any"),
        ("get", "leases.coordination.k8s.io", "-n", "tickwork"),
    ):
        assert not _can_i(cluster, worker, *question), f"worker may {question}"

    hpa = json.loads(
        cluster.kubectl("get", "hpa", "tw-tickwork-worker", "-n", "tickwork", "-o", "json").stdout
    )
    [metric] = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"]["name"] == "tickwork_queue_backlog"
    assert hpa["spec"]["scaleTargetRef"]["name"] == "tw-tickwork-worker"
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300

    deployment = json.loads(
        cluster.kubectl(
            "get", "deployment", "tw-tickwork-worker", "-n", "tickwork", "-o", "json"
        ).stdout
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    env = {e["name"]: e for e in container["env"]}
    _assert_the_password_is_a_file(deployment)
    assert env["TICKWORK_WORKER_COMMAND_TASKS"]["value"] == "false"

    def redis_password() -> str:
        return cluster.kubectl(
            "get", "secret", "tw-tickwork-redis", "-n", "tickwork", "-o", _PASSWORD_PATH
        ).stdout

    password = redis_password()
    upgraded = run(
        helm,
        *env_kube,
        "upgrade",
        "tw",
        str(CHART),
        "--namespace",
        "tickwork",
        "--set",
        "image.tag=test2",
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert redis_password() == password

    uninstalled = run(helm, *env_kube, "uninstall", "tw", "--namespace", "tickwork")
    assert uninstalled.returncode == 0, uninstalled.stderr
    cluster.kubectl("get", "crd", "scheduledjobs.tickwork.dev")  # kept
    assert (
        cluster.kubectl(
            "get", "deployment", "tw-tickwork-worker", "-n", "tickwork", check=False
        ).returncode
        != 0
    )

    # The plain manifests install the same things with kubectl alone.
    create_plain_redis_secret(cluster)
    applied = cluster.kubectl("apply", "-f", str(manifests.ROOT / "manifests"))
    assert "deployment.apps/tickwork-operator created" in applied.stdout
    assert "horizontalpodautoscaler.autoscaling/tickwork-worker created" in applied.stdout


def test_plain_manifests_are_rendered_from_the_chart() -> None:
    committed = manifests.OUTPUT.read_text()
    assert committed == manifests.render(), "manifests/tickwork.yaml drifted: run `make manifests`"


def test_chart_readme_documents_every_value(tmp_path: Path) -> None:
    rendered = chartdocs.render()
    table = chartdocs.values_table(rendered)
    assert len(table) > 40
    assert [key for key, description in table.items() if not description] == []
    assert (CHART / "README.md").read_text() == rendered, "run `make chart-docs`"
    # A value without a `# --` comment shows up with no description, so the check bites.
    chart = tmp_path / "tickwork"
    shutil.copytree(CHART, chart)
    with (chart / "values.yaml").open("a") as values:
        values.write("\nforgotten: 1\n")
    assert chartdocs.values_table(chartdocs.render(chart))["forgotten"] == ""


def test_the_chart_ships_the_generated_crd() -> None:
    for name in ("scheduledjobs.tickwork.dev.yaml", "calendars.tickwork.dev.yaml"):
        assert (CHART / "files" / name).read_text() == (
            manifests.ROOT / "manifests" / "crds" / name
        ).read_text()
