"""A worker's own copy of the ScheduledJobs, kept current by a list and a watch.

Starting a run needs the job's spec and status. Reading it from the API server
costs a request per run, and at the top of a busy minute thousands of those
requests queue behind each other before a single run can start. A worker
therefore lists the jobs once and follows the watch (as client-go's informers
do); a run then starts from memory, and the API server is asked only when the
copy cannot answer:

* before the first list has completed, or while the watch is broken;
* when the job is missing or has another uid (created or replaced moments ago);

Objects are kept as compact JSON without ``managedFields`` (1 to 2 KB a job) and
parsed when a run asks for one. The worker's own status writes are fed in as
they are answered, so its next run of a job sees them even before the watch
does: the newer ``resourceVersion`` wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
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
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
_GONE = 410


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old: list again."""


@dataclass(frozen=True, slots=True)
class _Cached:
    uid: str
    resource_version: str
    body: bytes


def _newer(candidate: str, current: str) -> bool:
    """Whether ``candidate`` is a later resourceVersion than ``current``. They are etcd
    revisions in practice; if one is not a number, the one just seen wins."""
    try:
        return int(candidate) > int(current)
    except ValueError:
        return True


class JobCache:
    """ScheduledJobs of ``namespaces`` (all namespaces if empty), by (namespace, name)."""

    def __init__(self, kube: KubeClient, namespaces: Sequence[str] = ()) -> None:
        self._kube = kube
        self._scopes: list[str | None] = list(namespaces) or [None]
        self._jobs: dict[tuple[str, str], _Cached] = {}
        self._live: set[str | None] = set()

    @property
    def synced(self) -> bool:
        """Every scope has been listed and its watch is running."""
        return len(self._live) == len(self._scopes)

    def __len__(self) -> int:
        return len(self._jobs)

    def get(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """The job as last seen, or None if this copy cannot vouch for it (not synced,
        unknown, or another object under that name)."""
        if not self.synced:
            return None
        cached = self._jobs.get((namespace, name))
        if cached is None or cached.uid != uid:
            return None
        body: dict[str, Any] = json.loads(cached.body)
        return body

    def observe(self, obj: dict[str, Any]) -> None:
        """Take in an object read or written meanwhile, if it is newer than the copy."""
        metadata = obj.get("metadata") or {}
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        version = str(metadata.get("resourceVersion") or "")
        cached = self._jobs.get(key)
        if not version or (cached is not None and not _newer(version, cached.resource_version)):
            return
        self._store(obj)

    def _store(self, obj: dict[str, Any]) -> None:
        metadata = dict(obj.get("metadata") or {})
        metadata.pop("managedFields", None)
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        compact = {**obj, "apiVersion": models.API_VERSION, "kind": models.KIND,
                   "metadata": metadata}  # fmt: skip
        self._jobs[key] = _Cached(
            uid=str(metadata.get("uid", "")),
            resource_version=str(metadata.get("resourceVersion") or ""),
            body=json.dumps(compact, separators=(",", ":")).encode(),
        )

    # -- list and watch -------------------------------------------------------------

    async def run(self) -> None:
        """Keep every scope current until cancelled."""
        await asyncio.gather(*(self._follow(scope) for scope in self._scopes))

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
                version = ""  # too old to resume: list again
            except KubeApiError as exc:
                self._live.discard(scope)
                delay = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
                failures += 1
                logger.warning("job watch (%s) broke, again in %.1fs: %s",
                               scope or "all namespaces", delay, exc)  # fmt: skip
                await asyncio.sleep(delay)  # backoff while the API server is away

    async def _list(self, scope: str | None) -> str:
        """Replace the scope's objects with a fresh list; its resourceVersion."""
        seen: set[tuple[str, str]] = set()
        params = {"limit": str(LIST_PAGE)}
        while True:
            page = await self._kube.request("GET", KubeClient.jobs_path(scope), params=params)
            for item in page.get("items", []):
                self.observe(item)  # a status write answered meanwhile may be newer
                metadata = item.get("metadata") or {}
                seen.add((metadata.get("namespace", ""), metadata.get("name", "")))
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
                key = (metadata.get("namespace", ""), metadata.get("name", ""))
                cached = self._jobs.get(key)
                if cached is not None and cached.uid == metadata.get("uid"):
                    del self._jobs[key]
            elif kind in ("ADDED", "MODIFIED"):
                self.observe(obj)  # unless the worker's own write already showed a newer one
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
