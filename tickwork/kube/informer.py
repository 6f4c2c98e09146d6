"""One list-and-watch of a resource per scope, for whoever keeps a copy of it.

The operator's index and a worker's job cache both follow the ScheduledJobs this
way (as client-go's informers do): list the scope (a namespace, or every namespace)
in pages, then watch from the list's resourceVersion with bookmarks, resume the watch
where it ended, and list again when the API server no longer has that version (410
Gone). What the list and the watch bring goes to a :class:`Subscriber`, in the API
server's order, in the event loop's thread:

* :meth:`Subscriber.listing` opens a list; each object goes to its sink's ``add`` as
  its page arrives, and ``end`` says the list came in whole (not called when it broke
  off). A list that came in whole also says which objects are gone: the ones deleted
  while nobody watched come in no event.
* :meth:`Subscriber.event` gets each watch event (ADDED, MODIFIED, DELETED);
  :meth:`Subscriber.reached` every resourceVersion the watch brought, bookmarks too
  (the API server's watch cache holds everything up to it).
* :meth:`Subscriber.live` is called before each watch request: from then on the copy
  follows the scope; :meth:`Subscriber.lost` when the watch broke (until ``live``
  again, changes may be missed).

Objects arrive without ``metadata.managedFields`` (neither copy reads them; with a
run history they are often most of a job). One object that a subscriber cannot take
is logged and the stream goes on. With ``fetch_ahead`` the next page is asked for as
soon as one arrives, so that the API server prepares it while the subscriber takes
the one before (at most two pages are held); every ``turn_every`` objects or events
the event loop turns, so that a long page or a burst of buffered events does not hold
up the operator's ticker or a worker's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tickwork.heap import settle, trim_now
from tickwork.kube.client import KubeApiError, KubeClient

logger = logging.getLogger(__name__)

Scope = str | None
"""A namespace, or None for every namespace."""
Page = tuple[list[dict[str, Any]], dict[str, Any]]
"""A list response's items and its list metadata."""
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
_GONE = 410


class ListSink(Protocol):
    """Where the objects of one list go."""

    def add(self, obj: dict[str, Any]) -> None:
        """Take one listed object."""

    def end(self) -> None:
        """The list came in whole."""


class Subscriber(Protocol):
    """What keeps a copy of the resource (see the module's docstring)."""

    def listing(self, scope: Scope) -> ListSink: ...

    def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None: ...

    def reached(self, scope: Scope, version: str) -> None: ...

    def live(self, scope: Scope) -> None: ...

    def lost(self, scope: Scope) -> None: ...


@dataclass(frozen=True)
class InformerSettings:
    """How an :class:`Informer` lists and watches."""

    page_size: int = 500
    """Objects per page of a list: a page is parsed whole."""
    fetch_ahead: bool = False
    """Ask for the next page as soon as one arrives (two pages held, not one)."""
    watch_seconds: int = 300
    """The API server ends each watch after this long (plus jitter): resumed at once."""
    idle_seconds: float = 150.0
    """Silence tolerated on a watch: bookmarks arrive about once a minute."""
    retry_seconds: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0)
    """Waits after consecutive failures (the last one repeats)."""
    relist_after_error: bool = True
    """After a failed request, list again (True) or resume the watch where it was."""
    turn_every: int = 50
    """Objects or events handed over between two turns of the event loop."""


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    """Lists and watches ``path(scope)`` for each of ``scopes`` until cancelled."""

    def __init__(
        self,
        kube: KubeClient,
        path: Callable[[Scope], str],
        scopes: Sequence[Scope],
        subscriber: Subscriber,
        settings: InformerSettings | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._kube = kube
        self._path = path
        self.scopes: list[Scope] = list(scopes) or [None]
        self._subscriber = subscriber
        self.settings = settings or InformerSettings()
        self._sleep = sleep
        self._at: dict[Scope, str] = {}
        """Per scope, the resourceVersion to watch from (the last the watch brought)."""
        self._came: dict[Scope, int] = {}
        """Per scope, how many events and bookmarks the watches brought."""

    async def run(self) -> None:
        """Follow every scope until cancelled; each scope is ``lost`` on the way out."""
        try:
            await asyncio.gather(*(self._follow(scope) for scope in self.scopes))
        finally:
            for scope in self.scopes:
                self._subscriber.lost(scope)

    async def _follow(self, scope: Scope) -> None:
        failures = 0
        version = ""
        while True:
            came = self._came.get(scope, 0)
            try:
                if not version:
                    version = await self._list(scope)
                    failures = 0
                self._subscriber.live(scope)
                await self._watch(scope, version)
                failures = 0  # the server ended the watch: resumed where it was
            except _ExpiredError:
                self._subscriber.lost(scope)
                version = ""  # too old to resume: list again, at once
                continue
            except Exception as exc:  # noqa: BLE001 - the API server away, or a bug: supervise
                self._subscriber.lost(scope)
                if self._came.get(scope, 0) != came:
                    failures = 0  # it broke after it worked: not a failure in a row
                if self.settings.relist_after_error:
                    self._at.pop(scope, None)
                retry = self.settings.retry_seconds
                delay = retry[min(failures, len(retry) - 1)]
                failures += 1
                log = logger.warning if isinstance(exc, KubeApiError) else logger.exception
                log(
                    "watch of %s broke, %s in %.1fs: %s",
                    self._path(scope),
                    "resuming" if self._at.get(scope) else "listing again",
                    delay,
                    exc,
                )
                await self._sleep(delay)
            version = self._at.get(scope, "")

    async def _list(self, scope: Scope) -> str:
        """One whole list of ``scope`` into a new sink; the list's resourceVersion."""
        sink = self._subscriber.listing(scope)
        pages = self._pages(scope)
        if self.settings.fetch_ahead:
            pages = _one_ahead(pages)
        metadata: dict[str, Any] = {}
        async with contextlib.aclosing(pages):
            async for items, listed in pages:
                metadata = listed
                await self._take(items, sink.add)
                del items  # the page taken and the next one are all that is held
        _call(sink.end)
        # What the list left lives as long as its jobs: out of the collector's full
        # passes. And a list parses every object once: give the allocator's free pages back.
        settle(f"the list of {self._path(scope)}")
        await trim_now(f"the list of {self._path(scope)}")
        return str(metadata.get("resourceVersion") or "")

    async def _pages(self, scope: Scope) -> AsyncGenerator[Page, None]:
        params = {"limit": str(self.settings.page_size)}
        while True:
            page = await self._kube.request("GET", self._path(scope), params=params)
            metadata = page.get("metadata") or {}
            yield page.get("items") or [], metadata
            del page
            if not metadata.get("continue"):
                return
            params = {"limit": str(self.settings.page_size), "continue": metadata["continue"]}

    async def _take(
        self, items: list[dict[str, Any]], add: Callable[[dict[str, Any]], None]
    ) -> None:
        for count, obj in enumerate(items, start=1):
            _call(add, _trimmed(obj))
            if count % self.settings.turn_every == 0:
                await asyncio.sleep(0)

    async def _watch(self, scope: Scope, version: str) -> None:
        """Hand over the watch's events from ``version`` on, until the server ends the
        watch; the version to resume from is kept as they come."""
        self._at[scope] = version
        params = {
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.settings.watch_seconds),
        }
        events = self._kube.watch(
            self._path(scope), params, idle_timeout=self.settings.idle_seconds
        )
        count = 0
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == _GONE:
                        self._at.pop(scope, None)
                        raise _ExpiredError
                    raise KubeApiError(
                        int(obj.get("code") or 0),
                        str(obj.get("reason", "")),
                        str(obj.get("message", "")),
                    )
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in EVENT_TYPES:
                    _call(self._subscriber.event, scope, kind, _trimmed(obj))
                self._at[scope] = version
                self._came[scope] = self._came.get(scope, 0) + 1
                _call(self._subscriber.reached, scope, version)
                count += 1
                if count % self.settings.turn_every == 0:
                    await asyncio.sleep(0)


def _trimmed(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


def _call(call: Callable[..., object], *args: Any) -> None:
    """``call(*args)``; one object that cannot be taken must not stop the stream."""
    try:
        call(*args)
    except Exception:
        obj = next((arg for arg in args if isinstance(arg, dict)), {})
        meta = obj.get("metadata") or {}
        logger.exception("%s/%s not taken in", meta.get("namespace"), meta.get("name"))


async def _one_ahead(pages: AsyncGenerator[Page, None]) -> AsyncGenerator[Page, None]:
    """The pages of ``pages``, each next one asked for as soon as the one before
    arrives. A failure to fetch comes out where that page would have; a fetch still
    under way when the caller stops is cancelled, and one that failed meanwhile is
    dropped."""
    async with contextlib.aclosing(pages):
        ahead = asyncio.ensure_future(_next_page(pages))
        try:
            while (page := await ahead) is not None:
                ahead = asyncio.ensure_future(_next_page(pages))
                await asyncio.sleep(0)  # its request goes out before the page is taken
                yield page
        finally:
            ahead.cancel()  # nothing if it is done
            await asyncio.gather(ahead, return_exceptions=True)


async def _next_page(pages: AsyncGenerator[Page, None]) -> Page | None:
    try:
        return await anext(pages)
    except StopAsyncIteration:
        return None
