"""Cluster add-ons the chart relies on, installed into the cluster under test.

* **CoreDNS** (cluster DNS) — the local node only; kind and real clusters have it.
* **monitoring** — Prometheus scraping Tickwork's operator plus prometheus-adapter
  with the rule of docs/operations.md: what the chart's default
  ``autoscaling.mode: hpa`` needs.
* **KEDA** — operator and metrics API server, from KEDA's own ``config/minimal``
  kustomization inside its Go module, for ``autoscaling.mode: keda``.

Manifests live in ``hack/addons/`` with ``${VARIABLES}`` for images and
names. On the local node the images are built here (:mod:`.images`); on any
other cluster the public images of the same versions are used.
"""

from __future__ import annotations

import json
import re
import string
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from tickwork_dev.devcluster import build, images
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.errors import StartError

ADDONS_DIR = build.HACK_DIR / "addons"
OPERATIONS_DOC = build.HACK_DIR.parent / "docs" / "operations.md"
MONITORING_NAMESPACE = "tickwork-monitoring"
KEDA_NAMESPACE = "keda"  # fixed by KEDA's manifests, RBAC subjects included
ROLLOUT_TIMEOUT = "300s"
#: The port the local node's CoreDNS listens on (as non-root: not 53); its Service
#: maps 53 to it. NetworkPolicies see the Pod's port, so egress rules must admit it.
COREDNS_POD_PORT = 1053


@dataclass(frozen=True)
class AddonImages:
    """Image references of every add-on."""

    coredns: str
    prometheus: str
    prometheus_adapter: str
    keda: str
    keda_adapter: str


def public_images() -> AddonImages:
    """The public images of the pinned versions, for clusters that can pull."""
    prometheus = build.prometheus_bundle().versions["prometheus"]
    adapter = build.prometheus_adapter_bundle().versions["prometheus-adapter"]
    keda = build.keda_bundle().versions["keda"].lstrip("v")
    coredns = build.coredns_bundle().versions["coredns"].lstrip("v")
    return AddonImages(
        coredns=f"registry.k8s.io/coredns/coredns:v{coredns}",
        prometheus=f"quay.io/prometheus/prometheus:v{prometheus}",
        prometheus_adapter=f"registry.k8s.io/prometheus-adapter/prometheus-adapter:{adapter}",
        keda=f"ghcr.io/kedacore/keda:{keda}",
        keda_adapter=f"ghcr.io/kedacore/keda-metrics-apiserver:{keda}",
    )


def _go_image(
    bundle: build.Bundle, binary: str, name: str, tag: str, *, inside: str | None = None
) -> images.Image:
    """``binary`` alone in an image, at ``inside`` (where the public image has it)."""
    path = build.ensure_built(bundle) / binary
    inside = inside or f"/usr/local/bin/{binary}"
    spec = images.BinaryImage(name, tag, {inside: path}, (inside,))
    return images.binary_image(spec)


def coredns_image() -> images.Image:
    bundle = build.coredns_bundle()
    return _go_image(bundle, "coredns", "coredns", bundle.versions["coredns"])


def monitoring_images() -> tuple[images.Image, images.Image]:
    prometheus = build.prometheus_bundle()
    adapter = build.prometheus_adapter_bundle()
    return (
        _go_image(prometheus, "prometheus", "prometheus", prometheus.versions["prometheus"]),
        _go_image(
            adapter,
            "prometheus-adapter",
            "prometheus-adapter",
            adapter.versions["prometheus-adapter"],
        ),
    )


def keda_images() -> tuple[images.Image, images.Image]:
    bundle = build.keda_bundle()
    version = bundle.versions["keda"]
    # KEDA's manifests run /keda and /keda-adapter, as its public images have them.
    return (
        _go_image(bundle, "keda", "keda", version, inside="/keda"),
        _go_image(
            bundle, "keda-adapter", "keda-metrics-apiserver", version, inside="/keda-adapter"
        ),
    )


def _render(name: str, **values: str) -> str:
    template = string.Template((ADDONS_DIR / name).read_text())
    try:
        return template.substitute(values)
    except KeyError as exc:
        raise StartError(f"hack/addons/{name} needs ${{{exc.args[0]}}}") from exc


def _apply(cluster: Cluster, manifest: str) -> None:
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input_text=manifest, timeout=120
    )


def _rollout(cluster: Cluster, namespace: str, *deployments: str) -> None:
    for deployment in deployments:
        result = cluster.kubectl(
            "-n",
            namespace,
            "rollout",
            "status",
            f"deployment/{deployment}",
            f"--timeout={ROLLOUT_TIMEOUT}",
            timeout=330,
            check=False,
        )
        if result.returncode != 0:
            raise StartError(
                f"{namespace}/{deployment} did not roll out: {result.stderr.strip()}\n"
                + cluster.diagnose()
            )


def install_coredns(cluster: Cluster, image: str, *, cluster_dns: str, domain: str) -> None:
    _apply(
        cluster,
        _render(
            "coredns.yaml", COREDNS_IMAGE=image, CLUSTER_DNS=cluster_dns, CLUSTER_DOMAIN=domain
        ),
    )
    _rollout(cluster, "kube-system", "coredns")


def documented_adapter_rules() -> dict[str, object]:
    """The prometheus-adapter rule that docs/operations.md gives users, as adapter config."""
    text = OPERATIONS_DOC.read_text()
    for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL):
        loaded = yaml.safe_load(block)
        if isinstance(loaded, dict) and "external" in (loaded.get("rules") or {}):
            # The chart's `rules.external` is the adapter's `externalRules`.
            return {"externalRules": loaded["rules"]["external"]}
    raise StartError("docs/operations.md has no prometheus-adapter `rules.external` block")


def install_monitoring(cluster: Cluster, *, prometheus: str, adapter: str) -> None:
    rules = yaml.safe_dump(documented_adapter_rules(), sort_keys=False)
    indented = "\n".join(f"    {line}" for line in rules.splitlines())
    _apply(
        cluster,
        _render(
            "monitoring.yaml",
            NAMESPACE=MONITORING_NAMESPACE,
            PROMETHEUS_IMAGE=prometheus,
            ADAPTER_IMAGE=adapter,
            ADAPTER_RULES=indented,
        ),
    )
    _rollout(cluster, MONITORING_NAMESPACE, "prometheus", "prometheus-adapter")
    cluster.kubectl(
        "wait",
        "--for=condition=Available",
        "--timeout=120s",
        "apiservice/v1beta1.external.metrics.k8s.io",
        timeout=150,
    )


def served_backlog(
    cluster: Cluster, namespace: str, queue: str = "default"
) -> list[dict[str, object]] | None:
    """``tickwork_queue_backlog`` as the External metrics API serves it to an HPA in
    ``namespace`` (its items; None when the API refuses)."""
    path = (
        f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/"
        f"tickwork_queue_backlog?labelSelector=queue%3D{queue}"
    )
    found = cluster.kubectl("get", "--raw", path, check=False)
    if found.returncode != 0:
        return None
    return list(json.loads(found.stdout).get("items") or [])


def install_keda(cluster: Cluster, *, operator: str, adapter: str) -> None:
    """KEDA from its module's ``config/minimal`` (no admission webhooks), images replaced."""
    version = build.keda_bundle().versions["keda"]
    source = build.module_dir("github.com/kedacore/keda/v2", version) / "config" / "minimal"
    overlay = (ADDONS_DIR / "keda-kustomization.yaml").read_text()
    with tempfile.TemporaryDirectory(prefix="tickwork-keda-") as scratch:
        # kustomize takes only relative resources: point at KEDA's tree by a link.
        (Path(scratch) / "upstream").symlink_to(source)
        (Path(scratch) / "kustomization.yaml").write_text(
            string.Template(overlay).substitute(
                KEDA_IMAGE=operator.rsplit(":", 1)[0],
                KEDA_TAG=operator.rsplit(":", 1)[1],
                KEDA_ADAPTER_IMAGE=adapter.rsplit(":", 1)[0],
                KEDA_ADAPTER_TAG=adapter.rsplit(":", 1)[1],
            )
        )
        rendered = cluster.kubectl("kustomize", scratch, timeout=120).stdout
    _apply(cluster, rendered)
    _rollout(cluster, KEDA_NAMESPACE, "keda-operator", "keda-metrics-apiserver")
    cluster.kubectl(
        "wait",
        "--for=condition=Available",
        "--timeout=180s",
        "apiservice/v1beta1.external.metrics.k8s.io",
        timeout=200,
    )


def uninstall_monitoring(cluster: Cluster) -> None:
    """Remove the monitoring add-on, its APIService first (KEDA registers the same one)."""
    cluster.kubectl(
        "delete",
        "--ignore-not-found",
        "--wait=true",
        "apiservice/v1beta1.external.metrics.k8s.io",
        timeout=120,
    )
    cluster.kubectl(
        "delete",
        "--ignore-not-found",
        "--wait=true",
        "namespace",
        MONITORING_NAMESPACE,
        timeout=300,
    )
