"""The check before runs start, answered by the worker's watched copy once its watch
has passed the version of one consistent read (tickwork_worker.start_checks), on the
real API server: resourceVersions of a list and of watch events compared as
Kubernetes 1.35 allows (KEP-5504), while the watch stalls behind a relay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import Jobs, relayed_api_server
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeClient, load_configuration
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_worker.start_checks import LIST_FACTOR, StartChecks

pytestmark = pytest.mark.timeout(120)

ECHO = {"echo": {"message": "-"}}


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run until ``condition()`` holds (each turn waits for I/O, not time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_the_copy_answers_a_batch_only_once_its_watch_passed_the_batchs_read(
    cluster: Cluster, jobs: Jobs, tmp_path: Path
) -> None:
    """A job is suspended and another deleted while the copy's watch stalls. Three
    claims ask together in a namespace of more than three jobs per claim: the first
    job's own read answers at once, the copy still shows the old jobs, and it answers
    nothing until its watch has brought a version past that read — then the suspend
    and the delete are in its answers. (Answering from the copy when the read returns
    would let both runs start.)"""
    for name in ("kept", "suspended", "deleted"):
        jobs.create(name, {"schedule": "@daily", "task": ECHO})
    idle = 3 * LIST_FACTOR
    for index in range(idle):
        jobs.create(f"idle-{index}", {"schedule": "@yearly", "task": ECHO})
    relay, through_relay = relayed_api_server(cluster, tmp_path / "relayed.kubeconfig")

    async def scenario() -> tuple[list[dict[str, Any] | None], list[tuple[str, int]]]:
        direct = KubeClient(load_configuration(str(cluster.kubeconfig)))
        watching = KubeClient(load_configuration(str(through_relay)))
        async with direct as kube, watching:
            copy = JobCache(watching, [jobs.namespace])
            follow = asyncio.create_task(copy.run())
            try:
                await _until(
                    lambda: copy.synced and copy.jobs_in(jobs.namespace) == 3 + idle,
                    "the copy to hold the jobs",
                )
                relay.pause()  # the copy's watch stalls here; the checks' reads do not
                jobs.patch("suspended", {"spec": {"suspend": True}})
                jobs.delete("deleted")
                counted: list[tuple[str, int]] = []
                checks = StartChecks(
                    kube,
                    copy=copy,
                    watch_wait=60,
                    counted=lambda read, n: counted.append((read, n)),
                )
                names = ("kept", "suspended", "deleted")
                asked = [asyncio.ensure_future(checks.metadata(jobs.namespace, n)) for n in names]
                await _until(asked[0].done, "the first job's own read")
                assert not asked[1].done()  # the copy is behind the read: no answer
                assert not asked[2].done()
                behind = copy.metadata(jobs.namespace, "suspended") or {}
                assert behind.get("generation") == 1
                assert copy.metadata(jobs.namespace, "deleted") is not None
                # A write after the read: the watch, once going again, passes its version.
                jobs.patch("idle-0", {"metadata": {"annotations": {"test/after": "read"}}})
                relay.resume()
                answers = await asyncio.wait_for(asyncio.gather(*asked), 30)
            finally:
                follow.cancel()
                await asyncio.gather(follow, return_exceptions=True)
        return answers, counted

    try:
        answers, counted = asyncio.run(scenario())
    finally:
        relay.close()
    kept, suspended, deleted = answers
    assert kept is not None
    assert kept["generation"] == 1
    assert suspended is not None
    assert suspended["generation"] == 2  # the suspend, brought by the watch
    assert deleted is None  # the delete, likewise
    assert counted == [("watch", 3)]
