"""A worker's own copy of the ScheduledJobs, kept current by a list and a watch.

Starting a run needs the job's spec and status. Reading it from the API server
costs a request per run, and at the top of a busy minute thousands of those
requests queue behind each other before a single run can start. A worker
therefore lists the jobs once and follows the watch (:mod:`tickwork.kube.informer`,
the list-and-watch the operator's index follows too); a run then starts from
memory, and the API server is asked only when the
copy cannot vouch for the job:

* before the first list has completed, while the watch is broken (it is listed
  again afterwards, not resumed blind), or if the task that follows it died;
* when the job is missing or has another uid (created or replaced moments ago),
  or was deleted (a tombstone keeps a racing read from putting it back);
* when the copy is older than the job the operator saw when it published the run
  (its ``metadata.generation``, which only grows, is in the run's message), or
  than the job's metadata read at the claim (the worker's check that no suspend,
  edit or delete has reached the API server meanwhile; see the runner).

resourceVersions are compared only for equality, as the API conventions long
required; order comes from the watch, which brings every change of a job in order.
(One thing compares them for order, as Kubernetes 1.35 allows for objects of one
resource, KEP-5504: :meth:`JobCache.until_watched`, which tells a write that follows
the worker's own when the API server's watch cache holds it, and the check before a
batch of runs starts when the copy holds every change up to a consistent read; with
versions that are not integers it does not wait.) A copy read from the API server, or
answered to the worker's own status write, shows the job at some moment after the
request was sent.
If neither the watch (for that job) nor a list brought anything since the request
was sent, the cached copy is from before it, so the answer is as new or newer: it is
taken in, and the watch's events of the job are skipped until they reach its
resourceVersion. Otherwise the answer may be older than the copy and is dropped (the
watch brings it in order). The caller notes :meth:`JobCache.mark` before sending.
The worker's next run of a job therefore builds on its own last write.

How each job is kept (a few hundred bytes): :mod:`tickwork.kube.packed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tickwork.kube.client import KubeClient
from tickwork.kube.informer import Informer, InformerSettings, Scope
from tickwork.kube.packed import Cached, Jobs, comparable, decode, entry, identity

logger = logging.getLogger(__name__)

#: How the worker lists and watches (:class:`~tickwork.kube.informer.Informer`): pages
#: of 100 (a page is parsed whole, and what it leaves in the heap stays: more after
#: pages of 500, benchmarks/rounds.md, fifth round), and a list after any failure
#: (events may have been missed: the copy vouches for nothing until listed again).
INFORMER = InformerSettings(page_size=100, relist_after_error=True)
#: How long a deleted job's uid is remembered (a read that raced the delete is
#: answered long before).
TOMBSTONE_SECONDS = 600.0


class JobCache:
    """ScheduledJobs of ``namespaces`` (all namespaces if empty), by (namespace, name)."""

    def __init__(self, kube: KubeClient, namespaces: Sequence[str] = ()) -> None:
        self._kube = kube
        self._scopes: list[str | None] = list(namespaces) or [None]
        self._jobs = Jobs()
        self._live: set[str | None] = set()
        self._tombstones: dict[str, float] = {}
        """uids of deleted jobs -> when the delete was seen (monotonic)."""
        self._sequence = 0
        """Counts what the list and the watch brought (see :meth:`mark`)."""
        self._listed = 0
        """:meth:`mark` when a list last completed."""
        self._reached: dict[str | None, int] = {}
        """Per scope, the highest resourceVersion its watch has brought (an event or a
        bookmark): the API server's watch cache holds everything up to it."""
        self._waiting: dict[str | None, list[tuple[int, asyncio.Future[bool]]]] = {}
        """Per scope, :meth:`until_watched` calls waiting for a resourceVersion."""

    def mark(self) -> int:
        """Note this before asking the API server for a job or writing one; pass it to
        :meth:`observe` with the answer."""
        return self._sequence

    @property
    def synced(self) -> bool:
        """Every scope has been listed and its watch is running."""
        return len(self._live) == len(self._scopes)

    def __len__(self) -> int:
        return len(self._jobs)

    def jobs_in(self, namespace: str) -> int:
        """How many jobs of ``namespace`` the copy holds."""
        return self._jobs.count(namespace)

    def get(
        self, namespace: str, name: str, uid: str, generation: int | None = None
    ) -> dict[str, Any] | None:
        """The job as last seen, or None if this copy cannot vouch for it: not synced,
        unknown, another object under that name, or older than ``generation``."""
        if not self.synced:
            return None
        cached = self._jobs.get((namespace, name))
        if cached is None or cached.uid != uid or cached.generation < (generation or 0):
            return None
        return decode(cached.body)

    def resource_version(self, namespace: str, name: str, uid: str) -> str | None:
        """The resourceVersion of the job as :meth:`get` would return it (None where
        :meth:`get` would, whatever the generation): tells, without decoding the job,
        whether the copy is the one the caller holds."""
        if not self.synced:
            return None
        cached = self._jobs.get((namespace, name))
        if cached is None or cached.uid != uid:
            return None
        return cached.resource_version

    def metadata(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The metadata of the job under that name as the copy has it, whatever its
        uid (None if the copy holds none): what the API server answered for it at the
        last version :meth:`until_watched` saw reached, or newer."""
        cached = self._jobs.get((namespace, name))
        if cached is None:
            return None
        metadata: dict[str, Any] = decode(cached.body).get("metadata") or {}
        return metadata

    async def until_watched(self, namespace: str, version: str, *, seconds: float) -> bool:
        """Wait until the watch of ``namespace`` has brought ``version`` (of a job the
        worker just wrote, or of a consistent read) or something after it; False, at
        once, if the copy is not following that namespace or the version is not an
        integer, and False if the watch breaks or ``seconds`` pass first. Once True, the
        copy holds every change of the namespace's jobs up to ``version``: the watch
        brings them in order.

        Why: the API server begins a write from the object in its watch cache, and
        when that is older than etcd's (a write that follows another to the same
        object within the watch cache's lag) it does the patch, the admission, the
        validation and the CEL rules twice (benchmarks/rounds.md, twentieth round).
        The watch this copy follows is served from that cache, so once it has
        brought ``version`` the cache holds it, and the next write is done once."""
        scope = None if self._scopes == [None] else namespace
        wanted = comparable(version)
        if scope not in self._live or wanted is None:
            return False
        if self._reached.get(scope, 0) >= wanted:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(scope, [])
        waiting.append((wanted, future))
        try:
            async with asyncio.timeout(seconds):
                return await future
        except TimeoutError:
            return False
        finally:
            with contextlib.suppress(ValueError):
                waiting.remove((wanted, future))

    def _reach(self, scope: str | None, version: str) -> None:
        """The watch of ``scope`` brought ``version``: wake who waited for it."""
        reached = comparable(version)
        if reached is None or reached <= self._reached.get(scope, 0):
            return
        self._reached[scope] = reached
        for wanted, future in self._waiting.get(scope, ()):
            if wanted <= reached and not future.done():
                future.set_result(True)

    def _release(self, scope: str | None) -> None:
        """The watch of ``scope`` stopped or starts over: nobody waits for it."""
        for _, future in self._waiting.get(scope, ()):
            if not future.done():
                future.set_result(False)

    def observe(self, obj: dict[str, Any], *, since: int) -> None:
        """Take in a copy read from the API server or answered to a write, sent when
        :meth:`mark` was ``since``, if it is provably as new as the cached one: nothing
        was listed, and nothing of the job watched, since; and it was not deleted."""
        key, uid, version, _ = identity(obj)
        if not version or uid in self._tombstones or self._listed > since:
            return
        cached = self._jobs.get(key)
        if cached is None or (cached.delivered <= since and version != cached.resource_version):
            # Counted as a delivery: an answer sent before this one came may be older
            # (two reads answered out of order), so it is refused, not taken back.
            self._sequence += 1
            self._store(obj, delivered=self._sequence, awaiting=version)

    def _watched(self, obj: dict[str, Any]) -> None:
        """Apply an ADDED or MODIFIED event (events of one watch arrive in order)."""
        key, _, version, _ = identity(obj)
        self._sequence += 1
        cached = self._jobs.get(key)
        if cached is not None and cached.awaiting not in (None, version):
            # Older than the copy read or written meanwhile (of this object or, for
            # another uid, of the one that replaced it): keep the copy.
            self._jobs[key] = dataclasses.replace(cached, delivered=self._sequence)
            return
        if cached is not None and cached.awaiting == version:
            # The copy read or written meanwhile, brought by the watch: held already.
            held = dataclasses.replace(cached, delivered=self._sequence, awaiting=None)
            self._jobs[key] = held
            return
        self._store(obj, delivered=self._sequence)

    def _deleted(self, obj: dict[str, Any]) -> None:
        key, uid, _, _ = identity(obj)
        self._sequence += 1
        now = time.monotonic()
        self._tombstones[uid] = now
        for old in [u for u, seen in self._tombstones.items() if now - seen > TOMBSTONE_SECONDS]:
            del self._tombstones[old]
        cached = self._jobs.get(key)
        if cached is not None and cached.uid == uid:
            del self._jobs[key]
        elif cached is not None:
            self._jobs[key] = dataclasses.replace(cached, delivered=self._sequence)

    def _store(self, obj: dict[str, Any], *, delivered: int, awaiting: str | None = None) -> None:
        key, cached = entry(obj, delivered=delivered, awaiting=awaiting)
        self._jobs[key] = cached

    # -- what the informer brings (tickwork.kube.informer.Subscriber) ----------------

    def listing(self, scope: Scope) -> _Listing:
        return _Listing(self, scope)

    def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None:
        del scope  # a job's key names its namespace
        if kind == "DELETED":
            self._deleted(obj)
        else:
            self._watched(obj)

    def reached(self, scope: Scope, version: str) -> None:
        self._reach(scope, version)

    def live(self, scope: Scope) -> None:
        self._live.add(scope)

    def lost(self, scope: Scope) -> None:
        # Events may be missed: vouch for nothing until listed again.
        self._live.discard(scope)
        self._release(scope)

    def _relist(self, scope: Scope, entries: dict[tuple[str, str], Cached]) -> None:
        """Take a consistent snapshot of the scope: the watch goes on from it."""
        self._sequence += 1
        for key, cached in entries.items():
            self._jobs[key] = dataclasses.replace(cached, delivered=self._sequence)
        for key in [k for k in self._jobs.keys(scope) if k not in entries]:
            del self._jobs[key]  # deleted while nobody watched
        self._listed = self._sequence

    async def run(self) -> None:
        """Keep every scope current until cancelled. While this does not run, the copy
        vouches for nothing."""
        await Informer(self._kube, KubeClient.jobs_path, self._scopes, self, INFORMER).run()


class _Listing:
    """One list of a scope: each job encoded as its page arrives (the parsed page is
    dropped before the next), and taken in as one snapshot when the list is whole."""

    def __init__(self, cache: JobCache, scope: Scope) -> None:
        self._cache = cache
        self._scope = scope
        self._entries: dict[tuple[str, str], Cached] = {}

    def add(self, obj: dict[str, Any]) -> None:
        key, cached = entry(obj, delivered=0)
        self._entries[key] = cached

    def end(self) -> None:
        self._cache._relist(self._scope, self._entries)  # noqa: SLF001 - its own list


@contextlib.asynccontextmanager
async def kept_current(cache: JobCache | None) -> AsyncIterator[None]:
    """Follow the watch while the block runs (nothing, for no cache)."""
    if cache is None:
        yield
        return
    task = asyncio.create_task(cache.run(), name="job cache")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
