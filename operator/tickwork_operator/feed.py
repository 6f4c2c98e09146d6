"""What the operator's informer brings, into the index: every ScheduledJob listed or
watched is handed to :class:`~tickwork_operator.state.WatchState` as it arrives, and
the ticker is woken when the job asks for something now.

The operator lists and watches ScheduledJobs itself (:mod:`tickwork.kube.informer`,
the same list-and-watch a worker's job cache follows), not through kopf: kopf's
per-object machinery (a worker task, a queue, a memory record, a logger per object)
cost about 1 ms of CPU an object or event, most of a cold start's time to index, and
the operator needs none of it: it does the same for every object (index it, or
forget it when deleted). The list comes in pages of ``list_page_size``, the next
asked for as one arrives; a watch that broke resumes where it was, and a list follows
only a 410 Gone (the resourceVersion is too old).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from tickwork.kube.client import KubeClient
from tickwork.kube.informer import Informer, InformerSettings, Scope
from tickwork_operator.entry import JobKey
from tickwork_operator.state import WatchState
from tickwork_operator.ticker import Ticker

logger = logging.getLogger(__name__)


def observe_listed(state: WatchState, ticker: Ticker, listed: dict[str, Any]) -> JobKey:
    """Index an object of a list (the first at a start, or a relist after the watch's
    version expired); owed status writes wait while a list is coming in
    (``state.listing``)."""
    state.listed_at = ticker.clock.monotonic()
    ticker.metrics.events.labels(type="LISTED").inc()
    return _observe(state, ticker, listed)


def observe_event(state: WatchState, ticker: Ticker, kind: str, body: dict[str, Any]) -> None:
    """Index the object of a watch event, or forget it when deleted."""
    ticker.metrics.events.labels(type=kind).inc()
    if kind == "DELETED":
        meta = body.get("metadata", {})
        state.forget(meta.get("namespace", ""), meta.get("name", ""), now=dt.datetime.now(dt.UTC))
    else:
        _observe(state, ticker, body)


def _observe(state: WatchState, ticker: Ticker, body: dict[str, Any]) -> JobKey:
    entry = state.observe(body, now=dt.datetime.now(dt.UTC))
    asked = any((entry.key, verb) in state.dead_letter_asks for verb in ("requeue", "purge"))
    if entry.key in state.triggers or entry.key in state.dirty or asked:
        ticker.wakeup.set()
    return entry.key


class ListedJobs:
    """The objects of one list, for one namespace or all (``namespace`` None). A
    relist (the operator already holds jobs of it) also notes which jobs it brought,
    and at its end forgets the others: deleted while the watch was down, they come in
    no event."""

    def __init__(self, state: WatchState, ticker: Ticker, namespace: str | None) -> None:
        self.state = state
        self.ticker = ticker
        self.namespace = namespace
        relist = any(namespace is None or key[0] == namespace for key in state.jobs)
        self.seen: set[JobKey] | None = set() if relist else None

    def add(self, listed: dict[str, Any]) -> None:
        key = observe_listed(self.state, self.ticker, listed)
        if self.seen is not None:
            self.seen.add(key)

    def end(self) -> None:
        if self.seen is None:
            return
        gone = self.state.forget_unlisted(self.namespace, self.seen)
        if gone:
            logger.info(
                "forgot %d ScheduledJobs deleted while the watch was down (first: %s/%s)",
                len(gone),
                *gone[0],
            )


class JobFeed:
    """The operator's :class:`~tickwork.kube.informer.Subscriber`."""

    def __init__(self, state: WatchState, ticker: Ticker) -> None:
        self.state = state
        self.ticker = ticker
        self.watching: set[Scope] = set()
        """Scopes listed whose watch runs now."""

    def listing(self, scope: Scope) -> ListedJobs:
        return ListedJobs(self.state, self.ticker, scope)

    def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None:
        del scope  # a job's key names its namespace
        observe_event(self.state, self.ticker, kind, obj)

    def reached(self, scope: Scope, version: str) -> None:
        del scope, version  # the index needs no version

    def live(self, scope: Scope) -> None:
        self.watching.add(scope)

    def lost(self, scope: Scope) -> None:
        self.watching.discard(scope)


def informer(kube: KubeClient, feed: JobFeed, namespaces: list[str], *, page_size: int) -> Informer:
    """The operator's list and watch of the ScheduledJobs of ``namespaces`` (all if
    empty) into ``feed``."""
    settings = InformerSettings(page_size=page_size, fetch_ahead=True, relist_after_error=False)
    return Informer(kube, KubeClient.jobs_path, namespaces or [None], feed, settings)
