"""The watcher on the real API server: publish lag of a burst, tick cost and memory at scale.

(Named watcher.py, not operator.py: a script's folder comes first on sys.path,
and a file called operator.py would shadow the standard library's operator.)

    python benchmarks/watcher.py [--burst 1000] [--sizes 10000 100000] [--window 30]
                                 [--ceiling-writes 3000] [--ceiling-concurrency 16 32 64]

* **Publish lag**: ``--burst`` one-shot ScheduledJobs due in the same second;
  lag = when Redis accepted each run (``enqueued_at``) minus the due second.
  Target: p99 <= 1 s.
* **Tick cost and memory**: ScheduledJobs that are not due (yearly schedules)
  are created in the API server until there are N of them; for each N a fresh
  operator process lists them, and once its index holds all N and their first
  status is written, the mean tick (``tickwork_tick_seconds``) over ``--window``
  seconds and its RSS are read.
  Target: the tick with nothing due does not grow with N; RSS per 1,000 jobs
  is reported, with the peak (VmHWM) of the cold start and the operator's CPU
  seconds to index every job and to write every first status.
* **Burst beside N**: at the largest N, ``--burst`` more one-shot jobs due in one
  second are created while that operator runs; their publish lag p99 <= 1 s.
* **Status-write ceiling**: the operator's share of a first status (as it wrote
  it) applied by one client to ``--ceiling-writes`` fresh jobs at each
  ``--ceiling-concurrency``, with no operator running. Issue 18's target for the
  first status of N new jobs is 1.3 x N / the best rate (``status_backfill_over_floor``
  <= 1.3).

* ``--compare-with DIR``: only the first statuses, of another checkout's operator
  (``before``) and this one's (``after``) by turns (before, after, after, before,
  ...; ``--rounds`` starts each), each against the largest ``--sizes`` fresh jobs in
  a namespace of its own, the ceiling measured after every start: medians, each
  over the floor of the best ceiling (the strictest), each start also over its own
  ceiling, and after / before (``watcher_first_statuses.json``). With
  ``--same-jobs-ceiling``, also the sustained ceiling: after every start, one client
  writes the operator's share once more to that start's own jobs (every one of them,
  the levels of concurrency taking a share each), in the state the start left the API
  server in; each start over the floor of its own jobs, and the medians over the
  best such floor of the run. A rewrite reads a larger object than a first write, so
  the burst after every start also writes its fresh jobs twice, and the ratio of the
  two rates (``first_over_rewrite``) gives each start over its own jobs' floor as
  first writes too.

Prints JSON lines, writes benchmarks/results/watcher.json and a plot. Compare
ratios within one run: the machine is shared and noisy.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tickwork.kube.client import KubeClient, load_configuration
from tickwork.kube.status import OPERATOR_MANAGER
from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage
from tickwork.queue.redis_queue import RedisRunQueue
from tickwork.queue.settings import RedisSettings
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for
from tickwork_dev.devcluster.measure import (
    benchmark_parser,
    code_commit,
    cpu_seconds,
    create_jobs,
    job_manifest,
    peak_rss_bytes,
    percentile,
    plane_with_crd,
    requests_so_far,
    rss_bytes,
    save_figure,
    save_report,
)
from tickwork_dev.devcluster.redis import RedisServer

ECHO = {"echo": {"message": "tick"}}


def start_operator(
    workdir: Path,
    cluster: Cluster,
    redis: RedisServer,
    namespace: str,
    label: str,
    *,
    tree: Path | None = None,
) -> TickworkProcess:
    """An operator process for ``namespace``; ``tree``: another checkout's code."""
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis.url,
        "TICKWORK_REDIS_QUEUE": namespace,
        "TICKWORK_OPERATOR_NAMESPACES": namespace,
        "TICKWORK_OPERATOR_LOG_LEVEL": "WARNING",
    }
    if tree is not None:
        env["PYTHONPATH"] = ":".join(str(tree / p) for p in ("", "operator", "worker", "dev"))
    operator = TickworkProcess(
        command="tickwork-operator", env=env, log_path=workdir / f"operator-{label}.log"
    ).start()
    operator.wait_ready(timeout=600)
    wait_for(operator.is_leader, timeout=60, what="the operator to lead")
    return operator


def drain(redis: RedisServer, queue: str) -> list[RunMessage]:
    async def call() -> list[RunMessage]:
        settings = RedisSettings(url=redis.url, queue=queue)
        runs = RedisRunQueue(create_client(settings), settings)
        try:
            claims = await runs.claim(consumer="bench", lease_seconds=3600, count=100_000)
            return [claim.message for claim in claims]
        finally:
            await runs.close()

    return asyncio.run(call())


def publish_lag(
    workdir: Path, cluster: Cluster, redis: RedisServer, burst: int, *, lead: float
) -> dict[str, Any]:
    namespace = "burst"
    cluster.kubectl("create", "namespace", namespace)
    operator = start_operator(workdir, cluster, redis, namespace, "burst")
    try:
        return burst_lag(cluster, redis, operator, namespace, burst, indexed=0, lead=lead)
    finally:
        operator.stop()


def burst_lag(
    cluster: Cluster,
    redis: RedisServer,
    operator: TickworkProcess,
    namespace: str,
    burst: int,
    *,
    indexed: int,
    lead: float,
) -> dict[str, Any]:
    """``burst`` one-shot jobs due in the same second, created beside ``indexed`` jobs
    the running operator already holds: the lag of each run's publication. They fall
    due ``lead`` seconds (and a second per 50 jobs) after they start to be created."""
    # Due on a whole second far enough ahead for every job to be created and indexed.
    due = dt.datetime.fromtimestamp(int(time.time() + lead) + burst // 50, dt.UTC)
    spec = {"runAt": due.isoformat().replace("+00:00", "Z"), "task": ECHO}
    pauses_before = _full_collections(operator)
    create_jobs(cluster, namespace, [job_manifest(f"b-{i:05d}", spec) for i in range(burst)])
    wait_for(
        lambda: operator.metric("tickwork_index_jobs") == indexed + burst,
        timeout=120,
        what="the index to hold the burst",
    )
    if time.time() >= due.timestamp():
        raise RuntimeError("creating the burst took longer than planned; lower --burst")
    messages: list[RunMessage] = []

    def all_published() -> bool:
        messages.extend(drain(redis, namespace))
        return len(messages) >= burst

    wait_for(all_published, timeout=120, interval=0.5, what="every run published")
    lags = [m.enqueued_at - due.timestamp() for m in messages if m.enqueued_at is not None]
    pauses_after = _full_collections(operator)
    return {
        "jobs": burst,
        "indexed_beside": indexed,
        "published": len(lags),
        # The collector's full passes while the burst was created, indexed and published,
        # and how long they held the operator in all (tickwork_gc_pause_seconds).
        "gc_full_collections": int(pauses_after[0] - pauses_before[0]),
        "gc_full_pause_seconds": round(pauses_after[1] - pauses_before[1], 3),
        "lag_p50_seconds": round(statistics.median(lags), 3),
        "lag_p99_seconds": round(percentile(lags, 0.99), 3),
        "lag_max_seconds": round(max(lags), 3),
        "target_p99_seconds": 1.0,
        "redis_memory": redis.memory(),
    }


async def _apply_statuses(
    kubeconfig: Path,
    namespace: str,
    jobs: list[dict[str, Any]],
    status: dict[str, Any],
    concurrency: int,
) -> tuple[float, int]:
    """Seconds to apply ``status`` to every job, and how many came back with it applied
    (its ``nextRunAt``)."""
    limit = asyncio.Semaphore(concurrency)
    async with KubeClient(load_configuration(str(kubeconfig))) as kube:

        async def one(job: dict[str, Any]) -> bool:
            metadata = job["metadata"]
            async with limit:
                found = await kube.apply_job_status(
                    namespace,
                    metadata["name"],
                    metadata["uid"],
                    status,
                    field_manager=OPERATOR_MANAGER,
                    force=True,
                )
            return bool((found.get("status") or {}).get("nextRunAt") == status.get("nextRunAt"))

        started = time.monotonic()
        applied = await asyncio.gather(*(one(job) for job in jobs))
        return time.monotonic() - started, sum(applied)


#: A nextRunAt no job of the benchmarks has: applied again, the share changes every job.
_REWRITTEN_NEXT_RUN = "2099-01-01T00:00:00Z"


def _rewritten(status: dict[str, Any]) -> dict[str, Any]:
    """The operator's share once more, changed so that no apply of it is a no-op."""
    return {**status, "nextRunAt": _REWRITTEN_NEXT_RUN}


def status_write_ceiling(
    cluster: Cluster,
    status: dict[str, Any],
    count: int,
    concurrencies: list[int],
    *,
    label: str = "",
    rewrite: bool = False,
) -> dict[str, Any]:
    """The API server's rate of first status writes, with no operator in the way: the
    operator's share of status (as it wrote it) applied by server-side apply to
    ``count`` fresh jobs per level of concurrency, from one client over one connection
    as the operator's. The ceiling is the best level's rate. ``label`` names the
    measurement's namespaces (each is deleted after it). With ``rewrite``, the same
    jobs are written once more right after (as :func:`same_jobs_ceiling` does) and
    ``first_over_rewrite`` is the median of the first writes' rate over the rewrites'
    at each level: what turns a rate of rewrites into one of first writes."""
    rates: dict[str, float] = {}
    again: dict[str, float] = {}
    rewrites_changed = 0
    apiserver_ms: dict[str, float] = {}
    apiserver = _apiserver_pid(cluster)
    for concurrency in concurrencies:
        namespace = f"ceiling{label}-{concurrency}"
        cluster.kubectl("create", "namespace", namespace)
        created = create_jobs(
            cluster,
            namespace,
            [
                job_manifest(f"c-{i:05d}", {"schedule": "0 0 1 1 *", "task": ECHO})
                for i in range(count)
            ],
        )
        cpu = cpu_seconds(apiserver)
        seconds, _ = asyncio.run(
            _apply_statuses(cluster.kubeconfig, namespace, created, status, concurrency)
        )
        rates[str(concurrency)] = round(count / seconds, 1)
        apiserver_ms[str(concurrency)] = round(1000 * (cpu_seconds(apiserver) - cpu) / count, 2)
        print(
            json.dumps(
                {
                    "status_writes": count,
                    "concurrency": concurrency,
                    "per_second": rates[str(concurrency)],
                    "apiserver_ms_per_write": apiserver_ms[str(concurrency)],
                }
            ),
            flush=True,
        )
        if rewrite:
            seconds, applied = asyncio.run(
                _apply_statuses(
                    cluster.kubeconfig, namespace, created, _rewritten(status), concurrency
                )
            )
            again[str(concurrency)] = round(count / seconds, 1)
            rewrites_changed += applied
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    found: dict[str, Any] = {
        "writes": count,
        "per_second_by_concurrency": rates,
        "apiserver_ms_per_write_by_concurrency": apiserver_ms,
        "ceiling_per_second": max(rates.values()),
    }
    if again:
        found["rewrite_per_second_by_concurrency"] = again
        found["rewrites_changed"] = rewrites_changed  # each rewrite a change, none a no-op
        found["first_over_rewrite"] = round(
            statistics.median(rates[level] / again[level] for level in again), 3
        )
    return found


def same_jobs_ceiling(
    cluster: Cluster,
    namespace: str,
    jobs: list[dict[str, Any]],
    status: dict[str, Any],
    concurrencies: list[int],
) -> dict[str, Any]:
    """The API server's sustained rate of status writes to the very jobs a start has just
    written, in the state that start left it in (every job of the run in etcd and the
    watch cache, the collector's and compaction's share of so many writes): the
    operator's share applied once more to each of ``jobs``, changed (``nextRunAt``) so
    that no apply is a no-op, by one client under the operator's field manager. The
    jobs are split among the levels of concurrency; the ceiling is the best level's
    rate. (A burst of ``--ceiling-writes`` to fresh jobs measures a moment; this is
    the whole volume once more.)"""
    body = _rewritten(status)
    share = -(-len(jobs) // len(concurrencies))
    rates: dict[str, float] = {}
    apiserver_ms: dict[str, float] = {}
    apiserver = _apiserver_pid(cluster)
    changed = 0
    for level, concurrency in enumerate(concurrencies):
        part = jobs[level * share : (level + 1) * share]
        if not part:
            continue
        cpu = cpu_seconds(apiserver)
        seconds, applied = asyncio.run(
            _apply_statuses(cluster.kubeconfig, namespace, part, body, concurrency)
        )
        changed += applied
        rates[str(concurrency)] = round(len(part) / seconds, 1)
        apiserver_ms[str(concurrency)] = round(1000 * (cpu_seconds(apiserver) - cpu) / len(part), 2)
        print(
            json.dumps(
                {
                    "same_jobs_writes": len(part),
                    "concurrency": concurrency,
                    "per_second": rates[str(concurrency)],
                    "apiserver_ms_per_write": apiserver_ms[str(concurrency)],
                }
            ),
            flush=True,
        )
    return {
        "writes": len(jobs),
        "changed": changed,
        "per_second_by_concurrency": rates,
        "apiserver_ms_per_write_by_concurrency": apiserver_ms,
        "ceiling_per_second": max(rates.values()),
    }


def _operator_status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """A job's status as the operator first wrote it (no run yet: all of it is its share)."""
    found = cluster.kubectl("get", "sj", "-n", namespace, name, "-o", "json").stdout
    status: dict[str, Any] = json.loads(found)["status"]
    return status


def _full_collections(operator: TickworkProcess) -> tuple[float, float]:
    """How many full collections the operator made so far, and their seconds in all."""
    labels = 'generation="2"'
    return (
        operator.metric("tickwork_gc_pause_seconds_count", labels) or 0.0,
        operator.metric("tickwork_gc_pause_seconds_sum", labels) or 0.0,
    )


def tick_and_memory(
    workdir: Path,
    cluster: Cluster,
    redis: RedisServer,
    sizes: list[int],
    window: float,
    *,
    burst: int,
    lead: float,
) -> list[dict[str, Any]]:
    """One row per size; at the largest, also the lag of a burst due beside every job."""
    namespace = "scale"
    cluster.kubectl("create", "namespace", namespace)
    apiserver = _apiserver_pid(cluster)
    rows: list[dict[str, Any]] = []
    created = 0
    rng = random.Random(7)
    for size in [0, *sizes]:
        items = [
            job_manifest(
                f"s-{i:06d}",
                {"schedule": f"{rng.randrange(60)} {rng.randrange(24)} 1 1 *", "task": ECHO},
            )
            for i in range(created, size)
        ]
        started = time.monotonic()
        for start in range(0, len(items), 5000):
            create_jobs(cluster, namespace, items[start : start + 5000])
        created = max(created, size)
        create_seconds = time.monotonic() - started
        pages_before = requests_so_far(cluster, ("LIST",), resource="scheduledjobs")
        launched = time.monotonic()
        operator = start_operator(workdir, cluster, redis, namespace, str(size))
        try:
            _wait_indexed(operator, size)
            warm_seconds = time.monotonic() - launched
            indexed_cpu = cpu_seconds(operator.pid)
            apiserver_cpu = cpu_seconds(apiserver)
            # New jobs are owed their first status (phase, nextRunAt); measure after that.
            _wait_for_metric(operator, "tickwork_status_writes_pending", 0.0)
            backfill_seconds = time.monotonic() - launched
            written_cpu = cpu_seconds(operator.pid)
            apiserver_cpu = cpu_seconds(apiserver) - apiserver_cpu
            # Pages the operator listed: one list is ceil(size / 500); more is a relist.
            pages = requests_so_far(cluster, ("LIST",), resource="scheduledjobs") - pages_before
            before = _ticks(operator)
            time.sleep(window)  # the measurement window itself, not a wait for an event
            after = _ticks(operator)
            rss, peak = rss_bytes(operator.pid), peak_rss_bytes(operator.pid)
            lag = (
                burst_lag(cluster, redis, operator, namespace, burst, indexed=size, lead=lead)
                if size == max(sizes) and burst
                else None
            )
        finally:
            operator.stop()
        ticks = after[1] - before[1]
        row: dict[str, Any] = {
            "jobs": size,
            "create_seconds": round(create_seconds, 1),
            "index_warm_seconds": round(warm_seconds, 1),
            "status_backfill_seconds": round(backfill_seconds, 1),
            "ticks": int(ticks),
            "tick_mean_ms": round(1000 * (after[0] - before[0]) / ticks, 3) if ticks else None,
            "index_cpu_seconds": round(indexed_cpu, 1),
            "status_backfill_cpu_seconds": round(written_cpu, 1),
            # Once every job is indexed, per first status: the API server's CPU (the
            # ceiling's is in status_write_ceiling) and the operator's (writes and the
            # watch events they cause).
            "apiserver_ms_per_first_status": _per_job(apiserver_cpu, size),
            "operator_ms_per_first_status": _per_job(written_cpu - indexed_cpu, size),
            "list_pages": int(pages),
            "rss_mib": round(rss / 2**20, 1),
            "peak_rss_mib": round(peak / 2**20, 1),
        }
        if lag is not None:
            row["burst_lag"] = lag
            row["operator_status_sample"] = _operator_status(cluster, namespace, "s-000000")
        print(
            json.dumps({k: v for k, v in row.items() if k != "operator_status_sample"}), flush=True
        )
        rows.append(row)
    base = rows[0]
    for row in rows[1:]:
        row["rss_mib_per_1k_jobs"] = round(
            (row["rss_mib"] - base["rss_mib"]) / (row["jobs"] / 1000), 3
        )
        row["peak_over_steady"] = round(row["peak_rss_mib"] / row["rss_mib"], 2)
        if row["tick_mean_ms"] and base["tick_mean_ms"]:
            row["tick_ratio_vs_empty"] = round(row["tick_mean_ms"] / base["tick_mean_ms"], 2)
    return rows


def _apiserver_pid(cluster: Cluster) -> int:
    if cluster.plane is None:
        raise RuntimeError("the watcher benchmark runs on a local control plane")
    return cluster.plane.pids()["kube-apiserver"]


def _per_job(seconds: float, size: int) -> float | None:
    return round(1000 * seconds / size, 2) if size else None


def _wait_indexed(operator: TickworkProcess, size: int) -> None:
    _wait_for_metric(operator, "tickwork_index_jobs", float(size))


def _wait_for_metric(operator: TickworkProcess, name: str, value: float) -> None:
    def reached() -> bool:
        try:
            return operator.metric(name) == value
        except OSError:  # busy listing and indexing: /metrics answers late
            return False

    # Every 3 s (a scrape reads the phase counts the watch keeps: no pass over the jobs).
    wait_for(reached, timeout=1800, interval=3, what=f"{name} to reach {value}")


def _ticks(operator: TickworkProcess) -> tuple[float, float]:
    total = operator.metric("tickwork_tick_seconds_sum") or 0.0
    count = operator.metric("tickwork_tick_seconds_count") or 0.0
    return total, count


def first_statuses(
    workdir: Path,
    cluster: Cluster,
    redis: RedisServer,
    size: int,
    *,
    trees: dict[str, Path],
    rounds: int,
    ceiling: Callable[[int], dict[str, Any]] | None = None,
    again: Callable[[str, list[dict[str, Any]]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``size`` new jobs owe their first status: operator processes of two trees start
    against ``size`` fresh jobs each (a namespace per start), by turns (before, after,
    after, before, ...), ``rounds`` times each. Per start: seconds to every job indexed,
    to every first status, and the writing between (jobs per second); with
    ``ceiling``, the API server's ceiling measured right after it (``ceiling(i)``: the
    API server's rate wanders by up to 2x within an hour, so one measurement at the
    end can flatter or wrong every start); with ``again``, the API server's sustained
    rate over the same jobs once the operator stopped (``again(namespace, jobs)``)."""
    order = [("before", "after") if i % 2 == 0 else ("after", "before") for i in range(rounds)]
    starts: list[dict[str, Any]] = []
    rng = random.Random(11)
    for i, label in enumerate(label for pair in order for label in pair):
        namespace = f"first-{i}"
        cluster.kubectl("create", "namespace", namespace)
        items = [
            job_manifest(
                f"s-{k:06d}",
                {"schedule": f"{rng.randrange(60)} {rng.randrange(24)} 1 1 *", "task": ECHO},
            )
            for k in range(size)
        ]
        created: list[dict[str, Any]] = []
        for start in range(0, size, 5000):
            page = create_jobs(cluster, namespace, items[start : start + 5000])
            created += [
                {"metadata": {key: job["metadata"][key] for key in ("name", "uid")}} for job in page
            ]
        launched = time.monotonic()
        operator = start_operator(workdir, cluster, redis, namespace, namespace, tree=trees[label])
        try:
            _wait_indexed(operator, size)
            indexed = time.monotonic() - launched
            _wait_for_metric(operator, "tickwork_status_writes_pending", 0.0)
            written = time.monotonic() - launched
            cpu = cpu_seconds(operator.pid)
        finally:
            operator.stop()
        row = {
            "tree": label,
            "index_warm_seconds": round(indexed, 1),
            "status_backfill_seconds": round(written, 1),
            "writes_per_second": round(size / (written - indexed), 1),
            "operator_cpu_seconds": round(cpu, 1),
        }
        print(json.dumps(row), flush=True)
        if ceiling is not None:
            row["ceiling_after"] = ceiling(i)
        if again is not None:
            row["same_jobs_ceiling"] = again(namespace, created)
        starts.append(row)
    keys = (
        "index_warm_seconds",
        "status_backfill_seconds",
        "writes_per_second",
        "operator_cpu_seconds",
    )
    medians = {
        label: {
            key: round(statistics.median(r[key] for r in starts if r["tree"] == label), 1)
            for key in keys
        }
        for label in ("before", "after")
    }
    return {
        "jobs": size,
        "rounds": rounds,
        "trees": {k: str(v) for k, v in trees.items()},
        "starts": starts,
        "median": medians,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    if "first_statuses" in report:
        plot_first_statuses(report, path)
        return
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [r for r in report["scale"] if r["jobs"]]
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    jobs = [r["jobs"] for r in report["scale"]]
    left.plot(jobs, [r["tick_mean_ms"] for r in report["scale"]], marker="o")
    left.set_xscale("symlog", linthresh=1000)
    left.set_xlabel("ScheduledJobs indexed (none due)")
    left.set_ylabel("mean tick (ms)")
    left.set_ylim(bottom=0)
    left.set_title("Tick cost vs N")
    right.bar([f"{r['jobs']:,}" for r in rows], [r["rss_mib"] for r in rows])
    right.set_ylabel("operator RSS (MiB)")
    right.set_title("Operator memory")
    for axis in (left, right):
        axis.grid(visible=True, alpha=0.3)
    save_figure(figure, path)


def plot_first_statuses(report: dict[str, Any], path: Path) -> None:
    from tickwork_dev.devcluster.measure import pyplot  # noqa: PLC0415

    found = report["first_statuses"]
    figure, axis = pyplot().subplots(figsize=(7.5, 4))
    starts = found["starts"]
    colors = {"before": "tab:gray", "after": "tab:blue"}
    for i, row in enumerate(starts):
        axis.bar(i, row["index_warm_seconds"], color=colors[row["tree"]], alpha=0.5)
        axis.bar(
            i,
            row["status_backfill_seconds"] - row["index_warm_seconds"],
            bottom=row["index_warm_seconds"],
            color=colors[row["tree"]],
        )
    for key, color, label in (
        ("ceiling_after", "tab:orange", "floor of the ceiling after that start"),
        ("same_jobs_ceiling", "tab:green", "floor of its own jobs written again"),
    ):
        floors = [
            (i, found["jobs"] / row[key]["ceiling_per_second"])
            for i, row in enumerate(starts)
            if key in row
        ]
        if floors:
            axis.scatter(
                [i for i, _ in floors],
                [f for _, f in floors],
                marker="_",
                s=900,
                color=color,
                label=label,
            )
    floor = found["floor_seconds"]
    axis.axhline(floor, color="black", linestyle="--", label=f"floor {floor:.0f} s (best ceiling)")
    axis.axhline(1.3 * floor, color="tab:red", linestyle=":", label="target 1.3 x floor")
    axis.set_xticks(range(len(starts)), [r["tree"] for r in starts])
    axis.set_ylabel("seconds from start (pale: to every job indexed)")
    axis.set_title(f"First status of {found['jobs']:,} new jobs, by turns")
    axis.legend()
    axis.grid(visible=True, axis="y", alpha=0.3)
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "watcher")
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument(
        "--burst-lead",
        type=float,
        default=30.0,
        help="seconds from creating a burst to its due second (plus one per 50 jobs)",
    )
    parser.add_argument(
        "--ceiling-writes",
        type=int,
        default=3000,
        help="status writes per level when measuring the API server's ceiling",
    )
    parser.add_argument("--ceiling-concurrency", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument(
        "--compare-with",
        type=Path,
        help="another tree ('before'): only the first statuses of the "
        "largest --sizes, by turns with this tree's, --rounds each",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--same-jobs-ceiling",
        action="store_true",
        help="with --compare-with: after every start, write the same jobs' "
        "statuses once more with one client (the sustained ceiling)",
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"benchmark": "watcher", "python": platform.python_version()}
    with tempfile.TemporaryDirectory(prefix="operator-bench-") as tmp:
        workdir = Path(tmp)
        if args.compare_with:
            return compare(args, workdir, report)
        with plane_with_crd(workdir) as (cluster, redis):
            report["publish_lag"] = publish_lag(
                workdir, cluster, redis, args.burst, lead=args.burst_lead
            )
            print(json.dumps(report["publish_lag"]), flush=True)
            report["scale"] = tick_and_memory(
                workdir,
                cluster,
                redis,
                args.sizes,
                args.window,
                burst=args.burst,
                lead=args.burst_lead,
            )
            largest = report["scale"][-1]
            status = largest.pop("operator_status_sample")
            report["status_write_ceiling"] = ceiling = status_write_ceiling(
                cluster, status, args.ceiling_writes, args.ceiling_concurrency
            )
            for row in report["scale"][1:]:
                # Issue 18's target: first status of N new jobs <= 1.3 x N / ceiling.
                floor = row["jobs"] / ceiling["ceiling_per_second"]
                row["status_backfill_floor_seconds"] = round(floor, 1)
                row["status_backfill_over_floor"] = round(row["status_backfill_seconds"] / floor, 2)
    save_report(report, args.out, args)
    plot(report, args.plot)
    lags = [report["publish_lag"], *(r["burst_lag"] for r in report["scale"] if "burst_lag" in r)]
    return 0 if all(lag["lag_p99_seconds"] <= 1.0 for lag in lags) else 1


def _over_same_jobs(found: dict[str, Any]) -> None:
    """Each start over the floor of its own jobs written once more (the sustained
    ceiling), and the medians over the floor of the best such ceiling of the run."""
    jobs = found["jobs"]
    best = max(row["same_jobs_ceiling"]["ceiling_per_second"] for row in found["starts"])
    floor = jobs / best
    for row in found["starts"]:
        rate = row["same_jobs_ceiling"]["ceiling_per_second"]
        row["over_floor_of_the_same_jobs"] = round(row["status_backfill_seconds"] * rate / jobs, 2)
        # A rewrite reads a larger object than a first write: the burst after the start
        # measured both; their ratio turns the rewrites' rate into first writes'.
        factor = row["ceiling_after"]["first_over_rewrite"]
        row["over_floor_of_the_same_jobs_as_first_writes"] = round(
            row["status_backfill_seconds"] * rate * factor / jobs, 2
        )
    found["same_jobs_floor_seconds"] = round(floor, 1)
    found["same_jobs_ceiling_of_every_start"] = [
        row["same_jobs_ceiling"]["ceiling_per_second"] for row in found["starts"]
    ]
    for label in ("before", "after"):
        median = found["median"][label]
        median["over_same_jobs_floor"] = round(median["status_backfill_seconds"] / floor, 2)
        for key in ("over_floor_of_the_same_jobs", "over_floor_of_the_same_jobs_as_first_writes"):
            median[key] = round(
                statistics.median(row[key] for row in found["starts"] if row["tree"] == label), 2
            )


def compare(args: Any, workdir: Path, report: dict[str, Any]) -> int:
    """``--compare-with``: the first statuses of two trees by turns, then the ceiling."""
    here = Path(__file__).resolve().parent.parent
    trees = {"before": args.compare_with.resolve(), "after": here}
    with plane_with_crd(workdir) as (cluster, redis):
        sample: list[dict[str, Any]] = []  # as the first start wrote it, before any rewrite

        def written() -> dict[str, Any]:
            if not sample:
                sample.append(_operator_status(cluster, "first-0", "s-000000"))
            return sample[0]

        def measured(i: int) -> dict[str, Any]:
            return status_write_ceiling(
                cluster,
                written(),
                args.ceiling_writes,
                args.ceiling_concurrency,
                label=f"-{i}",
                rewrite=args.same_jobs_ceiling,
            )

        def again(namespace: str, jobs: list[dict[str, Any]]) -> dict[str, Any]:
            return same_jobs_ceiling(cluster, namespace, jobs, written(), args.ceiling_concurrency)

        found = first_statuses(
            workdir,
            cluster,
            redis,
            max(args.sizes),
            trees=trees,
            rounds=args.rounds,
            ceiling=measured,
            again=again if args.same_jobs_ceiling else None,
        )
    # The floor from the best ceiling of the run (the strictest): after every start.
    ceiling = max(
        (row["ceiling_after"] for row in found["starts"]), key=lambda c: c["ceiling_per_second"]
    )
    ceiling["of_every_start"] = [
        row["ceiling_after"]["ceiling_per_second"] for row in found["starts"]
    ]
    floor = found["jobs"] / ceiling["ceiling_per_second"]
    for row in found["starts"]:
        row["over_floor"] = round(row["status_backfill_seconds"] / floor, 2)
        after = row["ceiling_after"]["ceiling_per_second"]
        row["over_floor_of_its_own_ceiling"] = round(
            row["status_backfill_seconds"] * after / found["jobs"], 2
        )
    found["floor_seconds"] = round(floor, 1)
    for label in ("before", "after"):
        median = found["median"][label]
        median["over_floor"] = round(median["status_backfill_seconds"] / floor, 2)
        median["writing_over_ceiling"] = round(
            median["writes_per_second"] / ceiling["ceiling_per_second"], 2
        )
    if args.same_jobs_ceiling:
        _over_same_jobs(found)
    seconds = {k: v["status_backfill_seconds"] for k, v in found["median"].items()}
    found["after_over_before"] = round(seconds["after"] / seconds["before"], 2)
    report["first_statuses"] = found
    report["status_write_ceiling"] = ceiling
    print(
        json.dumps(
            {
                "median": found["median"],
                "floor_seconds": found["floor_seconds"],
                "after_over_before": found["after_over_before"],
            }
        ),
        flush=True,
    )
    report["commits"] = {label: code_commit(tree) for label, tree in trees.items()}
    save_report(report, args.out, args)
    plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
