"""Sharding the watcher's index by uid hash: does each shard's cost follow its share?

    python benchmarks/shards.py [--jobs 200000] [--shards 2] [--minutes 60]

The pure core only (docs/scaling.md): ``--jobs`` hourly cron schedules (a random
minute each; the parsed schedules are shared as in the operator) are split over
``--shards`` bucket indexes by the 64-bit FNV-1a hash of their uid in equal
ranges (the API server's ``shardRange(object.metadata.uid, ...)`` selector), as
shard leaders would hold them. For one index holding every job and for each
shard, the script measures

* **memory**: what building the index and its keys allocated (tracemalloc);
* **a simulated hour of ticks**: every second, pop what is due and put each job
  back at its next run (``next_run_after``), as the leader's tick does; the sum
  of the tick times, the slowest tick (at the top of a minute, when a sixtieth
  of the shard's jobs is due) and the median tick with nothing due.

The claim checked: each shard's memory and tick work are its share of one index's
(within noise), so N jobs over S shards cost each leader about N/S. Absolute
times depend on the machine; compare the ratios. Writes
benchmarks/results/shards.json and a plot.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import platform
import random
import statistics
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from tickwork.core.buckets import BucketIndex
from tickwork.core.schedule import Schedule, cron_schedule
from tickwork_dev.devcluster.measure import benchmark_parser, save_figure, save_report

START = dt.datetime(2027, 1, 4, 9, 0, 30, tzinfo=dt.UTC)


def fnv1a64(text: str) -> int:
    """64-bit FNV-1a, the hash the API server's shard selector computes (KEP-5866)."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) % 2**64
    return value


def shard_of(uid: str, shards: int) -> int:
    """The shard whose hash range holds the uid: shard i of S owns
    ``shardRange(object.metadata.uid, i * 2**64 / S, (i + 1) * 2**64 / S)``."""
    return fnv1a64(uid) * shards // 2**64


def _jobs(count: int) -> list[tuple[str, Schedule]]:
    rng = random.Random(7)
    return [
        (
            str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            cron_schedule(f"{rng.randrange(60)} * * * *"),
        )
        for _ in range(count)
    ]


def measure(jobs: list[tuple[str, Schedule]], minutes: int) -> dict[str, Any]:
    """Build one index of ``jobs`` and run ``minutes`` of one-second ticks over it."""
    schedules = dict(jobs)
    gc.collect()
    tracemalloc.start()
    index: BucketIndex[str] = BucketIndex(start=START.timestamp(), width=1.0)
    for uid, schedule in jobs:
        first = schedule.next_run_after(START)
        assert first is not None  # noqa: S101 - hourly schedules never end
        index.put(str(uid), first.timestamp())  # a key of its own, as the watcher holds
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    ticks, idle, popped = [], [], 0
    now = START
    gc.disable()
    try:
        for _ in range(minutes * 60):
            now += dt.timedelta(seconds=1)
            started = time.perf_counter_ns()
            due = index.pop_due(now.timestamp())
            for entry in due:
                following = schedules[entry.key].next_run_after(now)
                assert following is not None  # noqa: S101
                index.put(entry.key, following.timestamp())
            spent = time.perf_counter_ns() - started
            ticks.append(spent)
            popped += len(due)
            if not due:
                idle.append(spent)
    finally:
        gc.enable()
    return {
        "jobs": len(jobs),
        "index_mib": round(memory / 2**20, 2),
        "index_kib_per_1k_jobs": round(memory / 1024 / max(len(jobs), 1) * 1000, 1),
        "runs_published": popped,
        "tick_seconds_total": round(sum(ticks) / 1e9, 3),
        "tick_max_ms": round(max(ticks) / 1e6, 2),
        "tick_idle_median_us": round(statistics.median(idle) / 1e3, 2) if idle else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "shards")
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="measure every index this often, keep each one's fastest",
    )
    args = parser.parse_args(argv)
    jobs = _jobs(args.jobs)

    parts_jobs = [
        [job for job in jobs if shard_of(job[0], args.shards) == shard]
        for shard in range(args.shards)
    ]
    # Repeats go round every index in turn (all, shard 0, shard 1, all, ...), so that
    # a slow spell of the shared machine does not fall on one index only.
    rounds = [
        [measure(mine, args.minutes) for mine in [jobs, *parts_jobs]] for _ in range(args.repeats)
    ]
    fastest = [
        min((r[i] for r in rounds), key=lambda run: run["tick_seconds_total"])
        for i in range(args.shards + 1)
    ]
    whole = fastest[0]
    print(json.dumps({"index": "all", **whole}), flush=True)
    parts: list[dict[str, Any]] = []
    for shard, mine in enumerate(parts_jobs):
        row = {"shard": shard, "share": round(len(mine) / len(jobs), 4), **fastest[shard + 1]}
        for key in ("index_mib", "runs_published", "tick_seconds_total", "tick_max_ms"):
            row[f"{key}_vs_all"] = round(row[key] / whole[key], 3) if whole[key] else None
        print(json.dumps(row), flush=True)
        parts.append(row)
    report = {
        "benchmark": "shards",
        "python": platform.python_version(),
        "jobs": args.jobs,
        "shards": args.shards,
        "minutes": args.minutes,
        "repeats": args.repeats,
        "all": whole,
        "per_shard": parts,
    }
    save_report(report, args.out, args)
    plot(report, args.plot)
    return 0


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [("all", report["all"])] + [(f"shard {r['shard']}", r) for r in report["per_shard"]]
    figure, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    for axis, key, title in zip(
        axes,
        ("index_mib", "tick_seconds_total", "tick_max_ms"),
        ("index memory (MiB)", f"tick time over {report['minutes']} min (s)", "slowest tick (ms)"),
        strict=True,
    ):
        axis.bar(
            [name for name, _ in rows],
            [row[key] for _, row in rows],
            color=["grey"] + ["tab:blue"] * len(report["per_shard"]),
        )
        axis.set_title(title)
        axis.grid(visible=True, alpha=0.3, axis="y")
    figure.suptitle(
        f"{report['jobs']:,} hourly jobs: one index vs {report['shards']} shards by uid hash"
    )
    save_figure(figure, path)


if __name__ == "__main__":
    sys.exit(main())
