"""kopf lists and watches ScheduledJobs; the operator indexes what comes, as it comes.

kopf hands each object of a list, and each event of a watch, to its per-object
machinery — a worker task and a queue, a memory record, a logger, the handler's
invocation: about 1 ms of CPU an object or event, most of a cold start's time to
index every job and a third of the operator's CPU per run (each run's status writes
come back as events). At a cold start it also asks for the next page of the list as
soon as the last is queued, not handled, so every job's parsed JSON and worker task
are alive at once, with the records the operator keeps for good made in between
them (benchmarks/rounds.md, "Where the operator's memory goes"). The operator needs
none of it: its one handler does the same for every object (index it, or forget it
when deleted), and kopf keeps nothing per object that the operator reads (only
``on.event`` handlers: no daemons, timers, indexes, progress or diff base).

:func:`indexed_here` wraps kopf's page fetcher and its watch stream
(``kopf._cogs.clients.fetching.fetch_objs`` and ``...watching.watch_objs``, which
kopf looks up at each list and each watch request) for the ScheduledJob resource:

* each page of a list goes to the operator as it arrives, and the next page is asked
  for as it arrives, so that the API server prepares a page while the operator
  indexes the one before (at most two pages are held: the one being indexed and the
  next one, arriving); kopf gets each page empty, with the list's resourceVersion,
  from which it watches as before;
* each watch event (added, modified, deleted) goes to the operator as it arrives,
  and kopf gets a bookmark of the event's resourceVersion instead: kopf still owns
  the watch (its reconnects, the resourceVersion to resume from, a 410 Gone and the
  relist that follows), and hands nothing over.

A list that came in whole also tells which jobs are gone: a relist follows a watch
that failed (410 Gone), and the jobs deleted while it was down come in no event
(kopf itself never forgets them). :meth:`ListSink.end` lets the operator forget them.

Other resources are listed and watched as kopf does, and both are put back on the
way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Iterator
from typing import Any, Protocol, cast

from kopf._cogs.clients import fetching as kopf_fetching
from kopf._cogs.clients import watching as kopf_watching

logger = logging.getLogger(__name__)

Page = tuple[Collection[Any], str]
#: Objects or events indexed between two turns of the event loop (a page of 500
#: takes ~0.1 s to index, and a watch stream's buffered events come without a wait;
#: the ticker must not wait for them).
TURN_EVERY = 50
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


class ListSink(Protocol):
    """Where the objects of one list go (one list of one namespace, or of all)."""

    def add(self, listed: dict[str, Any]) -> None:
        """Index one listed object."""

    def end(self) -> None:
        """The list came in whole (not called when it broke off)."""


EventSink = Callable[[str, dict[str, Any]], object]
"""Where a watch event goes: its type (ADDED, MODIFIED, DELETED) and its object."""


@contextlib.contextmanager
def indexed_here(
    sink_for: Callable[[str | None], ListSink],
    on_event: EventSink,
    *,
    plural: str,
    group: str,
) -> Iterator[None]:
    """While inside, the objects of every list of ``plural.group`` go to a sink of that
    list (``sink_for(namespace)``, None for every namespace) and its watch events to
    ``on_event`` — in the event loop's thread, in the API server's order — not to
    kopf's handlers."""
    fetch_objs, watch_objs = kopf_fetching.fetch_objs, kopf_watching.watch_objs

    async def paged(*, resource: Any, **options: Any) -> AsyncIterator[Page]:
        # Async generators (typed as iterators by kopf): closed with these.
        pages = cast("AsyncGenerator[Page, None]", fetch_objs(resource=resource, **options))
        if not _named(resource, plural, group):
            async with contextlib.aclosing(pages):
                async for page, version in pages:
                    yield page, version
            return
        sink = sink_for(options.get("namespace"))
        # the fetch ahead ends (is cancelled) before the pages are closed
        async with contextlib.aclosing(pages), contextlib.aclosing(_one_ahead(pages)) as ahead:
            async for page, version in ahead:
                await _index_page(page, sink)
                del page  # the page being indexed and the next one are all that is held
                yield (), version
        sink.end()

    async def watched(*, resource: Any, **options: Any) -> AsyncIterator[Any]:
        stream = cast("AsyncGenerator[Any, None]", watch_objs(resource=resource, **options))
        ours = _named(resource, plural, group)
        async with contextlib.aclosing(stream):
            count = 0
            async for raw in stream:
                if not ours or raw.get("type") not in EVENT_TYPES:
                    yield raw  # errors (410 Gone) and bookmarks: kopf's, as before
                    continue
                body = raw["object"]
                _handle("watched", body, on_event, raw["type"], body)
                yield {"type": "BOOKMARK", "object": {"metadata": {
                    "resourceVersion": (body.get("metadata") or {}).get("resourceVersion"),
                }}}  # fmt: skip
                count += 1
                if count % TURN_EVERY == 0:
                    await asyncio.sleep(0)

    kopf_fetching.fetch_objs, kopf_watching.watch_objs = paged, watched
    try:
        yield
    finally:
        kopf_fetching.fetch_objs, kopf_watching.watch_objs = fetch_objs, watch_objs


async def _one_ahead(pages: AsyncGenerator[Page, None]) -> AsyncGenerator[Page, None]:
    """The pages of ``pages``, each next one asked for as soon as the one before
    arrives: the API server prepares and sends it while the caller indexes (at
    100,000 jobs the operator had waited for pages a quarter of the index's time).
    A failure to fetch comes out where that page would have; a fetch still under way
    when the caller stops is cancelled, and one that failed meanwhile is dropped."""
    ahead = asyncio.ensure_future(_next_page(pages))
    try:
        while (page := await ahead) is not None:
            ahead = asyncio.ensure_future(_next_page(pages))
            yield page
    finally:
        ahead.cancel()  # nothing if it is done
        await asyncio.gather(ahead, return_exceptions=True)


async def _next_page(pages: AsyncGenerator[Page, None]) -> Page | None:
    try:
        return await anext(pages)
    except StopAsyncIteration:
        return None


def _named(resource: Any, plural: str, group: str) -> bool:
    return (resource.plural, resource.group) == (plural, group)


async def _index_page(page: Collection[Any], sink: ListSink) -> None:
    for count, listed in enumerate(page, start=1):
        _handle("listed", listed, sink.add, listed)
        if count % TURN_EVERY == 0:
            await asyncio.sleep(0)


def _handle(how: str, body: dict[str, Any], call: Callable[..., object], *args: Any) -> None:
    try:
        call(*args)
    except Exception:  # one object must not stop the stream (kopf logs a handler's alike)
        meta = body.get("metadata") or {}
        logger.exception(
            "%s ScheduledJob %s/%s not indexed", how, meta.get("namespace"), meta.get("name")
        )
