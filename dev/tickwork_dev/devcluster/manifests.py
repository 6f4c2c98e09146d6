"""Plain manifests for ``kubectl apply -f manifests/``, rendered from the Helm chart.

The chart is the one source: ``make manifests`` renders it with
``hack/manifests-values.yaml`` into ``manifests/tickwork.yaml`` (namespace
first), and a test fails when the committed file and the chart disagree.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tickwork_dev.devcluster import build
from tickwork_dev.devcluster.errors import BuildError

ROOT = build.HACK_DIR.parent
CHART = ROOT / "charts" / "tickwork"
VALUES = build.HACK_DIR / "manifests-values.yaml"
OUTPUT = ROOT / "manifests" / "tickwork.yaml"
NAMESPACE = "tickwork"
RELEASE = "tickwork"

_HEADER = f"""\
# Tickwork, as plain manifests: kubectl apply -f manifests/
# Rendered from charts/tickwork with hack/manifests-values.yaml by `make manifests`;
# do not edit by hand (a test fails when this file and the chart disagree).
#
# Before applying, create the Redis password (never committed):
#   kubectl create namespace {NAMESPACE}
#   kubectl -n {NAMESPACE} create secret generic tickwork-redis \\
#     --from-literal=redis-password="$(head -c 24 /dev/urandom | base64)"
---
apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
  labels:
    app.kubernetes.io/part-of: tickwork
"""


def helm() -> str:
    return str(build.ensure_built(build.helm_bundle(), log=False) / "helm")


def render() -> str:
    result = subprocess.run(
        [helm(), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(VALUES)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BuildError(f"helm template failed:\n{result.stderr}")
    return _HEADER + result.stdout


def write() -> Path:
    OUTPUT.write_text(render())
    return OUTPUT
