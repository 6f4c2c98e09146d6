"""Four ways Tickwork could talk to the API server, on the call that dominates a run:
a server-side-apply status patch of a ScheduledJob.

    python benchmarks/kube_clients.py [--writes 2000] [--concurrency 16] [--rounds 2]

Measured in one run, on one control plane, against the same jobs, each client in
turn (rounds interleave the clients, so drift on a noisy machine hits all alike):

* ``tickwork``: Tickwork's :class:`~tickwork.kube.client.KubeClient` (asyncio on
  aiohttp, the HTTP stack kopf already brings): what the workers and the
  operator use.
* ``httpx-h2``: the same request from httpx on one multiplexed HTTP/2
  connection (what KubeClient used before December 2026).
* ``httpx-h1``: httpx on HTTP/1.1 (a pool of connections).
* ``official``: the official ``kubernetes`` package (synchronous, urllib3) from a
  pool of threads, the usual way to call it from asyncio.

For each: writes per second, and the client process's CPU per write (user +
system of this process only: the API server runs in its own), and the ratio of
CPU per write to Tickwork's. Prints JSON lines, writes
benchmarks/results/kube_clients.json and a plot.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tickwork.api import models
from tickwork.kube.client import KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.measure import (
    benchmark_parser,
    create_jobs,
    job_manifest,
    plane_with_crd,
    save_figure,
    save_report,
)

CLIENTS = ("tickwork", "httpx-h2", "httpx-h1", "official")
Patch = Callable[[dict[str, Any], dict[str, Any]], Awaitable[object]]


def _status() -> dict[str, Any]:
    return {"phase": "Scheduled", "nextRunAt": dt.datetime.now(dt.UTC).isoformat()}


async def _drive(patch: Patch, jobs: list[dict[str, Any]], writes: int, concurrency: int) -> None:
    """``writes`` patches, ``concurrency`` in flight, round robin over ``jobs``."""
    counter = iter(range(writes))

    async def loop() -> None:
        for index in counter:
            await patch(jobs[index % len(jobs)], _status())

    await asyncio.gather(*(loop() for _ in range(concurrency)))


async def _tickwork(
    kubeconfig: Path, jobs: list[dict[str, Any]], writes: int, concurrency: int
) -> None:
    async with KubeClient(load_configuration(str(kubeconfig))) as kube:

        async def patch(job: dict[str, Any], status: dict[str, Any]) -> object:
            meta = job["metadata"]
            return await kube.apply_job_status(
                meta["namespace"],
                meta["name"],
                meta["uid"],
                status,
                field_manager="bench-clients",
                force=True,
            )

        await _drive(patch, jobs, writes, concurrency)


def _request(job: dict[str, Any], status: dict[str, Any]) -> tuple[str, bytes]:
    """The path and body of one status apply, as every client sends it."""
    meta = job["metadata"]
    body = {
        "apiVersion": models.API_VERSION,
        "kind": models.KIND,
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "status": status,
    }
    path = (
        f"/apis/{models.GROUP}/{models.VERSION}/namespaces/{meta['namespace']}/"
        f"{models.PLURAL}/{meta['name']}/status"
    )
    return path, json.dumps(body).encode()


_HEADERS = {"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"}
_PARAMS = {"fieldManager": "bench-clients", "force": "true"}


async def _httpx(
    kubeconfig: Path, jobs: list[dict[str, Any]], writes: int, concurrency: int, *, http2: bool
) -> None:
    import httpx  # noqa: PLC0415 - only these variants

    configuration = load_configuration(str(kubeconfig))
    context = configuration.ssl_context()
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=600)
    async with httpx.AsyncClient(
        base_url=configuration.host, verify=context, http2=http2, limits=limits, timeout=30
    ) as client:

        async def patch(job: dict[str, Any], status: dict[str, Any]) -> object:
            path, body = _request(job, status)
            response = await client.patch(path, content=body, headers=_HEADERS, params=_PARAMS)
            response.raise_for_status()
            return response.json()

        await _drive(patch, jobs, writes, concurrency)


async def _official(
    kubeconfig: Path, jobs: list[dict[str, Any]], writes: int, concurrency: int
) -> None:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = concurrency
    api = k8s.CustomObjectsApi(k8s.ApiClient(configuration))
    pool = ThreadPoolExecutor(max_workers=concurrency)
    loop = asyncio.get_running_loop()

    def call(job: dict[str, Any], status: dict[str, Any]) -> object:
        meta = job["metadata"]
        body = {
            "apiVersion": models.API_VERSION,
            "kind": models.KIND,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "status": status,
        }
        return api.patch_namespaced_custom_object_status(
            models.GROUP,
            models.VERSION,
            meta["namespace"],
            models.PLURAL,
            meta["name"],
            body,
            field_manager="bench-clients",
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    async def patch(job: dict[str, Any], status: dict[str, Any]) -> object:
        return await loop.run_in_executor(pool, call, job, status)

    try:
        await _drive(patch, jobs, writes, concurrency)
    finally:
        pool.shutdown()
        api.api_client.close()


def measure(
    kubeconfig: Path, jobs: list[dict[str, Any]], name: str, *, writes: int, concurrency: int
) -> dict[str, Any]:
    if name == "official":
        work = _official(kubeconfig, jobs, writes, concurrency)
    elif name == "tickwork":
        work = _tickwork(kubeconfig, jobs, writes, concurrency)
    else:
        work = _httpx(kubeconfig, jobs, writes, concurrency, http2=name == "httpx-h2")
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(work)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "client": name,
        "writes": writes,
        "writes_per_second": round(writes / wall, 1),
        "client_cpu_ms_per_write": round(cpu / writes * 1000, 3),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per client, the median over rounds."""
    out: dict[str, dict[str, float]] = {}
    for name in CLIENTS:
        mine = [r for r in rows if r["client"] == name]
        if not mine:
            continue
        out[name] = {
            "writes_per_second": round(statistics.median(r["writes_per_second"] for r in mine), 1),
            "client_cpu_ms_per_write": round(
                statistics.median(r["client_cpu_ms_per_write"] for r in mine), 3
            ),
        }
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - only for the plot

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    summary = report["summary"]
    names = list(summary)
    figure, (cpu, rate) = plt.subplots(1, 2, figsize=(9, 3.6))
    cpu.bar(names, [summary[n]["client_cpu_ms_per_write"] for n in names], color="#4c72b0")
    cpu.set_ylabel("client CPU per status write (ms)")
    rate.bar(names, [summary[n]["writes_per_second"] for n in names], color="#55a868")
    rate.set_ylabel("status writes per second")
    for axis in (cpu, rate):
        axis.grid(visible=True, axis="y", alpha=0.3)
    figure.suptitle(f"Status patches, {report['concurrency']} in flight, one local API server")
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "kube_clients")
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "benchmark": "kube_clients",
        "python": platform.python_version(),
        "concurrency": args.concurrency,
        "rounds": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="clients-bench-") as tmp,
        plane_with_crd(Path(tmp)) as (cluster, _redis),
    ):
        jobs = _jobs(cluster, args.jobs)
        for _ in range(args.rounds):
            for name in CLIENTS:
                row = measure(
                    cluster.kubeconfig, jobs, name, writes=args.writes, concurrency=args.concurrency
                )
                print(json.dumps(row), flush=True)
                report["rounds"].append(row)
    report["summary"] = summary = summarise(report["rounds"])
    ours = summary["tickwork"]["client_cpu_ms_per_write"]
    report["cpu_per_write_ratio"] = {
        name: round(values["client_cpu_ms_per_write"] / ours, 2) for name, values in summary.items()
    }
    print(json.dumps({"summary": summary, "cpu_per_write_ratio": report["cpu_per_write_ratio"]}))
    save_report(report, args.out, args)
    plot(report, args.plot)
    return 0


def _jobs(cluster: Cluster, count: int) -> list[dict[str, Any]]:
    spec = {"schedule": "0 0 1 1 *", "task": {"http": {"url": "https://example.com/"}}}
    cluster.kubectl("create", "namespace", "bench")
    return create_jobs(cluster, "bench", [job_manifest(f"k-{i:04d}", spec) for i in range(count)])


if __name__ == "__main__":
    sys.exit(main())
