"""What the dashboard and the alerts ask Prometheus for exists: every metric their
PromQL names is one Tickwork exports (read from the components' metric registries) or
one of a short, documented list of others. And the metrics the alerts rely on behave
as the alerts assume. (When the alerts fire: tests/integration/test_alerts.py.)
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from tickwork.api.models import OperatorStatus
from tickwork.api.sharing import compact
from tickwork.core.buckets import BucketIndex
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.states import JobPhase
from tickwork.queue.memory import MemoryRunQueue
from tickwork.queue.messages import RunMessage
from tickwork_operator.clock import Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.parts import Shared
from tickwork_operator.reconciler import Reconciler
from tickwork_operator.state import WatchState
from tickwork_worker.metrics import WorkerMetrics

CHART = Path(__file__).parents[2] / "charts" / "tickwork"

#: Metrics the dashboard and alerts may use that Tickwork does not export.
EXTERNAL = {
    "up": "Prometheus' own, per scraped target (TickworkNoLeader: no operator answers)",
    "kube_deployment_status_replicas_available": (
        "kube-state-metrics (TickworkNoLeader: the operator Deployment has no pod at all)"
    ),
}
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}
_NOT_METRICS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
}


def exported(registry: CollectorRegistry) -> set[str]:
    """The series names a registry can expose, labelled children or not."""
    return {
        family.name + suffix for family in registry.collect() for suffix in _SUFFIXES[family.type]
    }


def metric_names(promql: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, labels or keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", promql)  # strings: label values, Grafana vars
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)  # label matchers, ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = re.findall(r"(?<![\w.])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()", text)
    return {name for name in names if name not in _NOT_METRICS}


def dashboard_queries() -> dict[str, list[str]]:
    board = json.loads((CHART / "files" / "dashboard.json").read_text())
    return {
        panel["title"]: [target["expr"] for target in panel["targets"]] for panel in board["panels"]
    }


def alert_queries() -> dict[str, str]:
    """The alerts' expressions, read from the template with every template action left
    out (they only fill in label selectors)."""
    template = (CHART / "templates" / "prometheusrule.yaml").read_text()
    rule = yaml.safe_load(re.sub(r"\{\{.*?\}\}", "", template, flags=re.DOTALL))
    return {r["alert"]: r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]}


def _operator_registry() -> CollectorRegistry:
    metrics = OperatorMetrics()
    metrics.count_jobs(dict, tuple)  # as the operator's main wires it to its watch state
    return metrics.registry


TICKWORK = exported(_operator_registry()) | exported(WorkerMetrics().registry)


@pytest.mark.parametrize(
    ("promql", "names"),
    [
        (
            'sum by (state) (tickwork_queue_depth{namespace=~"$namespace"})',
            {"tickwork_queue_depth"},
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(tickwork_tick_seconds_bucket[5m])))",
            {"tickwork_tick_seconds_bucket"},
        ),
        ('a{x="y"} / (b > 0) and on (namespace, pod) c == 1', {"a", "b", "c"}),
        ("(m unless m offset 15m) or increase(m[15m]) > 1e3", {"m"}),
        ("sum without (pod) (rate(x_total[$__rate_interval])) > bool 0", {"x_total"}),
    ],
)
def test_metric_names_are_read_from_promql(promql: str, names: set[str]) -> None:
    assert metric_names(promql) == names


def test_every_panel_asks_for_metrics_tickwork_exports() -> None:
    queries = dashboard_queries()
    for title in (
        "Missed and skipped runs (per 15 min)",
        "Tick time p50 / p99",
        "Pending status writes",
        "Workers' job cache",
        "Redis memory",
        "Worker replicas",
    ):
        assert title in queries
    for title, exprs in queries.items():
        for expr in exprs:
            names = metric_names(expr)
            assert names & TICKWORK, f"panel {title!r} names no Tickwork metric: {expr}"
            assert names <= TICKWORK, f"panel {title!r}: {names - TICKWORK} not exported"


def test_every_alert_asks_for_metrics_tickwork_exports_or_documented_others() -> None:
    queries = alert_queries()
    assert len(queries) == 12
    for alert, expr in queries.items():
        names = metric_names(expr)
        assert names & TICKWORK, f"{alert} names no Tickwork metric"
        assert names <= TICKWORK | set(EXTERNAL), f"{alert}: {names - TICKWORK} unknown"


def test_the_counters_alerts_take_increase_of_start_at_zero() -> None:
    # A labelled child appears when first used; increase() cannot see its first value,
    # so the first missed or failed run would never alert.
    operator, worker = OperatorMetrics().registry, WorkerMetrics().registry
    assert operator.get_sample_value("tickwork_runs_skipped_total", {"reason": "missed"}) == 0
    assert worker.get_sample_value("tickwork_runs_total", {"outcome": "Failed"}) == 0
    assert worker.get_sample_value("tickwork_runs_total", {"outcome": "Succeeded"}) == 0


class _Unreachable(MemoryRunQueue):
    down = False

    async def reap_expired(self, *, limit: int = 1000) -> int:
        if self.down:
            raise QueueUnavailableError("cannot reach Redis")
        return await super().reap_expired(limit=limit)


def _maintaining(
    queue: MemoryRunQueue, clock: Callable[[], float]
) -> tuple[Reconciler, OperatorMetrics]:
    """A leader's queue maintenance on ``queue`` (no API server: it calls none)."""
    metrics = OperatorMetrics()
    shared = Shared(
        state=WatchState(index=BucketIndex(start=0.0, width=1.0)),
        queue=queue,
        kube=None,  # type: ignore[arg-type]  # maintenance never calls the API server
        events=None,  # type: ignore[arg-type]  # nor posts an Event
        metrics=metrics,
        clock=Clock(wall=clock, monotonic=clock),
    )
    return Reconciler(shared, queue_name="default"), metrics


@pytest.mark.asyncio
async def test_redis_up_follows_the_leaders_queue_maintenance_and_a_standby_has_none() -> None:
    queue = _Unreachable(clock=lambda: 0.0)
    reconciler, metrics = _maintaining(queue, lambda: 0.0)

    def up() -> float | None:
        return metrics.registry.get_sample_value("tickwork_redis_up", {"queue": "default"})

    assert up() is None
    await reconciler.maintain_queue()
    assert up() == 1
    queue.down = True
    await reconciler.maintain_queue()
    assert up() == 0
    queue.down = False
    await reconciler.maintain_queue()
    assert up() == 1
    reconciler.forget_queue()
    assert up() is None


@pytest.mark.asyncio
async def test_the_oldest_waiting_gauge_follows_the_queue_on_an_injected_clock() -> None:
    """tickwork_queue_oldest_waiting_seconds (TickworkQueueStuck): the age of the run
    next to be claimed, growing while nobody claims, 0 once it is claimed."""
    now = [1000.0]
    queue = MemoryRunQueue(clock=lambda: now[0])
    reconciler, metrics = _maintaining(queue, lambda: now[0])

    async def waited() -> float | None:
        await reconciler.maintain_queue()
        return metrics.registry.get_sample_value("tickwork_queue_oldest_waiting_seconds")

    assert await waited() == 0
    message = RunMessage(run_id="u.20261201T090000Z", namespace="ns", name="j", uid="u")
    await queue.enqueue(message)
    now[0] += 30
    await queue.enqueue(replace(message, run_id="u.20261201T090100Z"))
    now[0] += 600
    assert await waited() == 630  # the first, next to be claimed
    await queue.claim(consumer="w", lease_seconds=3600)
    assert await waited() == 600
    await queue.claim(consumer="w", lease_seconds=3600)
    assert await waited() == 0


@pytest.mark.asyncio
async def test_the_ready_gauge_counts_each_priority_and_the_backlog_all_of_them() -> None:
    """tickwork_queue_ready{priority}: the three ready lists; the autoscaler's backlog
    counts them all."""
    queue = MemoryRunQueue()
    reconciler, metrics = _maintaining(queue, lambda: 1000.0)
    for n, priority in enumerate(["High", "High", None, "Low", "Low", "Low"]):
        run = RunMessage(run_id=f"u.2026120109000{n}Z", namespace="ns", name="j", uid="u")
        await queue.enqueue(replace(run, priority=priority))
    await reconciler.maintain_queue()

    def ready(priority: str) -> float | None:
        return metrics.registry.get_sample_value("tickwork_queue_ready", {"priority": priority})

    assert (ready("High"), ready("Normal"), ready("Low")) == (2, 1, 3)
    backlog = metrics.registry.get_sample_value("tickwork_queue_backlog", {"queue": "default"})
    assert backlog == 6
    reconciler.forget_queue()
    assert ready("High") is None


def test_jobs_by_phase_counts_what_the_watched_status_shows_at_each_scrape() -> None:
    """tickwork_jobs{phase} (TickworkJobsPaused) follows the watch: a job whose status
    says Paused counts until a later event shows it resumed, every phase is exported,
    and a job without a phase yet is in none."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    state = WatchState(index=BucketIndex(start=now.timestamp(), width=1.0))
    metrics = OperatorMetrics()
    metrics.count_jobs(state.phases)

    def observe(name: str, phase: str | None, *, version: str = "1") -> None:
        state.observe(
            {
                "metadata": {
                    "namespace": "ns",
                    "name": name,
                    "uid": f"uid-{name}",
                    "generation": 1,
                    "creationTimestamp": now.isoformat(),
                    "resourceVersion": version,
                },
                "spec": {"schedule": "0 * * * *", "task": {"echo": {"message": "hi"}}},
                "status": {"phase": phase} if phase else {},
            },
            now=now,
        )

    def counts() -> dict[str, float | None]:
        phases = ("Scheduled", "Suspended", "Paused", "Completed", "Invalid")
        registry = metrics.registry
        return {
            phase: registry.get_sample_value("tickwork_jobs", {"phase": phase}) for phase in phases
        }

    assert counts() == dict.fromkeys(counts(), 0.0)
    observe("a", "Paused")
    observe("b", "Paused")
    observe("c", "Scheduled")
    observe("d", None)
    assert counts() == {
        "Scheduled": 1.0,
        "Suspended": 0.0,
        "Paused": 2.0,
        "Completed": 0.0,
        "Invalid": 0.0,
    }
    observe("a", "Scheduled", version="2")  # resumed
    state.forget("ns", "b")  # deleted
    assert counts()["Paused"] == 0.0
    assert counts()["Scheduled"] == 2.0


_PHASES = [None, "Scheduled", "Suspended", "Paused", "Completed"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["observe", "wrote", "wrote-stale", "forget"]),
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(_PHASES),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_phase_counts_follow_every_change_of_the_jobs_without_a_pass_over_them(
    steps: list[tuple[str, str, str | None, bool]],
) -> None:
    """The counts behind tickwork_jobs{phase} are kept as the watch brings jobs (new,
    changed, re-created under the same name with another uid), as the operator's
    writes land (on the entry held, or on one the watch replaced meanwhile) and as
    jobs are deleted: after every step they equal a count over the jobs. And a scrape
    reads the counts, not the jobs (at 100,000 jobs a pass held the event loop)."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    state = WatchState(index=BucketIndex(start=now.timestamp(), width=1.0))
    versions = iter(range(1, 10_000))
    stale: dict[str, Any] = {}
    for action, name, phase, other_uid in steps:
        if action == "observe":
            entry = state.observe(
                {
                    "metadata": {
                        "namespace": "ns",
                        "name": name,
                        "uid": f"uid-{name}-{int(other_uid)}",
                        "generation": 1,
                        "creationTimestamp": now.isoformat(),
                        "resourceVersion": str(next(versions)),
                    },
                    "spec": {"schedule": "0 * * * *", "task": {"echo": {"message": "hi"}}},
                    "status": {"phase": phase} if phase else {},
                },
                now=now,
            )
            stale.setdefault(name, entry)
        elif action.startswith("wrote") and (entry := state.jobs.get(("ns", name))):
            held = stale.get(name, entry) if action == "wrote-stale" else entry
            state.wrote(held, compact(OperatorStatus(phase=phase and JobPhase(phase))))
        elif action == "forget":
            state.forget("ns", name)
            stale.pop(name, None)
        assert state.phases() == collections.Counter(
            e.written.phase for e in state.jobs.values() if e.written.phase is not None
        )

    class Unread(dict):  # type: ignore[type-arg]
        def values(self) -> Any:
            raise AssertionError("a scrape passed over every job")

        def __iter__(self) -> Any:
            raise AssertionError("a scrape passed over every job")

    counted = state.phases()
    state.jobs = Unread(state.jobs)
    metrics = OperatorMetrics()
    metrics.count_jobs(state.phases)
    assert {
        phase: metrics.registry.get_sample_value("tickwork_jobs", {"phase": phase.value})
        for phase in counted
    } == counted
