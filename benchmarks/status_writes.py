"""What a status write costs the API server, by how the CRD's validation rules run.

    python benchmarks/status_writes.py [--jobs 500] [--rounds 8] [--concurrency 16]

The API server evaluates every CEL rule of a custom resource on every write, a write
of the status subresource too (validation ratcheting forgives errors of unchanged
values only after evaluating them), and Tickwork writes status once or twice per run.
Three copies of the ScheduledJob CRD, each under an API group of its own, on one
control plane:

* ``shipped``: the CRD as it is (every rule under ``spec``);
* ``oldself_guard``: each rule that runs a regular expression or parses a URL on a
  string or a map skips a value equal to the stored one
  (``oldSelf.hasValue() && oldSelf.value() == self || (rule)``, ``optionalOldSelf``),
  so that a status write should evaluate no regular expression;
* ``no_rules``: no CEL rule at all: what a status write would cost if the rules ran
  only on writes of the object itself (a ValidatingAdmissionPolicy, which does not
  match the status subresource, instead of rules in the schema);
* ``shipped_watched``: the CRD as it is, with one watch open on it all along (as the
  operator's: a consumer reading every event), so that each write also goes out as a
  watch event. Issue 18's floor for first statuses is measured with no watch open;
  the operator always has one.

Each holds ``--jobs`` jobs with one realistic spec (a cron schedule, an HTTP task
with a URL, headers and a body template). Per round, in a rotating order, every job
of each copy gets one status write as the operator makes it (server-side apply of its
share, a new ``nextRunAt`` each round); the API server's CPU time (``/proc``) over a
copy's writes, divided by their number, is its cost per write (median of the rounds
after a warm-up round). Compare the ratios: the machine is shared and noisy. Writes
benchmarks/results/status_writes.json and a plot.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tickwork.api import models
from tickwork.kube.client import APPLY_PATCH, KubeClient, load_configuration
from tickwork.kube.status import OPERATOR_MANAGER
from tickwork_dev.devcluster.cluster import Cluster, kubectl_binary
from tickwork_dev.devcluster.measure import (
    HTTP_JOB_SPEC,
    cpu_seconds,
    crd_copy,
    save_figure,
    writes_benchmark,
)

VARIANTS = ("shipped", "oldself_guard", "no_rules", "shipped_watched")
#: The guard the ``oldself_guard`` copy puts before a costly rule.
UNCHANGED = "oldSelf.hasValue() && oldSelf.value() == self"
COSTLY = ("matches(", "findAll(", "url(")
NAMESPACE = "writes"
SPEC = HTTP_JOB_SPEC


def _guarded(node: Any) -> Any:
    """``node`` with each costly rule on a string or a map skipping unchanged values."""
    if isinstance(node, dict):
        out = {key: _guarded(value) for key, value in node.items()}
        leaf = out.get("type") == "string" or "additionalProperties" in out
        for entry in out.get("x-kubernetes-validations", []) if leaf else []:
            if any(call in entry["rule"] for call in COSTLY):
                entry["rule"] = f"{UNCHANGED} || ({entry['rule']})"
                entry["optionalOldSelf"] = True
        return out
    if isinstance(node, list):
        return [_guarded(item) for item in node]
    return node


def variant_crd(variant: str) -> dict[str, Any]:
    """The shipped CRD, under the group ``<variant>.bench.tickwork.dev``."""
    crd = crd_copy(f"{variant.replace('_', '-')}.bench.{models.GROUP}", rules=variant != "no_rules")
    if variant == "oldself_guard":
        crd = _guarded(crd)
    return copy.deepcopy(crd)


def _path(variant: str, namespace: str, name: str = "") -> str:
    group = f"{variant.replace('_', '-')}.bench.{models.GROUP}"
    base = f"/apis/{group}/{models.VERSION}/namespaces/{namespace}/{models.PLURAL}"
    return f"{base}/{name}" if name else base


async def _create(kube: KubeClient, variant: str, namespace: str, jobs: int) -> list[str]:
    limit = asyncio.Semaphore(16)
    group = f"{variant.replace('_', '-')}.bench.{models.GROUP}"

    async def one(i: int) -> str:
        body = {
            "apiVersion": f"{group}/{models.VERSION}",
            "kind": models.KIND,
            "metadata": {"name": f"j-{i:05d}"},
            "spec": SPEC,
        }
        async with limit:
            created = await kube.request("POST", _path(variant, namespace), body=body)
        return str(created["metadata"]["name"])

    return await asyncio.gather(*(one(i) for i in range(jobs)))


async def _write_round(
    kube: KubeClient, variant: str, names: list[str], *, next_run: dt.datetime, concurrency: int
) -> None:
    namespace = NAMESPACE
    limit = asyncio.Semaphore(concurrency)
    group = f"{variant.replace('_', '-')}.bench.{models.GROUP}"
    stamp = next_run.isoformat().replace("+00:00", "Z")
    status = {
        "observedGeneration": 1,
        "phase": "Scheduled",
        "nextRunAt": stamp,
        "nextRuns": [stamp],
    }

    async def one(name: str) -> None:
        body = {
            "apiVersion": f"{group}/{models.VERSION}",
            "kind": models.KIND,
            "metadata": {"name": name, "namespace": namespace},
            "status": status,
        }
        async with limit:
            await kube.request(
                "PATCH",
                f"{_path(variant, namespace, name)}/status",
                body=body,
                params={"fieldManager": OPERATOR_MANAGER, "force": "true"},
                content_type=APPLY_PATCH,
            )

    await asyncio.gather(*(one(name) for name in names))


def measure(
    cluster: Cluster, apiserver: int, jobs: int, rounds: int, concurrency: int
) -> dict[str, Any]:
    namespace = NAMESPACE
    cluster.kubectl("create", "namespace", namespace)
    for variant in VARIANTS:
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(variant_crd(variant)))
    for variant in VARIANTS:
        group = f"{variant.replace('_', '-')}.bench.{models.GROUP}"
        cluster.wait_established(f"{models.PLURAL}.{group}")
    per_write: dict[str, list[float]] = {v: [] for v in VARIANTS}
    per_second: dict[str, list[float]] = {v: [] for v in VARIANTS}

    async def run() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            names = {v: await _create(kube, v, namespace, jobs) for v in VARIANTS}
            base = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
            for round_ in range(rounds + 1):  # round 0 warms up: not counted
                turn = round_ % len(VARIANTS)
                order = VARIANTS[turn:] + VARIANTS[:turn]
                for variant in order:
                    cpu, started = cpu_seconds(apiserver), time.monotonic()
                    await _write_round(
                        kube,
                        variant,
                        names[variant],
                        concurrency=concurrency,
                        next_run=base + dt.timedelta(minutes=round_),
                    )
                    used, took = cpu_seconds(apiserver) - cpu, time.monotonic() - started
                    if round_:
                        per_write[variant].append(1000 * used / jobs)
                        per_second[variant].append(jobs / took)
                    print(
                        json.dumps(
                            {
                                "round": round_,
                                "variant": variant,
                                "apiserver_ms_per_write": round(1000 * used / jobs, 3),
                                "writes_per_second": round(jobs / took, 1),
                            }
                        ),
                        flush=True,
                    )

    # kubectl reads the watch's events as they come (and drops them): the API server
    # encodes and sends each write of the watched copy once more.
    watch = subprocess.Popen(
        [
            kubectl_binary(),
            f"--kubeconfig={cluster.kubeconfig}",
            "get",
            "--raw",
            f"{_path('shipped_watched', namespace)}?watch=1&allowWatchBookmarks=true",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        asyncio.run(run())
        if watch.poll() is not None:
            raise RuntimeError(f"the watch ended early (exit {watch.returncode})")
    finally:
        watch.kill()
        watch.wait()
    ms = {v: round(statistics.median(per_write[v]), 3) for v in VARIANTS}
    return {
        "jobs_per_variant": jobs,
        "rounds": rounds,
        "concurrency": concurrency,
        "apiserver_ms_per_write": ms,
        "apiserver_ms_per_write_by_round": {
            v: [round(x, 3) for x in per_write[v]] for v in VARIANTS
        },
        "writes_per_second": {v: round(statistics.median(per_second[v]), 1) for v in VARIANTS},
        "oldself_guard_over_shipped": round(ms["oldself_guard"] / ms["shipped"], 3),
        "no_rules_over_shipped": round(ms["no_rules"] / ms["shipped"], 3),
        "shipped_watched_over_shipped": round(ms["shipped_watched"] / ms["shipped"], 3),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    from tickwork_dev.devcluster.measure import pyplot  # noqa: PLC0415

    figure, axis = pyplot().subplots(figsize=(7.5, 4))
    ms = result["apiserver_ms_per_write"]
    colors = ["tab:blue", "tab:orange", "tab:gray", "tab:purple"]
    axis.bar(list(ms), list(ms.values()), color=colors)
    for i, value in enumerate(ms.values()):
        axis.text(i, value, f"{value:.2f}", ha="center", va="bottom")
    axis.set_ylabel("API server CPU per status write (ms)")
    axis.set_title("Status writes by how the CRD's CEL rules run, and with a watch open")
    axis.grid(visible=True, axis="y", alpha=0.3)
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    return writes_benchmark(
        __doc__, "status_writes", argv, measure=measure, plot=plot, jobs=500, rounds=5
    )


if __name__ == "__main__":
    sys.exit(main())
