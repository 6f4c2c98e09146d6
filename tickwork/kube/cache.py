"""A worker's own copy of the ScheduledJobs, kept current by a list and a watch.

Starting a run needs the job's spec and status. Reading it from the API server
costs a request per run, and at the top of a busy minute thousands of those
requests queue behind each other before a single run can start. A worker
therefore lists the jobs once and follows the watch (as client-go's informers
do); a run then starts from memory, and the API server is asked only when the
copy cannot vouch for the job:

* before the first list has completed, while the watch is broken (it is listed
  again afterwards, not resumed blind), or if the task that follows it died;
* when the job is missing or has another uid (created or replaced moments ago),
  or was deleted (a tombstone keeps a racing read from putting it back);
* when the copy is older than the job the operator saw when it published the run
  (its ``metadata.generation``, which only grows, is in the run's message).

resourceVersions are compared only for equality, as the API conventions require.
The watch brings every change of a job in order, so a copy read from the API
server or answered to the worker's own status write is newer than the cached
one exactly when the watch has not brought its resourceVersion yet (the last
few it brought are remembered): it is taken in, and the watch's older events
of that job are skipped until it reaches that resourceVersion. The worker's next
run of the job therefore builds on its own last write. Objects are kept as
compact JSON without ``managedFields`` (1 to 2 KB a job) and parsed when a run
asks for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from tickwork.api import models
from tickwork.kube.client import KubeApiError, KubeClient

logger = logging.getLogger(__name__)

#: Objects per page of the initial list.
LIST_PAGE = 500
#: The server ends each watch after this long (plus jitter); it is resumed at once.
WATCH_SECONDS = 300
#: Silence tolerated on a watch: bookmarks arrive about once a minute.
IDLE_SECONDS = 150.0
#: How long a deleted job's uid is remembered (a read that raced the delete is
#: answered long before).
TOMBSTONE_SECONDS = 600.0
#: resourceVersions of a job's last watch events remembered (a read or write
#: answered moments ago is among them if the watch brought it already).
SEEN_VERSIONS = 8
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
_GONE = 410


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old: list again."""


@dataclass(frozen=True, slots=True)
class _Cached:
    uid: str
    resource_version: str
    generation: int
    body: bytes
    seen: tuple[str, ...] = ()
    """The resourceVersions of the job that the list and the watch brought last."""
    awaiting: str | None = None
    """A copy read or written meanwhile that the watch has not brought yet: its
    resourceVersion. The watch's events of the job before it are older: skipped."""


def _identity(obj: dict[str, Any]) -> tuple[tuple[str, str], str, str, int]:
    metadata = obj.get("metadata") or {}
    key = (str(metadata.get("namespace", "")), str(metadata.get("name", "")))
    return (key, str(metadata.get("uid", "")), str(metadata.get("resourceVersion") or ""),
            int(metadata.get("generation") or 0))  # fmt: skip


class JobCache:
    """ScheduledJobs of ``namespaces`` (all namespaces if empty), by (namespace, name)."""

    def __init__(self, kube: KubeClient, namespaces: Sequence[str] = ()) -> None:
        self._kube = kube
        self._scopes: list[str | None] = list(namespaces) or [None]
        self._jobs: dict[tuple[str, str], _Cached] = {}
        self._live: set[str | None] = set()
        self._tombstones: dict[str, float] = {}
        """uids of deleted jobs -> when the delete was seen (monotonic)."""

    @property
    def synced(self) -> bool:
        """Every scope has been listed and its watch is running."""
        return len(self._live) == len(self._scopes)

    def __len__(self) -> int:
        return len(self._jobs)

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
        body: dict[str, Any] = json.loads(cached.body)
        return body

    def observe(self, obj: dict[str, Any]) -> None:
        """Take in a copy read from the API server or answered to a write unless the
        watch brought it already (then the cached copy is as new or newer) or the job
        was deleted."""
        key, uid, version, _ = _identity(obj)
        if not version or uid in self._tombstones:
            return
        cached = self._jobs.get(key)
        if cached is None or cached.uid != uid:
            self._store(obj, awaiting=version)
        elif version not in cached.seen and version != cached.awaiting:
            self._store(obj, seen=cached.seen, awaiting=version)

    def _watched(self, obj: dict[str, Any]) -> None:
        """Apply an ADDED or MODIFIED event (events of one watch arrive in order)."""
        key, uid, version, _ = _identity(obj)
        cached = self._jobs.get(key)
        same = cached is not None and cached.uid == uid
        seen = ((cached.seen if same and cached else ()) + (version,))[-SEEN_VERSIONS:]
        if same and cached and cached.awaiting not in (None, version):
            # Older than the copy read or written meanwhile: note it, keep the copy.
            self._jobs[key] = dataclasses.replace(cached, seen=seen)
            return
        self._store(obj, seen=seen)

    def _deleted(self, obj: dict[str, Any]) -> None:
        key, uid, _, _ = _identity(obj)
        now = time.monotonic()
        self._tombstones[uid] = now
        for old in [u for u, seen in self._tombstones.items() if now - seen > TOMBSTONE_SECONDS]:
            del self._tombstones[old]
        cached = self._jobs.get(key)
        if cached is not None and cached.uid == uid:
            del self._jobs[key]

    def _store(
        self, obj: dict[str, Any], *, seen: tuple[str, ...] = (), awaiting: str | None = None
    ) -> None:
        metadata = dict(obj.get("metadata") or {})
        metadata.pop("managedFields", None)
        key, uid, version, generation = _identity(obj)
        compact = {**obj, "apiVersion": models.API_VERSION, "kind": models.KIND,
                   "metadata": metadata}  # fmt: skip
        self._jobs[key] = _Cached(
            uid=uid,
            resource_version=version,
            generation=generation,
            body=json.dumps(compact, separators=(",", ":")).encode(),
            seen=seen,
            awaiting=awaiting,
        )

    # -- list and watch -------------------------------------------------------------

    async def run(self) -> None:
        """Keep every scope current until cancelled. While this does not run, the copy
        vouches for nothing."""
        try:
            await asyncio.gather(*(self._follow(scope) for scope in self._scopes))
        finally:
            self._live.clear()

    async def _follow(self, scope: str | None) -> None:
        failures = 0
        version = ""
        while True:
            try:
                if not version:
                    version = await self._list(scope)
                self._live.add(scope)
                failures = 0
                version = await self._watch(scope, version)
            except _ExpiredError:
                self._live.discard(scope)
                version = ""  # too old to resume: list again
            except Exception as exc:  # noqa: BLE001 - the API server away, or a bug: supervise
                # Events may have been missed: vouch for nothing until listed again.
                self._live.discard(scope)
                version = ""
                delay = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
                failures += 1
                log = logger.warning if isinstance(exc, KubeApiError) else logger.exception
                log("job watch (%s) broke, listing again in %.1fs: %s",
                    scope or "all namespaces", delay, exc)  # fmt: skip
                await asyncio.sleep(delay)  # backoff while the API server is away

    async def _list(self, scope: str | None) -> str:
        """Replace the scope's objects with a fresh list; its resourceVersion."""
        seen: set[tuple[str, str]] = set()
        params = {"limit": str(LIST_PAGE)}
        while True:
            page = await self._kube.request("GET", KubeClient.jobs_path(scope), params=params)
            for item in page.get("items", []):
                # A consistent snapshot: the watch goes on from it.
                self._store(item, seen=(_identity(item)[2],))
                seen.add(_identity(item)[0])
            listed = page.get("metadata") or {}
            if not listed.get("continue"):
                break
            params = {"limit": str(LIST_PAGE), "continue": listed["continue"]}
        for key in [k for k in self._jobs if (scope is None or k[0] == scope) and k not in seen]:
            del self._jobs[key]  # deleted while nobody watched
        return str(listed.get("resourceVersion") or "")

    async def _watch(self, scope: str | None, version: str) -> str:
        """Apply the watch's events from ``version`` on; the version to resume from."""
        params = {"resourceVersion": version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(WATCH_SECONDS)}  # fmt: skip
        events = self._kube.watch(KubeClient.jobs_path(scope), params, idle_timeout=IDLE_SECONDS)
        async for event in events:
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == _GONE:
                    raise _ExpiredError
                raise KubeApiError(int(obj.get("code") or 0), str(obj.get("reason", "")),
                                   str(obj.get("message", "")))  # fmt: skip
            metadata = obj.get("metadata") or {}
            version = str(metadata.get("resourceVersion") or version)
            if kind == "DELETED":
                self._deleted(obj)
            elif kind in ("ADDED", "MODIFIED"):
                self._watched(obj)
        return version


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
