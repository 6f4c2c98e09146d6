"""Per-team metrics (issue 51): runs counted by the job's namespace, bounded so that a
cluster of thousands of namespaces adds a fixed number of series; a job that opts in
counted on its own. (From a worker process running real runs:
tests/integration/test_worker.py::test_runs_are_counted_by_team_and_a_job_that_opts_in_on_its_own.)"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tickwork_worker.metrics import METRICS_ANNOTATION, OTHER, WorkerMetrics

pytestmark = pytest.mark.unit


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_the_first_namespaces_are_named_and_the_rest_count_as_other() -> None:
    metrics = WorkerMetrics(namespace_limit=2)
    for namespace in ("team-a", "team-b", "team-c", "team-a", "team-d"):
        metrics.finished(namespace, "nightly", "Succeeded", annotations={})
    registry = metrics.registry
    runs = "tickwork_namespace_runs_total"
    assert value(registry, runs, job_namespace="team-a", outcome="Succeeded") == 2
    assert value(registry, runs, job_namespace="team-b", outcome="Succeeded") == 1
    assert value(registry, runs, job_namespace=OTHER, outcome="Succeeded") == 2  # c and d
    assert value(registry, runs, job_namespace="team-c", outcome="Succeeded") == 0
    named = {
        sample.labels["job_namespace"]
        for family in registry.collect()
        if family.name == "tickwork_namespace_runs"
        for sample in family.samples
    }
    assert named == {"team-a", "team-b", OTHER}


def test_start_lag_is_observed_by_namespace_never_below_zero() -> None:
    metrics = WorkerMetrics(namespace_limit=1)
    metrics.started_late("team-a", 3.0)
    metrics.started_late("team-b", 120.0)
    metrics.started_late("team-a", -0.2)  # a clock a little ahead: on time
    lag = "tickwork_namespace_start_lag_seconds"
    registry = metrics.registry
    assert value(registry, f"{lag}_count", job_namespace="team-a") == 2
    assert value(registry, f"{lag}_bucket", job_namespace="team-a", le="0.5") == 1
    assert value(registry, f"{lag}_bucket", job_namespace=OTHER, le="60.0") == 0
    assert value(registry, f"{lag}_bucket", job_namespace=OTHER, le="300.0") == 1


def test_a_job_that_opts_in_is_counted_on_its_own_up_to_the_limit() -> None:
    metrics = WorkerMetrics(job_limit=1)
    opted = {METRICS_ANNOTATION: "job"}
    metrics.finished("team-a", "nightly", "Failed", annotations=opted)
    metrics.finished("team-a", "hourly", "Succeeded", annotations={})  # did not opt in
    metrics.finished("team-a", "weekly", "Succeeded", annotations=opted)  # past the limit
    metrics.finished("team-a", "nightly", "Succeeded", annotations=opted)
    registry = metrics.registry
    jobs = "tickwork_job_runs_total"
    assert value(registry, jobs, job_namespace="team-a", job_name="nightly", outcome="Failed") == 1
    assert (
        value(registry, jobs, job_namespace="team-a", job_name="nightly", outcome="Succeeded") == 1
    )
    assert (
        value(registry, jobs, job_namespace="team-a", job_name="hourly", outcome="Succeeded") == 0
    )
    assert (
        value(registry, jobs, job_namespace="team-a", job_name="weekly", outcome="Succeeded") == 0
    )
    # Every run counts for its team either way.
    runs = "tickwork_namespace_runs_total"
    assert value(registry, runs, job_namespace="team-a", outcome="Succeeded") == 3
