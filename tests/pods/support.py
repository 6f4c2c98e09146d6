"""Helpers of the tests in real Pods: ScheduledJobs through kubectl."""

from __future__ import annotations

import json
import time
from typing import Any

from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.release import ClusterImages, merge

# -- ScheduledJobs ----------------------------------------------------------------------


def one_shot(name: str, url: str, *, run_at: str, timeout: int = 60) -> dict[str, Any]:
    """A one-shot ScheduledJob that calls ``url`` once at ``run_at``."""
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": name},
        "spec": {
            "runAt": run_at,
            "timeoutSeconds": timeout,
            "retry": {"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 5},
            "task": {"http": {"url": url, "method": "POST"}},
        },
    }


def right_now(name: str, task: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A one-shot ScheduledJob ``name`` due now that runs ``task`` in one attempt
    (``spec``: other fields of its spec)."""
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": name},
        "spec": {"runAt": seconds_from_now(0), "retry": {"maxAttempts": 1}, **spec, "task": task},
    }


def one_of_each(images: ClusterImages, **worker: Any) -> dict[str, Any]:
    """Release values: the test images, one operator and one worker (``worker``: more
    of its values), no autoscaling, and the CRDs left to the test (a CRD outlives the
    release that installed it: applied apart, as GitOps installs often do)."""
    return merge(
        images.values(),
        {
            "crds": {"install": False},
            "operator": {"replicas": 1},
            "autoscaling": {"enabled": False},
            "worker": {"replicas": 1, **worker},
        },
    )


def apply_jobs(cluster: Cluster, namespace: str, jobs: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs})
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=body, timeout=300)


def job_list(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    result = cluster.kubectl("get", "scheduledjobs", "-n", namespace, "-o", "json", timeout=120)
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    return items


def wait_outcomes(
    cluster: Cluster, namespace: str, names: set[str], outcome: str, *, timeout: float
) -> None:
    """Until the last run of every job named ended with ``outcome`` (polling the API
    server, which is the only way to observe it from outside)."""

    def done() -> bool:
        current = {
            job["metadata"]["name"]: (job.get("status", {}).get("lastRun") or {}).get("outcome")
            for job in job_list(cluster, namespace)
        }
        return all(current.get(name) == outcome for name in names)

    wait_for(done, timeout=timeout, interval=2, what=f"{len(names)} jobs {outcome}")


def wait_ended(
    cluster: Cluster, namespace: str, names: set[str], *, timeout: float
) -> dict[str, dict[str, Any]]:
    """The last run of each job of ``namespace``, once every job named ended its last run
    either way (for a test that says what went wrong before it checks the outcome)."""

    def last_runs() -> dict[str, dict[str, Any]]:
        return {
            job["metadata"]["name"]: (job.get("status") or {}).get("lastRun") or {}
            for job in job_list(cluster, namespace)
        }

    wait_for(
        lambda: all(
            last_runs().get(name, {}).get("outcome") in ("Succeeded", "Failed") for name in names
        ),
        timeout=timeout,
        interval=2,
        what=f"the last runs of {sorted(names)}",
    )
    return last_runs()


def seconds_from_now(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


# -- connections from inside a Pod ------------------------------------------------------

CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("open")
except OSError as exc:
    print("closed", type(exc).__name__)
"""


def prober(cluster: Cluster, namespace: str, image: str) -> str:
    """A Pod with none of Tickwork's labels, in ``namespace``, to connect from."""
    name = f"prober-{namespace}"[:63]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "prober",
                    "image": image,
                    "command": ["sleep", "3600"],
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "securityContext": {"runAsNonRoot": True},
            "terminationGracePeriodSeconds": 0,
        },
    }
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(pod))
    cluster.kubectl(
        "-n", namespace, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=60s", timeout=90
    )
    return name


def connect(cluster: Cluster, namespace: str, pod: str, host: str, port: int) -> str:
    """ "open", or "closed <error>": a TCP connection from ``pod`` to ``host:port``."""
    result = cluster.kubectl(
        "-n", namespace, "exec", pod, "--", "python3", "-c", CONNECT, host, str(port)
    )
    return result.stdout.strip()
