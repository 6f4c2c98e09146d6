"""Resilience drills: break a running Tickwork on purpose and count what was lost.

Each drill runs a real control plane, Redis (with AOF), operators and workers
as processes, feeds them one-shot runs of the ``tickwork.record`` task (which
appends each execution's run ID to a file), breaks something, and waits until
every run has ended. A drill reports runs lost (never succeeded), duplicate
executions (recorded more than once), executions beyond the run's attempts (a
run executed more often than its record's attempt count: must be 0) and how long
recovery took.

``python benchmarks/drills.py`` runs them at full scale; the e2e tests run
them small.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tickwork.api import models
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.redis import RedisServer

NAMESPACE = "drill"
_CRDS = Path(__file__).resolve().parents[3] / "manifests" / "crds"


@dataclass
class DrillResult:
    drill: str
    runs: int
    succeeded: int
    lost: int
    executions: int
    duplicates: int
    beyond_attempts: int
    """Executions of a run past its attempts (lastRun.attempts): each redelivery is a
    new attempt, so at-least-once may repeat a run but never within one attempt."""
    recovery_seconds: float | None
    elapsed_seconds: float
    notes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Stage:
    """A control plane, Redis, operators and workers for one drill."""

    workdir: Path
    plane: ControlPlane
    redis: RedisServer
    cluster: Cluster
    api: k8s.CustomObjectsApi
    record_file: Path
    operators: list[TickworkProcess] = field(default_factory=list)
    workers: list[TickworkProcess] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "TICKWORK_REDIS_URL": self.redis.url,
            "TICKWORK_OPERATOR_NAMESPACES": NAMESPACE,
            "TICKWORK_OPERATOR_RECONCILE_SECONDS": "5",
            "TICKWORK_OPERATOR_LOG_FORMAT": "text",
            "TICKWORK_WORKER_LOG_FORMAT": "text",
            "TICKWORK_WORKER_LEASE_SECONDS": "5",
            "TICKWORK_REDIS_REAP_GRACE_SECONDS": "5",  # as the chart does: the lease
            "TICKWORK_WORKER_DEMO_TASKS": "true",  # tickwork.record counts executions
            "TICKWORK_WORKER_CONCURRENCY": "8",
        }

    def start_operator(self, name: str) -> TickworkProcess:
        operator = TickworkProcess(
            command="tickwork-operator",
            env={**self.env(), "TICKWORK_OPERATOR_IDENTITY": name},
            log_path=self.workdir / f"{name}.log",
        ).start()
        operator.wait_ready()
        self.operators.append(operator)
        return operator

    def start_worker(self, name: str) -> TickworkProcess:
        worker = TickworkProcess(
            command="tickwork-worker",
            env={**self.env(), "TICKWORK_WORKER_NAME": name},
            log_path=self.workdir / f"{name}.log",
        ).start()
        self.workers.append(worker)
        return worker

    def create_runs(self, count: int, *, start_in: float, spread: float, sleep: float) -> None:
        """``count`` one-shot jobs, due over ``spread`` seconds from ``start_in`` on."""
        base = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=start_in)
        for n in range(count):
            at = base + dt.timedelta(seconds=spread * n / max(1, count))
            self.api.create_namespaced_custom_object(
                models.GROUP,
                models.VERSION,
                NAMESPACE,
                models.PLURAL,
                {
                    "apiVersion": models.API_VERSION,
                    "kind": models.KIND,
                    "metadata": {"name": f"run-{n:05d}"},
                    "spec": {
                        "runAt": at.isoformat(),
                        "retry": {"maxAttempts": 20, "backoffSeconds": 1, "maxBackoffSeconds": 2},
                        "task": {
                            "python": {
                                "name": "tickwork.record",
                                "kwargs": {"path": str(self.record_file), "seconds": str(sleep)},
                            }
                        },
                    },
                },
            )

    def outcomes(self) -> Counter[str]:
        listing = self.api.list_namespaced_custom_object(
            models.GROUP, models.VERSION, NAMESPACE, models.PLURAL
        )
        items: list[dict[str, Any]] = listing["items"]  # type: ignore[index]
        return Counter(
            ((item.get("status") or {}).get("lastRun") or {}).get("outcome", "pending")
            for item in items
        )

    def attempts(self) -> dict[str, int]:
        """Run ID -> attempts, from each job's last run."""
        listing = self.api.list_namespaced_custom_object(
            models.GROUP, models.VERSION, NAMESPACE, models.PLURAL
        )
        items: list[dict[str, Any]] = listing["items"]  # type: ignore[index]
        last = [((item.get("status") or {}).get("lastRun") or {}) for item in items]
        return {str(run["id"]): int(run.get("attempts") or 0) for run in last if run.get("id")}

    def executions(self) -> Counter[str]:
        if not self.record_file.exists():
            return Counter()
        return Counter(self.record_file.read_text().split())


@contextlib.contextmanager
def stage(workdir: Path) -> Iterator[Stage]:
    workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        plane = stack.enter_context(ControlPlane(workdir=workdir / "controlplane"))
        redis = stack.enter_context(RedisServer(workdir=workdir / "redis", appendonly=True))
        cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane)
        cluster.kubectl("apply", "-f", str(_CRDS))
        cluster.wait_established("scheduledjobs.tickwork.dev", "calendars.tickwork.dev")
        cluster.kubectl("create", "namespace", NAMESPACE)
        client = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))  # type: ignore[no-untyped-call]
        api = k8s.CustomObjectsApi(client)
        the_stage = Stage(
            workdir=workdir,
            plane=plane,
            redis=redis,
            cluster=cluster,
            api=api,
            record_file=workdir / "executions.txt",
        )
        try:
            yield the_stage
        finally:
            for component in [*the_stage.workers, *the_stage.operators]:
                component.kill()


def _finish(
    the_stage: Stage,
    drill: str,
    runs: int,
    started: float,
    *,
    timeout: float,
    recovery: float | None,
    notes: dict[str, Any],
) -> DrillResult:
    def settled() -> bool:
        outcomes = the_stage.outcomes()
        return outcomes["pending"] == 0 and sum(outcomes.values()) >= runs

    with contextlib.suppress(AssertionError):
        wait_for(settled, timeout=timeout, interval=1, what="every run to end")
    outcomes = the_stage.outcomes()
    executions = the_stage.executions()
    attempts = the_stage.attempts()
    memory = {"redis_memory": the_stage.redis.memory()}
    return DrillResult(
        drill=drill,
        runs=runs,
        succeeded=outcomes["Succeeded"],
        lost=runs - outcomes["Succeeded"],
        executions=sum(executions.values()),
        duplicates=sum(count - 1 for count in executions.values() if count > 1),
        beyond_attempts=sum(
            max(0, count - attempts.get(run, 0)) for run, count in executions.items()
        ),
        recovery_seconds=recovery,
        elapsed_seconds=round(time.monotonic() - started, 1),
        notes={**notes, "outcomes": dict(outcomes), **memory},
    )


def worker_kills(
    workdir: Path,
    *,
    runs: int = 1000,
    kills: int = 100,
    interval: float = 0.6,
    timeout: float = 900,
) -> DrillResult:
    """Two workers; one of them is SIGKILLed and restarted every ``interval`` s."""
    rng = random.Random(7)  # noqa: S311 - choosing a victim, not a secret
    with stage(workdir) as s:
        s.start_operator("op-a")
        for name in ("w-0", "w-1"):
            s.start_worker(name).wait_ready()
        started = time.monotonic()
        s.create_runs(runs, start_in=5, spread=max(20.0, kills * interval), sleep=0.3)
        for kill in range(kills):
            time.sleep(interval)  # the drill's cadence of crashes, on purpose
            victim = s.workers.pop(rng.randrange(len(s.workers)))
            victim.kill()
            s.start_worker(f"w-{kill + 2}")
        last_kill = time.monotonic()
        notes = {"kills": kills, "interval_seconds": interval}
        result = _finish(
            s, "worker SIGKILL loop", runs, started, timeout=timeout, recovery=None, notes=notes
        )
        result.recovery_seconds = round(time.monotonic() - last_kill, 1)
        return result


def _disruption_mid_stream(
    workdir: Path,
    drill: str,
    runs: int,
    timeout: float,
    disrupt: Callable[[Stage], dict[str, Any]],
    *,
    sleep: float = 0.1,
) -> DrillResult:
    """One operator and one worker; a third of the runs succeed, then ``disrupt``."""
    with stage(workdir) as s:
        s.start_operator("op-a")
        s.start_worker("w-0").wait_ready()
        started = time.monotonic()
        s.create_runs(runs, start_in=5, spread=30, sleep=sleep)
        wait_for(lambda: s.outcomes()["Succeeded"] >= runs // 3, timeout=120, what="a third")
        baseline = s.outcomes()["Succeeded"]
        disrupted = time.monotonic()
        notes = disrupt(s)
        recovery = _progress_after(s, disrupted, baseline)
        return _finish(s, drill, runs, started, timeout=timeout, recovery=recovery, notes=notes)


def redis_restart(workdir: Path, *, runs: int = 200, timeout: float = 300) -> DrillResult:
    """Redis is SIGKILLed mid-stream and restarted from its AOF."""

    def crash(s: Stage) -> dict[str, Any]:
        s.redis.kill()
        s.redis.start()
        return {}

    return _disruption_mid_stream(workdir, "Redis restart (AOF everysec)", runs, timeout, crash)


def leader_kill(workdir: Path, *, runs: int = 200, timeout: float = 300) -> DrillResult:
    """Two operators; the leader is SIGKILLed; the standby must take over."""
    with stage(workdir) as s:
        a = s.start_operator("op-a")
        wait_for(a.is_leader, timeout=30, what="op-a to lead")
        b = s.start_operator("op-b")
        s.start_worker("w-0").wait_ready()
        started = time.monotonic()
        s.create_runs(runs, start_in=3, spread=40, sleep=0.1)
        wait_for(lambda: s.outcomes()["Succeeded"] >= runs // 5, timeout=120, what="a fifth")
        a.kill()
        killed = time.monotonic()
        wait_for(b.is_leader, timeout=30, interval=0.2, what="op-b to take over")
        takeover = round(time.monotonic() - killed, 1)
        return _finish(
            s,
            "operator leader kill",
            runs,
            started,
            timeout=timeout,
            recovery=takeover,
            notes={"takeover_seconds": takeover},
        )


def apiserver_restart(workdir: Path, *, runs: int = 200, timeout: float = 300) -> DrillResult:
    """kube-apiserver stops and starts again on the same port; etcd keeps its data."""

    def restart(s: Stage) -> dict[str, Any]:
        stopped = time.monotonic()
        s.plane.restart_apiserver()
        return {"apiserver_down_seconds": round(time.monotonic() - stopped, 1)}

    return _disruption_mid_stream(workdir, "API server restart (etcd kept)", runs, timeout, restart)


def apiserver_outage(
    workdir: Path, *, runs: int = 200, down_seconds: float = 25, timeout: float = 300
) -> DrillResult:
    """kube-apiserver is away for longer than a progress mark's retries (about 15 s):
    runs that end meanwhile must keep their record until it can be written."""

    def outage(s: Stage) -> dict[str, Any]:
        stopped = time.monotonic()
        s.plane.stop_apiserver()
        time.sleep(down_seconds)  # the outage itself, on purpose
        s.plane.start_apiserver()
        return {"apiserver_down_seconds": round(time.monotonic() - stopped, 1)}

    return _disruption_mid_stream(
        workdir, "API server outage (etcd kept)", runs, timeout, outage, sleep=2.0
    )


def _progress_after(s: Stage, moment: float, baseline: int) -> float:
    """Seconds from ``moment`` until more runs have succeeded than ``baseline``."""
    wait_for(
        lambda: s.outcomes()["Succeeded"] > baseline,
        timeout=120,
        interval=0.2,
        what="runs to succeed again",
    )
    return round(time.monotonic() - moment, 1)


DRILLS: dict[str, Callable[..., DrillResult]] = {
    "worker-kills": worker_kills,
    "redis-restart": redis_restart,
    "leader-kill": leader_kill,
    "apiserver-restart": apiserver_restart,
    "apiserver-outage": apiserver_outage,
}
