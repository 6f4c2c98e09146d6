"""Benchmarks of the pure core: bucket-index ticks, next-run arithmetic, memory per job.

    python benchmarks/core.py [--sizes 1000 10000 100000 1000000] [--plot FILE] [--out FILE]

Prints one JSON document. Absolute times depend on the machine; compare the
ratios inside one run (``ratios``), which is what the targets are about:
a tick with nothing due must cost the same at 1M jobs as at 1k (within 1.5x).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from tickwork.core.buckets import BucketIndex
from tickwork.core.schedule import cron_schedule
from tickwork_dev.devcluster.measure import save_report

START = 1_800_000_000.0  # an instant in 2027, seconds since the epoch
TICKS = 400


def _keys(count: int) -> list[str]:
    return [str(uuid.UUID(int=i)) for i in range(count)]


def _median_ns(samples: list[int]) -> float:
    return float(statistics.median(samples))


def tick_nothing_due(count: int) -> dict[str, Any]:
    """Jobs due from one day out; every tick finds nothing."""
    keys = _keys(count)
    index: BucketIndex[str] = BucketIndex(start=START, width=1.0)
    for i, key in enumerate(keys):
        index.put(key, START + 86_400 + (i % 86_400))
    samples = []
    now = START
    gc.disable()
    try:
        for _ in range(TICKS):
            now += 1.0
            started = time.perf_counter_ns()
            popped = index.pop_due(now)
            samples.append(time.perf_counter_ns() - started)
            assert not popped  # noqa: S101 - the benchmark's premise
    finally:
        gc.enable()
    return {
        "jobs": count,
        "tick_ns_median": _median_ns(samples),
        "tick_ns_p99": sorted(samples)[int(len(samples) * 0.99) - 1],
    }


def tick_one_percent_due(count: int) -> dict[str, Any]:
    """Each tick, 1% of the jobs fall due; the tick pops them and re-indexes each."""
    keys = _keys(count)
    per_tick = max(1, count // 100)
    index: BucketIndex[str] = BucketIndex(start=START, width=1.0)
    for i, key in enumerate(keys):
        index.put(key, START + 1 + (i // per_tick) + 0.5)
    samples = []
    now = START
    ticks = min(TICKS, 100)
    gc.disable()
    try:
        for _ in range(ticks):
            now += 1.0
            started = time.perf_counter_ns()
            popped = index.pop_due(now + 0.5)
            for item in popped:
                index.put(item.key, item.due + 100.0)  # its next run
            samples.append(time.perf_counter_ns() - started)
            assert len(popped) == per_tick  # noqa: S101 - the benchmark's premise
    finally:
        gc.enable()
    median = _median_ns(samples)
    return {
        "jobs": count,
        "due_per_tick": per_tick,
        "tick_ns_median": median,
        "ns_per_due_job": median / per_tick,
    }


def memory_per_job(count: int) -> dict[str, Any]:
    keys = _keys(count)  # the keys exist anyway (the operator's uids)
    gc.collect()
    tracemalloc.start()
    index: BucketIndex[str] = BucketIndex(start=START, width=1.0)
    for i, key in enumerate(keys):
        index.put(key, START + (i % 86_400))
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"jobs": count, "bytes_per_job": current / count, "buckets": index.bucket_count}


SCHEDULES = [
    ("* * * * *", "UTC"),
    ("*/5 * * * *", "Europe/Berlin"),
    ("30 2 * * *", "America/New_York"),
    ("0 9 * * mon-fri", "Australia/Lord_Howe"),
    ("0 0 1 jan *", "Pacific/Chatham"),
]


def next_runs_per_second(seconds: float = 1.0) -> list[dict[str, Any]]:
    results = []
    for expression, zone in SCHEDULES:
        schedule = cron_schedule(expression, zone)
        moment = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        schedule.next_run_after(moment)  # warm the transition cache
        done = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                following = schedule.next_run_after(moment)
                assert following is not None  # noqa: S101
                moment = following
            done += 100
        elapsed = time.perf_counter() - started
        results.append({"schedule": expression, "zone": zone, "per_second": done / elapsed})
    return results


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional, only for --plot

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    sizes = [r["jobs"] for r in report["tick_nothing_due"]]
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.plot(
        sizes,
        [r["tick_ns_median"] / 1000 for r in report["tick_nothing_due"]],
        marker="o",
        label="nothing due",
    )
    axis.plot(
        sizes,
        [r["tick_ns_median"] / 1000 for r in report["tick_one_percent_due"]],
        marker="o",
        label="1% due (pop + re-index)",
    )
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("scheduled jobs in the index")
    axis.set_ylabel("tick cost (µs, median)")
    axis.set_title("Bucket index: tick cost vs index size")
    axis.legend()
    axis.grid(visible=True, which="both", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    nothing = [tick_nothing_due(n) for n in args.sizes]
    some = [tick_one_percent_due(n) for n in args.sizes]
    report: dict[str, Any] = {
        "benchmark": "core",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "tick_nothing_due": nothing,
        "tick_one_percent_due": some,
        "memory": [memory_per_job(n) for n in args.sizes],
        "next_run_per_second": next_runs_per_second(),
    }
    smallest, largest = nothing[0], nothing[-1]
    report["ratios"] = {
        f"tick_nothing_due_{largest['jobs']}_vs_{smallest['jobs']}": largest["tick_ns_median"]
        / smallest["tick_ns_median"],
        "target": "<= 1.5",
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        save_report(report, args.out, args)
    if args.plot:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
