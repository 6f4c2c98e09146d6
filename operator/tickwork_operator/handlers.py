"""Every kopf handler of the operator, registered in one registry, and what the
operator does with each object kopf lists or watches.

What kopf lists and watches is indexed as it arrives (:mod:`tickwork_operator.watch`
hands it to :class:`ListedJobs` and :func:`observe_event`); the one kopf handler
stays registered for kopf to watch ScheduledJobs at all, and receives nothing then.
Each path only hands the object to :class:`~tickwork_operator.state.WatchState` and
wakes the ticker; kopf writes nothing to the objects (no finalizers, no progress
annotations, no status: only event handlers are registered, and kopf's own storages
would use ``tickwork.dev`` annotations if ever needed).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

import kopf
from kopf._core.engines import daemons as kopf_daemons
from kopf._core.engines import indexing as kopf_indexing
from kopf._core.reactor import inventory as kopf_inventory

from tickwork.api import models
from tickwork.kube.credentials import Connection, load_configuration
from tickwork_operator.entry import JobKey
from tickwork_operator.state import WatchState
from tickwork_operator.ticker import Ticker

logger = logging.getLogger(__name__)

registry = kopf.OperatorRegistry()

#: Objects per page of the initial list (and of every relist).
LIST_PAGE = 500


@kopf.on.login(registry=registry)
def login(**_: Any) -> kopf.ConnectionInfo:
    """Credentials as Tickwork's own loader finds them (the service account in a Pod,
    else KUBECONFIG), which imports the official client only for what it leaves to it
    (exec plugins, auth providers): kopf's ``login_via_client`` imports it always
    (with kopf's own import of its models, ~9 MiB of the operator's RSS). kopf calls
    this again when the API server refuses the credentials (a rotated token is read
    then, an exec plugin run again)."""
    return connection_info(load_configuration())


def connection_info(connection: Connection) -> kopf.ConnectionInfo:
    """What kopf needs of a :class:`Connection`."""
    scheme, _, token = connection.authorization().get("Authorization", "").partition(" ")
    return kopf.ConnectionInfo(
        server=connection.host,
        ca_path=connection.ca_file,
        ca_data=connection.ca_data,
        insecure=not connection.verify,
        scheme=scheme or None,
        token=token or None,
        certificate_path=connection.cert_file,
        private_key_path=connection.key_file,
    )


@kopf.on.event(models.GROUP, models.VERSION, models.PLURAL, registry=registry)
async def scheduled_job_event(
    *, event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    """What kopf hands over: nothing while the operator indexes lists and watch
    events itself (:mod:`tickwork_operator.watch`, set up by ``run_operator``); kept
    for kopf to watch the resource at all, and for any setup without it.

    Async on purpose: kopf runs sync handlers in a thread pool, and the state they
    change is the ticker's, which runs on the event loop (and iterates it)."""
    state: WatchState = memo["state"]
    ticker: Ticker = memo["ticker"]
    ticker.metrics.kopf_events.inc()
    kind = event.get("type")
    if kind is None:  # kopf's event type for an object of a list
        observe_listed(state, ticker, dict(body))
    else:
        observe_event(state, ticker, kind, dict(body))


def observe_listed(state: WatchState, ticker: Ticker, listed: dict[str, Any]) -> JobKey:
    """Index an object of a list (the first at a start, or a relist after the watch
    failed); owed status writes wait while a list is coming in (``state.listing``)."""
    state.listed_at = ticker.clock.monotonic()
    ticker.metrics.events.labels(type="LISTED").inc()
    return _observe(state, ticker, listed)


def observe_event(state: WatchState, ticker: Ticker, kind: str, body: dict[str, Any]) -> None:
    """Index the object of a watch event, or forget it when deleted."""
    ticker.metrics.events.labels(type=kind).inc()
    if kind == "DELETED":
        meta = body.get("metadata", {})
        state.forget(meta.get("namespace", ""), meta.get("name", ""))
    else:
        _observe(state, ticker, body)


def _observe(state: WatchState, ticker: Ticker, body: dict[str, Any]) -> JobKey:
    entry = state.observe(body, now=dt.datetime.now(dt.UTC))
    asked = any((entry.key, verb) in state.dead_letter_asks for verb in ("requeue", "purge"))
    if entry.key in state.triggers or entry.key in state.dirty or asked:
        ticker.wakeup.set()
    return entry.key


class ListedJobs:
    """The objects of one list (:func:`~tickwork_operator.watch.indexed_here`), for
    one namespace or all (``namespace`` None). A relist (the operator already holds
    jobs of it) also notes which jobs it brought, and at its end forgets the others:
    deleted while the watch was down, they come in no event."""

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
                len(gone), *gone[0],
            )  # fmt: skip


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: kopf works out each event's "essence" (a deep copy of the body)
    and its diff against the last handled one for on.create/on.update handlers, and
    does so for every event even when, as here, only on.event handlers exist. That copy
    was ~8 % of the operator's CPU while a cold start's events flowed (py-spy,
    docs/performance.md); nothing reads it, so nothing is built, fetched or stored."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        del body, extra_fields  # kopf's interface
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        del body
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        del body, patch, essence


@kopf.on.cleanup(registry=registry)
async def stopping(memo: kopf.Memo, **_: Any) -> None:
    """kopf is stopping (SIGTERM): stop Tickwork's own loops now, not after kopf.

    After its own tasks, kopf waits up to 5 s for every task started after it — the
    ticker's and the reporter's waits among them, which end only on this event — and
    then cancels them: every shutdown took 5 s more, and a leader held its Lease that
    much longer before handing over."""
    stop: asyncio.Event | None = memo.get("stop")
    if stop is not None:
        stop.set()


class SharedMemo(kopf.Memo):
    """The operator's memo (the watch state, the ticker, the stop event), handed to every object's
    handler as it is. kopf gives each object a shallow copy of the memo, kept for as
    long as the object exists (~230 bytes a job); nothing is kept per object in it."""

    def __copy__(self) -> SharedMemo:
        return self


class LeanMemories(kopf_inventory.ResourceMemories):
    """kopf's per-object memories without the parts only daemons, timers and indexes
    use: every object shares one empty daemons record and one indexing record instead
    of its own (a set, a dict and two records: ~400 bytes a job). Sound only while the
    registry has none of those handlers (:func:`check_lean`, called at start)."""

    _no_daemons = kopf_daemons.DaemonsMemory(idle_reset_time=0.0)  # no daemon reads it
    _no_indexing = kopf_indexing.IndexingMemory()

    async def recall(self, raw_body: Any, **options: Any) -> Any:
        memory = await super().recall(raw_body, **options)
        memory.daemons_memory = self._no_daemons
        memory.indexing_memory = self._no_indexing
        return memory


def check_lean(registry_: kopf.OperatorRegistry) -> None:
    """Refuse to run kopf with :class:`LeanMemories` beside a daemon, timer or index."""
    spawning = registry_._spawning.get_all_handlers()  # noqa: SLF001 - kopf has no public list
    indexing = registry_._indexing.get_all_handlers()  # noqa: SLF001
    if spawning or indexing:
        raise RuntimeError(
            "LeanMemories shares the daemons and indexing records of every object: "
            "a kopf daemon, timer or index needs its own (drop LeanMemories)"
        )


def kopf_settings(*, list_page: int = LIST_PAGE) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True  # leadership is ours (a Lease), not kopf's peering
    settings.posting.enabled = False  # Events are posted by Tickwork, deduplicated
    settings.scanning.disabled = True  # no watching of CRDs and namespaces: less RBAC
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="tickwork.dev")
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.finalizer = "tickwork.dev/operator"
    settings.process.ultimate_exiting_timeout = 60
    # List in pages: kopf's default is one response holding every object's JSON at
    # once (benchmarks/rounds.md, "Where the operator's memory goes").
    settings.watching.chunk_size = list_page
    return settings
