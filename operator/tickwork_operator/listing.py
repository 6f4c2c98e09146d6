"""The list of every ScheduledJob (at a start, and at every relist) taken at the pace
the operator handles it.

kopf lists in pages (``settings.watching.chunk_size``) but asks for the next page as
soon as the last one is queued, not when it is handled: at a cold start every job's
parsed JSON, each with a kopf worker task and queue of its own, is alive at once,
and the records the operator keeps for good are made in between. The allocator
keeps the pages of that peak for as long as a few of those records sit in them
(docs/performance.md, "Where the operator's memory goes"). :class:`ListPacing` holds
the next page back until all but ``ahead`` of the objects listed so far have been
handled, so a cold start's garbage is a few pages, whatever the number of jobs.

kopf has no hook for this: :func:`paced_lists` wraps its page fetcher
(``kopf._cogs.clients.fetching.fetch_objs``, which its watcher looks up at each
list) for the ScheduledJob resource only, and puts it back on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Iterator
from typing import Any, cast

from kopf._cogs.clients import fetching as kopf_fetching

logger = logging.getLogger(__name__)

Page = tuple[Collection[Any], str]


class ListPacing:
    """How far the list is ahead of the handler, and the wait for it to catch up.

    The handler calls :meth:`handled` for each object of a list it handles; the page
    fetcher calls :meth:`started` when a list starts and :meth:`after_page` after each
    page (it returns once at most ``ahead`` objects listed wait to be handled, or after
    ``patience`` seconds: an object kopf never hands over must not stop the list, and
    a list's continue token expires after a few minutes)."""

    def __init__(self, *, ahead: int, patience: float = 10.0) -> None:
        if ahead < 0 or patience <= 0:
            raise ValueError("ahead must be >= 0 and patience > 0")
        self.ahead = ahead
        self.patience = patience
        self.listed = 0
        self.handled_count = 0
        self.most_behind = 0
        """The most objects listed and not yet handled at the end of a page (at most
        ``ahead`` and a page, unless the patience ran out)."""
        self.waited_seconds = 0.0
        self.timeouts = 0
        self._caught_up = asyncio.Event()

    @property
    def behind(self) -> int:
        return self.listed - self.handled_count

    def started(self) -> None:
        """A new list: what an earlier one left unhandled no longer counts."""
        self.listed = self.handled_count = 0

    def handled(self) -> None:
        self.handled_count += 1
        if self.behind <= self.ahead:
            self._caught_up.set()

    async def after_page(self, size: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.listed += size
        self.most_behind = max(self.most_behind, self.behind)
        if self.behind > self.ahead:
            self._caught_up.clear()
            started = clock()
            try:
                await asyncio.wait_for(self._caught_up.wait(), self.patience)
            except TimeoutError:
                self.timeouts += 1
                logger.warning(
                    "the list is %d objects ahead of the handler after %.0f s; going on",
                    self.behind, self.patience,
                )  # fmt: skip
            self.waited_seconds += clock() - started


@contextlib.contextmanager
def paced_lists(pacing: ListPacing, *, plural: str, group: str) -> Iterator[None]:
    """kopf's lists of ``plural.group`` paced by ``pacing`` while inside."""
    original = kopf_fetching.fetch_objs

    async def fetch_objs(*, resource: Any, **options: Any) -> AsyncIterator[Page]:
        # An async generator (typed as an iterator by kopf): closed with this one.
        pages = cast("AsyncGenerator[Page, None]", original(resource=resource, **options))
        ours = (resource.plural, resource.group) == (plural, group)
        async with contextlib.aclosing(pages):
            if ours:
                pacing.started()
            async for page, version in pages:
                size = len(page)
                yield page, version
                del page  # the consumer has queued it: hold no reference while waiting
                if ours:
                    await pacing.after_page(size)

    kopf_fetching.fetch_objs = fetch_objs
    try:
        yield
    finally:
        kopf_fetching.fetch_objs = original
