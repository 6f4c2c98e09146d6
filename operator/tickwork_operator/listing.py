"""The list of every ScheduledJob (at a start, and at every relist), indexed by the
operator as each page arrives rather than object by object through kopf.

kopf hands each listed object to its per-object machinery — a worker task and a
queue, a memory record, a logger, the handler's invocation — about 1 ms of CPU an
object, most of a cold start's time to index every job; and it asks for the next
page as soon as the last is queued, not handled, so at a cold start every job's
parsed JSON and worker task are alive at once, with the records the operator keeps
for good made in between them (docs/performance.md, "Where the operator's memory
goes"). The operator needs none of that for a listed object: its handler does the
same for every object (index it), and kopf keeps nothing per object that the
operator reads (only ``on.event`` handlers: no daemons, timers, indexes, progress
or diff base).

:func:`listed_here` wraps kopf's page fetcher
(``kopf._cogs.clients.fetching.fetch_objs``, which kopf's watcher looks up at each
list) for the ScheduledJob resource: each page's objects go to the operator as the
page arrives, the next page is asked for once they are indexed, and kopf gets the
page empty, with its resourceVersion, from which it watches as before. Every change
after the list (the watch's events) goes through kopf as before. Other resources are
listed as kopf lists them, and the fetcher is put back on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Iterator
from typing import Any, Protocol, cast

from kopf._cogs.clients import fetching as kopf_fetching

logger = logging.getLogger(__name__)

Page = tuple[Collection[Any], str]


class ListSink(Protocol):
    """Where the objects of one list go (one list of one namespace, or of all)."""

    def add(self, listed: dict[str, Any]) -> None:
        """Index one listed object."""

    def end(self) -> None:
        """The list came in whole (not called when it broke off)."""


#: Objects indexed between two turns of the event loop (a page of 500 takes ~0.1 s
#: to index; the ticker must not wait for a whole page).
TURN_EVERY = 50


@contextlib.contextmanager
def listed_here(
    sink_for: Callable[[str | None], ListSink], *, plural: str, group: str
) -> Iterator[None]:
    """While inside, every listed ``plural.group`` object goes to a sink of its list
    (``sink_for(namespace)``, None for every namespace; in the event loop's thread, in
    list order), not to kopf."""
    original = kopf_fetching.fetch_objs

    async def fetch_objs(*, resource: Any, **options: Any) -> AsyncIterator[Page]:
        # An async generator (typed as an iterator by kopf): closed with this one.
        pages = cast("AsyncGenerator[Page, None]", original(resource=resource, **options))
        sink = sink_for(options.get("namespace")) if _named(resource, plural, group) else None
        async with contextlib.aclosing(pages):
            async for page, version in pages:
                if sink is None:
                    yield page, version
                    continue
                await _index(page, sink)
                del page  # only the one page being indexed is ever held
                yield (), version
        if sink is not None:
            sink.end()

    kopf_fetching.fetch_objs = fetch_objs
    try:
        yield
    finally:
        kopf_fetching.fetch_objs = original


def _named(resource: Any, plural: str, group: str) -> bool:
    return (resource.plural, resource.group) == (plural, group)


async def _index(page: Collection[Any], sink: ListSink) -> None:
    for count, listed in enumerate(page, start=1):
        try:
            sink.add(listed)
        except Exception:  # one object must not stop the list (kopf logs a handler's alike)
            meta = listed.get("metadata") or {}
            logger.exception(
                "listed ScheduledJob %s/%s not indexed", meta.get("namespace"), meta.get("name")
            )
        if count % TURN_EVERY == 0:
            await asyncio.sleep(0)
