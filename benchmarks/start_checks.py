"""What the check before a run starts costs: one job's metadata read on its own,
against the metadata of a whole namespace in one list (tickwork_worker.start_checks).

    python benchmarks/start_checks.py [--sizes 100 1000] [--reads 2000] [--rounds 3]

On one control plane, for each namespace size M: M jobs, each with a full history
written the way runs write it (six records, each by the field manager of its place:
six entries in managedFields, as in steady state). Then, in interleaved rounds:

* ``job``: ``--reads`` reads of one job's metadata each (a consistent list by name,
  KubeClient.job_metadata), 32 in flight;
* ``namespace``: lists of the namespace's metadata (KubeClient.jobs_metadata), as
  many as make ``--reads`` jobs listed.

For each: the API server's CPU and this process's CPU (the worker's side: the
request, the JSON) per job answered, and their sum. The ratio of a job's read to a
job listed says how many jobs a namespace may hold per claim before one list costs
more than the claims' own reads (start_checks.LIST_FACTOR). Writes
benchmarks/results/start_checks.json (with the commit and settings) and a plot.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from tickwork.core.runs import scheduled_run_id
from tickwork.kube.client import KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.measure import (
    benchmark_parser,
    code_commit,
    cpu_seconds,
    create_jobs,
    job_manifest,
    plane_with_crd,
    pyplot,
    save_figure,
    save_report,
)

_IN_FLIGHT = 32


async def _histories(kube: KubeClient, created: list[dict[str, Any]]) -> None:
    """Six records per job, each applied by its place's field manager."""
    limit = asyncio.Semaphore(_IN_FLIGHT)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    async def one(job: dict[str, Any], place: int) -> None:
        meta = job["metadata"]
        at = base + dt.timedelta(minutes=place)
        stamp = at.isoformat().replace("+00:00", "Z")
        failed = place >= 3  # three successes, three failures
        record = {
            "id": scheduled_run_id(meta["uid"], at),
            "scheduledAt": stamp,
            "startedAt": stamp,
            "finishedAt": stamp,
            "outcome": "Failed" if failed else "Succeeded",
            "attempts": 1,
            "slot": f"{'f' if failed else 's'}{place % 3}",
        }
        manager = f"tickwork-runs-{record['slot']}"
        async with limit:
            await kube.apply_job_status(
                meta["namespace"],
                meta["name"],
                meta["uid"],
                {"runs": [record]},
                field_manager=manager,
                force=True,
            )

    await asyncio.gather(*(one(job, place) for job in created for place in range(6)))


async def _measure(
    kube: KubeClient, apiserver: int, namespace: str, jobs: int, args: Any
) -> dict[str, Any]:
    names = [f"job-{i}" for i in range(jobs)]
    reads: int = args.reads
    # per read: API server seconds, this process's seconds, jobs answered
    spent: dict[str, list[float]] = {"job": [0.0, 0.0, 0.0], "namespace": [0.0, 0.0, 0.0]}
    limit = asyncio.Semaphore(_IN_FLIGHT)

    async def one(name: str) -> None:
        async with limit:
            assert await kube.job_metadata(namespace, name) is not None  # noqa: S101

    async def by_job() -> int:
        await asyncio.gather(*(one(names[i % jobs]) for i in range(reads)))
        return reads

    async def by_namespace() -> int:
        lists = max(1, reads // jobs)
        for _ in range(lists):
            assert len(await kube.jobs_metadata(namespace)) == jobs  # noqa: S101
        return lists * jobs

    await by_job()  # warm: connections, the watch cache's first answers
    await by_namespace()
    for _ in range(args.rounds):
        for read, run in (("job", by_job), ("namespace", by_namespace)):
            server, client = cpu_seconds(apiserver), time.process_time()
            answered = float(await run())
            spent[read][0] += cpu_seconds(apiserver) - server
            spent[read][1] += time.process_time() - client
            spent[read][2] += answered
    result: dict[str, Any] = {"jobs": jobs}
    for read, (server, client, answered) in spent.items():
        result[read] = {
            "answered": int(answered),
            "server_us_per_job": round(server / answered * 1e6, 1),
            "client_us_per_job": round(client / answered * 1e6, 1),
            "total_us_per_job": round((server + client) / answered * 1e6, 1),
        }
    result["read_over_listed"] = round(
        result["job"]["total_us_per_job"] / result["namespace"]["total_us_per_job"], 2
    )
    return result


async def _one_size(cluster: Cluster, apiserver: int, size: int, args: Any) -> dict[str, Any]:
    namespace = f"checks-{size}"
    cluster.kubectl("create", "namespace", namespace)
    spec = {"schedule": "* * * * *", "task": {"echo": {"message": "hi"}}}
    manifests = [job_manifest(f"job-{i}", spec) for i in range(size)]
    created = await asyncio.to_thread(create_jobs, cluster, namespace, manifests)
    async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
        await _histories(kube, created)
        return await _measure(kube, apiserver, namespace, size, args)


def _plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4))
    sizes = [entry["jobs"] for entry in report["sizes"]]
    for read, label in (("job", "one job's read"), ("namespace", "a job in a namespace's list")):
        axis.plot(
            sizes,
            [entry[read]["total_us_per_job"] for entry in report["sizes"]],
            marker="o",
            label=label,
        )
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("jobs in the namespace")
    axis.set_ylabel("CPU per job answered (µs, API server + client)")
    axis.set_title("The check before a run starts: per job, by read")
    axis.legend()
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "start_checks")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "benchmark": "start_checks",
        "commit": code_commit(),
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "settings": {
            "sizes": args.sizes,
            "reads": args.reads,
            "rounds": args.rounds,
            "in_flight": _IN_FLIGHT,
            "history_records_per_job": 6,
        },
        "sizes": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="start-checks-") as tmp,
        plane_with_crd(Path(tmp)) as (cluster, _redis),
    ):
        assert cluster.plane is not None  # noqa: S101 - a plane of its own
        apiserver = cluster.plane.pids()["kube-apiserver"]
        for size in args.sizes:
            entry = asyncio.run(_one_size(cluster, apiserver, size, args))
            print(json.dumps(entry), flush=True)
            report["sizes"].append(entry)
    save_report(report, args.out)
    _plot(report, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
