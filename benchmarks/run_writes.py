"""What a run's one status write costs the API server, by how it is sent.

    python benchmarks/run_writes.py [--jobs 300] [--rounds 12] [--concurrency 16]

Since issue 48 a run of the schedule writes status once: its record in its place of
the history, with ``lastRun`` and the next runs. The API server's CPU for that write
is most of a run's cost (issue 48 wants a run at 0.35 of the previous main's). This
measures what decides it, on one control plane, each variant on ``--jobs`` jobs of a CRD copy of its
own (an API group each), every job's history full before the rounds (as in steady
state), then per round, in a rotating order, one run per job of each variant:

* ``placed``: as Tickwork writes today (``JobAccess._place``): a server-side apply of
  :func:`~tickwork.kube.status.record_body` with the record in its place
  (:func:`~tickwork.kube.status.history_slot`), by that place's field manager,
  conditional on the resourceVersion the place was chosen on;
* ``placed_no_rules``: the same on a copy of the CRD without its CEL rules (the API
  server evaluates the object's rules on every status write);
* ``json_patch``: the same fields as one JSON patch under one field manager for every
  run: the place's record ``test``-ed by its ``id`` and replaced, ``lastRun``,
  ``lastSuccessfulTime`` and the next runs set. No field manager per place;
* ``atomic_history``: the same fields as one apply under one field manager, on a CRD
  copy whose history is one atomic list (``x-kubernetes-list-type: atomic``), sent
  whole and conditional on the resourceVersion it was built on: ``managedFields``
  then names the history, not each record's every field;
* ``outcome_only``: the least a run can write and still show its outcome in status:
  one apply of ``lastRun`` and ``lastSuccessfulTime`` under one field manager, no
  history, no next runs, on a CRD copy without CEL rules. No design that records
  runs in status costs the API server less per run: its cost is the floor under any
  change to how a run's write is sent.

A round sends one write per job of a variant, ``--concurrency`` at a time; no write
follows another to the same object at once (as in Tickwork, where a job's runs are a
schedule's interval apart). The tries per write, from the API server's etcd metrics,
are reported beside the writes per run.

The API server's CPU time (``/proc``) over a variant's runs, divided by their number,
is its cost per run: the mean over the rounds; the writes per run and the size of a
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
from tickwork.kube.client import (
    APPLY_PATCH,
    JSON_PATCH,
    KubeClient,
    load_configuration,
)
from tickwork.kube.status import (
    HISTORY_MANAGER_PREFIX,
    history_manager,
    history_slot,
    record_body,
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

VARIANTS = ("placed", "placed_no_rules", "json_patch", "atomic_history", "outcome_only")
NAMESPACE = "runs"
#: The history limit of every job (successful runs; each run here succeeds).
KEEP = 3
#: Runs each job has before the measured rounds: its history full.
WARMUP_RUNS = 4
#: The one field manager of the ``json_patch`` and ``atomic_history`` writes.
ONE_WRITER = "tickwork-worker"
#: The one field manager of the ``outcome_only`` writes.
OUTCOME_WRITER = "tickwork-outcome"
#: The variants on a copy of the CRD without its CEL rules.
WITHOUT_RULES = ("placed_no_rules", "outcome_only")
SPEC = {
    **HTTP_JOB_SPEC,
    "schedule": "* * * * *",
    "history": {"successfulRuns": KEEP, "failedRuns": KEEP},
}
BASE = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)


def group(variant: str) -> str:
    return f"{variant.replace('_', '-')}.runs.bench.{models.GROUP}"


def variant_crd(variant: str) -> dict[str, Any]:
    """The shipped CRD under the variant's group; without CEL rules for
    :data:`WITHOUT_RULES`; for ``atomic_history``, its history one atomic list."""
    crd = crd_copy(group(variant), rules=variant not in WITHOUT_RULES)
    if variant == "atomic_history":
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        runs = schema["properties"]["status"]["properties"]["runs"]
        runs["x-kubernetes-list-type"] = "atomic"
        del runs["x-kubernetes-list-map-keys"]
    return crd


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
        return f"{self.uid}.{self.due(k).strftime('%Y%m%dT%H%M%SZ')}"

    @staticmethod
    def due(k: int) -> dt.datetime:
        return BASE + dt.timedelta(minutes=k)

    @property
    def version(self) -> str:
        return str((self.written.get("metadata") or {}).get("resourceVersion") or "")

    @property
    def history(self) -> list[RunRecord]:
        return ScheduledJobStatus.model_validate(self.written.get("status") or {}).runs

    def apply_body(self, status: dict[str, Any]) -> dict[str, Any]:
        metadata = {"name": self.name, "namespace": NAMESPACE, "uid": self.uid}
        if self.version:
            metadata["resourceVersion"] = self.version
        return {
            "apiVersion": f"{group(self.variant)}/{models.VERSION}",
            "kind": models.KIND,
            "metadata": metadata,
            "status": status,
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


def placed(job: Job, k: int) -> tuple[str, dict[str, Any]]:
    """Run ``k``'s place in the history and its write's status, as ``_place`` makes it."""
    slot = history_slot(job.history, RunState.SUCCEEDED, successful=KEEP, failed=KEEP)
    assert slot is not None  # noqa: S101 - the jobs keep successes
    shown = [job.due(k + i) for i in range(1, 6)]
    done = record(job, k).model_copy(update={"slot": slot})
    return slot, record_body(done, successful=KEEP, failed=KEEP, shown=shown)


async def as_placed(kube: KubeClient, job: Job, k: int) -> None:
    """The run's apply as its place's manager (``JobAccess._place``)."""
    slot, status = placed(job, k)
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=job.apply_body(status),
        params={"fieldManager": history_manager(slot), "force": "true"},
        content_type=APPLY_PATCH,
    )


async def as_json_patch(kube: KubeClient, job: Job, k: int) -> None:
    """The same fields as one JSON patch: the place's record ``test``-ed and replaced."""
    slot, status = placed(job, k)
    runs = (job.written.get("status") or {}).get("runs") or []
    at = next((i for i, run in enumerate(runs) if run.get("slot") == slot), None)
    operations: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": job.uid}]
    if at is not None:
        operations += [
            {"op": "test", "path": f"/status/runs/{at}/id", "value": runs[at]["id"]},
            {"op": "replace", "path": f"/status/runs/{at}", "value": status["runs"][0]},
        ]
    elif runs:
        operations.append({"op": "add", "path": "/status/runs/-", "value": status["runs"][0]})
    else:  # a new job: no status yet
        operations.append({"op": "add", "path": "/status", "value": {"runs": status["runs"]}})
    operations += [
        {"op": "add", "path": f"/status/{name}", "value": value}
        for name, value in status.items()
        if name != "runs"
    ]
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=operations,
        params={"fieldManager": ONE_WRITER},
        content_type=JSON_PATCH,
    )


async def as_atomic_history(kube: KubeClient, job: Job, k: int) -> None:
    """The same fields as one apply under one field manager, the history one atomic
    list sent whole, conditional on the resourceVersion it was built on."""
    slot, status = placed(job, k)
    runs = [
        run for run in (job.written.get("status") or {}).get("runs") or [] if run["slot"] != slot
    ]
    job.written = await kube.request(
        "PATCH",
        job.status_path,
        body=job.apply_body({**status, "runs": [*runs, *status["runs"]]}),
        params={"fieldManager": ONE_WRITER, "force": "true"},
        content_type=APPLY_PATCH,
    )


async def outcome_only(kube: KubeClient, job: Job, k: int) -> None:
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


Write = Callable[[KubeClient, Job, int], Awaitable[None]]

WRITES: dict[str, Write] = {
    "placed": as_placed,
    "placed_no_rules": as_placed,
    "json_patch": as_json_patch,
    "atomic_history": as_atomic_history,
    "outcome_only": outcome_only,
}


async def runs_of(kube: KubeClient, jobs: list[Job], k: int, concurrency: int) -> int:
    """Run ``k`` of every job (of one variant); how many writes."""
    limit = asyncio.Semaphore(concurrency)
    write = WRITES[jobs[0].variant]

    async def one(job: Job) -> None:
        async with limit:
            await write(kube, job, k)

    await asyncio.gather(*(one(job) for job in jobs))
    return len(jobs)


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
        "place_managers": sum(1 for m in managers if str(m).startswith(HISTORY_MANAGER_PREFIX)),
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
        "over_placed": {v: round(ms[v] / ms["placed"], 3) for v in ms},
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
    axis.set_title("A run's status write, by how it is sent (histories full; outcome_only: none)")
    axis.grid(visible=True, axis="y", alpha=0.3)
    axis.set_ylim(0, max(ms.values()) * 1.4)
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    return writes_benchmark(
        __doc__,
        "run_writes",
        argv,
        measure=measure,
        plot=plot,
        jobs=300,
        rounds=12,
    )


if __name__ == "__main__":
    sys.exit(main())
