"""The leader's tick: publish what fell due, write what status owes, keep the queue honest.

Only the replica holding the Lease runs :meth:`Ticker.run`. Every tick it
pops the due entries of the bucket index (nothing else is looked at), asks
:mod:`tickwork.core.planning` what to do, and does it: enqueue, cancel,
write status, post Events. Work per tick is proportional to what is due,
dirty or active — never to the number of ScheduledJobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from tickwork.core.errors import QueueUnavailableError
from tickwork.core.planning import Action, Decision, PendingRun, decide
from tickwork.core.runs import manual_run_id, same_trigger, trigger_key
from tickwork.core.states import JobPhase
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.events import NORMAL, WARNING, EventRecorder, JobRef
from tickwork.kube.status import (
    CONDITION_READY,
    OPERATOR_MANAGER,
    OperatorStatus,
    QueuedRunInfo,
)
from tickwork.queue.messages import EnqueueOutcome, RunLocation, RunMessage
from tickwork.queue.protocol import RunQueue
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import IndexKey, JobEntry, WatchState, reported, status_of

logger = logging.getLogger(__name__)

#: Owed status writes (new or edited jobs) use what is left of each tick, stopping
#: this long before the next one, so a backlog never delays publishing due runs;
#: at least the minimum is spent on them, so they are never starved either.
STATUS_BACKLOG_MARGIN = 0.1
STATUS_BACKLOG_MIN_SECONDS = 0.05
#: Due entries published at once (each is a Redis call).
CONCURRENCY = 64
#: Status reports sent at once. Reports are bookkeeping, not on the path of a
#: run: they go out in the background, after the workers have claimed what fell
#: due, so the API server serves the runs' own writes first.
REPORT_CONCURRENCY = 16
#: How long each round of reports waits for the workers to claim what is queued.
#: While a backlog lasts, reports trickle out one round per hold, and a job's
#: reports merge into one (the latest run, the latest nextRunAt).
REPORT_HOLD_SECONDS = 3.0
#: Reads and conditional applies of one Queued report before it is left to the
#: next tick (each retry means a worker wrote the object in between).
QUEUED_REPORT_ATTEMPTS = 4
#: Publishing offset after each tick boundary: cron runs fall on whole
#: seconds, so ticking just after them publishes a run milliseconds late.
_TICK_OFFSET = 0.005
_RETRY_DELAY = 1.0


def _ref(entry: JobEntry) -> JobRef:
    return JobRef(namespace=entry.namespace, name=entry.name, uid=entry.uid)


@dataclass
class _Report:
    """What one job's status and Events still owe for the due runs handled so far.
    Reports of one job merge: the status written is always the latest wanted one."""

    run_id: str | None = None
    """The latest run published, to report as Queued (unless a worker got there first)."""
    force: bool = False
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) of each Event to post, in order."""


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
    ) -> None:
        self.state = state
        self.queue = queue
        self.kube = kube
        self.events = events
        self.metrics = metrics
        self.tick_seconds = tick_seconds
        self.reconcile_seconds = reconcile_seconds
        self.queue_name = queue_name
        self.holds_lease = holds_lease
        """Whether the Lease is provably still ours (renewed within its duration): checked
        before every publish, not only when the leadership event changes."""
        self.wakeup = asyncio.Event()
        self._last_reconcile = 0.0
        self._reports: dict[tuple[str, str], _Report] = {}
        self._reporter: asyncio.Task[None] | None = None
        self.last_round = time.monotonic()
        """When the loop last finished a tick or found itself not leading (liveness)."""

    # -- the loop -----------------------------------------------------------------

    async def run(self, leading: asyncio.Event, stop: asyncio.Event) -> None:
        """Tick while ``leading`` is set, until ``stop`` is."""
        while not stop.is_set():
            self.last_round = time.monotonic()
            if not leading.is_set():
                self._stop_reporting()  # the new leader reports from its own view
                # Only the leader reports the queue, so autoscalers see one value.
                self.metrics.queue_depth.clear()
                self.metrics.queue_backlog.clear()
                await _wait_any(leading, stop)
                self.last_round = time.monotonic()
                self._last_reconcile = 0.0  # a new leader reconciles at once
                continue
            started = time.perf_counter()
            try:
                await self.tick()
            except Exception:
                logger.exception("tick failed; the next tick retries")
            self.metrics.tick_seconds.observe(time.perf_counter() - started)
            await self._sleep_until_next_tick(stop)
        self._stop_reporting()

    def stuck(self, *, leading: bool, now: float, limit: float) -> str | None:
        """Why the loop looks stuck, or None: a leader must finish a tick now and then;
        a standby only waits."""
        idle = now - self.last_round
        if leading and idle > limit:
            return f"no tick finished for {idle:.0f}s"
        return None

    async def _sleep_until_next_tick(self, stop: asyncio.Event) -> None:
        now = time.time()
        target = (now // self.tick_seconds + 1) * self.tick_seconds + _TICK_OFFSET
        self.wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_wait_any(self.wakeup, stop), timeout=max(0.0, target - now))

    async def tick(self) -> None:
        now = dt.datetime.now(dt.UTC)
        work: list[Coroutine[Any, Any, Any]] = []
        for due in self.state.index.pop_due(now.timestamp()):
            kind, namespace, name = due.key
            entry = self.state.jobs.get((namespace, name))
            if entry is None:
                continue
            if kind == "run":
                work.append(self._or_again(due.key, self._run_due(entry)))
            elif kind == "ttl":
                work.append(self._or_again(due.key, self._delete_finished(entry)))
        # Publish every due run (Redis, milliseconds); their status reports go out
        # in the background, so five thousand reports never hold up the next tick.
        await self._bounded(work)
        for key, token in list(self.state.triggers.items()):
            entry = self.state.jobs.get(key)
            self.state.triggers.pop(key, None)
            if entry is None:
                continue
            try:
                await self._run_now(entry, token)
            except Exception:
                # Tried again next tick; the rest of this tick (reports, reconciling,
                # owed status writes) must not wait on one trigger that keeps failing.
                self.state.triggers.setdefault(key, token)  # a newer token wins
                logger.exception("run-now %s/%s failed; it is retried", *key)
        await self._withdraw()
        if time.monotonic() - self._last_reconcile >= self.reconcile_seconds:
            self._last_reconcile = time.monotonic()
            await self.reconcile()
        await self._maintain_queue()
        self._start_reporting()
        self.metrics.index_size.set(len(self.state.jobs))
        self.metrics.reports_pending.set(len(self._reports))
        # Last: owed status writes fill the rest of this tick, never the next one.
        boundary = (time.time() // self.tick_seconds + 1) * self.tick_seconds
        budget = max(STATUS_BACKLOG_MIN_SECONDS, boundary - time.time() - STATUS_BACKLOG_MARGIN)
        await self._write_dirty(time.monotonic() + budget)

    async def _withdraw(self) -> None:
        """Take queued runs of deleted jobs out of the queue (a run already claimed is
        not touched: its worker finds the job gone)."""
        for run_id in list(self.state.withdrawn):
            withdrawn = await self._cancel(run_id)
            if withdrawn is None:
                return  # Redis is away: next tick
            self.state.withdrawn.pop(run_id, None)
            if withdrawn:
                logger.info("withdrew %s: its job was deleted", run_id)

    async def _cancel(self, run_id: str) -> bool | None:
        """Take a run out of the queue if it has not started; None if Redis is away."""
        try:
            return await self.queue.cancel(run_id)
        except QueueUnavailableError as exc:
            self.metrics.api_errors.labels(operation="queue.cancel").inc()
            logger.warning("could not cancel %s: %s", run_id, exc)
            return None

    # -- due runs -----------------------------------------------------------------

    async def _run_due(self, entry: JobEntry) -> None:
        """Decide and publish; the status report follows in the background."""
        if entry.pending is None or entry.spec is None or entry.suspended:
            return
        pending = entry.pending
        if not self.holds_lease():
            # The Lease may be someone else's by now: publish nothing, keep the entry
            # (a leader again, or the new leader from its own index, publishes it).
            self._reindex(entry, pending, retry=True)
            return
        self.state.busy.add(entry.key)
        try:
            now = dt.datetime.now(dt.UTC)
            decision = decide(entry.facts(), pending, now=now)
            if decision.action is Action.PUBLISH:
                published = await self._publish(entry, decision, now=now)
                if not published:
                    self._reindex(entry, pending, retry=True)
                    return
                self._report_published(entry, decision)
            else:
                self._not_published(entry, decision, now=now)
            entry.pending = decision.following
            self._reindex(entry, decision.following)
        finally:
            self.state.busy.discard(entry.key)

    async def _or_again(self, key: IndexKey, work: Coroutine[Any, Any, Any]) -> None:
        """Handle a due entry; on any failure put it back to be tried again shortly.

        The entry left the index when it fell due: an error no handler expected (a
        Redis script error, a bug) must not drop it until the job changes. A retry
        that publishes a run twice is harmless: run IDs are deduplicated.
        """
        try:
            await work
        except Exception:
            self.state.index.put(key, time.time() + _RETRY_DELAY)
            raise

    def _reindex(self, entry: JobEntry, pending: PendingRun | None, *, retry: bool = False) -> None:
        key = ("run", entry.namespace, entry.name)
        if pending is None:
            self.state.index.remove(key)
        elif retry:
            self.state.index.put(key, time.time() + _RETRY_DELAY)
        else:
            self.state.index.put(key, pending.due_at.timestamp())

    async def _publish(self, entry: JobEntry, decision: Decision, *, now: dt.datetime) -> bool:
        assert decision.scheduled_at is not None  # noqa: S101 - a publish names its run
        assert decision.run_id is not None  # noqa: S101
        if decision.cancel_run_id is not None:
            await self._replace(entry, decision.cancel_run_id)
        message = RunMessage(
            run_id=decision.run_id,
            namespace=entry.namespace,
            name=entry.name,
            uid=entry.uid,
            scheduled_at=decision.scheduled_at.isoformat(),
            generation=entry.generation,
        )
        outcome = await self._enqueue(message)
        if outcome is None:
            return False
        lag = (now - decision.scheduled_at).total_seconds()
        if outcome is EnqueueOutcome.ENQUEUED:
            self.metrics.runs_published.labels(trigger="schedule").inc()
            self.metrics.schedule_lag.observe(max(0.0, lag))
        entry.published_run_id = decision.run_id
        self.state.track_active(entry)
        wanted = replace(
            entry.wanted,
            phase=JobPhase.QUEUED,
            last_schedule_time=decision.scheduled_at,
            next_run_at=decision.following.scheduled_at if decision.following else None,
            queued_run=QueuedRunInfo(
                id=decision.run_id, scheduled_at=decision.scheduled_at, queued_at=now
            ),
        )
        entry.wanted = self._count_missed(wanted, decision)
        return True

    def _report_published(self, entry: JobEntry, decision: Decision) -> None:
        assert decision.scheduled_at is not None  # noqa: S101 - a publish names its run
        assert decision.run_id is not None  # noqa: S101
        report = self._report(entry, run_id=decision.run_id)
        if decision.missed:
            message = (
                f"{decision.missed} run(s) missed while no watcher ran; the latest due "
                f"run ({decision.scheduled_at.isoformat()}) was published"
            )
            report.events.append((WARNING, "MissedRuns", message))

    def _count_missed(self, wanted: OperatorStatus, decision: Decision) -> OperatorStatus:
        if not decision.missed:
            return wanted
        self.metrics.runs_skipped.labels(reason="missed").inc(decision.missed)
        return replace(
            wanted,
            missed_runs=wanted.missed_runs + decision.missed,
            last_missed_time=decision.latest_missed or wanted.last_missed_time,
        )

    def _not_published(self, entry: JobEntry, decision: Decision, *, now: dt.datetime) -> None:
        wanted = entry.wanted
        report = self._report(entry, force=decision.action is Action.MISS)
        following = decision.following.scheduled_at if decision.following else None
        if decision.action is Action.SKIP:
            self.metrics.runs_skipped.labels(reason="forbid").inc()
            wanted = replace(
                wanted,
                next_run_at=following,
                last_schedule_time=decision.scheduled_at,
                missed_runs=wanted.missed_runs + 1 + decision.missed,
                last_missed_time=decision.scheduled_at,
            )
            report.events.append((NORMAL, "RunSkipped", decision.reason))
        else:  # MISS
            self.metrics.runs_skipped.labels(reason="missed").inc(decision.missed)
            wanted = replace(
                wanted,
                next_run_at=following,
                missed_runs=wanted.missed_runs + decision.missed,
                last_missed_time=decision.latest_missed,
                last_schedule_time=decision.latest_missed,
            )
            if entry.spec is not None and entry.spec.one_shot:
                wanted = replace(wanted, phase=JobPhase.FAILED).with_condition(
                    CONDITION_READY, status=False, reason="Missed", message=decision.reason,
                    now=now,
                )  # fmt: skip
            report.events.append((WARNING, "MissedRun", decision.reason))
        entry.wanted = wanted

    async def _replace(self, entry: JobEntry, run_id: str) -> None:
        withdrawn = await self._cancel(run_id)
        if withdrawn is None:
            return
        how = "withdrawn from the queue" if withdrawn else "cancelled by its worker"
        await self.events.post(
            _ref(entry), type_=NORMAL, reason="RunReplaced",
            message=f"run {run_id} {how}: a newer run fell due (concurrencyPolicy Replace)",
        )  # fmt: skip

    async def _enqueue(self, message: RunMessage) -> EnqueueOutcome | None:
        try:
            return await self.queue.enqueue(message)
        except QueueUnavailableError as exc:
            self.metrics.api_errors.labels(operation="queue.enqueue").inc()
            logger.warning("could not publish %s, retrying: %s", message.run_id, exc)
            return None

    # -- manual runs --------------------------------------------------------------

    async def _run_now(self, entry: JobEntry, token: str) -> None:
        key = trigger_key(token)
        if key is None or same_trigger(token, entry.wanted.last_trigger_token):
            return
        if not self.holds_lease():
            self.state.triggers.setdefault(entry.key, token)
            return
        if entry.spec is None or entry.suspended:
            why = "the job is suspended" if entry.suspended else "the spec is invalid"
            entry.wanted = replace(entry.wanted, last_trigger_token=key)
            await self.events.post(
                _ref(entry),
                type_=WARNING,
                reason="RunNowIgnored",
                message=f"run-now {token!r} ignored: {why}",
            )
            await self._write_status(entry, force=False)
            return
        now = dt.datetime.now(dt.UTC)
        run_id = manual_run_id(entry.uid, token)
        message = RunMessage(
            run_id=run_id, namespace=entry.namespace, name=entry.name, uid=entry.uid,
            generation=entry.generation,
        )  # fmt: skip
        outcome = await self._enqueue(message)
        if outcome is None:
            self.state.triggers[entry.key] = token  # try again next tick
            return
        if outcome is EnqueueOutcome.ENQUEUED:
            self.metrics.runs_published.labels(trigger="manual").inc()
        entry.published_run_id = run_id
        self.state.track_active(entry)
        entry.wanted = replace(
            entry.wanted,
            phase=JobPhase.QUEUED,
            last_trigger_token=key,  # fits status whatever the annotation holds
            queued_run=QueuedRunInfo(id=run_id, scheduled_at=now, queued_at=now, manual=True),
        )
        report = self._report(entry, run_id=run_id)
        report.events.append((NORMAL, "RunNow", f"manual run {run_id} published (token {token!r})"))

    # -- reports ------------------------------------------------------------------

    def _report(
        self, entry: JobEntry, *, run_id: str | None = None, force: bool = False
    ) -> _Report:
        """Owe ``entry`` a status report (merged with one still owed)."""
        report = self._reports.setdefault(entry.key, _Report())
        report.run_id = run_id or report.run_id
        report.force = report.force or force
        return report

    def _start_reporting(self) -> None:
        if self._reports and (self._reporter is None or self._reporter.done()):
            self._reporter = asyncio.create_task(self._report_all(), name="status reports")

    def _stop_reporting(self) -> None:
        if self._reporter is not None:
            self._reporter.cancel()
            self._reporter = None
        self._reports.clear()

    async def _report_all(self) -> None:
        """Send owed reports, a round at a time, each round once the workers have
        claimed what is queued (or the hold is over): during a backlog the API
        server serves the runs first, and reports of one job merge meanwhile."""
        while self._reports:
            await self._until_claimed(REPORT_HOLD_SECONDS)
            keys = list(itertools.islice(self._reports, REPORT_CONCURRENCY))
            batch = [(key, self._reports.pop(key)) for key in keys]
            await self._bounded([self._send_report(key, report) for key, report in batch],
                                REPORT_CONCURRENCY)  # fmt: skip
            self.metrics.reports_pending.set(len(self._reports))

    async def _send_report(self, key: tuple[str, str], report: _Report) -> None:
        entry = self.state.jobs.get(key)
        if entry is None:
            return  # deleted meanwhile
        if report.run_id is not None:
            await self._write_queued(entry, report.run_id)
        else:
            await self._write_status(entry, force=report.force)
        for type_, reason, message in report.events:
            await self.events.post(_ref(entry), type_=type_, reason=reason, message=message)

    # -- status -------------------------------------------------------------------

    async def _write_queued(self, entry: JobEntry, run_id: str) -> bool:
        """Report a published run: ``phase: Queued`` with force — unless a worker got there
        first. Workers claim a run within milliseconds, and a quick one can finish before
        this report goes out; a forced Queued would then overwrite the worker's Running or
        Succeeded for good. So the report is conditional: if status (as last seen) already
        names the run, the phase the worker set is kept, and the apply carries that
        version's resourceVersion, so a worker's write since makes it a 409. Then the
        object is read afresh and the decision made again."""
        from_watch = True  # first decide from what the watch showed: no extra read
        for _ in range(QUEUED_REPORT_ATTEMPTS):
            latest = self.state.jobs.get(entry.key)
            if latest is None or latest.uid != entry.uid:
                return False  # deleted (or re-created) meanwhile
            entry = latest
            if from_watch and entry.resource_version:
                status, version = entry.observed, entry.resource_version
            else:
                try:
                    current = await self.kube.get_job(entry.namespace, entry.name)
                except KubeApiError as exc:
                    if not exc.not_found:
                        self.metrics.api_errors.labels(operation="job.get").inc()
                        self.state.dirty[entry.key] = None
                    return False
                status, version = status_of(current), str(current["metadata"]["resourceVersion"])
            if reported(status, run_id):
                entry.wanted = replace(entry.wanted, phase=status.phase)
            if await self._write_status(entry, force=True, resource_version=version):
                return True
            if entry.key not in self.state.dirty:
                return False  # deleted meanwhile: the watch will tell us
            self.state.dirty.pop(entry.key, None)  # changed meanwhile: read and decide again
            from_watch = False
        self.state.dirty[entry.key] = None
        return False

    async def _write_status(
        self, entry: JobEntry, *, force: bool, resource_version: str | None = None
    ) -> bool:
        """Send the operator's share. Without ``force`` a phase the worker changed
        meanwhile makes this a conflict: the next watch event refreshes it and
        the write is retried."""
        wanted = entry.wanted
        try:
            written = await self.kube.apply_job_status(
                entry.namespace, entry.name, entry.uid, wanted.apply_body(),
                field_manager=OPERATOR_MANAGER, force=force, resource_version=resource_version,
            )  # fmt: skip
        except KubeApiError as exc:
            if exc.not_found:
                return False  # deleted meanwhile; the watch will tell us
            if exc.conflict:
                self.state.dirty[entry.key] = None
                return False
            self.metrics.api_errors.labels(operation="status.apply").inc()
            logger.warning("status of %s/%s not written: %s", entry.namespace, entry.name, exc)
            self.state.dirty[entry.key] = None
            return False
        entry.written = wanted
        entry.resource_version = str(written.get("metadata", {}).get("resourceVersion") or "")
        self.state.dirty.pop(entry.key, None)
        return True

    async def _until_claimed(self, limit: float) -> None:
        """Wait (at most ``limit`` s) until no published run is still waiting for a worker."""
        deadline = time.monotonic() + limit
        with contextlib.suppress(QueueUnavailableError):
            # Redis has no event for "claimed": poll the O(1) depth briefly.
            while (await self.queue.depth()).ready > 0 and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)

    async def _bounded(
        self, work: list[Coroutine[Any, Any, Any]], limit_to: int = CONCURRENCY
    ) -> None:
        """Await ``work`` with at most ``limit_to`` calls in flight: a thousand runs due
        on the same minute are published in parallel, not one after another."""
        limit = asyncio.Semaphore(limit_to)

        async def one(job: Coroutine[Any, Any, Any]) -> None:
            async with limit:
                try:
                    await job
                except Exception:
                    logger.exception("handling a due entry failed")

        await asyncio.gather(*(one(job) for job in work))

    async def _write_dirty(self, deadline: float) -> None:
        """Work off owed status writes until ``deadline`` (monotonic): ten thousand jobs
        applied at once must not hold back the next tick's due runs."""
        while time.monotonic() < deadline:
            # A job with a report still to go gets its status written by that report.
            owed = (key for key in self.state.dirty if key not in self._reports)
            keys = list(itertools.islice(owed, REPORT_CONCURRENCY))
            if not keys:
                break
            await self._bounded([self._write_one_dirty(key) for key in keys], REPORT_CONCURRENCY)
        self.metrics.status_writes_pending.set(len(self.state.dirty))

    async def _write_one_dirty(self, key: tuple[str, str]) -> None:
        entry = self.state.jobs.get(key)
        self.state.dirty.pop(key, None)
        if entry is None:
            return
        newly_invalid = entry.spec is None and entry.written.phase is not JobPhase.INVALID
        force = entry.spec is None or entry.suspended
        if await self._write_status(entry, force=force) and newly_invalid:
            await self.events.post(
                _ref(entry), type_=WARNING, reason="InvalidSpec",
                message=f"{entry.invalid_reason}; fix the spec and apply it again",
            )  # fmt: skip

    # -- housekeeping -------------------------------------------------------------

    async def _delete_finished(self, entry: JobEntry) -> None:
        try:
            await self.kube.delete_job(entry.namespace, entry.name, entry.uid)
            logger.info("deleted finished one-shot job %s/%s (ttl)", entry.namespace, entry.name)
        except KubeApiError as exc:
            if not exc.not_found and not exc.conflict:
                self.metrics.api_errors.labels(operation="job.delete").inc()
                self.state.index.put(("ttl", entry.namespace, entry.name), time.time() + 30)

    async def reconcile(self) -> int:
        """Re-publish runs that status shows active but the queue has lost."""
        if not self.holds_lease():
            return 0
        republished = 0
        unheard: list[str] = []
        for entry in self.state.active_jobs():
            run_id = entry.active_run_id()
            if run_id is None:
                continue
            try:
                location = await self.queue.locate(run_id)
                if location is RunLocation.DONE:
                    # Finished (or cancelled) but status never heard: stop counting
                    # it as active, or Forbid would skip every later run.
                    entry.settled_run_ids.add(run_id)
                    self.state.track_active(entry)
                    unheard.append(run_id)
                    continue
                if location is not None:
                    continue
                current = entry.observed.current_run
                attempt = current.attempt if current is not None and current.id == run_id else 1
                scheduled = current.scheduled_at if current is not None else None
                queued = entry.observed.queued_run
                if scheduled is None and queued is not None and queued.id == run_id:
                    scheduled = None if queued.manual else queued.scheduled_at
                message = RunMessage(
                    run_id=run_id, namespace=entry.namespace, name=entry.name, uid=entry.uid,
                    attempt=attempt, scheduled_at=scheduled.isoformat() if scheduled else None,
                    generation=entry.generation,
                )  # fmt: skip
                if await self.queue.enqueue(message) is EnqueueOutcome.ENQUEUED:
                    republished += 1
                    self.metrics.runs_published.labels(trigger="republish").inc()
                    logger.warning("re-published lost run %s", run_id)
            except QueueUnavailableError as exc:
                self.metrics.api_errors.labels(operation="queue.reconcile").inc()
                logger.warning("reconcile postponed: %s", exc)
                return republished
        if unheard:
            # Normal for a moment under load (the watch is behind the workers' writes);
            # if it persists, status writes are failing: see the workers' logs.
            logger.warning("%d run(s) done in the queue but not yet in status, e.g. %s",
                           len(unheard), ", ".join(unheard[:3]))  # fmt: skip
        self.metrics.reconciliations.inc()
        return republished

    async def _maintain_queue(self) -> None:
        try:
            await self.queue.reap_expired()
            await self.queue.promote_due()
            depth = await self.queue.depth()
        except QueueUnavailableError as exc:
            self.metrics.api_errors.labels(operation="queue.maintain").inc()
            logger.warning("queue maintenance postponed: %s", exc)
            return
        for state, value in (
            ("ready", depth.ready), ("in_flight", depth.in_flight),
            ("delayed", depth.delayed), ("dead", depth.dead), ("parked", depth.parked),
        ):  # fmt: skip
            self.metrics.queue_depth.labels(state=state).set(value)
        self.metrics.queue_backlog.labels(queue=self.queue_name).set(depth.backlog)
        self.metrics.queue_remembered.set(depth.remembered)
        self.metrics.queue_dead_oldest.set(depth.oldest_dead_seconds)
        if depth.memory_used_bytes is not None:
            self.metrics.redis_memory_used.set(depth.memory_used_bytes)
            self.metrics.redis_memory_max.set(depth.memory_max_bytes or 0)


async def _wait_any(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
