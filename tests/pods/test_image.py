"""Tickwork's image, built here from the Dockerfile on a Debian base: as a Pod with
nothing but a read-only root filesystem set, it runs as its own non-root user,
both entry points start, and the OTLP exporter for traces is there."""

from __future__ import annotations

import json
import secrets

import pytest

from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.release import ClusterImages

pytestmark = pytest.mark.timeout(300)

SCRIPT = """
set -u
echo "uid=$(id -u) gid=$(id -g)"
tickwork-operator --help >/dev/null && echo "operator=ok"
tickwork-worker --help >/dev/null && echo "worker=ok"
if touch /usr/probe 2>/dev/null; then echo "root=writable"; else echo "root=read-only"; fi
if python3 -m pip --version >/dev/null 2>&1; then echo "pip=present"; else echo "pip=absent"; fi
if python3 -c "import tickwork_demo_tasks" 2>/dev/null; then echo "demo=present"
else echo "demo=absent"; fi
python3 -c "from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter" \
  && echo "traces=ready"
"""


@pytest.mark.parametrize("which", ["product", "demo"])
def test_the_image_runs_both_entry_points_as_non_root_on_a_read_only_root(
    pods_cluster: Cluster, test_images: ClusterImages, which: str
) -> None:
    """Tickwork's image holds no demo tasks; the demo image is the same plus them."""
    image = test_images.tickwork if which == "product" else test_images.demo
    assert image is not None
    namespace = f"image-{secrets.token_hex(3)}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "image-check", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            # No runAsUser: the user is the image's own (USER in the Dockerfile).
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "check",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", SCRIPT],
                    "securityContext": {
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }
    pods_cluster.kubectl("create", "namespace", namespace)
    try:
        pods_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(pod))

        def finished() -> bool:
            phase = pods_cluster.kubectl(
                "-n", namespace, "get", "pod", "image-check", "-o", "jsonpath={.status.phase}"
            ).stdout
            return phase in {"Succeeded", "Failed"}

        wait_for(finished, timeout=120, interval=1, what="the image check Pod")
        output = pods_cluster.kubectl("-n", namespace, "logs", "image-check").stdout.split()
        demo = "demo=absent" if which == "product" else "demo=present"
        assert output == [
            "uid=10001",
            "gid=10001",
            "operator=ok",
            "worker=ok",
            "root=read-only",
            "pip=absent",
            demo,
            "traces=ready",  # tickwork[traces]: an OTLP endpoint is all it takes
        ], output
    finally:
        pods_cluster.kubectl("delete", "namespace", namespace, "--wait=false")
