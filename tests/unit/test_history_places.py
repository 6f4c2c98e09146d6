"""A run's record goes in its place of the history in one write (issue 48): the
place is chosen on the newest copy of the job, and the write is conditional on that
copy's resourceVersion, so that two runs of one job that end together never take one
place (the second reads the job again and takes the next)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any, cast

import pytest

from tests.support import scheduled_message
from tickwork.api.models import ScheduledJob
from tickwork.core.runs import manual_run_id
from tickwork.core.states import RunState
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.packed import entry as _entry
from tickwork.queue.messages import Claim, RunMessage
from tickwork_worker.decisions import Outcome
from tickwork_worker.job_access import JobAccess
from tickwork_worker.lease import Lease
from tickwork_worker.metrics import WorkerMetrics

pytestmark = pytest.mark.unit

UID = "7c8e4d0a-1111-4222-8333-444455556666"
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def job_body(version: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": UID,
            "generation": 1,
            "resourceVersion": version,
            "creationTimestamp": "2026-11-01T00:00:00Z",
        },
        "spec": {
            "schedule": "0 9 * * *",
            "task": {"echo": {"message": "hi"}},
            "history": {"successfulRuns": 2, "failedRuns": 1},
        },
        "status": {"runs": runs},
    }


def placed(run_id: str, day: int, slot: str) -> dict[str, Any]:
    at = (T0 + dt.timedelta(days=day)).isoformat()
    return {"id": run_id, "scheduledAt": at, "outcome": "Succeeded", "slot": slot}


class ApiServer:
    """The status subresource of one job: applies conditional on a resourceVersion are
    refused (409) when the object moved on, as the API server does."""

    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current
        self.applies: list[tuple[str, str | None, dict[str, Any]]] = []
        self.gets = 0

    async def apply_job_status(self, *job: Any, **options: Any) -> dict[str, Any]:
        body: dict[str, Any] = job[3]
        version = options.get("resource_version")
        self.applies.append((options["field_manager"], version, body))
        if version is not None and version != self.current["metadata"]["resourceVersion"]:
            raise KubeApiError(409, "Conflict", "the object has been modified")
        # What the API server returns: a place's manager's record replaces the one it
        # held there (an apply states all of its manager's intent).
        places = {record.get("slot") for record in body.get("runs", [])} - {None}
        runs = [
            record for record in self.current["status"]["runs"] if record.get("slot") not in places
        ] + body.get("runs", [])
        metadata = self.current["metadata"]
        moved = {**metadata, "resourceVersion": str(int(metadata["resourceVersion"]) + 1)}
        return {**self.current, "metadata": moved, "status": {"runs": runs}}

    async def get_job(self, *job: str) -> dict[str, Any]:
        assert job == ("ns", "j")
        self.gets += 1
        return self.current


def claim_of(day: int) -> Claim:
    at = T0 + dt.timedelta(days=day)
    return Claim(message=scheduled_message(UID, at), token="t")


def watched(*objects: dict[str, Any]) -> JobCache:
    """A worker's copy that holds ``objects``, listed and followed."""
    cache = JobCache(cast("KubeClient", None))
    cache._relist(None, dict(_entry(obj, delivered=0) for obj in objects))
    cache.live(None)
    return cache


async def finish(
    server: ApiServer,
    job: dict[str, Any],
    claim: Claim,
    jobs: JobCache | None = None,
    **options: Any,
) -> bool:
    access = JobAccess(kube=cast("KubeClient", server), metrics=WorkerMetrics(), jobs=jobs)
    lease = Lease(time.monotonic(), 300)
    return await access.finish(
        claim,
        lease,
        ScheduledJob.model_validate(job),
        Outcome(state=RunState.SUCCEEDED, result="ok"),
        started_at=T0,
        **options,
    )


@pytest.mark.asyncio
async def test_a_record_replaces_the_oldest_of_its_kind_in_one_conditional_write() -> None:
    history = [placed("a", 0, "s1"), placed("b", 1, "s0")]
    server = ApiServer(job_body("7", history))
    assert await finish(server, job_body("7", history), claim_of(2))
    [(manager, version, body)] = server.applies
    assert (manager, version) == ("tickwork-runs-s1", "7")  # a (day 0) was the oldest
    [record] = body["runs"]
    assert (record["id"], record["slot"]) == (claim_of(2).run_id, "s1")
    assert body["lastRun"]["id"] == record["id"]
    assert body["nextRunAt"] == "2026-12-04T09:00:00Z"  # the run after this one


@pytest.mark.asyncio
async def test_a_stale_copy_is_read_again_and_the_record_takes_the_next_place() -> None:
    """The worker's copy is from before another run of the job took s0: its write is
    refused, the job read again, and the record goes to s1 on the new version."""
    server = ApiServer(job_body("8", [placed("other", 5, "s0")]))
    assert await finish(server, job_body("7", []), claim_of(2))
    assert [(m, v) for m, v, _ in server.applies] == [
        ("tickwork-runs-s0", "7"),
        ("tickwork-runs-s1", "8"),
    ]
    assert server.gets == 1


@pytest.mark.asyncio
async def test_a_marked_retried_or_manual_run_writes_as_its_own_manager() -> None:
    server = ApiServer(job_body("7", []))
    assert await finish(server, job_body("7", []), claim_of(2), marked=True)
    manual = Claim(
        message=RunMessage(
            run_id=manual_run_id(UID, "tok"),
            namespace="ns",
            name="j",
            uid=UID,
            triggered_at=T0.isoformat(),
        ),
        token="t",
    )
    assert await finish(server, job_body("7", []), manual)
    retried = claim_of(3)
    retried = Claim(message=dataclasses.replace(retried.message, attempt=2), token="t")
    assert await finish(server, job_body("7", []), retried)
    assert [(m.startswith("tickwork-run-"), v) for m, v, _ in server.applies] == [
        (True, None),
        (True, None),
        (True, None),
    ]


@pytest.mark.asyncio
async def test_the_place_is_chosen_on_the_watched_copy_when_another_run_wrote_since() -> None:
    """Another run of the job took s0 after this run read the job: the worker's copy
    has it, so the record goes to s1 at once, on that version, with no refusal."""
    newer = job_body("8", [placed("other", 5, "s0")])
    server = ApiServer(newer)
    assert await finish(server, job_body("7", []), claim_of(2), watched(newer))
    assert [(m, v) for m, v, _ in server.applies] == [("tickwork-runs-s1", "8")]
    assert server.gets == 0


@pytest.mark.asyncio
async def test_a_copy_that_is_the_job_already_read_is_not_decoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = job_body("7", [placed("a", 0, "s0")])
    server = ApiServer(body)
    jobs = watched(body)
    decoded: list[str] = []
    real_get = jobs.get
    monkeypatch.setattr(jobs, "get", lambda *key: decoded.append(key[1]) or real_get(*key))
    assert await finish(server, body, claim_of(2), jobs)
    assert decoded == []
    assert [(m, v) for m, v, _ in server.applies] == [("tickwork-runs-s1", "7")]
