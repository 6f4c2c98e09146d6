"""The leader's tick: publish what fell due, write what status owes, keep the queue honest.

Only the replica holding the Lease runs :meth:`Ticker.run`. Every tick it
pops the due entries of the bucket index (nothing else is looked at) and hands
them to the :class:`~tickwork_operator.publisher.Publisher` (due runs, run-now
triggers; and through its parts, backfills, buffered runs, cancels and
withdrawals), the :class:`~tickwork_operator.reconciler.Reconciler`
(lost runs, the queue's timers and depth, TTL deletions) and the
:class:`~tickwork_operator.reporter.Reporter` (status and Events, in the
background, beside the ticks). Work per tick is proportional to
what is due, dirty or active — never to the number of ScheduledJobs. Time comes
from an injected :class:`~tickwork_operator.clock.Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from tickwork.kube.client import KubeClient
from tickwork.kube.events import EventRecorder
from tickwork.queue.protocol import RunQueue
from tickwork.tracing import Tracing
from tickwork_operator.claims import NamespaceClaims
from tickwork_operator.clock import SYSTEM, Clock, wait_any
from tickwork_operator.dead_letters import DeadLetterDesk
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.pacing import Pace
from tickwork_operator.parts import Shared
from tickwork_operator.publisher import RETRY_DELAY, Publisher
from tickwork_operator.reconciler import Reconciler
from tickwork_operator.reporter import REPORT_HOLD_SECONDS, Reporter, bounded
from tickwork_operator.state import IndexKey, WatchState

logger = logging.getLogger(__name__)

#: Due entries published at once (each is a Redis call).
CONCURRENCY = 64
#: Publishing offset after each tick boundary: cron runs fall on whole
#: seconds, so ticking just after them publishes a run milliseconds late.
_TICK_OFFSET = 0.005


class Ticker:
    def __init__(
        self,
        *,
        state: WatchState,
        queue: RunQueue,
        kube: KubeClient,
        events: EventRecorder,
        metrics: OperatorMetrics,
        tick_seconds: float,
        reconcile_seconds: float,
        queue_name: str = "default",
        holds_lease: Callable[[], bool] = lambda: True,
        clock: Clock = SYSTEM,
        report_hold_seconds: float = REPORT_HOLD_SECONDS,
        catchup_runs_per_second: float = 10.0,
        claims: NamespaceClaims | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``holds_lease``: whether the Lease is provably still ours (renewed within its
        duration), checked before every publish, not only when leadership changes;
        ``claims``, the same for each namespace (None: every namespace is ours);
        ``tracing``: where publish spans go (none: off)."""
        self.state = state
        self.metrics = metrics
        self.tick_seconds = tick_seconds
        self.reconcile_seconds = reconcile_seconds
        self.clock = clock
        self.shared = Shared(
            state=state,
            queue=queue,
            kube=kube,
            events=events,
            metrics=metrics,
            clock=clock,
            holds_lease=holds_lease,
            claims=claims,
            tracing=tracing or Tracing(),
        )
        self.reporter = Reporter(self.shared, hold_seconds=report_hold_seconds)
        pace = Pace(
            per_second=catchup_runs_per_second,
            burst=int(catchup_runs_per_second),
            now=clock.monotonic(),
        )
        self.publisher = Publisher(self.shared, reporter=self.reporter, pace=pace)
        self.dead_letters = DeadLetterDesk(self.shared, reporter=self.reporter)
        self.reconciler = Reconciler(self.shared, queue_name=queue_name)
        self.wakeup = asyncio.Event()
        if claims is not None:
            claims.on_claimed = self._claimed
        self._last_reconcile: float | None = None
        self._maintained_in: float | None = None
        """The tick period (wall time // ``tick_seconds``) the queue was last maintained in."""
        self.last_round = time.monotonic()
        """When the loop last finished a tick or found itself not leading (liveness)."""

    # -- the loop -----------------------------------------------------------------

    async def run(self, leading: asyncio.Event, stop: asyncio.Event) -> None:
        """Tick while ``leading`` is set, until ``stop`` is."""
        while not stop.is_set():
            self.last_round = time.monotonic()
            if not leading.is_set():
                self.reporter.stop()  # the new leader reports from its own view
                self.reconciler.forget_queue()
                await wait_any(leading, stop)
                self.last_round = time.monotonic()
                self._last_reconcile = None  # a new leader reconciles at once
                self._maintained_in = None
                continue
            started = time.perf_counter()
            try:
                await self.tick()
            except Exception:
                logger.exception("tick failed; the next tick retries")
            self.metrics.tick_seconds.observe(time.perf_counter() - started)
            await self._sleep_until_next_tick(stop)
        self.reporter.stop()

    def _claimed(self, namespace: str) -> None:
        """A namespace's claim was taken: its owed status goes out, its due runs next
        tick (they were put back a second or five ahead)."""
        self.reporter.claimed(namespace)
        self.wakeup.set()

    def stuck(self, *, leading: bool, now: float, limit: float) -> str | None:
        """Why the loop looks stuck, or None: a leader must finish a tick now and then;
        a standby only waits."""
        idle = now - self.last_round
        if leading and idle > limit:
            return f"no tick finished for {idle:.0f}s"
        return None

    async def _sleep_until_next_tick(self, stop: asyncio.Event) -> None:
        now = self.clock.wall()
        target = (now // self.tick_seconds + 1) * self.tick_seconds + _TICK_OFFSET
        self.wakeup.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, target - now)):
                await wait_any(self.wakeup, stop)

    async def tick(self) -> None:
        work: list[Coroutine[Any, Any, Any]] = []
        for due in self.state.index.pop_due(self.clock.wall()):
            kind, namespace, name = due.key
            entry = self.state.jobs.get((namespace, name))
            if entry is None:
                continue
            if kind == "run":
                work.append(self._or_again(due.key, self.publisher.run_due(entry)))
            elif kind == "ttl":
                work.append(self._or_again(due.key, self.reconciler.delete_finished(entry)))
        # Publish every due run (Redis, milliseconds); their status reports go out
        # in the background, so five thousand reports never hold up the next tick.
        await bounded(work, CONCURRENCY)
        await self.publisher.run_triggers()
        await self.publisher.backfills.run_backfills()
        await self.publisher.waiting.run_waiting()
        await self.dead_letters.act()
        await self.publisher.waiting.withdraw()
        monotonic = self.clock.monotonic()
        if self._last_reconcile is None or monotonic - self._last_reconcile >= (
            self.reconcile_seconds
        ):
            self._last_reconcile = monotonic
            await self.reconciler.reconcile()
        # Once per tick period: the ticks a watch event wakes in between (a status owed,
        # a trigger) need no reaping, promotion or depth (three Redis round trips each;
        # benchmarks/rounds.md for their share of the operator's CPU).
        period = self.clock.wall() // self.tick_seconds
        if period != self._maintained_in:
            self._maintained_in = period
            await self.reconciler.maintain_queue()
        self.reporter.start()
        self.metrics.index_size.set(len(self.state.jobs))
        self.metrics.reports_pending.set(self.reporter.pending)
        # Owed status writes go on in the background, beside the ticks (a tick never
        # waits for them); none while a list comes in (WatchState.listing says why).
        self.metrics.status_writes_pending.set(len(self.state.dirty))
        if not self.state.listing(self.clock.monotonic()):
            self.reporter.write_owed()

    async def reconcile(self) -> int:
        return await self.reconciler.reconcile()

    async def _or_again(self, key: IndexKey, work: Coroutine[Any, Any, Any]) -> None:
        """Handle a due entry; on any failure put it back to be tried again shortly.

        The entry left the index when it fell due: an error no handler expected (a
        Redis script error, a bug) must not drop it until the job changes. A retry
        that publishes a run twice is harmless: run IDs are deduplicated.
        """
        try:
            await work
        except Exception:
            self.state.index.put(key, self.clock.wall() + RETRY_DELAY)
            raise
