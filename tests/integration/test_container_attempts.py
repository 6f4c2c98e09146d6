"""A container task's Jobs against the real API server (no node: the Jobs' Pods never
run, which is what lets a test hold an attempt mid-way): an attempt creates one Job
and a cancel deletes it; an attempt that follows a dead worker takes over the run's
Job instead of creating another. The Pods end to end: tests/pods/test_container_tasks.py."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from tests.support import Jobs
from tickwork.api.models import ScheduledJobSpec
from tickwork.kube.client import KubeApiError, KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_worker.tasks import jobs as batch
from tickwork_worker.tasks.base import RunContext
from tickwork_worker.tasks.container import ContainerTask

pytestmark = pytest.mark.timeout(120)
SPEC = {
    "schedule": "@daily",
    "timeoutSeconds": 300,
    "task": {"container": {"image": "busybox:1.36", "args": ["true"]}},
}


def _run(jobs: Jobs, name: str, attempt: int) -> RunContext:
    uid = jobs.get(name)["metadata"]["uid"]
    return RunContext(
        run_id=f"{jobs.namespace}.{name}.{uid[:8]}.1767225600",
        attempt=attempt,
        namespace=jobs.namespace,
        name=name,
        scheduled_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        job_uid=uid,
    )


async def _first_job(kube: KubeClient, namespace: str, run: RunContext) -> dict[str, Any]:
    """The first Job of the run, as a watch sees it appear."""
    selector = f"{batch.RUN_LABEL}={batch.run_digest(run.run_id)}"
    params = {"labelSelector": selector}
    async for event in kube.watch(kube.batch_jobs_path(namespace), params, idle_timeout=60):
        if event["type"] == "ADDED":
            found: dict[str, Any] = event["object"]
            return found
    raise AssertionError("the watch ended without a Job")


async def _exists(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        await kube.get_batch_job(namespace, name)
    except KubeApiError as exc:
        if not exc.not_found:
            raise
        return False
    return True


def test_an_attempt_creates_one_job_and_cancelling_it_deletes_the_job(
    cluster: Cluster, jobs: Jobs
) -> None:
    jobs.create("export", SPEC)
    run = _run(jobs, "export", 1)
    spec = ScheduledJobSpec.model_validate(SPEC)

    async def scenario() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            task = ContainerTask(kube=kube, enabled=True, ttl_seconds=60, log_bytes=4096)
            attempt = asyncio.create_task(task.execute(spec, run))
            job = await _first_job(kube, jobs.namespace, run)
            assert job["metadata"]["name"] == batch.job_name("export", run.run_id, 1)
            assert job["spec"]["activeDeadlineSeconds"] == 300
            assert job["spec"]["ttlSecondsAfterFinished"] == 60
            assert not attempt.done()  # watching a Job whose Pod never runs here
            attempt.cancel()
            with pytest.raises(asyncio.CancelledError):
                await attempt
            assert not await _exists(kube, jobs.namespace, job["metadata"]["name"])

    asyncio.run(scenario())


def _completed(job: dict[str, Any]) -> dict[str, Any]:
    """A status that says the Job succeeded (what the Job controller would write)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods",
            "lastTransitionTime": now,
            "lastProbeTime": now,
        }
        for kind in ("SuccessCriteriaMet", "Complete")
    ]
    return {
        **job,
        "status": {
            "startTime": now,
            "completionTime": now,
            "succeeded": 1,
            "ready": 0,
            "terminating": 0,
            "active": 0,
            "uncountedTerminatedPods": {},
            "conditions": conditions,
        },
    }


def test_an_attempt_after_a_dead_workers_takes_over_the_runs_job(
    cluster: Cluster, jobs: Jobs
) -> None:
    jobs.create("export", SPEC)
    first, second = _run(jobs, "export", 1), _run(jobs, "export", 2)
    spec = ScheduledJobSpec.model_validate(SPEC)
    assert spec.task.container is not None
    owner = batch.Owner(name="export", uid=first.job_uid or "")

    async def scenario() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            # Attempt 1's worker made its Job and died; the Job ran on and succeeded.
            wanted = batch.build_job(
                spec.task.container, first, owner=owner, timeout_seconds=300, ttl_seconds=60
            )
            # Suspended, so that a job controller (kube-controller-manager runs once a
            # test has asked for it) makes no Pod for it; then completed by hand,
            # again on a conflict with that controller's own status write.
            wanted["spec"]["suspend"] = True
            made = await kube.create_batch_job(jobs.namespace, wanted)
            path = f"{kube.batch_jobs_path(jobs.namespace)}/{made['metadata']['name']}"
            for _ in range(20):
                current = await kube.request("GET", path)
                try:
                    await kube.request("PUT", f"{path}/status", body=_completed(current))
                    break
                except KubeApiError as exc:
                    if exc.status != 409:  # Conflict: read it again
                        raise
            else:
                raise AssertionError("the Job's status kept changing")
            task = ContainerTask(kube=kube, enabled=True, ttl_seconds=60, log_bytes=4096)
            result = await task.execute(spec, second)
            # Attempt 2 took attempt 1's outcome instead of running the container again.
            assert result.summary.startswith("Job CompletionsReached"), result
            selector = f"{batch.RUN_LABEL}={batch.run_digest(first.run_id)}"
            names = [
                j["metadata"]["name"] for j in await kube.list_batch_jobs(jobs.namespace, selector)
            ]
            assert names == [made["metadata"]["name"]]

    asyncio.run(scenario())
