"""A run recorder Pod: HTTP tasks call it, tests and benchmarks count what it saw.

Executions are counted where they happen (at the task's far end), not from
Tickwork's own status, so a run executed twice or never is seen as such. The
server (``hack/addons/recorder/server.py``) runs on Tickwork's image; it is
read through the API server's Service proxy, which works on any cluster.
"""

from __future__ import annotations

import json
import secrets

from tickwork_dev.devcluster import build
from tickwork_dev.devcluster.cluster import Cluster

SERVER = build.HACK_DIR / "addons" / "recorder" / "server.py"
#: Chart values that let workers call the recorder: a Service address, in a range
#: workers refuse by default (no request forgery), allowed by its host name in the
#: workers' own rules and by a peer in their egress NetworkPolicy (which cannot
#: express host names).
EGRESS_VALUES: dict[str, object] = {
    "worker": {"egress": {"allow": ["recorder.*.svc.cluster.local"]}},
    "networkPolicy": {
        "workerEgress": {
            "extra": [
                {
                    "to": [
                        {
                            "namespaceSelector": {},
                            "podSelector": {"matchLabels": {"app": "recorder"}},
                        }
                    ]
                },
            ]
        }
    },
}


class Recorder:
    """The recorder of one namespace."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def url(self, key: str, *, delay: float = 0) -> str:
        """What an HTTP task calls to be counted under ``key`` and last ``delay`` seconds."""
        query = f"?delay={delay:g}" if delay else ""
        return f"http://recorder.{self.namespace}.svc.cluster.local:8080/hit/{key}{query}"

    def _get(self, path: str) -> str:
        raw = f"/api/v1/namespaces/{self.namespace}/services/recorder:8080/proxy{path}"
        return self.cluster.kubectl("get", "--raw", raw).stdout

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = json.loads(self._get("/counts"))
        return found

    def inflight(self) -> int:
        """Calls being answered right now (tasks that are executing)."""
        return int(self._get("/inflight"))

    def traceparents(self) -> dict[str, str]:
        """The last ``traceparent`` header each key was called with."""
        found: dict[str, str] = json.loads(self._get("/traceparents"))
        return found

    def spans(self, trace: str) -> list[dict[str, str]]:
        """The spans of ``trace`` (32 hex digits) exported to the recorder as a collector:
        service, name, span ID and parent span ID, each in hex."""
        found: list[dict[str, str]] = json.loads(self._get(f"/spans?trace={trace}"))
        return found


def deploy(cluster: Cluster, image: str, *, namespace: str | None = None) -> Recorder:
    """Run the recorder in a namespace of its own and wait until it answers."""
    namespace = namespace or f"recorder-{secrets.token_hex(3)}"
    labels = {"app": "recorder"}
    deployment = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 10001,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "recorder",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python3", "/recorder/server.py"],
                        "ports": [{"containerPort": 8080, "name": "http"}],
                        "readinessProbe": {
                            "httpGet": {"path": "/healthz", "port": "http"},
                            "periodSeconds": 1,
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [{"name": "server", "mountPath": "/recorder"}],
                    }
                ],
                "volumes": [{"name": "server", "configMap": {"name": "recorder"}}],
            },
        },
    }
    meta = {"name": "recorder", "namespace": namespace}
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta,
            "data": {"server.py": SERVER.read_text()},
        },
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": deployment},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": labels, "ports": [{"port": 8080, "targetPort": "http"}]},
        },
    ]
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    cluster.kubectl("apply", "-f", "-", input_text=body)
    cluster.kubectl(
        "-n", namespace, "rollout", "status", "deployment/recorder", "--timeout=120s", timeout=150
    )
    return Recorder(cluster, namespace)
