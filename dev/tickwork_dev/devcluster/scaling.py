"""A burst of runs against a release whose workers autoscale, observed second by second.

One scenario serves the autoscaling tests (which assert what happened) and
``benchmarks/autoscaling.py`` (which records how fast): N one-shot jobs fall
due in the same second, each calls the recorder and lasts ``seconds``; the
worker Deployment's replicas, ready replicas and the jobs' last outcomes are sampled
until the backlog has drained and the workers are back at the minimum.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from tickwork_dev.devcluster.recorder import Recorder
from tickwork_dev.devcluster.release import Release

SAMPLE_SECONDS = 2.0


@dataclass
class Sample:
    at: float
    """Seconds since the burst fell due."""
    replicas: int
    ready: int
    succeeded: int
    executing: int


@dataclass
class Burst:
    """What one burst did; times are seconds after the burst fell due."""

    jobs: int
    task_seconds: float
    min_replicas: int
    samples: list[Sample] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)

    def _first(self, predicate: Any) -> float | None:
        return next((s.at for s in self.samples if predicate(s)), None)

    @property
    def first_extra_ready(self) -> float | None:
        return self._first(lambda s: s.ready > self.min_replicas)

    @property
    def peak_replicas(self) -> int:
        return max((s.replicas for s in self.samples), default=0)

    @property
    def drained(self) -> float | None:
        return self._first(lambda s: s.succeeded == self.jobs)

    @property
    def back_to_min(self) -> float | None:
        drained = self.drained
        if drained is None:
            return None
        return self._first(lambda s: s.at >= drained and s.replicas == self.min_replicas)

    @property
    def lost(self) -> list[str]:
        return sorted(name for name in self.outcomes if self.counts.get(name, 0) == 0)

    @property
    def executed_more_than_attempts(self) -> list[str]:
        return sorted(
            name
            for name, count in self.counts.items()
            if count > max(1, self.attempts.get(name, 1))
        )

    def summary(self) -> dict[str, object]:
        return {
            "jobs": self.jobs,
            "task_seconds": self.task_seconds,
            "min_replicas": self.min_replicas,
            "first_extra_worker_ready_s": self.first_extra_ready,
            "peak_replicas": self.peak_replicas,
            "drained_s": self.drained,
            "back_to_min_s": self.back_to_min,
            "lost": len(self.lost),
            "executed_more_than_attempts": len(self.executed_more_than_attempts),
            "samples": [asdict(sample) for sample in self.samples],
        }


def _jobs(release: Release, key: str) -> list[dict[str, Any]]:
    result = release.cluster.kubectl(
        "get",
        "scheduledjobs",
        "-n",
        release.namespace,
        "-l",
        f"tickwork.dev/burst={key}",
        "-o",
        "json",
        timeout=120,
    )
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    return items


def run_burst(
    release: Release,
    recorder: Recorder,
    *,
    jobs: int,
    task_seconds: float,
    min_replicas: int,
    lead_seconds: int = 20,
    timeout: float = 900,
) -> Burst:
    """Create ``jobs`` one-shots due ``lead_seconds`` from now and watch them through."""
    key = secrets.token_hex(3)
    due = time.time() + lead_seconds
    run_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due))
    due = float(int(due))
    items = [
        {
            "apiVersion": "tickwork.dev/v1alpha1",
            "kind": "ScheduledJob",
            "metadata": {"name": f"burst-{key}-{index:04d}", "labels": {"tickwork.dev/burst": key}},
            "spec": {
                "runAt": run_at,
                "timeoutSeconds": int(task_seconds) + 60,
                "task": {
                    "http": {
                        "url": recorder.url(f"burst-{key}-{index:04d}", delay=task_seconds),
                        "method": "POST",
                    }
                },
            },
        }
        for index in range(jobs)
    ]
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    release.cluster.kubectl(
        "apply", "-n", release.namespace, "-f", "-", input_text=body, timeout=300
    )
    burst = Burst(jobs=jobs, task_seconds=task_seconds, min_replicas=min_replicas)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = release.deployment("worker").get("status", {})
        found = _jobs(release, key)
        outcomes = [_outcome(job) for job in found]
        burst.samples.append(
            Sample(
                at=round(time.time() - due, 1),
                replicas=int(status.get("replicas") or 0),
                ready=int(status.get("readyReplicas") or 0),
                succeeded=outcomes.count("Succeeded"),
                executing=recorder.inflight(),
            )
        )
        if burst.drained is not None and burst.back_to_min is not None:
            break
        time.sleep(SAMPLE_SECONDS)
    final = _jobs(release, key)
    burst.outcomes = {job["metadata"]["name"]: _outcome(job) for job in final}
    burst.attempts = {
        job["metadata"]["name"]: int(
            (job.get("status", {}).get("lastRun") or {}).get("attempts") or 1
        )
        for job in final
    }
    burst.counts = {
        name: count for name, count in recorder.counts().items() if name.startswith(f"burst-{key}-")
    }
    return burst


def _outcome(job: dict[str, Any]) -> str:
    """How the job's last run ended ("" before it has)."""
    return str(((job.get("status") or {}).get("lastRun") or {}).get("outcome") or "")
