"""The check before a run starts, shared by the claims of a namespace that arrive
together (tickwork_worker.start_checks): one consistent read per namespace and batch,
never an answer older than the claim that asked."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from tickwork.kube.client import KubeApiError, KubeClient
from tickwork_worker.start_checks import LIST_FACTOR, StartChecks

pytestmark = pytest.mark.unit

NS = "team-a"


class ApiServer:
    """Answers metadata reads from ``jobs`` as they are when the read arrives; a read
    waits for ``gate`` when one is set."""

    def __init__(self, jobs: dict[str, dict[str, Any]]) -> None:
        self.jobs = jobs
        self.reads: list[tuple[str, str | None]] = []
        self.gate: asyncio.Event | None = None
        self.failure: KubeApiError | None = None
        self.revision = 100
        """The resourceVersion a read answers at."""

    async def _arrive(self) -> dict[str, dict[str, Any]]:
        seen = {name: dict(metadata) for name, metadata in self.jobs.items()}  # as of now
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return seen

    async def job_metadata(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append((namespace, name))
        return (await self._arrive()).get(name)

    async def job_metadata_at(self, namespace: str, name: str) -> tuple[Any, str]:
        self.reads.append((namespace, name))
        revision = str(self.revision)  # as of the read's arrival
        return (await self._arrive()).get(name), revision

    async def jobs_metadata(self, namespace: str) -> dict[str, dict[str, Any]]:
        self.reads.append((namespace, None))
        return await self._arrive()


async def turns_until(condition: Any) -> None:
    """Let the event loop turn until ``condition()`` holds (no timer involved)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


def jobs(count: int) -> dict[str, dict[str, Any]]:
    return {f"j{i}": {"name": f"j{i}", "uid": f"u{i}", "generation": 1} for i in range(count)}


class Copy:
    """The worker's watched copy: ``jobs`` as its watch has brought them, up to
    ``reached``; a wait for a later version ends when the test moves ``reached`` (or,
    with ``stalled``, at once unanswered, as when no event comes in time)."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self.jobs = {name: dict(metadata) for name, metadata in server.jobs.items()}
        self.reached = 0
        self.stalled = False
        self.waits: list[str] = []
        self._moved = asyncio.Event()

    def jobs_in(self, namespace: str) -> int:  # noqa: ARG002 - one namespace here
        return len(self.jobs)

    def metadata(self, namespace: str, name: str) -> dict[str, Any] | None:  # noqa: ARG002
        return self.jobs.get(name)

    def bring(self, reached: int) -> None:
        """The watch brings every change up to ``reached``."""
        self.jobs = {name: dict(metadata) for name, metadata in self.server.jobs.items()}
        self.reached = reached
        self._moved.set()

    async def until_watched(self, namespace: str, version: str, *, seconds: float) -> bool:
        del namespace, seconds  # one namespace; the wait ends when the test says
        self.waits.append(version)
        while self.reached < int(version):
            if self.stalled:
                return False
            self._moved.clear()
            await self._moved.wait()
        return True


def checks(
    server: ApiServer, counted: list[tuple[str, int]] | None = None, copy: Copy | None = None
) -> StartChecks:
    tally = counted if counted is not None else []
    return StartChecks(
        cast("KubeClient", server),
        copy=copy or Copy(server),
        counted=lambda read, answered: tally.append((read, answered)),
    )


@pytest.mark.asyncio
async def test_the_claims_of_a_namespace_that_arrive_together_share_one_read() -> None:
    server = ApiServer(jobs(10))
    counted: list[tuple[str, int]] = []
    shared = checks(server, counted)
    asked = ["j1", "j4", "j4", "j9", "gone"]
    answers = await asyncio.gather(*(shared.metadata(NS, name) for name in asked))
    assert server.reads == [(NS, None)]  # one list of the namespace, not five reads
    assert [a and a["uid"] for a in answers] == ["u1", "u4", "u4", "u9", None]
    assert counted == [("namespace", 4)]  # four distinct jobs answered


@pytest.mark.asyncio
async def test_one_claim_reads_its_own_job() -> None:
    server = ApiServer(jobs(3))
    counted: list[tuple[str, int]] = []
    assert (await checks(server, counted).metadata(NS, "j2") or {})["uid"] == "u2"
    assert server.reads == [(NS, "j2")]
    assert counted == [("job", 1)]


@pytest.mark.asyncio
async def test_a_batch_in_a_larger_namespace_reads_one_job_and_the_copy_once_watched_past() -> None:
    """Over the list's bound: one job's own read says the version it is current at;
    the copy answers for the others only once its watch has brought that version,
    so a suspend and a delete that reached the API server before the read, and
    that the copy had not seen yet, are in the answers."""
    server = ApiServer(jobs(3 * LIST_FACTOR + 1))  # three asked: over the bound
    copy = Copy(server)
    counted: list[tuple[str, int]] = []
    shared = checks(server, counted, copy)
    server.jobs["j1"]["generation"] = 2  # suspended: the copy does not know yet
    del server.jobs["j2"]  # deleted: likewise
    asked = [asyncio.ensure_future(shared.metadata(NS, name)) for name in ("j0", "j1", "j2")]
    await turns_until(lambda: copy.waits)
    assert server.reads == [(NS, "j0")]  # one read for the three
    assert copy.waits == ["100"]  # ... current at version 100
    for _ in range(5):
        await asyncio.sleep(0)
    assert asked[0].done()  # its own read answered it
    assert not asked[1].done()  # the copy is behind: no answer yet
    assert not asked[2].done()
    copy.bring(reached=100)
    answers = await asyncio.gather(*asked)
    assert [a and (a["uid"], a["generation"]) for a in answers] == [("u0", 1), ("u1", 2), None]
    assert counted == [("watch", 3)]
    # At the bound (LIST_FACTOR jobs per job asked) the list still serves.
    server = ApiServer(jobs(2 * LIST_FACTOR))
    shared = checks(server)
    await asyncio.gather(*(shared.metadata(NS, name) for name in ("j0", "j1")))
    assert server.reads == [(NS, None)]


@pytest.mark.asyncio
async def test_when_the_watch_does_not_get_there_each_job_reads_its_own() -> None:
    server = ApiServer(jobs(2 * LIST_FACTOR + 1))
    copy = Copy(server)
    copy.stalled = True  # nothing written in the namespace: no event comes in time
    counted: list[tuple[str, int]] = []
    server.jobs["j1"]["generation"] = 2
    answers = await asyncio.gather(
        *(checks(server, counted, copy).metadata(NS, n) for n in ("j0", "j1"))
    )
    assert sorted(server.reads, key=str) == [(NS, "j0"), (NS, "j1")]
    assert [a and a["generation"] for a in answers] == [1, 2]  # not the copy's 1
    assert sorted(counted) == [("job", 1), ("job", 1)]


@pytest.mark.asyncio
async def test_namespaces_are_read_apart() -> None:
    server = ApiServer(jobs(4))
    shared = checks(server)
    await asyncio.gather(
        shared.metadata("a", "j0"), shared.metadata("b", "j1"), shared.metadata("b", "j2")
    )
    assert sorted(server.reads, key=str) == [("a", "j0"), ("b", None)]


@pytest.mark.asyncio
async def test_a_claim_that_asks_while_a_read_is_on_its_way_waits_for_a_read_of_its_own() -> None:
    """The guarantee: an answer is never older than the claim's question. A job
    suspended (generation 2) after the first read was sent must not be answered with
    that read's generation 1."""
    server = ApiServer(jobs(4))
    server.gate = asyncio.Event()
    shared = checks(server)
    first = [asyncio.ensure_future(shared.metadata(NS, name)) for name in ("j0", "j1")]
    await turns_until(lambda: server.reads)
    assert server.reads == [(NS, None)]  # sent, not answered
    assert not any(future.done() for future in first)
    server.jobs["j1"]["generation"] = 2  # a suspend reaches the API server now
    late = [asyncio.ensure_future(shared.metadata(NS, name)) for name in ("j1", "j2")]
    server.gate.set()
    early, later = await asyncio.gather(*first), await asyncio.gather(*late)
    assert [a and a["generation"] for a in early] == [1, 1]
    assert later[0] is not None
    assert later[0]["generation"] == 2  # its own read, sent after it asked
    assert server.reads == [(NS, None), (NS, None)]


@pytest.mark.asyncio
async def test_a_failed_read_reaches_every_claim_it_would_have_answered() -> None:
    server = ApiServer(jobs(4))
    server.failure = KubeApiError(503, "ServiceUnavailable", "etcd is down")
    shared = checks(server)
    answers = await asyncio.gather(
        *(shared.metadata(NS, n) for n in ("j0", "j1", "j2")), return_exceptions=True
    )
    assert all(isinstance(a, KubeApiError) and a.unavailable for a in answers)
    assert await asyncio.gather(shared.metadata(NS, "j3"), return_exceptions=True) == [
        server.failure
    ]


@pytest.mark.asyncio
async def test_a_claim_cancelled_while_waiting_leaves_the_others_their_answer() -> None:
    server = ApiServer(jobs(4))
    server.gate = asyncio.Event()
    shared = checks(server)
    stopped = asyncio.ensure_future(shared.metadata(NS, "j0"))
    kept = asyncio.ensure_future(shared.metadata(NS, "j1"))
    await turns_until(lambda: server.reads)
    stopped.cancel()
    server.gate.set()
    assert (await kept or {})["uid"] == "u1"
    assert stopped.cancelled()
