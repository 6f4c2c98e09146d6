"""Every Prometheus metric the operator exports, defined once.

The names follow job-queue conventions (``*_total`` counters, ``*_seconds``
histograms, queue depth as a gauge with a ``state`` label) so dashboards and
the HPA's adapter rule can rely on them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tickwork.core.states import JobPhase
from tickwork.heap import CollectorPauses

#: Why the operator did not publish a due run (``tickwork_runs_skipped_total{reason}``).
SKIP_REASONS = ("forbid", "missed")
#: Buckets for schedule lag: publishing should take milliseconds; minutes mean trouble.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)


class _JobsByPhase(Collector):
    """``tickwork_jobs{phase}``, read when Prometheus scrapes from the counts the watch
    keeps (``WatchState.phases``: no pass over every job while the event loop waits);
    every phase is exported, 0 when no job is in it."""

    def __init__(self, count: Callable[[], Mapping[JobPhase, int]]) -> None:
        self._count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = self._count()
        family = GaugeMetricFamily(
            "tickwork_jobs",
            "ScheduledJobs this replica watches, by the phase their status shows.",
            labels=["phase"],
        )
        for phase in JobPhase:
            family.add_metric([phase.value], counts.get(phase, 0))
        yield family


#: Jobs ``tickwork_job_late`` names at most (the rest are counted, not named).
LATE_JOBS_NAMED = 1000


class _LateJobs(Collector):
    """``tickwork_job_late{job_namespace, job_name}``: 1 for each job with a lag objective
    (spec.slo) whose last run started late (condition OnTime False), from the set the
    watch keeps; the first :data:`LATE_JOBS_NAMED` of them by name, and how many in all
    (``tickwork_jobs_late``)."""

    def __init__(self, late: Callable[[], Collection[tuple[str, str]]]) -> None:
        self._late = late

    def collect(self) -> Iterator[GaugeMetricFamily]:
        late = self._late()
        named = GaugeMetricFamily(
            "tickwork_job_late",
            "1 for each job whose last run started later than its spec.slo allows "
            f"(condition OnTime False; the first {LATE_JOBS_NAMED} such jobs).",
            labels=["job_namespace", "job_name"],
        )
        for namespace, name in itertools.islice(late, LATE_JOBS_NAMED):
            named.add_metric([namespace, name], 1)
        yield named
        yield GaugeMetricFamily(
            "tickwork_jobs_late",
            "Jobs whose last run started later than their spec.slo allows.",
            value=len(late),
        )


class OperatorMetrics:
    """The operator's metrics, in their own registry (so tests can make several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.gc_pauses = CollectorPauses()
        r.register(self.gc_pauses)
        self.queue_depth = Gauge(
            "tickwork_queue_depth", "Runs in the queue, by state.", ["state"], registry=r
        )
        self.queue_ready = Gauge(
            "tickwork_queue_ready",
            "Ready runs by priority (spec.priority: High, Normal, Low).",
            ["priority"],
            registry=r,
        )
        self.queue_remembered = Gauge(
            "tickwork_queue_remembered_runs",
            "Acknowledged run IDs kept so that re-publishing one is a no-op (bounded by age "
            "and count).",
            registry=r,
        )
        self.queue_oldest_waiting = Gauge(
            "tickwork_queue_oldest_waiting_seconds",
            "How long the run that waits longest has been queued (the next to be "
            "claimed, or the longest parked); 0 when none waits. It grows while no "
            "worker claims.",
            registry=r,
        )
        self.queue_dead_oldest = Gauge(
            "tickwork_queue_dead_oldest_seconds",
            "Age of the oldest dead letter; 0 when there is none.",
            registry=r,
        )
        self.redis_memory_used = Gauge(
            "tickwork_redis_memory_used_bytes",
            "Memory Redis uses (INFO used_memory).",
            registry=r,
        )
        self.redis_memory_max = Gauge(
            "tickwork_redis_memory_max_bytes",
            "Redis' maxmemory; 0 when it has none (then alert on the container's limit).",
            registry=r,
        )
        self.redis_up = Gauge(
            "tickwork_redis_up",
            "1 while the leader's queue maintenance reaches Redis (every tick); 0 when Redis "
            "is unreachable or refuses it. Only the leader reports it.",
            ["queue"],
            registry=r,
        )
        self.queue_backlog = Gauge(
            "tickwork_queue_backlog",
            "Ready, parked and in-flight runs: what the worker autoscaler scales on.",
            ["queue"],
            registry=r,
        )
        self.runs_published = Counter(
            "tickwork_runs_published_total",
            "Runs published to the queue, by what caused them.",
            ["trigger"],
            registry=r,
        )
        self.runs_held_back = Counter(
            "tickwork_runs_held_back_total",
            "Looks at a due run that published nothing for want of its namespace's claim: "
            "claimed_elsewhere (another Tickwork release holds it and publishes the run), "
            "not_claimed (being taken, or its renewal overdue). Counted at each look.",
            ["reason"],
            registry=r,
        )
        self.runs_skipped = Counter(
            "tickwork_runs_skipped_total",
            "Runs not published, by reason (forbid, missed).",
            ["reason"],
            registry=r,
        )
        for reason in SKIP_REASONS:  # from 0, so an alert's increase() sees the first miss
            self.runs_skipped.labels(reason=reason)
        self.schedule_lag = Histogram(
            "tickwork_schedule_lag_seconds",
            "Publish time minus scheduled time (jitter included).",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.status_writes_pending = Gauge(
            "tickwork_status_writes_pending",
            "Status writes the operator owes (new or changed jobs), worked off each tick.",
            registry=r,
        )
        self.reports_pending = Gauge(
            "tickwork_status_reports_pending",
            "Jobs whose report of a published run (phase Queued, nextRunAt) is still to be "
            "written; written in the background, merged per job while a backlog lasts.",
            registry=r,
        )
        self.events = Counter(
            "tickwork_operator_events",
            "ScheduledJobs the operator indexed, by how they came: LISTED (a list at a "
            "start or a relist), ADDED, MODIFIED, DELETED (watch events).",
            ["type"],
            registry=r,
        )
        self.index_size = Gauge(
            "tickwork_index_jobs", "ScheduledJobs in the watcher's bucket index.", registry=r
        )
        self.leader = Gauge(
            "tickwork_operator_leader", "1 while this replica holds the Lease.", registry=r
        )
        self.namespace_claims = Gauge(
            "tickwork_namespace_claims",
            "Namespaces the leader schedules (state=held: their tickwork-scheduler Lease "
            "is this release's) and those it leaves to another Tickwork release that "
            "claimed them first (state=elsewhere: alert on > 0).",
            ["state"],
            registry=r,
        )
        self.api_errors = Counter(
            "tickwork_api_errors_total",
            "Failed calls to the Kubernetes API or Redis, by operation.",
            ["operation"],
            registry=r,
        )
        self.reconciliations = Counter(
            "tickwork_reconciliations_total",
            "Passes that compared active runs in status with the queue.",
            registry=r,
        )
        self.tick_seconds = Histogram(
            "tickwork_tick_seconds",
            "Duration of one leader tick.",
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
            registry=r,
        )

    def count_jobs(
        self,
        count: Callable[[], Mapping[JobPhase, int]],
        late: Callable[[], Collection[tuple[str, str]]] = tuple,
    ) -> None:
        """Export ``tickwork_jobs{phase}`` from ``count``, ``tickwork_job_late`` and
        ``tickwork_jobs_late`` from ``late`` (each called at each scrape)."""
        self.registry.register(_JobsByPhase(count))
        self.registry.register(_LateJobs(late))
