"""Tickwork next to Kubernetes' CronJob controller, on the same control plane.

    python benchmarks/cronjob.py [--sizes 100 1000 5000] [--minutes 3] [--plot FILE]
                                 [--tickwork-only] [--no-worker-cache]
                                 [--warmup-minutes W] [--history N]
                                 [--schedule-in-status true|false] [--indexed M]
                                 [--env NAME=VALUE]

For each N, N recurring schedules fire every minute, first as Tickwork
ScheduledJobs (operator + workers as processes), then as CronJobs (the real
kube-controller-manager, default settings). Measured in the same run:

* schedule lag: CronJob — when the Job appeared (watch event) minus the
  scheduled minute; Tickwork — when a worker started the run (``startedAt``)
  minus the scheduled minute;
* API writes per run: every mutating request the API server counted
  (``apiserver_request_total``: POST, PUT, PATCH, DELETE, from every client)
  during the measured minutes, divided by the runs in them;
* runs that will never happen: the CronJob controller starts only the latest
  of the schedules it missed, so a minute older than a CronJob's
  ``lastScheduleTime`` without a Job is skipped for good. Its lag is unbounded,
  not merely late: a percentile that falls on such runs is reported as
  unbounded (JSON ``null`` with ``..._unbounded: true``), next to the lower
  bound the observation window alone would give;
* CPU per run (Tickwork's side): the CPU time every process on a run's path
  used during the measured minutes (``/proc``: kube-apiserver, etcd, Redis, the
  operator, the workers), divided by the runs scheduled in them; issue 18's
  target is 10 ms in all at N = 5,000. The controller-manager, idle for
  Tickwork, is reported apart. ``--tickwork-only`` measures this side alone;
  ``--warmup-minutes 4`` lets every job's run history fill first, so that the
  measured runs also pay for trimming it, as they do in steady state.
  ``--history 0`` gives the jobs no run history (``spec.history``);
  ``--schedule-in-status true`` runs the operator as before issue 48 (a write of
  its own per run published; off, the default, the worker's record is the run's
  one write). The JSON records the commit measured and these settings.

Prints JSON, writes benchmarks/results/cronjob.json and a plot of p99 lag
against N. Compare ratios within one run: the machine is shared and noisy.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from tickwork.api import models
from tickwork_dev.devcluster.cluster import Cluster, kubectl_binary
from tickwork_dev.devcluster.components import READY_TIMEOUT_SECONDS, TickworkProcess, wait_for
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.measure import (
    CRDS,
    RESULTS,
    benchmark_parser,
    code_commit,
    cpu_seconds,
    create_jobs,
    job_manifest,
    percentile,
    requests_so_far,
    save_figure,
    save_report,
    storage_updates_so_far,
    writes_so_far,
)
from tickwork_dev.devcluster.redis import RedisServer

SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def next_minute(after: float) -> float:
    return (math.floor(after / 60) + 1) * 60


class Collector:
    """Watches objects in a thread and records (scheduled, observed) per run."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[float, float]] = {}
        self.skipped_for_good: list[float] = []
        """Scheduled instants of runs that can no longer start (by the controller's rules)."""
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def watch(
        self, list_function: Callable[..., Any], handle: Callable[[Any, float], None], *args: Any
    ) -> None:
        def loop() -> None:
            # Each watch resumes where the last one ended: a fresh list would only show
            # the latest status of each job, and a run reported in between would be lost.
            version = None
            while not self._stop.is_set():
                watcher = k8s_watch.Watch()  # type: ignore[no-untyped-call]
                try:
                    stream = watcher.stream(  # type: ignore[no-untyped-call]
                        list_function, *args, timeout_seconds=30, resource_version=version
                    )
                    for event in stream:
                        handle(event["object"], time.time())
                        if self._stop.is_set():
                            return
                    version = watcher.resource_version
                except Exception:  # noqa: BLE001 - 410 Gone and the like: start over
                    version = None

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()

    def _seen(self) -> list[tuple[float, float]]:
        # The watch threads add runs while the window is read: a copy made in one C
        # call (the GIL held throughout), not a Python loop over the live dict, which
        # raised "dictionary changed size during iteration" at N = 3,000.
        return list(self.runs.values())

    def scheduled(self, first: float, last: float) -> list[float]:
        return [scheduled for scheduled, _ in self._seen() if first <= scheduled < last]

    def lags(self, first: float, last: float) -> list[float]:
        return [seen - scheduled for scheduled, seen in self._seen() if first <= scheduled < last]


def _parse(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


@contextlib.contextmanager
def control_plane(workdir: Path) -> Iterator[tuple[ControlPlane, Cluster, k8s.ApiClient]]:
    with ControlPlane(workdir=workdir / "controlplane", with_controller_manager=True) as plane:
        cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane)
        api = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))  # type: ignore[no-untyped-call]
        yield plane, cluster, api


def _apply_in_batches(cluster: Cluster, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 500):
        listing = {"apiVersion": "v1", "kind": "List", "items": items[start : start + 500]}
        cluster.kubectl(
            "apply", "--server-side", "-f", "-", input_text=json.dumps(listing), timeout=600
        )


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def profile_apiserver(cluster: Cluster, seconds: int, path: Path) -> threading.Thread:
    """Take the API server's Go CPU profile of the next ``seconds`` into ``path``
    (``go tool pprof``), in a thread."""

    def take() -> None:
        argv = [
            kubectl_binary(),
            f"--kubeconfig={cluster.kubeconfig}",
            "get",
            "--raw",
            f"/debug/pprof/profile?seconds={seconds}",
        ]
        result = subprocess.run(argv, capture_output=True, timeout=seconds + 120, check=True)
        path.write_bytes(result.stdout)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


#: Where the API server's CPU goes, by the cumulative share of one function each (a
#: profile's ``go tool pprof -top -cum``); the parts overlap (a write's apply, say, is
#: inside the write).
PROFILE_PARTS = {
    "status_writes": "handlers.(*patcher).patchResource.func3",
    "status_writes.server_side_apply": "handlers.(*applyPatcher).applyPatchToCurrentObject",
    "status_writes.validation": "customresource.statusStrategy.ValidateUpdate",
    "status_writes.validation.schema": "validation.(*RatchetingSchemaValidator).ValidateUpdate",
    "status_writes.validation.cel": "schema/cel.(*Validator).Validate",
    "status_writes.managed_fields_read": "unstructured.(*Unstructured).GetManagedFields",
    "watch_cache_decoding": "etcd3.(*watchChan).serialProcessEvents",
    "watches_served": "handlers.(*WatchServer).HandleHTTP",
    "reads": "handlers.handleList",
    "authentication": "union.(*unionAuthRequestHandler).AuthenticateRequest",
    "gc_background": "runtime.gcBgMarkWorker",
    "allocation": "runtime.mallocgc",
}


def profile_parts(path: Path) -> dict[str, float] | None:
    """:data:`PROFILE_PARTS` of the profile at ``path``, in % of its samples (None
    without a Go toolchain to read it)."""
    go = shutil.which("go")
    if go is None or not path.exists():
        return None
    argv = [go, "tool", "pprof", "-top", "-cum", "-nodecount=100000", str(path)]
    top = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout
    return parts_of(top)


def parts_of(top: str) -> dict[str, float]:
    """:data:`PROFILE_PARTS` in a ``pprof -top -cum`` listing: each part's function's
    cumulative %, the first line that names it (a function may appear once per
    inlined or generic copy)."""
    found: dict[str, float] = {}
    for line in top.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[4].endswith("%"):
            continue
        function = fields[5].split(" (")[0]
        for part, name in PROFILE_PARTS.items():
            if part not in found and function.endswith(name):
                found[part] = float(fields[4].rstrip("%"))
    return found


def measure_window(
    cluster: Cluster,
    collector: Collector,
    minutes: int,
    pids: dict[str, int] | None = None,
    *,
    warmup: int = 1,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Skip ``warmup`` minutes, then measure ``minutes`` whole minutes (and the CPU
    time the processes ``pids`` names used in them; with ``profile``, the API
    server's CPU profile of the first of them)."""
    first = next_minute(time.time()) + 60 * warmup
    last = first + 60 * minutes
    wait_for(
        lambda: time.time() >= first - 2, timeout=60 * warmup + 140, interval=0.5, what="the window"
    )
    before = writes_so_far(cluster)
    job_writes_before = writes_so_far(cluster, resource="scheduledjobs")
    job_reads_before = requests_so_far(cluster, ("GET",), resource="scheduledjobs")
    tries_before = storage_updates_so_far(cluster, "scheduledjobs")
    cpu_before = _cpu(pids or {})
    profiling = profile_apiserver(cluster, 60, profile) if profile is not None else None
    wait_for(
        lambda: time.time() >= last - 2,
        timeout=60 * minutes + 60,
        interval=0.5,
        what="the end of the window",
    )
    cpu = {name: used - cpu_before[name] for name, used in _cpu(pids or {}).items()}
    after = writes_so_far(cluster)
    job_writes = writes_so_far(cluster, resource="scheduledjobs") - job_writes_before
    job_reads = requests_so_far(cluster, ("GET",), resource="scheduledjobs") - job_reads_before
    tries = storage_updates_so_far(cluster, "scheduledjobs") - tries_before
    if profiling is not None:
        profiling.join()
    # Runs of the window's last minute may still be starting: give them a minute.
    wait_for(lambda: time.time() >= last + 60, timeout=120, interval=0.5, what="stragglers")
    observed_until = time.time()
    lags = collector.lags(first, last)
    scheduled = collector.scheduled(first, last)
    return {
        "lags": lags,
        "writes": after - before,
        "job_writes": job_writes,
        "job_reads": job_reads,
        "job_write_tries": tries,
        "window": (first, last),
        "observed_until": observed_until,
        "scheduled": scheduled,
        "minutes": minutes,
        "cpu_seconds": cpu,
    }


def skipped_by_cronjobs(
    batch: k8s.BatchV1Api, namespace: str, window: dict[str, Any]
) -> list[float]:
    """Window minutes the CronJob controller has moved past without creating a Job.

    With no ``startingDeadlineSeconds``, the controller creates a Job only for the
    most recent schedule it missed; a scheduled minute at or before a CronJob's
    ``lastScheduleTime`` that has no Job by now never gets one. CronJobs are listed
    first, then the Jobs (never deleted here: their pods stay Pending, none
    finishes): the controller records a schedule only after creating its Job, so
    every Job behind a ``lastScheduleTime`` read is in the listing that follows."""
    first = window["window"][0]
    cronjobs: list[Any] = batch.list_namespaced_cron_job(namespace).items
    started: dict[str, set[float]] = {}
    jobs: list[Any] = batch.list_namespaced_job(namespace).items
    for job in jobs:
        stamp = (job.metadata.annotations or {}).get(SCHEDULED_ANNOTATION)
        for owner in job.metadata.owner_references or []:
            if stamp and owner.kind == "CronJob":
                started.setdefault(owner.name, set()).add(_parse(stamp))
    skipped = []
    for cronjob in cronjobs:
        latest = cronjob.status.last_schedule_time if cronjob.status else None
        if latest is None:
            continue
        for minute in range(window["minutes"]):
            start = first + 60 * minute
            if start <= latest.timestamp() and start not in started.get(cronjob.metadata.name, ()):
                skipped.append(start)
    return skipped


def run_tickwork(
    workdir: Path,
    plane: ControlPlane,
    api: k8s.ApiClient,
    n: int,
    minutes: int,
    *,
    job_cache: bool = True,
    warmup: int = 1,
    profile: Path | None = None,
    history: int | None = None,
    schedule_in_status: bool | None = None,
    indexed: int = 0,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``indexed``: that many more jobs in the namespace, yearly (due on January 1st),
    created before the operator and workers start: they hold them all."""
    cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane)
    namespace = f"tickwork-{n}"
    cluster.kubectl("create", "namespace", namespace)
    if indexed:
        yearly = {"schedule": "0 0 1 1 *", "task": {"echo": {"message": "new year"}}}
        create_jobs(
            cluster, namespace, [job_manifest(f"idle-{i:06d}", yearly) for i in range(indexed)]
        )
    items = [
        {
            "apiVersion": models.API_VERSION,
            "kind": models.KIND,
            "metadata": {"name": f"sj-{i:05d}", "namespace": namespace},
            "spec": {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Allow",
                "task": {"echo": {"message": "tick"}},
                **(
                    {"history": {"successfulRuns": history, "failedRuns": history}}
                    if history is not None
                    else {}
                ),
            },
        }
        for i in range(n)
    ]
    collector = Collector()

    def handle(obj: dict[str, Any], seen: float) -> None:
        status = obj.get("status") or {}
        for run in (status.get("currentRun"), status.get("lastRun")):
            if run and run.get("startedAt") and run.get("scheduledAt"):
                collector.runs.setdefault(
                    run["id"], (_parse(run["scheduledAt"]), _parse(run["startedAt"]))
                )
        del seen

    custom = k8s.CustomObjectsApi(api)
    collector.watch(
        custom.list_namespaced_custom_object,
        handle,
        models.GROUP,
        models.VERSION,
        namespace,
        models.PLURAL,
    )
    with RedisServer(workdir=workdir / f"redis-{n}", appendonly=True) as redis:
        env = {
            "KUBECONFIG": str(cluster.kubeconfig),
            "TICKWORK_REDIS_URL": redis.url,
            "TICKWORK_OPERATOR_NAMESPACES": namespace,
            "TICKWORK_WORKER_NAMESPACES": namespace,
            "TICKWORK_OPERATOR_LOG_LEVEL": "WARNING",
            "TICKWORK_WORKER_LOG_LEVEL": "WARNING",
            "TICKWORK_WORKER_CONCURRENCY": "128",
            "TICKWORK_OPERATOR_RECONCILE_SECONDS": "60",
            "TICKWORK_WORKER_JOB_CACHE": str(job_cache).lower(),
        }
        env.update(extra_env or {})
        if schedule_in_status is not None:  # else the operator's default
            env["TICKWORK_OPERATOR_SCHEDULE_IN_STATUS"] = str(schedule_in_status).lower()
        components = [
            TickworkProcess(
                command="tickwork-operator", env=env, log_path=workdir / f"operator-{n}.log"
            ),
            *(
                TickworkProcess(
                    command="tickwork-worker",
                    env={**env, "TICKWORK_WORKER_NAME": w},
                    log_path=workdir / f"{w}-{n}.log",
                )
                for w in ("w0", "w1")
            ),
        ]
        # A worker lists every job of its namespaces before it is ready: with 100,000
        # there, that takes longer than a component's usual minute.
        ready_timeout = READY_TIMEOUT_SECONDS + indexed * 0.003
        ready_seconds: dict[str, float] = {}
        for index, component in enumerate(components):
            started = time.monotonic()
            component.start().wait_ready(timeout=ready_timeout)
            ready_seconds[f"{component.command}-{index}"] = round(time.monotonic() - started, 1)
        try:
            # POSTs over one HTTP/2 connection, 32 in flight: kubectl's server-side
            # apply of 5,000 took over 10 min while the first jobs already fired.
            create_jobs(cluster, namespace, items)
            pids = {
                **plane.pids(),
                "redis-server": redis.pid,
                **{
                    f"tickwork-{c.command.removeprefix('tickwork-')}-{i}": c.pid
                    for i, c in enumerate(components)
                },
            }
            window = measure_window(
                cluster, collector, minutes, pids, warmup=warmup, profile=profile
            )
            window["redis_memory"] = redis.memory()
            window["ready_seconds"] = ready_seconds
        finally:
            collector.stop()
            for component in components:
                component.stop()
    return window


def run_cronjobs(cluster: Cluster, api: k8s.ApiClient, n: int, minutes: int) -> dict[str, Any]:
    namespace = f"cronjob-{n}"
    cluster.kubectl("create", "namespace", namespace)
    items = [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": f"cj-{i:05d}", "namespace": namespace},
            "spec": {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Allow",
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {"name": "c", "image": "busybox", "command": ["echo", "tick"]}
                                ],
                            }
                        }
                    }
                },
            },
        }
        for i in range(n)
    ]
    collector = Collector()

    def handle(obj: Any, seen: float) -> None:
        annotations = obj.metadata.annotations or {}
        stamp = annotations.get(SCHEDULED_ANNOTATION)
        if stamp:
            collector.runs.setdefault(obj.metadata.uid, (_parse(stamp), seen))

    batch = k8s.BatchV1Api(api)
    collector.watch(batch.list_namespaced_job, handle, namespace)
    try:
        _apply_in_batches(cluster, items)
        window = measure_window(cluster, collector, minutes)
        window["skipped_for_good"] = skipped_by_cronjobs(batch, namespace, window)
    finally:
        collector.stop()
        # Stop the controller creating more Jobs; their pods stay Pending (no nodes).
        cluster.kubectl("delete", "cronjobs", "--all", "-n", namespace, "--wait=false", timeout=600)
    return window


def summarize(window: dict[str, Any], n: int, minutes: int) -> dict[str, Any]:
    """Percentiles over every expected run. A run not seen by the end counts with the
    lag it had at least (until observation ended) — or, if it was skipped for good,
    with an unbounded one — so a system that falls behind or drops runs is not
    flattered by leaving its slowest runs out."""
    observed = list(window["lags"])
    runs = len(observed)
    first, _ = window["window"]
    skipped = list(window.get("skipped_for_good", []))
    bounded = list(observed)  # every missing run at its lower bound
    lags = list(observed)  # the same, but runs skipped for good are unbounded
    for minute in range(minutes):
        start = first + 60 * minute
        seen = sum(1 for s in window["scheduled"] if s == start)
        missing = max(0, n - seen)
        never = min(missing, sum(1 for s in skipped if s == start))
        bounded += [window["observed_until"] - start] * missing
        lags += [math.inf] * never + [window["observed_until"] - start] * (missing - never)
    p50, p99 = statistics.median(lags), percentile(lags, 0.99)
    return {
        **({"ready_seconds": window["ready_seconds"]} if "ready_seconds" in window else {}),
        "expected_runs": n * minutes,
        "runs": runs,
        "runs_not_started_in_time": n * minutes - runs,
        "runs_skipped_for_good": len(skipped),
        "lag_p50_seconds": _finite(p50),
        "lag_p99_seconds": _finite(p99),
        "lag_max_seconds": _finite(max(lags)) if lags else None,
        "lag_p50_unbounded": math.isinf(p50),
        "lag_p99_unbounded": math.isinf(p99),
        "lag_p50_lower_bound_seconds": round(statistics.median(bounded), 3),
        "lag_p99_lower_bound_seconds": round(percentile(bounded, 0.99), 3),
        "api_writes": int(window["writes"]),
        "api_writes_per_run": round(window["writes"] / runs, 2) if runs else None,
        **_tries(window),
        **(
            {"scheduledjob_reads_per_run": round(window["job_reads"] / runs, 2)}
            if runs and "job_reads" in window
            else {}
        ),
        "lag_percentiles_are_lower_bounds": runs < n * minutes,
        **({"redis_memory": window["redis_memory"]} if "redis_memory" in window else {}),
        **_cpu_per_run(window.get("cpu_seconds") or {}, n * minutes),
    }


def _tries(window: dict[str, Any]) -> dict[str, Any]:
    """How often a ScheduledJob write was done twice by the API server (begun from a
    stale copy in its watch cache): etcd updates per write of a ScheduledJob."""
    writes, tries = window.get("job_writes"), window.get("job_write_tries")
    if not writes or tries is None:
        return {}
    return {
        "scheduledjob_writes": int(writes),
        "storage_tries_per_scheduledjob_write": round(tries / writes, 3),
    }


#: Processes of the benchmark's control plane that no Tickwork run passes through.
_BYSTANDERS = ("kube-controller-manager", "kube-scheduler")


def _cpu_per_run(cpu: dict[str, float], runs: int) -> dict[str, Any]:
    """CPU milliseconds per scheduled run, by process, and in all on a run's path (the
    workers counted together)."""
    if not cpu or not runs:
        return {}
    by_process: dict[str, float] = {}
    for process, seconds in cpu.items():
        name = re.sub(r"-\d+$", "", process).replace("tickwork-worker", "tickwork-workers")
        by_process[name] = by_process.get(name, 0.0) + 1000 * seconds / runs
    on_path = sum(ms for name, ms in by_process.items() if name not in _BYSTANDERS)
    return {
        "cpu_ms_per_run": {k: round(v, 2) for k, v in sorted(by_process.items())},
        "cpu_ms_per_run_total": round(on_path, 2),
    }


def _finite(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def p99_ratio(tickwork: dict[str, Any], cronjob: dict[str, Any]) -> dict[str, Any]:
    """CronJob's p99 over Tickwork's: measured, at least (lower bounds), or unbounded."""
    ours = tickwork["lag_p99_seconds"]
    if ours is None or tickwork["lag_percentiles_are_lower_bounds"]:
        return {"p99_lag_ratio_cronjob_over_tickwork": None}
    bound = cronjob["lag_p99_lower_bound_seconds"] / ours
    return {
        "p99_lag_ratio_cronjob_over_tickwork": (
            None if cronjob["lag_p99_unbounded"] else round(bound, 1)
        ),
        "p99_lag_ratio_at_least": round(bound, 1),
        "p99_lag_ratio_unbounded": cronjob["lag_p99_unbounded"],
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Lag against N (a hollow marker: a lower bound, runs were still missing when
    observation ended) and the share of runs started within the window."""
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = report["results"]
    sizes = [row["n"] for row in rows]
    figure, (lags, share) = plt.subplots(1, 2, figsize=(10, 4.2))
    for system, color in (("cronjob", "tab:blue"), ("tickwork", "tab:green")):
        for key, style in (("lag_p99_seconds", "-"), ("lag_p50_seconds", "--")):
            values = [_plotted(row[system], key) for row in rows]
            label = f"{system} {key.split('_')[1]}"
            alpha = 0.9 if style == "-" else 0.6
            lags.plot(sizes, values, linestyle=style, color=color, alpha=alpha, label=label)
            for n, value, row in zip(sizes, values, rows, strict=True):
                if row[system].get(key.replace("_seconds", "_unbounded")):
                    lags.plot([n], [value], marker="^", markersize=9, color=color)
                    lags.annotate(
                        "∞", (n, value), textcoords="offset points", xytext=(6, 4), color=color
                    )
                    continue
                bound = row[system]["lag_percentiles_are_lower_bounds"]
                lags.plot(
                    [n],
                    [value],
                    marker="o",
                    color=color,
                    markerfacecolor="white" if bound else color,
                )
        started = [100 * row[system]["runs"] / row[system]["expected_runs"] for row in rows]
        share.plot(sizes, started, marker="o", color=color, label=system)
    lags.set_xscale("log")
    lags.set_xlim(min(sizes) / 1.5, max(sizes) * 1.8)
    lags.set_yscale("log")
    lags.set_xlabel("schedules firing every minute (N)")
    lags.set_ylabel("schedule lag (s)")
    lags.set_title(
        "Schedule lag (hollow: lower bound; ▲∞: unbounded,\n"
        "more than 1 % of runs skipped for good)",
        fontsize=10,
    )
    share.set_xscale("log")
    share.set_ylim(0, 105)
    share.set_xlabel("schedules firing every minute (N)")
    share.set_ylabel("runs started within the window (%)")
    share.set_title("Runs that happened at all")
    for axis in (lags, share):
        axis.grid(visible=True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle("Tickwork vs the CronJob controller, same control plane, 2 cores")
    save_figure(figure, path)


def plot_cpu(report: dict[str, Any], path: Path) -> None:
    """CPU milliseconds per scheduled run, stacked by process, for each N (Tickwork)."""
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [row for row in report["results"] if row["tickwork"].get("cpu_ms_per_run")]
    processes = sorted(
        {p for row in rows for p in row["tickwork"]["cpu_ms_per_run"] if p not in _BYSTANDERS}
    )
    figure, axis = plt.subplots(figsize=(6, 4.2))
    labels = [f"N = {row['n']:,}" for row in rows]
    bottom = [0.0] * len(rows)
    for process in processes:
        values = [row["tickwork"]["cpu_ms_per_run"].get(process, 0.0) for row in rows]
        axis.bar(labels, values, bottom=bottom, label=process)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axis.axhline(10, color="black", linestyle="--", linewidth=1, label="target: 10 ms")
    axis.set_ylabel("CPU ms per scheduled run")
    cache = "on" if report.get("worker_job_cache", True) else "off"
    lean = "; no schedule in status" if report.get("schedule_in_status") is False else ""
    if report.get("history") is not None:
        lean += f"; run history {report['history']}"
    axis.set_title(
        f"Tickwork's CPU per run, by process\n(workers' job cache {cache}{lean})", fontsize=10
    )
    axis.legend(fontsize=8)
    axis.grid(visible=True, axis="y", alpha=0.3)
    save_figure(figure, path)


def _plotted(summary: dict[str, Any], key: str) -> float:
    """The value to draw: an unbounded percentile sits at its window's lower bound."""
    value = summary[key]
    if value is None:
        value = summary[key.replace("_seconds", "_lower_bound_seconds")]
    return float(value)


def _profile_path(args: Any, n: int) -> Path | None:
    base: Path | None = args.profile_apiserver
    return None if base is None else base.with_name(f"{base.stem}_{n}{base.suffix}")


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "cronjob")
    parser.set_defaults(plot=RESULTS / "cronjob_lag.png")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument(
        "--tickwork-only",
        action="store_true",
        help="skip the CronJob side (lag and CPU per run of Tickwork alone)",
    )
    parser.add_argument(
        "--no-worker-cache",
        action="store_true",
        help="workers read each run's job from the API server (no watched copy)",
    )
    parser.add_argument(
        "--warmup-minutes",
        type=int,
        default=1,
        help="minutes of Tickwork's runs before the measured ones (4 or more: every "
        "job's history of 3 is full, so each run also trims it, as in steady state)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        help="the jobs' run history (spec.history, both limits); unset: the default (3)",
    )
    parser.add_argument(
        "--schedule-in-status",
        choices=["true", "false"],
        default=None,
        help="the operator's scheduleInStatus (unset: its default, off since issue 48; "
        "on: a write of its own per run published)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for Tickwork's processes (TICKWORK_WORKER_FINISHING_PER_SLOT=3): "
        "two runs of one tree, with and without it",
    )
    parser.add_argument(
        "--indexed",
        type=int,
        default=0,
        help="that many more yearly jobs beside the N firing ones, indexed by the operator "
        "and held by the workers (e.g. 97000 with --sizes 3000: 100,000 jobs, 3,000 due a "
        "minute)",
    )
    parser.add_argument(
        "--profile-apiserver",
        type=Path,
        default=None,
        help="also write the API server's Go CPU profile of the first measured minute "
        "here (one file per N, suffixed; read with `go tool pprof`)",
    )
    args = parser.parse_args(argv)
    in_status = None if args.schedule_in_status is None else args.schedule_in_status == "true"
    report: dict[str, Any] = {
        "benchmark": "cronjob",
        "commit": code_commit(),
        "python": platform.python_version(),
        "minutes_measured": args.minutes,
        "warmup_minutes": args.warmup_minutes,
        "worker_job_cache": not args.no_worker_cache,
        "history": args.history,
        "schedule_in_status": in_status,
        "indexed_beside": args.indexed,
        "results": [],
    }
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix=f"cronjob-bench-{n}-") as tmp:
            workdir = Path(tmp)
            with control_plane(workdir) as (plane, cluster, api):
                cluster.kubectl("apply", "-f", str(CRDS))
                cluster.wait_established("scheduledjobs.tickwork.dev", "calendars.tickwork.dev")
                tickwork = summarize(
                    run_tickwork(
                        workdir,
                        plane,
                        api,
                        n,
                        args.minutes,
                        job_cache=not args.no_worker_cache,
                        warmup=args.warmup_minutes,
                        history=args.history,
                        schedule_in_status=in_status,
                        profile=_profile_path(args, n),
                        indexed=args.indexed,
                        extra_env=dict(e.split("=", 1) for e in args.env),
                    ),
                    n,
                    args.minutes,
                )
                profile = _profile_path(args, n)
                if profile is not None:
                    tickwork["apiserver_profile_percent"] = profile_parts(profile)
                if args.tickwork_only:
                    row = {"n": n, "tickwork": tickwork}
                else:
                    cronjob = summarize(
                        run_cronjobs(cluster, api, n, args.minutes), n, args.minutes
                    )
                    row = {
                        "n": n,
                        "tickwork": tickwork,
                        "cronjob": cronjob,
                        **p99_ratio(tickwork, cronjob),
                    }
        print(json.dumps(row), flush=True)
        report["results"].append(row)
        # Written after every N: a long run that is interrupted keeps what it measured.
        save_report(report, args.out, args)
    if args.tickwork_only:
        plot_cpu(report, args.out.with_suffix(".png"))
    else:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
