"""The check before a run starts, shared by the claims that arrive together.

A run may start from the worker's watched copy of its job only once the API server
has said, after the run was claimed, that the job is still there, still the same
object, not being deleted, and no newer in its spec than the copy (a suspend or an
edit raises the generation). That takes a consistent read, one per run until now:
at the top of a minute, N runs were N reads queued at the API server beside the
status writes.

Claims taken from the queue together reach :meth:`StartChecks.metadata` in the same
turn of the event loop; the reads of one namespace asked in that turn become one:

* one job asked for: its metadata alone (a list filtered by name);
* several: the metadata of every job of the namespace in one consistent list, when
  the namespace holds at most :data:`LIST_FACTOR` times as many jobs as were asked
  for (the watched copy counts them);
* several in a larger namespace: one job's own read, which also says the
  resourceVersion it is current at; once the worker's watch of the namespace has
  brought that version (:meth:`JobCache.until_watched`), the copy holds every change
  made before the read, and answers for the others. A watch brings only its own
  objects' changes, so in a namespace where nothing is being written it may not get
  there soon: after :data:`WATCH_WAIT_SECONDS` each of the others reads its own.

Every answer is as new as the API server's state when the read was sent, and the
read is sent after every claim it answers had asked: the guarantee of a read per
run, for one request per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tickwork.kube.client import KubeClient

#: A namespace's list serves a batch when it holds at most this many jobs per job
#: asked for: a job's metadata in a list costs the API server and the worker 3.5 to
#: 5.8 times less than a read of its own (benchmarks/results/start_checks.json), so
#: the list never costs more CPU than the reads it replaces.
LIST_FACTOR = 3
#: How long the claims of a batch wait, by default, for the watch to bring the
#: version of the batch's read before each reads its own job (the worker setting
#: ``start_check_watch_seconds``): a busy namespace's watch brings the workers' own
#: writes within milliseconds; an idle one may bring nothing for a minute (bookmarks).
WATCH_WAIT_SECONDS = 0.25

Metadata = dict[str, Any]


class WatchedCopy(Protocol):
    """What the check needs of the worker's watched copy (:class:`JobCache`)."""

    def jobs_in(self, namespace: str) -> int: ...
    def metadata(self, namespace: str, name: str) -> Metadata | None: ...
    def until_watched(self, namespace: str, version: str, *, seconds: float) -> Awaitable[bool]: ...


class StartChecks:
    """Consistent reads of jobs' metadata, one request per namespace and batch."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        copy: WatchedCopy,
        counted: Callable[[str, int], None],
        watch_wait: float = WATCH_WAIT_SECONDS,
    ) -> None:
        """``copy``: the worker's watched copy of the jobs. ``counted(read, jobs)``: told
        of each request sent and the number of jobs it answered for — "job" (its own),
        "namespace" (one list) or "watch" (one job's read and the copy, for all)."""
        self._kube = kube
        self._copy = copy
        self._counted = counted
        self._watch_wait = watch_wait
        self._asked: dict[str, dict[str, list[asyncio.Future[Metadata | None]]]] = {}
        self._reads: set[asyncio.Task[None]] = set()

    async def metadata(self, namespace: str, name: str) -> Metadata | None:
        """The job's metadata as the API server has it after this call began (None if
        there is no such job)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Metadata | None] = loop.create_future()
        asked = self._asked.get(namespace)
        if asked is None:
            asked = self._asked[namespace] = {}
            loop.call_soon(self._send, namespace)  # after the others of this turn
        asked.setdefault(name, []).append(future)
        return await future

    def _send(self, namespace: str) -> None:
        asked = self._asked.pop(namespace)
        if len(asked) == 1:
            reads = [self._read_job(namespace, name, waiting) for name, waiting in asked.items()]
        elif self._copy.jobs_in(namespace) <= LIST_FACTOR * len(asked):
            reads = [self._read_namespace(namespace, asked)]
        else:
            reads = [self._read_through_watch(namespace, asked)]
        for read in reads:
            task = asyncio.ensure_future(read)
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)

    async def _read_namespace(
        self, namespace: str, asked: dict[str, list[asyncio.Future[Metadata | None]]]
    ) -> None:
        try:
            found = await self._kube.jobs_metadata(namespace)
        except Exception as exc:  # noqa: BLE001 - handed to every claim that asked
            for waiting in asked.values():
                _fail(waiting, exc)
            return
        self._counted("namespace", len(asked))
        for name, waiting in asked.items():
            _answer(waiting, found.get(name))

    async def _read_through_watch(
        self, namespace: str, asked: dict[str, list[asyncio.Future[Metadata | None]]]
    ) -> None:
        (name, waiting), *others = asked.items()
        try:
            found, version = await self._kube.job_metadata_at(namespace, name)
        except Exception as exc:  # noqa: BLE001 - handed to every claim that asked
            for each in asked.values():
                _fail(each, exc)
            return
        _answer(waiting, found)
        if await self._copy.until_watched(namespace, version, seconds=self._watch_wait):
            self._counted("watch", len(asked))
            for other, each in others:
                _answer(each, self._copy.metadata(namespace, other))
            return
        self._counted("job", 1)
        await asyncio.gather(*(self._read_job(namespace, other, each) for other, each in others))

    async def _read_job(
        self, namespace: str, name: str, waiting: list[asyncio.Future[Metadata | None]]
    ) -> None:
        try:
            found = await self._kube.job_metadata(namespace, name)
        except Exception as exc:  # noqa: BLE001 - handed to every claim that asked
            _fail(waiting, exc)
            return
        self._counted("job", 1)
        _answer(waiting, found)


def _answer(waiting: list[asyncio.Future[Metadata | None]], found: Metadata | None) -> None:
    for future in waiting:
        if not future.done():  # its claim may have been cancelled (shutdown)
            future.set_result(found)


def _fail(waiting: list[asyncio.Future[Metadata | None]], exc: BaseException) -> None:
    for future in waiting:
        if not future.done():
            future.set_exception(exc)
