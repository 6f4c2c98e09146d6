"""The Helm chart, installed for real: ``helm install`` into the cluster under test.

The local node has no registry and no storage provisioner, so a release there
takes the images built here (pulled never) and a pre-bound hostPath volume
for Redis; on any other cluster (kind) ``TICKWORK_TEST_IMAGE`` names Tickwork's
image, loaded there beforehand, and everything else comes from public images.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tickwork_dev.devcluster import addons, build, images
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.errors import StartError

CHART = build.HACK_DIR.parent / "charts" / "tickwork"
IMAGE_ENV = "TICKWORK_TEST_IMAGE"
UPGRADE_IMAGE_ENV = "TICKWORK_TEST_UPGRADE_IMAGE"
DEMO_IMAGE_ENV = "TICKWORK_TEST_DEMO_IMAGE"
PREVIOUS_IMAGE_ENV = "TICKWORK_TEST_PREVIOUS_IMAGE"
#: The Redis StatefulSet's data volume (volumeClaimTemplates `data`, replica 0).
_REDIS_UID = 999


def helm_binary() -> str:
    return str(build.ensure_built(build.helm_bundle(), log=False) / "helm")


def image_fields(ref: str) -> dict[str, str]:
    """The chart's image fields naming ``ref`` exactly: no registry, so that the
    repository (``localhost/tickwork``, or ``tickwork`` as kind loads it) is used as
    it is, and the rendered image equals ``ref``."""
    repository, tag = ref.rsplit(":", 1)
    return {"registry": "", "repository": repository, "tag": tag}


def image_values(ref: str) -> dict[str, object]:
    """Values that run the chart on an image the cluster already holds."""
    return {"image": {**image_fields(ref), "pullPolicy": "Never"}}


def redis_image_values(repository: str, tag: str) -> dict[str, object]:
    return {"redis": {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}}}


def merge(*layers: dict[str, object]) -> dict[str, object]:
    """Deep-merge values the way Helm merges several -f files (later wins)."""
    result: dict[str, object] = {}
    for layer in layers:
        for key, value in layer.items():
            current = result.get(key)
            if isinstance(current, dict) and isinstance(value, dict):
                result[key] = merge(current, value)
            else:
                result[key] = value
    return result


@dataclass
class ClusterImages:
    """Image references the cluster under test holds (or can pull)."""

    cluster: Cluster
    tickwork: str
    upgrade: str
    """A different build of the same sources, for `helm upgrade` while runs are in flight."""
    redis: str | None
    """Redis for the chart; None keeps the chart's default (a cluster that can pull)."""
    prometheus: str
    prometheus_adapter: str
    demo: str | None = None
    """Tickwork's demo image (its demo tasks too); None where none was named."""

    def values(self) -> dict[str, object]:
        """Chart values that run this Tickwork image (and Redis image) on this cluster."""
        layers = [image_values(self.tickwork)]
        if self.redis is not None:
            layers.append(redis_image_values(*self.redis.rsplit(":", 1)))
        if self.cluster.node is not None:  # the local node's DNS Pods listen on another port
            dns = [53, addons.COREDNS_POD_PORT]
            layers.append({"networkPolicy": {"workerEgress": {"dnsPorts": dns}}})
        return merge(*layers)

    def demo_values(self) -> dict[str, object]:
        """Chart values whose workers run the demo image with the demo tasks on: a layer
        over :meth:`values`, whose empty ``image.registry`` the workers' image inherits."""
        if self.demo is None:
            raise StartError(
                f"{DEMO_IMAGE_ENV} must name Tickwork's demo image "
                "(docker build --target demo), loaded into the cluster"
            )
        return {"worker": {"image": image_fields(self.demo), "demoTasks": {"enabled": True}}}

    def keda(self) -> tuple[str, str]:
        """KEDA's operator and metrics-server images: built and loaded on first use
        (KEDA is the largest build of all)."""
        node = self.cluster.node
        if node is None:
            public = addons.public_images()
            return public.keda, public.keda_adapter
        operator, adapter = addons.keda_images()
        node.load_image(operator)
        node.load_image(adapter)
        return operator.ref, adapter.ref


def cluster_images(cluster: Cluster) -> ClusterImages:
    """Tickwork's image (a rebuild of it, and its demo image), Redis and the monitoring
    add-on's images: built here and loaded into the local node, or named by the
    environment elsewhere."""
    node = cluster.node
    if node is None:
        image = os.environ.get(IMAGE_ENV)
        if not image:
            raise StartError(f"{IMAGE_ENV} must name Tickwork's image, loaded into the cluster")
        public = addons.public_images()
        return ClusterImages(
            cluster,
            image,
            os.environ.get(UPGRADE_IMAGE_ENV, image),
            None,
            public.prometheus,
            public.prometheus_adapter,
            os.environ.get(DEMO_IMAGE_ENV),
        )
    built = [
        images.tickwork_image().image,
        images.tickwork_image(tag_suffix="upgrade").image,
        images.redis_image(),
        *addons.monitoring_images(),
        images.demo_image(),
    ]
    for built_image in built:
        node.load_image(built_image)
    tickwork, upgrade, redis, prometheus, adapter, demo = (image.ref for image in built)
    return ClusterImages(cluster, tickwork, upgrade, redis, prometheus, adapter, demo)


def previous_release(cluster: Cluster) -> tuple[str, Path]:
    """The image and the chart of the release an upgrade starts from
    (:data:`images.PREVIOUS_RELEASE`): built from its tree and loaded into the local
    node, or, on an existing cluster, the image :data:`PREVIOUS_IMAGE_ENV` names
    (scripts/kind-e2e.sh builds and loads it)."""
    tree = images.previous_release_tree()
    chart = tree / "charts" / "tickwork"
    node = cluster.node
    if node is None:
        image = os.environ.get(PREVIOUS_IMAGE_ENV)
        if not image:
            raise StartError(
                f"{PREVIOUS_IMAGE_ENV} must name the image of Tickwork "
                f"{images.PREVIOUS_RELEASE}, loaded into the cluster"
            )
        return image, chart
    built = images.tickwork_image(root=tree).image
    node.load_image(built)
    return built.ref, chart


@dataclass
class Release:
    """One release of the chart: ``helm install``/``upgrade``/``uninstall`` and what it made."""

    cluster: Cluster
    namespace: str
    name: str = "tickwork"
    values: dict[str, object] = field(default_factory=dict)
    chart: Path = CHART
    """The chart ``install`` and ``upgrade`` use (another release's, for an upgrade)."""

    @property
    def fullname(self) -> str:
        return self.name if "tickwork" in self.name else f"{self.name}-tickwork"

    def helm(self, *args: str, timeout: float = 600) -> str:
        argv = [
            helm_binary(),
            f"--kubeconfig={self.cluster.kubeconfig}",
            f"--namespace={self.namespace}",
            *args,
        ]
        env = {**os.environ, "HELM_CACHE_HOME": str(build.cache_root() / "helm")}
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
        if result.returncode != 0:
            raise StartError(f"helm {' '.join(args[:2])} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def _with_values(self, verb: str, *extra: str, values: dict[str, object]) -> str:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
            yaml.safe_dump(values, handle)
        try:
            return self.helm(verb, self.name, str(self.chart), "-f", handle.name, *extra)
        finally:
            Path(handle.name).unlink(missing_ok=True)

    def install(self, *, timeout: str = "5m") -> str:
        """``helm install --wait``: returns once every Deployment and StatefulSet is ready."""
        self.provide_redis_volume()
        return self._with_values(
            "install", "--create-namespace", "--wait", f"--timeout={timeout}", values=self.values
        )

    def upgrade(self, values: dict[str, object], *, wait: bool = True, timeout: str = "5m") -> str:
        self.values = merge(self.values, values)
        extra = ["--wait", f"--timeout={timeout}"] if wait else []
        return self._with_values("upgrade", *extra, values=self.values)

    def uninstall(self) -> str:
        return self.helm("uninstall", self.name, "--wait", "--timeout=5m")

    def provide_redis_volume(self) -> None:
        """On the local node, a hostPath PersistentVolume pre-bound to Redis's claim.

        kind and real clusters provision it from their default StorageClass.
        """
        plane = self.cluster.plane
        redis = self.values.get("redis", {})
        enabled = isinstance(redis, dict) and redis.get("enabled", True)
        persistent = isinstance(redis, dict) and (redis.get("persistence") or {}).get(
            "enabled", True
        )
        if self.cluster.node is None or plane is None or not (enabled and persistent):
            return
        directory = plane.workdir.parent / "volumes" / f"{self.namespace}-{self.name}-redis"
        directory.mkdir(parents=True, exist_ok=True)
        os.chown(directory, _REDIS_UID, _REDIS_UID)
        claim = f"data-{self.fullname}-redis-0"
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{self.namespace}-{claim}"},
            "spec": {
                "capacity": {"storage": "2Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": str(directory), "type": "Directory"},
                "claimRef": {"namespace": self.namespace, "name": claim},
            },
        }
        self.cluster.kubectl("apply", "-f", "-", input_text=json.dumps(volume))

    # -- what the release made -------------------------------------------------------

    def pods(self, component: str, *, terminating: bool = False) -> list[dict[str, Any]]:
        """The component's Pods; those shutting down only with ``terminating``."""
        selector = f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component={component}"
        result = self.cluster.kubectl(
            "-n", self.namespace, "get", "pods", "-l", selector, "-o", "json"
        )
        items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
        return [pod for pod in items if terminating or "deletionTimestamp" not in pod["metadata"]]

    def staying_pod(self, component: str) -> str:
        """A Ready Pod of the component that a scale-down removes last: it gets the
        highest ``pod-deletion-cost``, so the HPA shrinking the Deployment after an
        earlier test takes the others first (as long as one replica stays)."""
        for pod in self.pods(component):
            statuses = pod["status"].get("containerStatuses", [])
            if not statuses or not all(status["ready"] for status in statuses):
                continue
            name = str(pod["metadata"]["name"])
            self.cluster.kubectl(
                "-n",
                self.namespace,
                "annotate",
                "--overwrite",
                "pod",
                name,
                "controller.kubernetes.io/pod-deletion-cost=1000000",
            )
            if any(p["metadata"]["name"] == name for p in self.pods(component)):
                return name  # still not shutting down once marked
        raise AssertionError(f"no Ready {component} Pod of {self.name}")

    def deployment(self, component: str) -> dict[str, Any]:
        result = self.cluster.kubectl(
            "-n", self.namespace, "get", "deployment", f"{self.fullname}-{component}", "-o", "json"
        )
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    def redis_memory(self) -> dict[str, int]:
        """``used_memory`` and ``used_memory_peak`` (bytes) of the release's Redis, read
        with the CLI inside its Pod (which takes the password from its environment)."""
        pod = self.pods("redis")[0]["metadata"]["name"]
        script = '"$(command -v valkey-cli || command -v redis-cli)" info memory'
        command = ["-n", self.namespace, "exec", pod, "-c", "redis", "--", "sh", "-c", script]
        result = self.cluster.kubectl(*command)
        fields = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
        return {
            "used_memory_bytes": int(fields["used_memory"]),
            "used_memory_peak_bytes": int(fields["used_memory_peak"]),
        }

    def leader(self) -> str | None:
        """The operator Pod that holds the Lease (its holderIdentity is the Pod's name)."""
        lease = f"{self.fullname}-operator"
        result = self.cluster.kubectl(
            "-n", self.namespace, "get", "lease", lease, "-o", "json", check=False
        )
        if result.returncode != 0:
            return None
        holder = json.loads(result.stdout).get("spec", {}).get("holderIdentity")
        return str(holder) if holder else None
