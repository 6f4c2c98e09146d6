"""The chart's Redis (issue 16, item 3): a server image whose licence suits an
open-source chart, maxmemory from the memory limit, a password that GitOps renders
keep, restarts when the password changes, and an external Redis with an ACL user,
TLS with a CA from a Secret, or Sentinel — rendered with `helm template` and checked
against the schema, and the restart on a real API server with a real `helm upgrade`."""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tickwork_dev.devcluster import manifests
from tickwork_dev.devcluster.cluster import Cluster

CHART = manifests.CHART
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def helm() -> str:
    return manifests.helm()


def helm_run(helm: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *argv], capture_output=True, text=True, timeout=120, check=False)


def objects(helm: str, *values: str) -> dict[tuple[str, str], dict[str, Any]]:
    result = helm_run(helm, "template", "tw", str(CHART), "--namespace", "tickwork", *values)
    assert result.returncode == 0, result.stderr
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def refused(helm: str, *values: str) -> str:
    result = helm_run(helm, "template", "tw", str(CHART), *values)
    assert result.returncode != 0, "the chart rendered values it should refuse"
    return result.stderr


def redis_conf(rendered: dict[tuple[str, str], dict[str, Any]]) -> dict[str, str]:
    text = rendered["ConfigMap", "tw-tickwork-redis"]["data"]["redis.conf"]
    pairs = (line.split(None, 1) for line in text.splitlines() if line and line[0] != "#")
    return dict(pairs)


def container(
    rendered: dict[tuple[str, str], dict[str, Any]], kind: str, name: str
) -> dict[str, Any]:
    [first, *_] = rendered[kind, name]["spec"]["template"]["spec"]["containers"]
    return first


def env(rendered: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(rendered, "Deployment", name)["env"]}


EXTERNAL = [
    "--set",
    "redis.enabled=false",
    "--set",
    "externalRedis.url=redis://r.example:6390/2",
    "--set",
    "externalRedis.existingSecret=my-redis",
]


# -- The bundled server -------------------------------------------------------


def test_the_default_server_is_valkey_and_follows_the_registry_settings(helm: str) -> None:
    image = container(objects(helm), "StatefulSet", "tw-tickwork-redis")["image"]
    assert image == "docker.io/valkey/valkey:8.1-alpine"
    mirrored = objects(helm, "--set", "global.imageRegistry=mirror.example:5000")
    assert (
        container(mirrored, "StatefulSet", "tw-tickwork-redis")["image"]
        == "mirror.example:5000/valkey/valkey:8.1-alpine"
    )
    digest = "sha256:" + "ab" * 32
    pinned = objects(helm, "--set", f"redis.image.digest={digest}")
    assert (
        container(pinned, "StatefulSet", "tw-tickwork-redis")["image"]
        == f"docker.io/valkey/valkey@{digest}"
    )
    # Values written for the old single-field image keep naming the same image.
    old = objects(
        helm,
        "--set",
        "redis.image.repository=docker.io/library/redis",
        "--set",
        "redis.image.tag=7.2.5-alpine",
    )
    assert (
        container(old, "StatefulSet", "tw-tickwork-redis")["image"]
        == "docker.io/library/redis:7.2.5-alpine"
    )


def test_the_server_command_works_with_valkey_or_redis_images(helm: str, tmp_path: Path) -> None:
    """The chart starts whichever server the image has: run its command in a shell
    whose PATH holds only one of the two names (a stand-in that prints its arguments)."""
    redis = container(objects(helm), "StatefulSet", "tw-tickwork-redis")
    command = redis["command"]
    assert command[:2] == ["sh", "-c"]
    for server in ("valkey-server", "redis-server"):
        bin_dir = tmp_path / server
        bin_dir.mkdir()
        stand_in = bin_dir / server
        stand_in.write_text(f'#!/bin/sh\necho "{server} $*"\n')
        stand_in.chmod(0o755)
        result = subprocess.run(
            [*command],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "REDIS_PASSWORD": "pw"},
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{server} /etc/redis/redis.conf --requirepass pw"


def test_maxmemory_is_half_the_memory_limit_unless_set(helm: str) -> None:
    assert redis_conf(objects(helm))["maxmemory"] == str(256 * 1024 * 1024)
    assert redis_conf(objects(helm, "--set", "redis.resources.limits.memory=1.5Gi"))[
        "maxmemory"
    ] == str(768 * 1024 * 1024)
    assert redis_conf(objects(helm, "--set", "redis.resources.limits.memory=1G"))[
        "maxmemory"
    ] == str(500_000_000)
    explicit = objects(helm, "--set", "redis.maxMemory=100mb")
    assert redis_conf(explicit)["maxmemory"] == str(100 * 1024 * 1024)
    assert redis_conf(explicit)["maxmemory-policy"] == "noeviction"


def test_maxmemory_above_half_the_limit_or_without_a_limit_is_refused(helm: str) -> None:
    over = refused(helm, "--set", "redis.maxMemory=300mb")
    assert "more than half of redis.resources.limits.memory" in over
    assert "half of it" in refused(helm, "--set", "redis.resources.limits=null")
    assert "/redis/maxMemory" in refused(helm, "--set", "redis.maxMemory=lots")


def test_a_new_limit_or_fsync_policy_restarts_redis(helm: str) -> None:
    def config_checksum(*values: str) -> str:
        rendered = objects(helm, "--set", "redis.auth.existingSecret=pw", *values)
        annotations = rendered["StatefulSet", "tw-tickwork-redis"]["spec"]["template"]["metadata"][
            "annotations"
        ]
        return str(annotations["checksum/config"])

    base = config_checksum()
    assert config_checksum() == base
    assert config_checksum("--set", "redis.resources.limits.memory=1Gi") != base
    assert config_checksum("--set", "redis.appendfsync=always") != base


# -- Passwords and GitOps -------------------------------------------------------


def _passwords(rendered: dict[tuple[str, str], dict[str, Any]]) -> str:
    return str(rendered["Secret", "tw-tickwork-redis"]["data"]["redis-password"])


def test_a_generated_password_changes_between_renders_which_is_why_gitops_is_refused(
    helm: str,
) -> None:
    """`helm template` (Argo CD, Flux post-renderers) cannot look up the password of an
    earlier install, so each render makes a new one: the chart's documented reason to
    require existingSecret there. With `generate: false` it refuses instead of guessing."""
    assert _passwords(objects(helm)) != _passwords(objects(helm))
    message = refused(helm, "--set", "redis.auth.generate=false")
    assert "redis.auth.generate=false needs redis.auth.existingSecret" in message


def test_with_an_existing_secret_every_render_is_the_same(helm: str) -> None:
    values = [
        "--set",
        "redis.auth.generate=false",
        "--set",
        "redis.auth.existingSecret=pw",
        "--set",
        "redis.auth.passwordKey=secret",
    ]
    first = helm_run(helm, "template", "tw", str(CHART), *values)
    second = helm_run(helm, "template", "tw", str(CHART), *values)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    rendered = objects(helm, *values)
    assert ("Secret", "tw-tickwork-redis") not in rendered
    pod = rendered["StatefulSet", "tw-tickwork-redis"]["spec"]["template"]["spec"]
    refs = [e["valueFrom"]["secretKeyRef"] for e in pod["containers"][0]["env"]]
    assert refs
    assert all(ref == {"name": "pw", "key": "secret"} for ref in refs)
    for name in ("tw-tickwork-operator", "tw-tickwork-worker"):
        volumes = rendered["Deployment", name]["spec"]["template"]["spec"]["volumes"]
        [password] = [v for v in volumes if v["name"] == "redis-password"]
        assert password["secret"]["secretName"] == "pw"
        assert password["secret"]["items"] == [{"key": "secret", "path": "password"}]


def _annotation(cluster: Cluster, namespace: str, kind: str, name: str) -> str:
    path = "jsonpath={.spec.template.metadata.annotations.checksum/redis}"
    result = cluster.kubectl("get", kind, name, "-n", namespace, "-o", path)
    return result.stdout.strip()


def _secret(cluster: Cluster, namespace: str, name: str, password: str) -> None:
    data = base64.b64encode(password.encode()).decode()
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"redis-password": data},
    }
    cluster.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(manifest))


def test_rotating_the_secret_and_upgrading_restarts_redis_and_its_clients(
    helm: str, cluster: Cluster, namespace: str
) -> None:
    """On a real API server: helm looks up the Secret's content, so an upgrade after a
    rotation gives Redis, the operator and the workers a new checksum (new Pods, one
    password), and an upgrade without a rotation changes nothing."""
    release = f"tw{uuid.uuid4().hex[:6]}"
    kube = ["--kubeconfig", str(cluster.kubeconfig), "--namespace", namespace]
    values = [
        "--set",
        "crds.install=false",
        "--set",
        "rbac.aggregateToDefaultRoles=false",
        "--set",
        "redis.auth.existingSecret=rotating",
        "--set",
        "redis.auth.generate=false",
    ]
    _secret(cluster, namespace, "rotating", "first-password")
    installed = helm_run(helm, *kube, "install", release, str(CHART), *values)
    assert installed.returncode == 0, installed.stderr
    try:
        workloads = [
            ("statefulset", f"{release}-tickwork-redis"),
            ("deployment", f"{release}-tickwork-operator"),
            ("deployment", f"{release}-tickwork-worker"),
        ]
        before = [_annotation(cluster, namespace, *w) for w in workloads]
        assert all(before), before
        unchanged = helm_run(helm, *kube, "upgrade", release, str(CHART), *values)
        assert unchanged.returncode == 0, unchanged.stderr
        assert [_annotation(cluster, namespace, *w) for w in workloads] == before
        _secret(cluster, namespace, "rotating", "second-password")
        rotated = helm_run(helm, *kube, "upgrade", release, str(CHART), *values)
        assert rotated.returncode == 0, rotated.stderr
        after = [_annotation(cluster, namespace, *w) for w in workloads]
        assert all(a != b for a, b in zip(after, before, strict=True)), (before, after)
        assert len(set(after)) == 1  # one password: Redis and its clients agree
    finally:
        helm_run(helm, *kube, "uninstall", release)


def test_a_generated_password_survives_upgrades(
    helm: str, cluster: Cluster, namespace: str
) -> None:
    """`helm upgrade` finds the generated password again (lookup), so nothing restarts."""
    release = f"tw{uuid.uuid4().hex[:6]}"
    kube = ["--kubeconfig", str(cluster.kubeconfig), "--namespace", namespace]
    values = ["--set", "crds.install=false", "--set", "rbac.aggregateToDefaultRoles=false"]
    installed = helm_run(helm, *kube, "install", release, str(CHART), *values)
    assert installed.returncode == 0, installed.stderr
    try:
        secret = f"{release}-tickwork-redis"
        read = ["get", "secret", secret, "-n", namespace, "-o", "jsonpath={.data.redis-password}"]
        password = cluster.kubectl(*read).stdout
        checksum = _annotation(cluster, namespace, "statefulset", secret)
        upgraded = helm_run(helm, *kube, "upgrade", release, str(CHART), *values)
        assert upgraded.returncode == 0, upgraded.stderr
        assert cluster.kubectl(*read).stdout == password
        assert _annotation(cluster, namespace, "statefulset", secret) == checksum
    finally:
        helm_run(helm, *kube, "uninstall", release)
        cluster.kubectl(
            "delete", "secret", f"{release}-tickwork-redis", "-n", namespace, "--ignore-not-found"
        )


# -- An external Redis ---------------------------------------------------------


def test_an_external_redis_with_a_user_and_tls_from_a_ca_secret(helm: str) -> None:
    rendered = objects(
        helm,
        *EXTERNAL,
        "--set",
        "externalRedis.username=tickwork",
        "--set",
        "externalRedis.tls.enabled=true",
        "--set",
        "externalRedis.tls.caSecret=corp-ca",
        "--set",
        "externalRedis.tls.caKey=bundle.pem",
    )
    assert ("StatefulSet", "tw-tickwork-redis") not in rendered
    for name in ("tw-tickwork-operator", "tw-tickwork-worker"):
        variables = env(rendered, name)
        assert variables["TICKWORK_REDIS_URL"] == "redis://r.example:6390/2"
        assert variables["TICKWORK_REDIS_USERNAME"] == "tickwork"
        assert variables["TICKWORK_REDIS_TLS"] == "true"
        ca_file = variables["TICKWORK_REDIS_TLS_CA_FILE"]
        assert "TICKWORK_REDIS_TLS_VERIFY" not in variables
        pod = rendered["Deployment", name]["spec"]["template"]["spec"]
        [mount] = [
            m
            for m in container(rendered, "Deployment", name)["volumeMounts"]
            if ca_file.startswith(m["mountPath"] + "/")
        ]
        [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["secretName"] == "corp-ca"
        assert volume["secret"]["items"] == [{"key": "bundle.pem", "path": Path(ca_file).name}]
    # The workers' egress reaches the external port only.
    policy = rendered["NetworkPolicy", "tw-tickwork-worker-egress"]["spec"]["egress"]
    assert any(
        rule.get("ports") == [{"port": 6390, "protocol": "TCP"}] and "to" not in rule
        for rule in policy
    )
    plain = env(objects(helm, *EXTERNAL), "tw-tickwork-worker")
    assert not {"TICKWORK_REDIS_TLS", "TICKWORK_REDIS_USERNAME"} & set(plain)
    rediss = env(
        objects(helm, *EXTERNAL, "--set", "externalRedis.url=rediss://r.example/0"),
        "tw-tickwork-worker",
    )
    assert rediss["TICKWORK_REDIS_TLS"] == "true"
    assert "TICKWORK_REDIS_TLS_CA_FILE" not in rediss  # the image's system CAs


def test_an_external_redis_behind_sentinel(helm: str) -> None:
    scenario = CHART / "ci" / "external-sentinel-values.yaml"
    rendered = objects(helm, "-f", str(scenario))
    variables = env(rendered, "tw-tickwork-worker")
    assert variables["TICKWORK_REDIS_SENTINELS"] == (
        "sentinel-0.sentinel.redis.svc:26379,sentinel-1.sentinel.redis.svc:26379,"
        "sentinel-2.sentinel.redis.svc:26380"
    )
    assert variables["TICKWORK_REDIS_SENTINEL_MASTER"] == "mymaster"
    assert variables["TICKWORK_REDIS_SENTINEL_PASSWORD_FILE"].startswith("/var/run/secrets/")
    triggers = rendered["ScaledObject", "tw-tickwork-worker"]["spec"]["triggers"]
    assert {t["type"] for t in triggers} == {"redis-sentinel"}
    assert all(
        t["metadata"]["sentinelMasterFromEnv"] == "TICKWORK_REDIS_SENTINEL_MASTER"
        and t["metadata"]["usernameFromEnv"] == "TICKWORK_REDIS_USERNAME"
        and t["metadata"]["enableTLS"] == "true"
        for t in triggers
    )
    auth = rendered["TriggerAuthentication", "tw-tickwork-worker"]["spec"]["secretTargetRef"]
    assert {(a["parameter"], a["name"]) for a in auth} == {
        ("password", "my-redis"),
        ("ca", "my-redis-ca"),
        ("sentinelPassword", "my-sentinel"),
    }
    policy = rendered["NetworkPolicy", "tw-tickwork-worker-egress"]["spec"]["egress"]
    ports = [rule["ports"] for rule in policy if "to" not in rule and "ports" in rule]
    assert [{"port": p, "protocol": "TCP"} for p in (6379, 26379, 26380)] in ports
    missing = refused(helm, *EXTERNAL, "--set", "externalRedis.sentinel.masterSet=m")
    assert "externalRedis.sentinel.hosts is required" in missing
    assert "/externalRedis/sentinel/hosts/0" in refused(
        helm,
        *EXTERNAL,
        "--set",
        "externalRedis.sentinel.masterSet=m",
        "--set",
        "externalRedis.sentinel.hosts={no-port}",
    )
