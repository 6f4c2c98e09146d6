"""The Helm chart, installed for real: ``helm install`` into the cluster under test.

The local node has no registry and no storage provisioner, so a release there
takes the images built here (pulled never) and a pre-bound hostPath volume
for Redis; on any other cluster (kind) only the images change.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tickwork.devcluster import build
from tickwork.devcluster.cluster import Cluster
from tickwork.devcluster.errors import StartError

CHART = build.HACK_DIR.parent / "charts" / "tickwork"
#: The Redis StatefulSet's data volume (volumeClaimTemplates `data`, replica 0).
_REDIS_UID = 999


def helm_binary() -> str:
    return str(build.ensure_built(build.helm_bundle(), log=False) / "helm")


def image_values(repository: str, tag: str) -> dict[str, object]:
    """Values that run the chart on an image the cluster already holds."""
    return {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}}


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
class Release:
    """One release of the chart: ``helm install``/``upgrade``/``uninstall`` and what it made."""

    cluster: Cluster
    namespace: str
    name: str = "tickwork"
    values: dict[str, object] = field(default_factory=dict)

    @property
    def fullname(self) -> str:
        return self.name if "tickwork" in self.name else f"{self.name}-tickwork"

    def helm(self, *args: str, timeout: float = 600) -> str:
        argv = [helm_binary(), f"--kubeconfig={self.cluster.kubeconfig}",
                f"--namespace={self.namespace}", *args]  # fmt: skip
        env = {**os.environ, "HELM_CACHE_HOME": str(build.cache_root() / "helm")}
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                check=False, env=env)  # fmt: skip
        if result.returncode != 0:
            raise StartError(f"helm {' '.join(args[:2])} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def _with_values(self, verb: str, *extra: str, values: dict[str, object]) -> str:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
            yaml.safe_dump(values, handle)
        try:
            return self.helm(verb, self.name, str(CHART), "-f", handle.name, *extra)
        finally:
            Path(handle.name).unlink(missing_ok=True)

    def install(self, *, timeout: str = "5m") -> str:
        """``helm install --wait``: returns once every Deployment and StatefulSet is ready."""
        self.provide_redis_volume()
        return self._with_values("install", "--create-namespace", "--wait",
                                 f"--timeout={timeout}", values=self.values)  # fmt: skip

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

    def pods(self, component: str) -> list[dict[str, object]]:
        selector = (f"app.kubernetes.io/instance={self.name},"
                    f"app.kubernetes.io/component={component}")  # fmt: skip
        result = self.cluster.kubectl("-n", self.namespace, "get", "pods", "-l", selector,
                                      "-o", "json")  # fmt: skip
        items: list[dict[str, object]] = json.loads(result.stdout)["items"]
        return items

    def deployment(self, component: str) -> dict[str, object]:
        result = self.cluster.kubectl("-n", self.namespace, "get", "deployment",
                                      f"{self.fullname}-{component}", "-o", "json")  # fmt: skip
        found: dict[str, object] = json.loads(result.stdout)
        return found

    def leader(self) -> str | None:
        """The operator Pod that holds the Lease (its holderIdentity is the Pod's name)."""
        lease = f"{self.fullname}-operator"
        result = self.cluster.kubectl("-n", self.namespace, "get", "lease", lease, "-o", "json",
                                      check=False)  # fmt: skip
        if result.returncode != 0:
            return None
        holder = json.loads(result.stdout).get("spec", {}).get("holderIdentity")
        return str(holder) if holder else None
