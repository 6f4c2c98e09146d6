"""Every Prometheus metric the worker exports, defined once (job-queue conventions).

Per-team metrics carry the job's namespace as ``job_namespace`` and its name as
``job_name`` (``namespace`` and ``job`` are the labels Prometheus gives the scraped
Pod's namespace and scrape job), for the first
``namespace_limit`` namespaces a worker sees; runs of any later one count under
``job_namespace="_other"``, so a cluster of thousands of namespaces adds a bounded
number of series. A job annotated ``tickwork.dev/metrics: job`` is also counted on its
own (``tickwork_job_runs_total``), for the first ``job_limit`` such jobs.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tickwork.core.states import RunState
from tickwork.heap import CollectorPauses

_DURATION_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
#: Few buckets: this histogram has a series per namespace.
_LAG_BUCKETS = (0.5, 1, 5, 15, 60, 300, 900)
#: The ``job_namespace`` of the namespaces past the limit.
OTHER = "_other"
#: The annotation by which a job asks for metrics of its own.
METRICS_ANNOTATION = "tickwork.dev/metrics"
#: Namespaces with series of their own, and jobs that asked for theirs, per worker.
NAMESPACE_LIMIT, JOB_LIMIT = 100, 200


class Bounded:
    """The first ``limit`` values seen keep a label value of their own."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def admits(self, value: str) -> bool:
        if value in self.seen:
            return True
        if len(self.seen) >= self.limit:
            return False
        self.seen.add(value)
        return True


class WorkerMetrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace_limit: int = NAMESPACE_LIMIT,
        job_limit: int = JOB_LIMIT,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._namespaces = Bounded(namespace_limit)
        self._jobs = Bounded(job_limit)
        self.namespace_runs = Counter(
            "tickwork_namespace_runs_total",
            "Runs finished by this worker, by the job's namespace (job_namespace; "
            f'"{OTHER}" past the first {namespace_limit}) and outcome.',
            ["job_namespace", "outcome"],
            registry=r,
        )
        self.namespace_lag = Histogram(
            "tickwork_namespace_start_lag_seconds",
            "When a run's first attempt started minus when it was due, by the job's "
            "namespace (as tickwork_namespace_runs_total).",
            ["job_namespace"],
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.job_runs = Counter(
            "tickwork_job_runs_total",
            f"Runs finished, by job, for jobs annotated {METRICS_ANNOTATION}: job (the "
            f"first {job_limit} of them), and outcome.",
            ["job_namespace", "job_name", "outcome"],
            registry=r,
        )
        self.gc_pauses = CollectorPauses()
        r.register(self.gc_pauses)
        self.runs = Counter(
            "tickwork_runs_total",
            "Runs finished by this worker, by outcome.",
            ["outcome"],
            registry=r,
        )
        for outcome in (RunState.SUCCEEDED, RunState.FAILED):  # from 0, for increase()
            self.runs.labels(outcome=outcome.value)
        self.retries = Counter(
            "tickwork_run_retries_total", "Failed attempts that will be retried.", registry=r
        )
        self.dead_lettered = Counter(
            "tickwork_runs_dead_lettered_total", "Runs moved to the dead-letter queue.", registry=r
        )
        self.notices = Counter(
            "tickwork_notices_total",
            "Notices of spec.notify, by outcome: sent, failed (after its tries), duplicate "
            "(told already), limited (the namespace's notices a minute).",
            ["outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "tickwork_run_duration_seconds",
            "Time spent executing one attempt.",
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "tickwork_queue_wait_seconds",
            "Start of execution minus enqueue time.",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "tickwork_runs_in_flight", "Runs this worker is executing now.", registry=r
        )
        self.job_reads = Counter(
            "tickwork_worker_job_reads_total",
            "Jobs read to start or finish a run, by source: the watched copy (cache) or "
            "the API server (api).",
            ["source"],
            registry=r,
        )
        self.start_checks = Counter(
            "tickwork_worker_start_checks_total",
            "Consistent reads made before runs start, by read: one job's metadata (job), "
            "a namespace's for several claims at once (namespace), or one job's read "
            "with the watched copy answering for the others once the watch passed its "
            "version (watch).",
            ["read"],
            registry=r,
        )
        self.start_checks_answered = Counter(
            "tickwork_worker_start_checks_answered_total",
            "Runs whose check before starting those reads answered, by read.",
            ["read"],
            registry=r,
        )
        self.job_cache_synced = Gauge(
            "tickwork_worker_job_cache_synced",
            "1 while the watched copy of the jobs is listed and its watch runs (0: off or "
            "catching up; runs then read their job from the API server).",
            registry=r,
        )
        self.job_cache_objects = Gauge(
            "tickwork_worker_job_cache_objects", "Jobs in the watched copy.", registry=r
        )
        self.skipped = Counter(
            "tickwork_runs_skipped_by_worker_total",
            "Claimed runs not executed (job gone, replaced, suspended, paused, already done).",
            ["reason"],
            registry=r,
        )
        self.internal_errors = Counter(
            "tickwork_worker_internal_errors_total",
            "Runs a bug in Tickwork itself (not the task) interrupted; each is logged with"
            " its run ID and redelivered when its lease expires.",
            registry=r,
        )
        self.leases_lost = Counter(
            "tickwork_worker_leases_lost_total",
            "Attempts this worker stopped because it could no longer prove it held the run's"
            " lease (Redis unreachable until the lease ran out, or the run given to another"
            " worker after a pause); nothing is written for them and the run is redelivered as"
            " a new attempt.",
            registry=r,
        )
        self.stale_copies = Counter(
            "tickwork_worker_stale_job_copies_total",
            "Records to write in their place of a job's history that found the job changed"
            " since the copy they were built on (another run's record, an edit): the job is"
            " read again and the record written on the new copy.",
            registry=r,
        )

    def namespace_of(self, namespace: str) -> str:
        """``namespace`` as ``job_namespace`` says it: itself, or :data:`OTHER`."""
        return namespace if self._namespaces.admits(namespace) else OTHER

    def finished(
        self, namespace: str, name: str, outcome: str, *, annotations: dict[str, str]
    ) -> None:
        """A run of ``namespace``/``name`` ended ``outcome``: the per-team counters."""
        self.namespace_runs.labels(
            job_namespace=self.namespace_of(namespace), outcome=outcome
        ).inc()
        if annotations.get(METRICS_ANNOTATION) == "job" and self._jobs.admits(
            f"{namespace}/{name}"
        ):
            self.job_runs.labels(job_namespace=namespace, job_name=name, outcome=outcome).inc()

    def started_late(self, namespace: str, seconds: float) -> None:
        """A run's first attempt started ``seconds`` after it was due."""
        self.namespace_lag.labels(job_namespace=self.namespace_of(namespace)).observe(
            max(0.0, seconds)
        )
