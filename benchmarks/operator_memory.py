"""Where the operator's memory goes: RSS and tracemalloc per phase of a cold start.

    python benchmarks/operator_memory.py [--jobs 10000] [--compare-with /work/main]

A local control plane holds ``--jobs`` ScheduledJobs (yearly schedules: nothing
is due, every job is owed its first status), each with ``--history`` finished runs in
its status (a fleet's jobs once they ran). A fresh operator process starts
against them, twice per variant: once plain (RSS is read from /proc) and once
under tracemalloc (what holds the memory, by category). Phases:

* ``started``: imports done, nothing listed yet;
* ``indexed``: every job is in the index (the initial list has been handled);
* ``status_written``: the first status of every job is written;
* ``steady``: 70 s later, after a garbage collection (kopf's per-object worker
  tasks have idled out by then, and the operator's periodic heap trim has run).

``peak`` is the process's high-water RSS (VmHWM); ``cpu_seconds`` the process's CPU
time so far (a fairer figure than wall time on a shared machine). Allocations are put in a
category by the innermost frame that names an owner: pydantic (the models a
JobEntry holds), kopf's per-object memories, kopf's queueing (a stream and a
worker task per object while events flow), the JSON bodies (aiohttp, json,
kopf's API client), Tickwork's core (the index, parsed schedules) and the rest
of Tickwork's operator (JobEntry and its fields).

``--compare-with DIR`` runs the same measurement with the operator code of
another checkout (e.g. main) in a namespace of its own, in the same run: the
before/after ratios are what to compare, the machine is shared and noisy.
Writes benchmarks/results/operator_memory.json and a plot.

``--index-rounds R`` (with ``--compare-with``) measures only the time to index: the
jobs are created once, and operator processes of the two trees start against them
by turns, R times each (before, after, after, before, ...), each ending once every
job is indexed (before its first status write): wall and CPU seconds per start,
their medians and the after ÷ before ratios (``operator_index_50k.json``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ECHO = {"echo": {"message": "tick"}}
FRAMES = 1  # deeper tracebacks make indexing ~50x slower; the innermost frame names the owner
CATEGORIES = (
    # (substring of a frame's file name, category); the innermost matching frame wins
    ("/pydantic", "pydantic models"),
    ("/kopf/_core/reactor/inventory.py", "kopf per-object memories"),
    ("/kopf/_core/reactor/queueing.py", "kopf queueing (streams, worker tasks)"),
    ("/kopf/_cogs/clients/", "JSON bodies (list/watch)"),
    ("/aiohttp/", "JSON bodies (list/watch)"),
    ("/json/", "JSON bodies (list/watch)"),
    ("/kopf/", "kopf (other)"),
    ("/tickwork/core/", "Tickwork core (index, schedules)"),
    ("/tickwork_operator/", "Tickwork JobEntry and state"),
    ("/tickwork/", "Tickwork JobEntry and state"),
    ("/asyncio/", "asyncio (other)"),
)


# -- the child: one operator process that measures itself ---------------------------


def _rss() -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def _category(trace: Any) -> str:
    for name in [frame.filename for frame in trace]:  # innermost first
        for part, category in CATEGORIES:
            if part in name:
                return category
    return "other"


def _deep_size(roots: list[Any], seen: set[int]) -> int:
    """Bytes reachable from ``roots`` and not counted before (``seen`` is shared, so
    what several owners share is counted once, for the first)."""
    import types  # noqa: PLC0415

    skip = (
        type,
        types.ModuleType,
        types.FunctionType,
        types.BuiltinFunctionType,
        types.MethodType,
        types.CodeType,
    )
    total, stack = 0, list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def _owners(state: Any, jobs: int) -> dict[str, float]:
    """Deep sizes per owner, KiB per 1,000 jobs, shared objects counted once."""

    entries = list(state.jobs.values())
    seen: set[int] = {id(state)}
    sizes = {
        "index (BucketIndex)": _deep_size([state.index], seen),
        "parsed schedules": _deep_size([e.schedule for e in entries], seen),
        "spec models": _deep_size([e.spec for e in entries], seen),
        "observed status models": _deep_size([e.observed for e in entries], seen),
        "wanted/written status models": _deep_size(
            [m for e in entries for m in (e.wanted, e.written)], seen
        ),
        "JobEntry records and the rest": _deep_size([state.jobs], seen),
    }
    # kopf's class or a subclass of it (LeanMemories), by name: --compare-with may run
    # a tree whose operator has either.
    kinds = {"ResourceMemories", "LeanMemories"}
    items = [m._items for m in gc.get_objects() if type(m).__name__ in kinds]  # noqa: SLF001
    for memory in (memory for found in items for memory in found.values()):
        seen.update(id(value) for value in dict(memory.memo).values())  # the operator's memo
    sizes["kopf per-object memories"] = _deep_size(items, seen)
    per = max(jobs, 1) / 1000
    return {name: round(size / 1024 / per, 1) for name, size in sizes.items()}


def _breakdown(jobs: int) -> dict[str, Any]:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(inclusive=False, filename_pattern=tracemalloc.__file__)]
    )
    sizes: dict[str, int] = {}
    for stat in snapshot.statistics("traceback"):
        category = _category(stat.traceback)
        sizes[category] = sizes.get(category, 0) + stat.size
    top = [
        {
            "where": (
                f"{stat.traceback[0].filename.split('site-packages/')[-1]}:"
                f"{stat.traceback[0].lineno}"
            ),
            "kib": round(stat.size / 1024, 1),
        }
        for stat in snapshot.statistics("lineno")[:15]
    ]
    per = max(jobs, 1) / 1000
    return {
        "traced_mib": round(sum(sizes.values()) / 2**20, 1),
        "by_category_kib_per_1k_jobs": {
            name: round(size / 1024 / per, 1)
            for name, size in sorted(sizes.items(), key=lambda item: -item[1])
        },
        "top_lines": top,
    }


def child(out: Path, jobs: int, *, trace: bool, until_indexed: bool = False) -> None:
    from tickwork_operator import main as operator_main  # noqa: PLC0415
    from tickwork_operator.settings import OperatorSettings  # noqa: PLC0415

    if trace:  # after the imports: their code and classes are the same with any N
        tracemalloc.start(FRAMES)
    captured: list[Any] = []
    state_class = operator_main.WatchState  # type: ignore[attr-defined]

    def capture(*args: Any, **kwargs: Any) -> Any:
        captured.append(state_class(*args, **kwargs))
        return captured[-1]

    operator_main.WatchState = capture  # type: ignore[attr-defined,assignment]

    async def both() -> None:
        task = asyncio.create_task(
            _probe(captured, jobs, out, trace=trace, until_indexed=until_indexed)
        )
        await operator_main.run_operator(OperatorSettings())
        await task

    asyncio.run(both())


async def _probe(
    captured: list[Any], jobs: int, out: Path, *, trace: bool, until_indexed: bool = False
) -> None:
    """Wait for each phase (polling the state: the probe must not change the operator),
    record it, and end the process after the last (``until_indexed``: once every job
    is indexed, before any status is written)."""
    phases: list[dict[str, Any]] = []
    launched = time.monotonic()
    if until_indexed:
        cpu = time.process_time()
        while not captured or len(captured[0].jobs) < jobs:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        indexed = {
            "seconds": round(time.monotonic() - launched, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2),
            "peak_mib": round(_rss()[1], 1),
        }
        await asyncio.to_thread(out.write_text, json.dumps(indexed))
        os._exit(0)

    def record(name: str) -> None:
        gc.collect()
        rss, peak = _rss()
        phase: dict[str, Any] = {
            "phase": name,
            "seconds": round(time.monotonic() - launched, 1),
            "cpu_seconds": round(time.process_time(), 1),
            "rss_mib": round(rss, 1),
            "peak_mib": round(peak, 1),
        }
        if trace:
            phase.update(_breakdown(jobs))
        elif captured and name != "started":
            phase["owners_kib_per_1k_jobs"] = _owners(captured[0], jobs)
        phases.append(phase)
        print(json.dumps({k: v for k, v in phase.items() if k != "top_lines"}), flush=True)

    record("started")
    while not captured or len(captured[0].jobs) < jobs:  # noqa: ASYNC110 - see the docstring
        await asyncio.sleep(0.2)
    record("indexed")
    state = captured[0]
    while state.dirty or state.busy:  # noqa: ASYNC110
        await asyncio.sleep(0.2)
    record("status_written")
    # The operator gives freed heap back once a minute (tickwork.heap.TRIM_SECONDS,
    # not imported here: --compare-with may run a tree without it); wait for one.
    await asyncio.sleep(70)
    record("steady")
    await asyncio.to_thread(out.write_text, json.dumps(phases))
    os._exit(0)


# -- the parent: a control plane, the jobs, and the operator processes ---------------


def _run_child(
    workdir: Path,
    env: dict[str, str],
    pythonpath: str,
    jobs: int,
    *,
    trace: bool,
    label: str,
    until_indexed: bool = False,
) -> Any:
    out = workdir / f"{label}.json"
    command = [sys.executable, __file__, "--child", str(out), "--jobs", str(jobs)]
    if trace:
        command.append("--trace")
    if until_indexed:
        command.append("--until-indexed")
    with (workdir / f"{label}.log").open("w") as log:
        subprocess.run(
            command,
            env={**os.environ, **env, "PYTHONPATH": pythonpath},
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=1800,
            check=True,
        )
    return json.loads(out.read_text())


def index_rounds(args: Any, trees: dict[str, Path]) -> int:
    """Time to index ``args.jobs`` jobs (that never ran), the trees' operators
    starting by turns against the same jobs; see the module's docstring."""
    from tickwork_dev.devcluster.measure import (  # noqa: PLC0415
        code_commit,
        create_jobs,
        plane_with_crd,
        save_report,
    )

    rng = random.Random(7)
    starts: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory(prefix="operator-index-") as tmp:
        workdir = Path(tmp)
        with plane_with_crd(workdir) as (cluster, redis):
            namespace = "index"
            cluster.kubectl("create", "namespace", namespace)
            items = _yearly_jobs(rng, args.jobs)
            for start in range(0, len(items), 5000):
                create_jobs(cluster, namespace, items[start : start + 5000])
            order = list(trees)
            for round_ in range(args.index_rounds):
                for label in order if round_ % 2 == 0 else order[::-1]:
                    env = _operator_env(cluster, redis, namespace, f"{label}-{round_}")
                    indexed = _run_child(
                        workdir,
                        env,
                        _pythonpath(trees[label]),
                        args.jobs,
                        trace=False,
                        label=f"{label}-{round_}",
                        until_indexed=True,
                    )
                    starts[label].append(indexed)
                    print(json.dumps({"variant": label, "round": round_, **indexed}), flush=True)
    medians = {
        label: {
            key: round(statistics.median(s[key] for s in runs), 2)
            for key in ("seconds", "cpu_seconds", "peak_mib")
        }
        for label, runs in starts.items()
    }
    report = {
        "benchmark": "operator_index",
        "python": platform.python_version(),
        "jobs": args.jobs,
        "list_page": 500,
        "starts": starts,
        "median": medians,
        "after_over_before": {
            key: round(medians["after"][key] / medians["before"][key], 2)
            for key in medians["after"]
        },
    }
    report["commits"] = {label: code_commit(tree) for label, tree in trees.items()}
    save_report(report, args.out, args)
    plot_index(report, args.plot)
    return 0


def _yearly_jobs(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` ScheduledJobs due once a year at a random minute: nothing is due."""
    from tickwork_dev.devcluster.measure import job_manifest  # noqa: PLC0415

    return [
        job_manifest(
            f"m-{i:06d}",
            {"schedule": f"{rng.randrange(60)} {rng.randrange(24)} 1 1 *", "task": ECHO},
        )
        for i in range(count)
    ]


def _operator_env(cluster: Any, redis: Any, namespace: str, name: str) -> dict[str, str]:
    """An operator of ``namespace`` with a queue and a Lease of its own (``name``): each
    start is a release of its own over the same jobs, so none claims the namespace (or
    each would wait out the last one's claim before writing a status)."""
    return {
        "TICKWORK_OPERATOR_NAMESPACE_CLAIMS": "false",
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis.url,
        "TICKWORK_REDIS_QUEUE": name,
        "TICKWORK_OPERATOR_NAMESPACES": namespace,
        "TICKWORK_OPERATOR_LEASE_NAME": f"probe-{name}",
        "TICKWORK_OPERATOR_HTTP_PORT": "0",
        "TICKWORK_OPERATOR_LOG_LEVEL": "WARNING",
    }


def _pythonpath(tree: Path) -> str:
    return ":".join(str(tree / part) for part in ("", "operator", "worker", "dev"))


def main(argv: list[str] | None = None) -> int:
    from tickwork_dev.devcluster.measure import (  # noqa: PLC0415
        benchmark_parser,
        create_jobs,
        plane_with_crd,
        save_report,
    )

    parser = benchmark_parser(__doc__, "operator_memory")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--compare-with", type=Path, help="another checkout's tree: 'before'")
    parser.add_argument(
        "--history",
        type=int,
        default=6,
        help="finished runs in each job's status (default 6: what the "
        "default spec.history keeps, 3 succeeded and 3 failed)",
    )
    parser.add_argument(
        "--index-rounds",
        type=int,
        default=0,
        help="only the time to index, R starts of each tree by turns",
    )
    parser.add_argument("--until-indexed", action="store_true", help=argparse_hidden())
    parser.add_argument("--child", type=Path, help=argparse_hidden())
    parser.add_argument(
        "--trace", action="store_true", help="also run each variant under tracemalloc (slow)"
    )
    args = parser.parse_args(argv)
    if args.child:  # one operator process; --trace: under tracemalloc
        child(args.child, args.jobs, trace=args.trace, until_indexed=args.until_indexed)
        return 0
    here = Path(__file__).resolve().parent.parent
    variants = [("after", here)]
    if args.compare_with:
        variants.insert(0, ("before", args.compare_with.resolve()))
    if args.index_rounds:
        if not args.compare_with:
            parser.error("--index-rounds compares two trees: give --compare-with")
        return index_rounds(args, dict(variants))
    report: dict[str, Any] = {
        "benchmark": "operator_memory",
        "python": platform.python_version(),
        "jobs": args.jobs,
        "history": args.history,
        "variants": {},
    }
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="operator-memory-") as tmp:
        workdir = Path(tmp)
        with plane_with_crd(workdir) as (cluster, redis):
            for label, tree in variants:
                for trace in (False, True) if args.trace else (False,):
                    namespace = f"{label}-{'traced' if trace else 'plain'}"
                    cluster.kubectl("create", "namespace", namespace)
                    items = _yearly_jobs(rng, args.jobs)
                    for start in range(0, len(items), 5000):
                        created = create_jobs(cluster, namespace, items[start : start + 5000])
                        if args.history:
                            # Imported here: a --child runs with another tree's harness.
                            from tickwork_dev.devcluster.measure import (  # noqa: PLC0415
                                write_history,
                            )

                            asyncio.run(write_history(cluster, created, args.history))
                    env = _operator_env(cluster, redis, namespace, namespace)
                    phases = _run_child(
                        workdir, env, _pythonpath(tree), args.jobs, trace=trace, label=namespace
                    )
                    report["variants"].setdefault(label, {})["traced" if trace else "plain"] = (
                        phases
                    )
                    print(
                        json.dumps(
                            {
                                "variant": namespace,
                                "phases": [
                                    {
                                        k: p[k]
                                        for k in (
                                            "phase",
                                            "seconds",
                                            "cpu_seconds",
                                            "rss_mib",
                                            "peak_mib",
                                        )
                                    }
                                    for p in phases
                                ],
                            }
                        ),
                        flush=True,
                    )
            report["worker"] = _worker_memory(workdir, cluster, redis, "after-plain", args.jobs)
            print(json.dumps({"worker": report["worker"]}), flush=True)
    _ratios(report)
    save_report(report, args.out, args)
    plot(report, args.plot)
    return 0


def _worker_memory(
    workdir: Path, cluster: Any, redis: Any, namespace: str, jobs: int
) -> dict[str, Any]:
    """A worker's RSS once its job cache holds every job, against one without a cache."""
    from tickwork_dev.devcluster.components import TickworkProcess, wait_for  # noqa: PLC0415
    from tickwork_dev.devcluster.measure import rss_bytes  # noqa: PLC0415

    found: dict[str, Any] = {"jobs": jobs}
    for cache in (False, True):
        worker = TickworkProcess(
            command="tickwork-worker",
            env={
                "KUBECONFIG": str(cluster.kubeconfig),
                "TICKWORK_REDIS_URL": redis.url,
                "TICKWORK_REDIS_QUEUE": namespace,
                "TICKWORK_WORKER_NAMESPACES": namespace,
                "TICKWORK_WORKER_JOB_CACHE": str(cache).lower(),
                "TICKWORK_WORKER_LOG_LEVEL": "WARNING",
            },
            log_path=workdir / f"worker-{cache}.log",
        ).start()
        try:
            worker.wait_ready()
            if cache:
                wait_for(
                    lambda w=worker: w.metric("tickwork_worker_job_cache_objects") == jobs,
                    timeout=600,
                    interval=1,
                    what="the cache to hold every job",
                )
            text = Path(f"/proc/{worker.pid}/status").read_text()
            peak = int(text.split("VmHWM:")[1].split()[0]) / 1024
            found["cache" if cache else "no_cache"] = {
                "rss_mib": round(rss_bytes(worker.pid) / 2**20, 1),
                "peak_mib": round(peak, 1),
            }
        finally:
            worker.stop()
    found["cache_mib_per_1k_jobs"] = round(
        (found["cache"]["rss_mib"] - found["no_cache"]["rss_mib"]) / (jobs / 1000), 2
    )
    return found


def argparse_hidden() -> str:
    import argparse  # noqa: PLC0415

    return argparse.SUPPRESS


def _ratios(report: dict[str, Any]) -> None:
    variants = report["variants"]
    jobs = report["jobs"] / 1000
    for variant in variants.values():
        plain = {p["phase"]: p for p in variant["plain"]}
        base = plain["started"]["rss_mib"]
        variant["summary"] = {
            "steady_rss_mib": plain["steady"]["rss_mib"],
            "peak_rss_mib": plain["steady"]["peak_mib"],
            "steady_mib_per_1k_jobs": round((plain["steady"]["rss_mib"] - base) / jobs, 2),
            "peak_over_steady": round(plain["steady"]["peak_mib"] / plain["steady"]["rss_mib"], 2),
            "indexed_seconds": plain["indexed"]["seconds"],
            "status_written_seconds": plain["status_written"]["seconds"],
            # CPU time less the imports' (the "started" phase): fairer than wall time.
            "indexed_cpu_seconds": round(
                plain["indexed"]["cpu_seconds"] - plain["started"]["cpu_seconds"], 1
            ),
            "status_written_cpu_seconds": round(
                plain["status_written"]["cpu_seconds"] - plain["started"]["cpu_seconds"], 1
            ),
        }
    if "before" in variants and "after" in variants:
        before, after = variants["before"]["summary"], variants["after"]["summary"]
        report["after_over_before"] = {
            key: round(after[key] / before[key], 2) for key in after if before[key]
        }


def plot_index(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from tickwork_dev.devcluster.measure import save_figure  # noqa: PLC0415

    figure, axis = plt.subplots(figsize=(7, 4))
    for offset, (label, runs) in enumerate(report["starts"].items()):
        xs = [i + offset * 0.3 for i in range(len(runs))]
        axis.bar(xs, [r["seconds"] for r in runs], width=0.3, label=f"{label}: wall")
        axis.scatter(
            xs,
            [r["cpu_seconds"] for r in runs],
            color="black",
            zorder=3,
            label="CPU" if offset else None,
        )
    axis.set_xlabel("start (the trees by turns)")
    axis.set_ylabel("seconds to every job indexed")
    axis.set_title(f"Operator start to {report['jobs']:,} jobs indexed")
    axis.grid(visible=True, alpha=0.3)
    axis.legend(fontsize=8)
    save_figure(figure, path)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from tickwork_dev.devcluster.measure import save_figure  # noqa: PLC0415

    labels = list(report["variants"])
    figure, axes = plt.subplots(
        1, len(labels), figsize=(5 * len(labels), 4), squeeze=False, sharey=True
    )
    for axis, label in zip(axes[0], labels, strict=True):
        phases = [p for p in report["variants"][label]["plain"] if p["phase"] != "started"]
        names = sorted({n for p in phases for n in p["owners_kib_per_1k_jobs"]})
        bottom = [0.0] * len(phases)
        for name in names:
            values = [p["owners_kib_per_1k_jobs"].get(name, 0) / 1024 for p in phases]
            axis.bar([p["phase"] for p in phases], values, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        plain = [p for p in report["variants"][label]["plain"] if p["phase"] != "started"]
        base = report["variants"][label]["plain"][0]["rss_mib"]
        axis.plot(
            [p["phase"] for p in plain],
            [(p["rss_mib"] - base) / (report["jobs"] / 1000) for p in plain],
            color="black",
            marker="o",
            label="RSS above start (untraced)",
        )
        axis.set_title(f"{label}: MiB per 1,000 jobs (N = {report['jobs']:,})")
        axis.grid(visible=True, alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save_figure(figure, path)


if __name__ == "__main__":
    sys.exit(main())
