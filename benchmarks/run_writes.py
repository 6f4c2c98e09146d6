"""What one run's status writes cost the API server, by how they are sent.

    python benchmarks/run_writes.py [--jobs 300] [--rounds 8] [--concurrency 16]

Issue 18's CPU target (10 ms per run, every process) is out of reach while the API
server alone spends more than that on a run's status writes. This measures what
decides it, on one control plane, each variant on ``--jobs`` jobs of a CRD copy of its
own (an API group each), every job's history full before the rounds (as in steady
state), then per round, in a rotating order, one run per job of each variant:

* ``shipped``: as Tickwork writes today: the operator's report (server-side apply of
  its share: a new ``lastScheduleTime``, ``nextRunAt``, ``nextRuns``, ``queuedRun``),
  the run's record (apply by the run's own field manager, as
  :func:`~tickwork.kube.status.record_body` makes it), and, once 4 records are past
  the history limit, the JSON patch that trims them;
* ``no_rules``: the same writes on a copy of the CRD without its CEL rules (what
  moving them to a ValidatingAdmissionPolicy, which does not match the status
  subresource, would save: the API server evaluates every rule of the object on
  every status write);
* ``one_writer``: the report as shipped; the record as one JSON patch under one
  field manager for every run (append it, take ``lastRun`` and
  ``lastSuccessfulTime``, and remove the record past the limit, ``test``-ed by its
  ``id``): no field manager per run in ``managedFields``, no trim of its own;
* ``records_only``: the record and its trims as shipped, no report: what a run would
  cost if the operator wrote nothing per run;
* ``outcome_only``: the least a run can write and still show its outcome in status:
  one apply of ``lastRun`` and ``lastSuccessfulTime`` under one field manager, no
  history, no report, on a CRD copy without CEL rules. No design that records runs
  in status costs the API server less per run: its cost is the floor under any
  change to how a run's writes are sent.

A round sends a variant's writes kind by kind: every job's report, then every job's
record, then every job's trim. So no write follows another to the same object at once,
as in Tickwork, where a run's record comes a run's length after the operator's report
and the worker sends a trim once its watch has brought the record before it. (The API
server begins a write from the object in its watch cache; a write that follows another
to the same object sooner than the watch cache sees it begins from a stale copy and is
done twice. Sent job by job, the nineteenth round's rounds had a fifth of their writes
done twice: benchmarks/rounds.md, twentieth round.) The tries per write, from the API
server's etcd metrics, are reported beside the writes per run.

The API server's CPU time (``/proc``) over a variant's runs, divided by their number,
is its cost per run: the mean over the rounds, which come in whole trim cycles
(``--rounds`` a multiple of 4: a history is trimmed once in every 4 runs, and a
median would pick the rounds without a trim); the writes per run and the size of a
job as stored are reported beside it. Compare the ratios within one run: the
machine is shared and noisy. Writes benchmarks/results/run_writes.json and a plot.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickwork.api import models
from tickwork.api.models import RunRecord, ScheduledJobStatus
from tickwork.core.states import RunState
from tickwork.kube.client import APPLY_PATCH, KubeClient, load_configuration
from tickwork.kube.status import (
    OPERATOR_MANAGER,
    TRIM_BATCH,
    TRIM_MANAGER,
    record_body,
    run_manager,
    timestamp,
    to_drop,
    trim_due,
    trim_patch,
)
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.measure import (
    HTTP_JOB_SPEC,
    cpu_seconds,
    crd_copy,
    save_figure,
    storage_updates_so_far,
    writes_benchmark,
)

VARIANTS = ("shipped", "no_rules", "one_writer", "records_only", "outcome_only")
NAMESPACE = "runs"
#: The history limit of every job (successful runs; each run here succeeds).
KEEP = 3
#: Runs each job has before the measured rounds: its history full, a trim made.
WARMUP_RUNS = 6
#: The one field manager of the ``one_writer`` records.
ONE_WRITER = "tickwork-records"
#: The one field manager of the ``outcome_only`` writes.
OUTCOME_WRITER = "tickwork-outcome"
#: The variants on a copy of the CRD without its CEL rules.
WITHOUT_RULES = ("no_rules", "outcome_only")
JSON_PATCH = "application/json-patch+json"
SPEC = {
    **HTTP_JOB_SPEC,
    "schedule": "* * * * *",
    "history": {"successfulRuns": KEEP, "failedRuns": KEEP},
}
BASE = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)


def group(variant: str) -> str:
    return f"{variant.replace('_', '-')}.runs.bench.{models.GROUP}"


def variant_crd(variant: str) -> dict[str, Any]:
    """The shipped CRD under the variant's group; without CEL rules for ``no_rules``
    and ``outcome_only``."""
    return crd_copy(group(variant), rules=variant not in WITHOUT_RULES)


def _path(variant: str, name: str = "") -> str:
    base = f"/apis/{group(variant)}/{models.VERSION}/namespaces/{NAMESPACE}/{models.PLURAL}"
    return f"{base}/{name}" if name else base


@dataclass
class Job:
    variant: str
    name: str
    uid: str
    written: dict[str, Any] = field(default_factory=dict)
    """The object as the API server last returned it."""

    @property
    def status_path(self) -> str:
        return f"{_path(self.variant, self.name)}/status"

    def run_id(self, k: int) -> str:
        return f"{NAMESPACE}.{self.name}.{self.uid[:8]}.{int(self.due(k).timestamp())}"

    @staticmethod
    def due(k: int) -> dt.datetime:
        return BASE + dt.timedelta(minutes=k)

    def apply_body(self, status: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": f"{group(self.variant)}/{models.VERSION}",
            "kind": models.KIND,
            "metadata": {"name": self.name, "namespace": NAMESPACE, "uid": self.uid},
            "status": status,
        }


def operator_share(job: Job, k: int) -> dict[str, Any]:
    """The operator's share once run ``k`` is published, as ``operator_body`` sends it."""
    at = job.due(k)
    following = [timestamp(at + dt.timedelta(minutes=i)) for i in range(1, 6)]
    return {
        "phase": "Scheduled",
        "observedGeneration": 1,
        "nextRunAt": following[0],
        "nextRuns": following,
        "lastScheduleTime": timestamp(at),
        "queuedRun": {
            "id": job.run_id(k),
            "scheduledAt": timestamp(at),
            "queuedAt": timestamp(at + dt.timedelta(seconds=0.2)),
        },
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Scheduled",
                "message": "runs on its schedule",
                "observedGeneration": 1,
                "lastTransitionTime": timestamp(BASE),
            }
        ],
    }


def record(job: Job, k: int) -> RunRecord:
    at = job.due(k)
    return RunRecord(
        id=job.run_id(k),
        scheduled_at=at,
        outcome=RunState.SUCCEEDED,
        attempts=1,
        started_at=at + dt.timedelta(seconds=0.4),
        finished_at=at + dt.timedelta(seconds=0.5),
        result="the report for team a was built",
    )


async def report(kube: KubeClient, job: Job, k: int) -> int:
    await kube.request(
        "PATCH",
        job.status_path,
        body=job.apply_body(operator_share(job, k)),
        params={"fieldManager": OPERATOR_MANAGER, "force": "true"},
        content_type=APPLY_PATCH,
    )
    return 1


async def record_as_shipped(kube: KubeClient, job: Job, k: int) -> int:
    """The run's apply (``JobAccess.finish``)."""
    done = record(job, k)
    body = job.apply_body(record_body(done, successful=KEEP, failed=KEEP))
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=body,
        params={"fieldManager": run_manager(done.id), "force": "true"},
        content_type=APPLY_PATCH,
    )
    return 1


async def trim_as_shipped(kube: KubeClient, job: Job, k: int) -> int:
    """The trim after run ``k``'s record, once it is due (``JobAccess.trim``)."""
    status = ScheduledJobStatus.model_validate(job.written.get("status") or {})
    drop = to_drop(status.runs, record(job, k), successful=KEEP, failed=KEEP)
    patch = trim_patch(job.written, drop) if trim_due(drop, len(status.runs), placed=False) else []
    if not patch:
        return 0
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=patch,
        params={"fieldManager": TRIM_MANAGER},
        content_type=JSON_PATCH,
    )
    return 1


async def record_by_one_writer(kube: KubeClient, job: Job, k: int) -> int:
    """One JSON patch: the record appended, ``lastRun`` taken, the records past the
    limit removed (each ``test``-ed by its ``id`` at its index, as the trim does)."""
    body = record_body(record(job, k), successful=KEEP, failed=KEEP)
    runs = (job.written.get("status") or {}).get("runs") or []
    # The first record makes the list (``add`` of a member replaces it: it is empty).
    append = (
        {"op": "add", "path": "/status/runs/-", "value": body["runs"][0]}
        if job.written
        else {"op": "add", "path": "/status/runs", "value": body["runs"]}
    )
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/uid", "value": job.uid},
        append,
        {"op": "add", "path": "/status/lastRun", "value": body["lastRun"]},
        {"op": "add", "path": "/status/lastSuccessfulTime", "value": body["lastSuccessfulTime"]},
    ]
    for index in reversed(range(max(0, len(runs) + 1 - KEEP))):
        operations += [
            {"op": "test", "path": f"/status/runs/{index}/id", "value": runs[index]["id"]},
            {"op": "remove", "path": f"/status/runs/{index}"},
        ]
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=operations,
        params={"fieldManager": ONE_WRITER},
        content_type=JSON_PATCH,
    )
    return 1


async def outcome_only(kube: KubeClient, job: Job, k: int) -> int:
    """The run's outcome alone: ``lastRun`` and ``lastSuccessfulTime``, no history."""
    done = record(job, k)
    body = record_body(done, successful=0, failed=0)  # a history of none
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=job.apply_body(body),
        params={"fieldManager": OUTCOME_WRITER, "force": "true"},
        content_type=APPLY_PATCH,
    )
    return 1


Write = Callable[[KubeClient, Job, int], Awaitable[int]]


def kinds_of_writes(variant: str) -> list[Write]:
    """A run's writes, as ``variant`` sends them, in their order."""
    if variant == "outcome_only":
        return [outcome_only]
    reports: list[Write] = [] if variant == "records_only" else [report]
    if variant == "one_writer":
        return [*reports, record_by_one_writer]
    return [*reports, record_as_shipped, trim_as_shipped]


async def runs_of(kube: KubeClient, jobs: list[Job], k: int, concurrency: int) -> int:
    """Run ``k`` of every job (of one variant), kind of write by kind; how many writes."""
    limit = asyncio.Semaphore(concurrency)
    sent = 0
    for write in kinds_of_writes(jobs[0].variant):

        async def one(job: Job, write: Write = write) -> int:
            async with limit:
                return await write(kube, job, k)

        sent += sum(await asyncio.gather(*(one(job) for job in jobs)))
    return sent


async def create(kube: KubeClient, variant: str, jobs: int) -> list[Job]:
    limit = asyncio.Semaphore(16)

    async def one(i: int) -> Job:
        body = {
            "apiVersion": f"{group(variant)}/{models.VERSION}",
            "kind": models.KIND,
            "metadata": {"name": f"j-{i:05d}"},
            "spec": SPEC,
        }
        async with limit:
            made = await kube.request("POST", _path(variant), body=body)
        return Job(variant, made["metadata"]["name"], made["metadata"]["uid"])

    return list(await asyncio.gather(*(one(i) for i in range(jobs))))


def describe(stored: dict[str, Any]) -> dict[str, Any]:
    """What a job holds after the rounds: its size as stored, its history, its managers."""
    status = stored.get("status") or {}
    managers = [entry.get("manager") for entry in stored["metadata"].get("managedFields") or []]
    return {
        "bytes": len(json.dumps(stored, separators=(",", ":"))),
        "records": len(status.get("runs") or []),
        "last_run": (status.get("lastRun") or {}).get("id"),
        "next_run_at": status.get("nextRunAt"),
        "managers": len(managers),
        "run_managers": sum(1 for m in managers if str(m).startswith("tickwork-run-")),
    }


def measure(
    cluster: Cluster, apiserver: int, jobs: int, rounds: int, concurrency: int
) -> dict[str, Any]:
    cluster.kubectl("create", "namespace", NAMESPACE)
    for variant in VARIANTS:
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(variant_crd(variant)))
    for variant in VARIANTS:
        cluster.wait_established(f"{models.PLURAL}.{group(variant)}")
    per_run: dict[str, list[float]] = {v: [] for v in VARIANTS}
    writes: dict[str, int] = dict.fromkeys(VARIANTS, 0)
    tries: dict[str, float] = dict.fromkeys(VARIANTS, 0.0)
    held: dict[str, dict[str, Any]] = {}

    def stored(variant: str) -> float:
        return storage_updates_so_far(cluster, models.PLURAL, group=group(variant))

    async def run() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            sets = {v: await create(kube, v, jobs) for v in VARIANTS}
            for k in range(WARMUP_RUNS):
                for variant in VARIANTS:
                    await runs_of(kube, sets[variant], k, concurrency)
            for round_ in range(rounds):
                k = WARMUP_RUNS + round_
                turn = round_ % len(VARIANTS)
                for variant in VARIANTS[turn:] + VARIANTS[:turn]:
                    # Read before and after the CPU time (serving /metrics costs some).
                    tried = await asyncio.to_thread(stored, variant)
                    cpu, started = cpu_seconds(apiserver), time.monotonic()
                    sent = await runs_of(kube, sets[variant], k, concurrency)
                    used, took = cpu_seconds(apiserver) - cpu, time.monotonic() - started
                    tries[variant] += await asyncio.to_thread(stored, variant) - tried
                    per_run[variant].append(1000 * used / jobs)
                    writes[variant] += sent
                    print(
                        json.dumps(
                            {
                                "round": round_,
                                "variant": variant,
                                "apiserver_ms_per_run": round(1000 * used / jobs, 3),
                                "writes_per_run": round(sent / jobs, 3),
                                "runs_per_second": round(jobs / took, 1),
                            }
                        ),
                        flush=True,
                    )
            for variant in VARIANTS:
                first = sets[variant][0]
                held[variant] = describe(await kube.request("GET", _path(variant, first.name)))
                held[variant]["expected_last_run"] = first.run_id(WARMUP_RUNS + rounds - 1)

    asyncio.run(run())
    return {
        "jobs_per_variant": jobs,
        "rounds": rounds,
        "concurrency": concurrency,
        "history_limit": KEEP,
        **summary({v: [round(x, 3) for x in per_run[v]] for v in VARIANTS}),
        "writes_per_run": {v: round(writes[v] / (jobs * rounds), 3) for v in VARIANTS},
        "storage_tries_per_write": {v: round(tries[v] / writes[v], 3) for v in VARIANTS},
        "a_job_after_the_rounds": held,
    }


def summary(by_round: dict[str, list[float]]) -> dict[str, Any]:
    """Each variant's cost per run (the mean of its rounds), and as a share of today's."""
    ms = {v: round(statistics.fmean(rounds), 3) for v, rounds in by_round.items()}
    return {
        "apiserver_ms_per_run": ms,
        "apiserver_ms_per_run_by_round": by_round,
        "over_shipped": {v: round(ms[v] / ms["shipped"], 3) for v in ms},
    }


def plot(result: dict[str, Any], path: Path) -> None:
    from tickwork_dev.devcluster.measure import pyplot  # noqa: PLC0415

    figure, axis = pyplot().subplots(figsize=(9, 4))
    ms = result["apiserver_ms_per_run"]
    per_write = result["writes_per_run"]
    colors = ["tab:blue", "tab:gray", "tab:green", "tab:orange", "tab:purple"]
    axis.bar(list(ms), list(ms.values()), color=colors[: len(ms)])
    tries = result.get("storage_tries_per_write") or {}
    for i, (variant, value) in enumerate(ms.items()):
        label = f"{value:.1f} ms\n{per_write[variant]:.2f} writes"
        if variant in tries:
            label += f"\n{tries[variant]:.2f} tries each"
        axis.text(i, value, label, ha="center", va="bottom")
    axis.set_ylabel("API server CPU per run (ms)")
    axis.set_title(
        "One run's status writes, by how they are sent (histories full; outcome_only: none)"
    )
    axis.grid(visible=True, axis="y", alpha=0.3)
    axis.set_ylim(0, max(ms.values()) * 1.4)
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    # Whole trim cycles: a history is trimmed once in every TRIM_BATCH runs.
    return writes_benchmark(
        __doc__,
        "run_writes",
        argv,
        measure=measure,
        plot=plot,
        jobs=300,
        rounds=12,
        rounds_multiple_of=TRIM_BATCH,
    )


if __name__ == "__main__":
    sys.exit(main())
