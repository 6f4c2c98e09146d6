"""The watcher on the real API server: publish lag of a burst, tick cost and memory at scale.

(Named watcher.py, not operator.py: a script's folder comes first on sys.path,
and a file called operator.py would shadow the standard library's operator.)

    python benchmarks/watcher.py [--burst 1000] [--sizes 10000 100000] [--window 30]

* **Publish lag**: ``--burst`` one-shot ScheduledJobs due in the same second;
  lag = when Redis accepted each run (``enqueued_at``) minus the due second.
  Target: p99 <= 1 s.
* **Tick cost and memory**: ScheduledJobs that are not due (yearly schedules)
  are created in the API server until there are N of them; for each N a fresh
  operator process lists them, and once its index holds all N and their first
  status is written, the mean tick (``tickwork_tick_seconds``) over ``--window``
  seconds and its RSS are read.
  Target: the tick with nothing due does not grow with N; RSS per 1,000 jobs
  is reported.

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
from pathlib import Path
from typing import Any

from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage
from tickwork.queue.redis_queue import RedisRunQueue
from tickwork.queue.settings import RedisSettings
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for
from tickwork_dev.devcluster.measure import (
    benchmark_parser,
    create_jobs,
    job_manifest,
    percentile,
    plane_with_crd,
    rss_bytes,
    save_figure,
)
from tickwork_dev.devcluster.redis import RedisServer

ECHO = {"echo": {"message": "tick"}}


def start_operator(workdir: Path, cluster: Cluster, redis: RedisServer, namespace: str,
                   label: str) -> TickworkProcess:  # fmt: skip
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis.url,
        "TICKWORK_REDIS_QUEUE": namespace,
        "TICKWORK_OPERATOR_NAMESPACES": namespace,
        "TICKWORK_OPERATOR_LOG_LEVEL": "WARNING",
    }
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


def publish_lag(workdir: Path, cluster: Cluster, redis: RedisServer, burst: int) -> dict[str, Any]:
    namespace = "burst"
    cluster.kubectl("create", "namespace", namespace)
    operator = start_operator(workdir, cluster, redis, namespace, "burst")
    try:
        # Due on a whole second far enough ahead for every job to be created and indexed.
        due = dt.datetime.fromtimestamp(int(time.time()) + 30 + burst // 50, dt.UTC)
        spec = {"runAt": due.isoformat().replace("+00:00", "Z"), "task": ECHO}
        create_jobs(cluster, namespace, [job_manifest(f"b-{i:05d}", spec) for i in range(burst)])
        wait_for(lambda: operator.metric("tickwork_index_jobs") == burst, timeout=120,
                 what="the index to hold the burst")  # fmt: skip
        if time.time() >= due.timestamp():
            raise RuntimeError("creating the burst took longer than planned; lower --burst")
        messages: list[RunMessage] = []

        def all_published() -> bool:
            messages.extend(drain(redis, namespace))
            return len(messages) >= burst

        wait_for(all_published, timeout=120, interval=0.5, what="every run published")
        lags = [m.enqueued_at - due.timestamp() for m in messages if m.enqueued_at is not None]
    finally:
        operator.stop()
    return {
        "jobs": burst,
        "published": len(lags),
        "lag_p50_seconds": round(statistics.median(lags), 3),
        "lag_p99_seconds": round(percentile(lags, 0.99), 3),
        "lag_max_seconds": round(max(lags), 3),
        "target_p99_seconds": 1.0,
    }


def tick_and_memory(workdir: Path, cluster: Cluster, redis: RedisServer, sizes: list[int],
                    window: float) -> list[dict[str, Any]]:  # fmt: skip
    namespace = "scale"
    cluster.kubectl("create", "namespace", namespace)
    rows: list[dict[str, Any]] = []
    created = 0
    rng = random.Random(7)
    for size in [0, *sizes]:
        items = [job_manifest(f"s-{i:06d}", {
            "schedule": f"{rng.randrange(60)} {rng.randrange(24)} 1 1 *", "task": ECHO})
            for i in range(created, size)]  # fmt: skip
        started = time.monotonic()
        for start in range(0, len(items), 5000):
            create_jobs(cluster, namespace, items[start : start + 5000])
        created = max(created, size)
        create_seconds = time.monotonic() - started
        launched = time.monotonic()
        operator = start_operator(workdir, cluster, redis, namespace, str(size))
        try:
            _wait_indexed(operator, size)
            warm_seconds = time.monotonic() - launched
            # New jobs are owed their first status (phase, nextRunAt); measure after that.
            _wait_for_metric(operator, "tickwork_status_writes_pending", 0.0)
            backfill_seconds = time.monotonic() - launched
            before = _ticks(operator)
            time.sleep(window)  # the measurement window itself, not a wait for an event
            after = _ticks(operator)
            rss = rss_bytes(operator.pid)
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
            "rss_mib": round(rss / 2**20, 1),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    base = rows[0]
    for row in rows[1:]:
        row["rss_mib_per_1k_jobs"] = round(
            (row["rss_mib"] - base["rss_mib"]) / (row["jobs"] / 1000), 3
        )
        if row["tick_mean_ms"] and base["tick_mean_ms"]:
            row["tick_ratio_vs_empty"] = round(row["tick_mean_ms"] / base["tick_mean_ms"], 2)
    return rows


def _wait_indexed(operator: TickworkProcess, size: int) -> None:
    _wait_for_metric(operator, "tickwork_index_jobs", float(size))


def _wait_for_metric(operator: TickworkProcess, name: str, value: float) -> None:
    def reached() -> bool:
        try:
            return operator.metric(name) == value
        except OSError:  # busy listing and indexing: /metrics answers late
            return False

    wait_for(reached, timeout=1800, interval=1, what=f"{name} to reach {value}")


def _ticks(operator: TickworkProcess) -> tuple[float, float]:
    total = operator.metric("tickwork_tick_seconds_sum") or 0.0
    count = operator.metric("tickwork_tick_seconds_count") or 0.0
    return total, count


def plot(report: dict[str, Any], path: Path) -> None:
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


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "watcher")
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"benchmark": "watcher", "python": platform.python_version()}
    with tempfile.TemporaryDirectory(prefix="operator-bench-") as tmp:
        workdir = Path(tmp)
        with plane_with_crd(workdir) as (cluster, redis):
            report["publish_lag"] = publish_lag(workdir, cluster, redis, args.burst)
            print(json.dumps(report["publish_lag"]), flush=True)
            report["scale"] = tick_and_memory(workdir, cluster, redis, args.sizes, args.window)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.plot)
    return 0 if report["publish_lag"]["lag_p99_seconds"] <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
