"""Measuring tools the benchmarks share: percentiles, the API server's own write
counter, a process's resident memory, and bulk creation of ScheduledJobs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tickwork.api import models
from tickwork.kube.client import KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.redis import RedisServer

_ROOT = Path(__file__).resolve().parents[3]
#: Where benchmarks write their JSON and plots (in the repository checkout).
RESULTS = _ROOT / "benchmarks" / "results"
CRDS = _ROOT / "manifests" / "crds"

#: A realistic job's spec for benchmarks of status writes: a cron schedule in a zone and
#: an HTTP task with a URL, headers and a body template (what the CEL rules check).
HTTP_JOB_SPEC: dict[str, Any] = {
    "schedule": "*/5 * * * *",
    "timeZone": "Europe/Berlin",
    "task": {
        "http": {
            "url": "https://reports.example.com/nightly?team=a",
            "method": "POST",
            "headers": [{"name": "X-Team", "value": "a"}, {"name": "X-Kind", "value": "nightly"}],
            "bodyTemplate": '{"run": "{{ runId }}", "at": "{{ scheduledTime }}"}',
        }
    },
    "retry": {"maxAttempts": 3},
}

#: Verbs that change something (APPLY is server-side apply).
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE")
_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_STORAGE = re.compile(r"^etcd_request_duration_seconds_count\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def writes_so_far(cluster: Cluster, *, resource: str | None = None) -> float:
    """Mutating requests the API server has served since it started (from every
    client), optionally only those on one resource (``scheduledjobs``)."""
    return requests_so_far(cluster, WRITE_VERBS, resource=resource)


def requests_so_far(
    cluster: Cluster, verbs: tuple[str, ...], *, resource: str | None = None
) -> float:
    """Requests with one of ``verbs`` (``LIST``: each page counts) the API server has
    served since it started, optionally only those on one resource."""

    def wanted(labels: str) -> bool:
        return any(f'verb="{verb}"' in labels for verb in verbs) and (
            resource is None or f'resource="{resource}"' in labels
        )

    return _counted(cluster, _REQUESTS, wanted)


def _counted(cluster: Cluster, metric: re.Pattern[str], wanted: Callable[[str], bool]) -> float:
    """The sum of the API server's counter ``metric`` over the label sets ``wanted``."""
    text = cluster.kubectl("get", "--raw", "/metrics", timeout=120).stdout
    total = 0.0
    for line in text.splitlines():
        match = metric.match(line)
        if match is not None and wanted(match.group("labels")):
            total += float(match.group("value"))
    return total


def storage_updates_so_far(cluster: Cluster, resource: str, *, group: str | None = None) -> float:
    """Updates the API server has sent etcd for objects of ``resource`` (a plural, e.g.
    ``scheduledjobs``, in any group or in ``group``) since it started
    (``etcd_request_duration_seconds``): one per try of a write, so that beside
    :func:`writes_so_far` on the same resource it shows the writes tried twice.
    A write is tried again when it began from a copy in the watch cache older than what
    etcd holds (a write that follows another to the same object before the watch cache
    has seen it): the patch, the admission and the validation are done over again."""

    def wanted(labels: str) -> bool:
        return (
            'operation="update"' in labels
            and f'resource="{resource}"' in labels
            and (group is None or f'group="{group}"' in labels)
        )

    return _counted(cluster, _STORAGE, wanted)


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_bytes(pid: int) -> int:
    """A process's high-water resident memory (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"no VmHWM for pid {pid}")


def job_manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": models.API_VERSION,
        "kind": models.KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


async def _create_all(
    kubeconfig: Path, namespace: str, items: list[dict[str, Any]], concurrency: int
) -> list[dict[str, Any]]:
    path = f"/apis/{models.GROUP}/{models.VERSION}/namespaces/{namespace}/{models.PLURAL}"
    limit = asyncio.Semaphore(concurrency)
    async with KubeClient(load_configuration(str(kubeconfig))) as kube:

        async def one(item: dict[str, Any]) -> dict[str, Any]:
            async with limit:
                return await kube.request("POST", path, body=item)

        return await asyncio.gather(*(one(item) for item in items))


def create_jobs(
    cluster: Cluster, namespace: str, items: list[dict[str, Any]], *, concurrency: int = 32
) -> list[dict[str, Any]]:
    """Create ScheduledJobs fast (many requests in flight over one HTTP/2 connection);
    return the created objects."""
    return asyncio.run(_create_all(cluster.kubeconfig, namespace, items, concurrency))


def code_commit(tree: Path | None = None) -> str:
    """The commit the measured code is (with ``+dirty`` if the tree has changes):
    every results file records it, so that a figure says what it was measured on."""
    where = str(tree or Path(__file__).resolve().parents[3])
    head = subprocess.run(
        ["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    # The results a benchmark run writes are not the code it measures.
    code = [
        "tickwork",
        "operator",
        "worker",
        "benchmarks",
        "dev",
        "charts",
        ":(exclude)benchmarks/results",
    ]
    dirty = subprocess.run(
        ["git", "-C", where, "status", "--porcelain", "--", *code],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{head}+dirty" if head and dirty else head


def benchmark_parser(doc: str | None, name: str) -> argparse.ArgumentParser:
    """The arguments every benchmark takes: ``--out`` (JSON) and ``--plot`` (PNG)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=RESULTS / f"{name}.json")
    parser.add_argument("--plot", type=Path, default=RESULTS / f"{name}.png")
    return parser


def crd_copy(group: str, *, rules: bool = True) -> dict[str, Any]:
    """The shipped ScheduledJob CRD under the API group ``group``, to stand beside the
    real one on one control plane (no short names, no categories); without its CEL
    rules if ``rules`` is False."""
    crd: dict[str, Any] = yaml.safe_load(
        (CRDS / f"{models.PLURAL}.{models.GROUP}.yaml").read_text()
    )
    crd["metadata"]["name"] = f"{models.PLURAL}.{group}"
    crd["spec"]["group"] = group
    crd["spec"]["names"].pop("shortNames", None)
    crd["spec"]["names"].pop("categories", None)
    if not rules:
        crd = without_cel_rules(crd)
    return crd


def without_cel_rules(node: Any) -> Any:
    """``node`` (a schema, or a part of one) with every ``x-kubernetes-validations`` left out."""
    if isinstance(node, dict):
        return {k: without_cel_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_cel_rules(item) for item in node]
    return node


def on_a_control_plane(
    name: str,
    out: Path,
    measure: Callable[[Cluster, int], dict[str, Any]],
    args: argparse.Namespace | None = None,
) -> dict[str, Any]:
    """Start a control plane of its own, ``measure(cluster, API server's pid)`` on it,
    and save what it found (with the benchmark's name and Python's version) to ``out``."""
    report: dict[str, Any] = {"benchmark": name, "python": platform.python_version()}
    with (
        tempfile.TemporaryDirectory(prefix=f"{name.replace('_', '-')}-") as tmp,
        ControlPlane(workdir=Path(tmp) / "controlplane") as plane,
    ):
        cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane)
        report.update(measure(cluster, plane.pids()["kube-apiserver"]))
    save_report(report, out, args)
    return report


def writes_benchmark(
    doc: str | None,
    name: str,
    argv: list[str] | None,
    *,
    measure: Callable[[Cluster, int, int, int, int], dict[str, Any]],
    plot: Callable[[dict[str, Any], Path], None],
    jobs: int,
    rounds: int,
    rounds_multiple_of: int = 1,
) -> int:
    """The ``main`` of a benchmark of status writes: ``--jobs``, ``--rounds`` (a multiple
    of ``rounds_multiple_of``) and ``--concurrency``, then ``measure(cluster, API
    server's pid, jobs, rounds, concurrency)`` on a control plane of its own, printed,
    saved and drawn."""
    parser = benchmark_parser(doc, name)
    parser.add_argument("--jobs", type=int, default=jobs, help="jobs per variant")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    if args.rounds % rounds_multiple_of:
        parser.error(f"--rounds must be a multiple of {rounds_multiple_of}")
    report = on_a_control_plane(
        name,
        args.out,
        lambda cluster, apiserver: measure(
            cluster, apiserver, args.jobs, args.rounds, args.concurrency
        ),
        args,
    )
    print(json.dumps(report), flush=True)  # noqa: T201 - a benchmark prints its result
    plot(report, args.plot)
    return 0


def save_figure(figure: Any, path: Path) -> None:
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)


def save_report(report: dict[str, Any], path: Path, args: argparse.Namespace | None = None) -> None:
    """A benchmark's results as indented JSON (``benchmarks/results/``), with what they
    were measured on: the commit (:func:`code_commit`; a report that compares trees
    names its own), the date, and the arguments the benchmark ran with (``settings``,
    but for where it writes; a report's own ``settings`` are kept)."""
    stamped: dict[str, Any] = {
        "commit": code_commit(),
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        **report,
    }
    if args is not None and "settings" not in report:
        stamped["settings"] = {
            key: _setting(value)
            for key, value in sorted(vars(args).items())
            if key not in {"out", "plot"}
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamped, indent=2) + "\n")


def _setting(value: Any) -> Any:
    """An argument as JSON holds it (a path, or a list of paths, as text)."""
    if isinstance(value, list):
        return [_setting(item) for item in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def pyplot() -> Any:
    """matplotlib's pyplot drawing to files only (no display here)."""
    import matplotlib as mpl  # noqa: PLC0415 - optional, for plots only

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


@contextlib.contextmanager
def plane_with_crd(workdir: Path) -> Iterator[tuple[Cluster, RedisServer]]:
    """A fresh control plane with the CRD established, and a Redis, for one benchmark."""
    with (
        ControlPlane(workdir=workdir / "controlplane") as plane,
        RedisServer(workdir=workdir / "redis") as redis,
    ):
        cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane)
        cluster.kubectl("apply", "-f", str(CRDS))
        cluster.wait_established("scheduledjobs.tickwork.dev", "calendars.tickwork.dev")
        yield cluster, redis


async def write_history(cluster: Cluster, created: list[dict[str, Any]], runs: int) -> None:
    """Give each job the run record a fleet's jobs have once they ran: ``runs`` finished
    runs in status.runs (half failed) and the last in lastRun, as a run's field manager
    writes them."""
    import datetime as dt  # noqa: PLC0415

    from tickwork.core.runs import scheduled_run_id  # noqa: PLC0415

    limit = asyncio.Semaphore(32)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def record(uid: str, i: int) -> dict[str, Any]:
        at = base + dt.timedelta(days=i)
        stamp = at.isoformat().replace("+00:00", "Z")
        done = (at + dt.timedelta(seconds=3)).isoformat().replace("+00:00", "Z")
        failed = i % 2 == 1
        return {
            "id": scheduled_run_id(uid, at),
            "scheduledAt": stamp,
            "startedAt": stamp,
            "finishedAt": done,
            "outcome": "Failed" if failed else "Succeeded",
            "attempts": 3 if failed else 1,
            **(
                {"error": "HTTP 503 from https://reports.example.com/nightly"}
                if failed
                else {"result": "HTTP 200"}
            ),
        }

    async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:

        async def one(job: dict[str, Any]) -> None:
            meta = job["metadata"]
            records = [record(meta["uid"], i) for i in range(runs)]
            status = {"runs": records, "lastRun": records[-1]}
            async with limit:
                await kube.apply_job_status(
                    meta["namespace"],
                    meta["name"],
                    meta["uid"],
                    status,
                    field_manager="tickwork-run-bench",
                    force=True,
                )

        await asyncio.gather(*(one(job) for job in created))
