"""A worker's memory with its job cache, as the number of jobs grows.

    python benchmarks/worker_memory.py [--sizes 5000 15000 30000] [--compare-with DIR]

A local control plane holds ScheduledJobs, each with ``--history`` finished runs in
its status (what a fleet's jobs carry once they ran), created in steps up to each
of ``--sizes``. At every size a fresh worker process with its job cache lists them
all; its RSS is read from /proc once the cache holds every job and the heap trim
after the list has run (RSS no longer falls). A worker without the cache gives the
process's own floor. The RSS per size is fitted with a line: its slope is the
cache's cost per 1,000 jobs, free of what one list page costs once (the figure a
single size mixes in), and the line at 100,000 jobs is what issue 18's target
(≤ 150 MiB) is held against.

``--compare-with DIR`` runs a worker with another checkout's code beside this
tree's at every size, on the same jobs, in the same run: compare the ratios, the
machine is shared. Writes benchmarks/results/worker_memory.json and a plot.
"""

from __future__ import annotations

import asyncio
import json
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

ECHO = {"echo": {"message": "tick"}}
NAMESPACE = "cache"
TARGET_JOBS = 100_000
TARGET_MIB = 150


def _pythonpath(tree: Path) -> str:
    return ":".join(str(tree / part) for part in ("", "operator", "worker", "dev"))


def _settled_rss(pid: int) -> float:
    """RSS in MiB once it stops falling (the heap trim after the list has run)."""
    from tickwork_dev.devcluster.measure import rss_bytes  # noqa: PLC0415

    last = rss_bytes(pid)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(1)  # sampling a settling figure, not waiting for an event
        now = rss_bytes(pid)
        if now >= last:
            return now / 2**20
        last = now
    return last / 2**20


def _measure(
    workdir: Path,
    cluster: Any,
    redis: Any,
    tree: Path | None,
    jobs: int,
    *,
    cache: bool,
    label: str,
) -> dict[str, float]:
    from tickwork_dev.devcluster.components import TickworkProcess, wait_for  # noqa: PLC0415

    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis.url,
        "TICKWORK_REDIS_QUEUE": f"q-{label}",
        "TICKWORK_WORKER_NAMESPACES": NAMESPACE,
        "TICKWORK_WORKER_JOB_CACHE": str(cache).lower(),
        "TICKWORK_WORKER_LOG_LEVEL": "WARNING",
    }
    if tree is not None:
        env["PYTHONPATH"] = _pythonpath(tree)
    worker = TickworkProcess(
        command="tickwork-worker", env=env, log_path=workdir / f"worker-{label}-{jobs}.log"
    ).start()
    try:
        worker.wait_ready(timeout=900)  # ready once listed: minutes at 100,000 jobs
        if cache:
            wait_for(
                lambda: worker.metric("tickwork_worker_job_cache_objects") == jobs,
                timeout=900,
                interval=0.5,
                what="the cache to hold every job",
            )
        rss = _settled_rss(worker.pid)
        text = Path(f"/proc/{worker.pid}/status").read_text()
        peak = int(text.split("VmHWM:")[1].split()[0]) / 1024
        return {"rss_mib": round(rss, 1), "peak_mib": round(peak, 1)}
    finally:
        worker.stop()


def fit(points: list[tuple[int, float]]) -> dict[str, float]:
    """Least squares line through (jobs, MiB): MiB per 1,000 jobs, the intercept, and
    the line at :data:`TARGET_JOBS`."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    intercept = mean_y - slope * mean_x
    return {
        "mib_per_1k_jobs": round(slope * 1000, 3),
        "intercept_mib": round(intercept, 1),
        f"rss_at_{TARGET_JOBS}_mib": round(intercept + slope * TARGET_JOBS, 1),
    }


def main(argv: list[str] | None = None) -> int:
    from tickwork_dev.devcluster.measure import (  # noqa: PLC0415
        benchmark_parser,
        create_jobs,
        job_manifest,
        plane_with_crd,
        save_report,
        write_history,
    )

    parser = benchmark_parser(__doc__, "worker_memory")
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 15000, 30000])
    parser.add_argument("--history", type=int, default=6)
    parser.add_argument("--compare-with", type=Path, help="another checkout's tree: 'before'")
    args = parser.parse_args(argv)
    variants: list[tuple[str, Path | None]] = [("after", None)]
    if args.compare_with:
        variants.insert(0, ("before", args.compare_with.resolve()))
    report: dict[str, Any] = {
        "benchmark": "worker_memory",
        "python": platform.python_version(),
        "history": args.history,
        "sizes": sorted(args.sizes),
        "no_cache": {},
        "variants": {},
    }
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="worker-memory-") as tmp:
        workdir = Path(tmp)
        with plane_with_crd(workdir) as (cluster, redis):
            cluster.kubectl("create", "namespace", NAMESPACE)
            made = 0
            for size in sorted(args.sizes):
                for start in range(made, size, 5000):
                    items = [
                        job_manifest(
                            f"w-{i:06d}",
                            {
                                "schedule": f"{rng.randrange(60)} {rng.randrange(24)} 1 1 *",
                                "task": ECHO,
                            },
                        )
                        for i in range(start, min(size, start + 5000))
                    ]
                    created = create_jobs(cluster, NAMESPACE, items)
                    if args.history:
                        asyncio.run(write_history(cluster, created, args.history))
                made = size
                for label, tree in variants:
                    found = _measure(workdir, cluster, redis, tree, size, cache=True, label=label)
                    report["variants"].setdefault(label, {"points": []})["points"].append(
                        {"jobs": size, **found}
                    )
                    print(json.dumps({"variant": label, "jobs": size, **found}), flush=True)
            report["no_cache"] = _measure(
                workdir, cluster, redis, None, made, cache=False, label="no-cache"
            )
    for variant in report["variants"].values():
        variant["fit"] = fit([(p["jobs"], p["rss_mib"]) for p in variant["points"]])
    if "before" in report["variants"]:
        before, after = (report["variants"][k]["fit"] for k in ("before", "after"))
        report["after_over_before"] = {
            key: round(after[key] / before[key], 2) for key in after if before[key]
        }
    print(json.dumps({k: v for k, v in report.items() if k != "variants"}), flush=True)
    save_report(report, args.out)
    plot(report, args.plot)
    return 0


def plot(report: dict[str, Any], path: Path) -> None:
    from tickwork_dev.devcluster.measure import pyplot, save_figure  # noqa: PLC0415

    figure, axis = pyplot().subplots(figsize=(7, 4.2))
    for label, variant in report["variants"].items():
        xs = [p["jobs"] for p in variant["points"]]
        ys = [p["rss_mib"] for p in variant["points"]]
        line = variant["fit"]
        axis.plot(xs, ys, "o", label=f"{label}: {line['mib_per_1k_jobs']} MiB per 1,000 jobs")
        ends = [0, TARGET_JOBS]
        axis.plot(
            ends,
            [line["intercept_mib"] + line["mib_per_1k_jobs"] * x / 1000 for x in ends],
            "--",
            color=axis.lines[-1].get_color(),
        )
    axis.axhline(TARGET_MIB, color="red", linewidth=1, label=f"target at {TARGET_JOBS:,} jobs")
    if report.get("no_cache"):
        axis.axhline(
            report["no_cache"]["rss_mib"], color="grey", linewidth=1, label="worker without a cache"
        )
    axis.set_xlabel(f"ScheduledJobs (history of {report['history']} runs each)")
    axis.set_ylabel("worker RSS (MiB)")
    axis.set_title("A worker's job cache: RSS vs jobs, fitted and extrapolated")
    axis.legend(fontsize=8)
    save_figure(figure, path)


if __name__ == "__main__":
    raise SystemExit(main())
