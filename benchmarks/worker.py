"""Workers on the real API server and Redis: end-to-end runs per second against the ceiling.

    python benchmarks/worker.py [--runs 3000] [--workers 1 2] [--concurrency 32]
                                [--task echo|http] [--env NAME=VALUE]
    python benchmarks/worker.py --traces [--rounds 3] [--runs 2000] --out .../traces.json

Measured in one run, on one control plane:

* **Ceiling**: the raw rate at which this API server takes server-side-apply
  status patches of ScheduledJobs (many in flight, one HTTP/2 connection); next
  to it, the rates of the worker's check before each run (a consistent read of the
  job's metadata) and of a full GET of the job, as costs relative to a patch.
* **End to end**: ``--runs`` one-shot jobs (echo task) are created, their runs
  put in the Redis queue at once, and 1 or 2 ``tickwork-worker`` processes
  (already started and ready) claim, re-read the job, execute, write status and
  ack them all. Runs per second = runs / time until the last is acknowledged;
  the steady rate = the runs between the 10th and the 90th percent done, over the
  time between them (slots full: neither the burst's start nor its last runs).
* **API writes per run**: the API server's own counter of mutating requests
  during the end-to-end phase, all resources and ScheduledJobs only.
* ``--task http``: the runs are real HTTP tasks (a POST each) against a local
  server in this process (``ThreadingHTTPServer`` on loopback, which the workers'
  egress rules are told to allow); every request it served is counted.
* Redis memory (``INFO memory``) after each end-to-end phase, and the workers' CPU
  (user + system) per run while they worked.
* ``--traces``: one worker, with traces off and on (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
  at an OTLP/HTTP receiver in this process, which counts what it is sent), alternating
  for ``--rounds``; the medians of runs/s and CPU per run, and on/off ratios.

Targets: at most 2 status writes per successful run; end-to-end runs/s at
least half of (ceiling / writes per run). Prints JSON lines, writes
benchmarks/results/worker.json and a plot.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import http.server
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from tickwork.core.runs import scheduled_run_id
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage
from tickwork.queue.redis_queue import RedisRunQueue
from tickwork.queue.settings import RedisSettings
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for
from tickwork_dev.devcluster.measure import (
    benchmark_parser,
    cpu_seconds,
    create_jobs,
    job_manifest,
    plane_with_crd,
    save_figure,
    save_report,
    writes_so_far,
)
from tickwork_dev.devcluster.redis import RedisServer

Call = Callable[[KubeClient, dict[str, Any]], Awaitable[object]]


async def _call_for(
    kubeconfig: Path, jobs: list[dict[str, Any]], call: Call, seconds: float, concurrency: int
) -> int:
    """How many ``call``s (one job each, round robin) complete in ``seconds``."""
    done = 0
    deadline = time.monotonic() + seconds
    async with KubeClient(load_configuration(str(kubeconfig))) as kube:

        async def loop(offset: int) -> None:
            nonlocal done
            index = offset
            while time.monotonic() < deadline:
                await call(kube, jobs[index % len(jobs)])
                done += 1
                index += concurrency

        await asyncio.gather(*(loop(i) for i in range(concurrency)))
    return done


async def _patch(kube: KubeClient, job: dict[str, Any]) -> object:
    status = {"phase": "Scheduled", "nextRunAt": dt.datetime.now(dt.UTC).isoformat()}
    metadata = job["metadata"]
    return await kube.apply_job_status(
        metadata["namespace"],
        metadata["name"],
        metadata["uid"],
        status,
        field_manager="bench-ceiling",
        force=True,
    )


async def _check(kube: KubeClient, job: dict[str, Any]) -> object:
    return await kube.job_metadata(job["metadata"]["namespace"], job["metadata"]["name"])


async def _get(kube: KubeClient, job: dict[str, Any]) -> object:
    return await kube.get_job(job["metadata"]["namespace"], job["metadata"]["name"])


def ceiling(cluster: Cluster, seconds: float = 15.0, concurrency: int = 32) -> dict[str, Any]:
    """The status-patch ceiling; and, on the same jobs, what the worker's check before a
    run (a consistent metadata read) and a full GET of the job cost next to it."""
    namespace = "ceiling"
    cluster.kubectl("create", "namespace", namespace)
    spec = {"schedule": "0 0 1 1 *", "task": {"echo": {"message": "x"}}}
    jobs = create_jobs(cluster, namespace, [job_manifest(f"c-{i:04d}", spec) for i in range(256)])
    rates = {}
    for what, call in (("status_patches", _patch), ("metadata_checks", _check), ("job_gets", _get)):
        started = time.monotonic()
        done = asyncio.run(_call_for(cluster.kubeconfig, jobs, call, seconds, concurrency))
        rates[what] = round(done / (time.monotonic() - started), 1)
    return {
        "seconds": seconds,
        "status_patches_per_second": rates["status_patches"],
        "metadata_checks_per_second": rates["metadata_checks"],
        "job_gets_per_second": rates["job_gets"],
        "check_cost_vs_patch": round(rates["status_patches"] / rates["metadata_checks"], 3),
        "get_cost_vs_patch": round(rates["status_patches"] / rates["job_gets"], 3),
    }


def enqueue_all(redis: RedisServer, queue: str, messages: list[RunMessage]) -> None:
    async def call() -> None:
        settings = RedisSettings(url=redis.url, queue=queue)
        runs = RedisRunQueue(create_client(settings), settings)
        try:
            await asyncio.gather(*(runs.enqueue(m) for m in messages))
        finally:
            await runs.close()

    asyncio.run(call())


class _Served(http.server.BaseHTTPRequestHandler):
    count = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _Served.lock:
            _Served.count += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler], path: str) -> Iterator[str]:
    """A local HTTP server answering with ``handler``: the URL of ``path`` on it,
    while it serves."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()


def end_to_end(
    workdir: Path,
    cluster: Cluster,
    redis: RedisServer,
    *,
    workers: int,
    runs: int,
    concurrency: int,
    url: str | None = None,
    extra_env: dict[str, str] | None = None,
    suffix: str = "",
) -> dict[str, Any]:
    """``url``: HTTP tasks against it, else echo tasks; ``suffix`` names the namespace
    apart from another phase's with as many workers."""
    namespace = f"e2e-{workers}-{'http' if url else 'echo'}{suffix}"
    cluster.kubectl("create", "namespace", namespace)
    due = dt.datetime.now(dt.UTC).replace(microsecond=0)
    task = {"http": {"url": url, "method": "POST"}} if url else {"echo": {"message": "hi"}}
    spec = {"runAt": due.isoformat().replace("+00:00", "Z"), "task": task}
    jobs = create_jobs(cluster, namespace, [job_manifest(f"r-{i:05d}", spec) for i in range(runs)])
    messages = [
        RunMessage(
            run_id=scheduled_run_id(j["metadata"]["uid"], due),
            namespace=namespace,
            name=j["metadata"]["name"],
            uid=j["metadata"]["uid"],
            scheduled_at=due.isoformat(),
        )
        for j in jobs
    ]
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_REDIS_URL": redis.url,
        "TICKWORK_REDIS_QUEUE": namespace,
        "TICKWORK_WORKER_LOG_LEVEL": "WARNING",
        "TICKWORK_WORKER_CONCURRENCY": str(concurrency),
        "TICKWORK_WORKER_EGRESS_ALLOW": "127.0.0.0/8" if url else "",
    }
    env.update(extra_env or {})
    served_before = _Served.count
    processes = [
        TickworkProcess(
            command="tickwork-worker",
            env={**env, "TICKWORK_WORKER_NAME": f"w{i}"},
            log_path=workdir / f"worker-{workers}-{i}.log",
        ).start()
        for i in range(workers)
    ]
    try:
        for process in processes:
            process.wait_ready()
        writes_before = writes_so_far(cluster)
        status_writes_before = writes_so_far(cluster, resource="scheduledjobs")
        cpu_before = sum(cpu_seconds(p.pid) for p in processes)
        started = time.monotonic()
        enqueue_all(redis, namespace, messages)

        samples: list[tuple[float, float]] = []  # (seconds since the enqueue, runs done)

        def finished() -> bool:
            done = sum(
                p.metric("tickwork_runs_total", 'outcome="Succeeded"') or 0 for p in processes
            )
            samples.append((time.monotonic() - started, done))
            return done >= runs

        wait_for(finished, timeout=600, interval=0.2, what="every run")
        elapsed = time.monotonic() - started
        cpu = sum(cpu_seconds(p.pid) for p in processes) - cpu_before
        writes = writes_so_far(cluster) - writes_before
        status_writes = writes_so_far(cluster, resource="scheduledjobs") - status_writes_before
        memory = redis.memory()
    finally:
        for process in processes:
            process.stop()
    return {
        "task": "http" if url else "echo",
        **({"http_requests_served": _Served.count - served_before} if url else {}),
        "workers": workers,
        "concurrency_per_worker": concurrency,
        "runs": runs,
        "seconds": round(elapsed, 2),
        "runs_per_second": round(runs / elapsed, 1),
        "steady_runs_per_second": round(steady_rate(samples, runs), 1),
        "api_writes_per_run": round(writes / runs, 2),
        "status_writes_per_run": round(status_writes / runs, 2),
        "worker_cpu_ms_per_run": round(1000 * cpu / runs, 3),
        "redis_memory": memory,
    }


def steady_rate(samples: list[tuple[float, float]], runs: int) -> float:
    """Runs a second between the 10th and the 90th percent of the runs done (each
    moment interpolated between the samples): the rate once the workers' slots are
    full, without the start of the burst and its last runs."""

    def when(done: float) -> float:
        previous = (0.0, 0.0)
        for moment, count in samples:
            if count >= done:
                (t0, c0), (t1, c1) = previous, (moment, count)
                return t0 + (t1 - t0) * (done - c0) / max(c1 - c0, 1e-9)
            previous = (moment, count)
        return samples[-1][0]

    low, high = 0.1 * runs, 0.9 * runs
    return (high - low) / max(when(high) - when(low), 1e-9)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = report["end_to_end"]
    labels = [f"{r['workers']} worker{'s' if r['workers'] > 1 else ''}" for r in rows]
    values = [r["runs_per_second"] for r in rows]
    figure, axis = plt.subplots(figsize=(6, 3.8))
    axis.bar(labels, values, label="end-to-end runs/s (echo)")
    bound = report["ceiling"]["status_patches_per_second"] / max(
        r["status_writes_per_run"] for r in rows
    )
    axis.axhline(bound, color="grey", linestyle="--", label="ceiling / status writes per run")
    axis.axhline(bound / 2, color="red", linestyle=":", label="target (half of that)")
    axis.set_ylabel("runs per second")
    axis.set_title("Worker throughput on one local API server")
    axis.legend(fontsize=8)
    axis.grid(visible=True, axis="y", alpha=0.3)
    save_figure(figure, path)


class _Otlp(http.server.BaseHTTPRequestHandler):
    requests = 0
    received = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _Otlp.lock:
            _Otlp.requests += 1
            _Otlp.received += len(body)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


def otlp_receiver() -> contextlib.AbstractContextManager[str]:
    """A local OTLP/HTTP trace endpoint that takes every export: its URL."""
    return serving(_Otlp, "/v1/traces")


def traces_cost(
    workdir: Path, cluster: Cluster, redis: RedisServer, args: Any, url: str | None
) -> dict[str, Any]:
    """One worker, traces off and on in alternation: the rows and the medians."""
    rows: list[dict[str, Any]] = []
    with otlp_receiver() as endpoint:
        for round_ in range(args.rounds):
            order = ["off", "on"] if round_ % 2 == 0 else ["on", "off"]
            for mode in order:
                env = dict(e.split("=", 1) for e in args.env)
                if mode == "on":
                    env |= {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}
                exported = _Otlp.received
                row = end_to_end(
                    workdir,
                    cluster,
                    redis,
                    workers=1,
                    runs=args.runs,
                    concurrency=args.concurrency,
                    url=url,
                    extra_env=env,
                    suffix=f"-{mode}-{round_}",
                )
                row |= {
                    "traces": mode,
                    "otlp_bytes_per_run": round((_Otlp.received - exported) / args.runs),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    summary: dict[str, Any] = {}
    for mode in ("off", "on"):
        mine = [r for r in rows if r["traces"] == mode]
        summary[mode] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("runs_per_second", "steady_runs_per_second", "worker_cpu_ms_per_run")
        }
    summary["cpu_per_run_on_over_off"] = round(
        summary["on"]["worker_cpu_ms_per_run"] / summary["off"]["worker_cpu_ms_per_run"], 2
    )
    summary["runs_per_second_on_over_off"] = round(
        summary["on"]["runs_per_second"] / summary["off"]["runs_per_second"], 2
    )
    return {"end_to_end": rows, "traces_cost": summary}


def plot_traces(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    summary = report["traces_cost"]
    figure, (rate, cpu) = plt.subplots(1, 2, figsize=(7, 3.4))
    modes = ["off", "on"]
    rate.bar(modes, [summary[m]["runs_per_second"] for m in modes], color=["grey", "tab:blue"])
    rate.set_title("runs/s, one worker (median)")
    cpu.bar(modes, [summary[m]["worker_cpu_ms_per_run"] for m in modes], color=["grey", "tab:blue"])
    cpu.set_title("worker CPU ms per run (median)")
    for axis in (rate, cpu):
        axis.set_xlabel("traces")
        axis.grid(visible=True, axis="y", alpha=0.3)
    figure.suptitle(
        f"Traces on: {summary['cpu_per_run_on_over_off']}x the CPU per run, "
        f"{summary['runs_per_second_on_over_off']}x the runs/s"
    )
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "worker")
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--task", choices=["echo", "http"], default="echo")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the workers (TICKWORK_WORKER_FINISHING_PER_SLOT=3)",
    )
    parser.add_argument("--traces", action="store_true", help="traces off against on")
    parser.add_argument("--rounds", type=int, default=3, help="with --traces: off/on rounds")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"benchmark": "worker", "python": platform.python_version()}
    with tempfile.TemporaryDirectory(prefix="worker-bench-") as tmp:
        workdir = Path(tmp)
        with (
            plane_with_crd(workdir) as (cluster, redis),
            contextlib.ExitStack() as stack,
        ):
            url = stack.enter_context(serving(_Served, "/run")) if args.task == "http" else None
            if args.traces:
                report |= traces_cost(workdir, cluster, redis, args, url)
                save_report(report, args.out, args)
                plot_traces(report, args.plot)
                return 0
            report["ceiling"] = ceiling(cluster)
            print(json.dumps(report["ceiling"]), flush=True)
            report["end_to_end"] = []
            for workers in args.workers:
                row = end_to_end(
                    workdir,
                    cluster,
                    redis,
                    workers=workers,
                    runs=args.runs,
                    concurrency=args.concurrency,
                    url=url,
                    extra_env=dict(e.split("=", 1) for e in args.env),
                )
                print(json.dumps(row), flush=True)
                report["end_to_end"].append(row)
    patches = report["ceiling"]["status_patches_per_second"]
    for row in report["end_to_end"]:
        bound = patches / max(row["status_writes_per_run"], 1e-9)
        row["fraction_of_ceiling_bound"] = round(row["runs_per_second"] / bound, 2)
        row["steady_fraction_of_ceiling_bound"] = round(row["steady_runs_per_second"] / bound, 2)
    report["targets"] = {"status_writes_per_run_max": 2, "fraction_of_ceiling_bound_min": 0.5}
    save_report(report, args.out, args)
    plot(report, args.plot)
    met = all(
        r["status_writes_per_run"] <= 2 and r["fraction_of_ceiling_bound"] >= 0.5
        for r in report["end_to_end"]
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
