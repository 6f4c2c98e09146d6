"""The leader's status writes and Events: reports of what it published (sent in the
background, after the workers have claimed the runs), and the owed writes of new
or edited jobs (in the background too, beside the ticks).

Over 400 lines: the operator's status writes and its Events share one record of what
is owed, written in batches with one retry policy.

The operator writes only its own share of status (field manager
``tickwork-operator``, :class:`~tickwork.api.models.OperatorStatus`): no worker
writes any of its fields, so a report never reads, merges or races a worker's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import itertools
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from tickwork.api.models import OperatorStatus, RunRecord
from tickwork.core.annotations import RESUME_ANNOTATION
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.states import JobPhase, RunState
from tickwork.kube.client import KubeApiError
from tickwork.kube.events import NORMAL, WARNING, JobRef
from tickwork.kube.status import (
    CONDITION_PAUSED,
    OPERATOR_MANAGER,
    operator_body,
    record_body,
    shown_fields,
)
from tickwork_operator.claims import schedules
from tickwork_operator.parts import Part, Shared
from tickwork_operator.state import JobEntry, JobKey

logger = logging.getLogger(__name__)

#: Status reports sent at once. Reports are bookkeeping, not on the path of a
#: run: they go out in the background, after the workers have claimed what fell
#: due, so the API server serves the runs' own writes first.
REPORT_CONCURRENCY = 16
#: Owed status writes (new or edited jobs) in flight at once: the API server's rate of
#: first status writes was best at 32 of 16 / 32 / 64 (209 / 221 / 193 per second at
#: 100,000 jobs; benchmarks/watcher.py, ``status_write_ceiling``).
OWED_CONCURRENCY = 32
#: Owed jobs taken per pass over ``WatchState.dirty``.
OWED_BATCH = 8 * OWED_CONCURRENCY
#: How long each round of reports waits for the workers to claim what is queued.
#: While a backlog lasts, reports trickle out one round per hold, and a job's
#: reports merge into one (the latest run, the latest nextRunAt).
REPORT_HOLD_SECONDS = 3.0


def pause_news(before: OperatorStatus, after: OperatorStatus) -> list[tuple[str, str, str]]:
    """The Events a status write tells, once written: a pause that began (naming the
    runs that failed), or one that ended (and why)."""
    was = before.failure_streak is not None and before.failure_streak.paused_at is not None
    streak = after.failure_streak
    if streak is not None and streak.paused_at is not None:
        if was:
            return []
        paused = next((c for c in after.conditions if c.type == CONDITION_PAUSED), None)
        text = paused.message if paused is not None else f"paused: {', '.join(streak.run_ids)}"
        return [(WARNING, "Paused", text)]
    if not was:
        return []
    if after.last_resume_token != before.last_resume_token:
        why = f"a new {RESUME_ANNOTATION} token, {after.last_resume_token!r}"
    else:
        why = f"the spec changed, generation {after.observed_generation}"
    return [(NORMAL, "Resumed", f"resumed ({why}): runs are published again, from now on")]


def job_ref(entry: JobEntry) -> JobRef:
    return JobRef(namespace=entry.namespace, name=entry.name, uid=entry.uid)


@dataclass
class Report:
    """What one job's status and Events still owe for the due runs handled so far.
    Reports of one job merge: the status written is always the latest wanted one."""

    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) of each Event to post, in order."""


async def bounded(work: list[Coroutine[Any, Any, Any]], limit_to: int) -> None:
    """Await ``work`` with at most ``limit_to`` calls in flight; a failure is logged,
    it does not stop the others."""
    limit = asyncio.Semaphore(limit_to)

    async def one(job: Coroutine[Any, Any, Any]) -> None:
        async with limit:
            try:
                await job
            except Exception:
                logger.exception("handling a due entry failed")

    await asyncio.gather(*(one(job) for job in work))


class Reporter(Part):
    def __init__(self, shared: Shared, *, hold_seconds: float = REPORT_HOLD_SECONDS) -> None:
        super().__init__(shared)
        self.hold_seconds = hold_seconds
        self._reports: dict[JobKey, Report] = {}
        self._task: asyncio.Task[None] | None = None
        self._writing: set[JobKey] = set()
        """Jobs whose status write is on its way."""
        self._owed_task: asyncio.Task[None] | None = None
        self._candidates: collections.deque[JobKey] = collections.deque()
        """Jobs taken from ``WatchState.owed_news`` and not looked at yet."""

    @property
    def pending(self) -> int:
        """Jobs with a report still to send."""
        return len(self._reports)

    def owe(self, entry: JobEntry) -> Report:
        """Owe ``entry`` a status report (merged with one still owed)."""
        return self._reports.setdefault(entry.key, Report())

    def claimed(self, namespace: str) -> None:
        """The claim on ``namespace`` was taken: what its jobs are owed is written now."""
        self._candidates.extend(key for key in self.state.dirty if key[0] == namespace)

    def start(self) -> None:
        """Send what is owed, in the background."""
        if self._reports and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._report_all(), name="status reports")

    def stop(self) -> None:
        """Drop what is owed: a new leader reports from its own view."""
        for task in (self._task, self._owed_task):
            if task is not None:
                task.cancel()
        self._task = self._owed_task = None
        self._reports.clear()
        # Jobs dirty behind a dropped report are owed now (a write still on its way
        # owes its job again as it is cancelled): the next leadership looks at every
        # dirty job once.
        self._candidates = collections.deque(self.state.dirty)

    async def idle(self) -> None:
        """Wait until the reports and owed writes sent in the background are out."""
        for task in (self._task, self._owed_task):
            if task is not None:
                await task

    async def _report_all(self) -> None:
        """Send owed reports, a round at a time, each round once the workers have
        claimed what is queued (or the hold is over): during a backlog the API
        server serves the runs first, and reports of one job merge meanwhile."""
        while self._reports:
            await self._until_claimed(self.hold_seconds)
            keys = list(itertools.islice(self._reports, REPORT_CONCURRENCY))
            batch = [(key, self._reports.pop(key)) for key in keys]
            await bounded([self._send(key, report) for key, report in batch], REPORT_CONCURRENCY)
            self.metrics.reports_pending.set(len(self._reports))

    async def _send(self, key: JobKey, report: Report) -> None:
        entry = self.state.jobs.get(key)
        if entry is None:
            return  # deleted meanwhile
        await self.write(entry)
        for type_, reason, message in report.events:
            await self.events.post(job_ref(entry), type_=type_, reason=reason, message=message)

    async def _until_claimed(self, limit: float) -> None:
        """Wait (at most ``limit`` s) until no published run is still waiting for a worker."""
        deadline = self.clock.monotonic() + limit
        with contextlib.suppress(QueueUnavailableError):
            # Redis has no event for "claimed": poll the O(1) depth briefly.
            while (await self.queue.depth()).ready > 0 and self.clock.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)

    # -- writes -------------------------------------------------------------------

    async def write(self, entry: JobEntry) -> bool:
        """Send the operator's share: every field of it, none of anyone else's, so it
        is applied unconditionally (forced: after an upgrade it takes over ``phase``
        from the workers of older versions)."""
        if not schedules(self.claims, entry.namespace):
            # Another release schedules the namespace (or the claim lapsed): its status
            # is that one's to write. Still owed, written once the claim is ours.
            self.state.owe_status(entry.key)
            return False
        if entry.key in self._writing:
            # One write per job at a time: two on their way may reach the API server
            # in one order and answer in the other, and the older share would stay
            # written while the newer is taken as written. This one goes next tick.
            self.state.owe_status(entry.key)
            return False
        wanted, before = entry.wanted, entry.written
        body = operator_body(wanted)
        apart = not self.state.keeps_schedule(entry)
        shown = self.state.shows(entry) if apart else ()
        if apart:
            body.update(shown_fields(list(shown)))
        self._writing.add(entry.key)
        try:
            if apart and not shown and entry.observed.shown:
                await self._unshow(entry)  # first: no reader sees the new phase beside them
            # Forced: the next runs and the phase are also written by the runs' records
            # (each its own manager); the operator's write takes them over knowingly.
            await self.kube.apply_job_status(
                entry.namespace,
                entry.name,
                entry.uid,
                body,
                field_manager=OPERATOR_MANAGER,
                force=True,
            )
        except KubeApiError as exc:
            if exc.not_found:
                return False  # deleted meanwhile; the watch will tell us
            self.metrics.api_errors.labels(operation="status.apply").inc()
            logger.warning("status of %s/%s not written: %s", entry.namespace, entry.name, exc)
            self.state.owe_status(entry.key)
            return False
        except BaseException:
            self.state.owe_status(entry.key)  # not written (cancelled, a broken connection)
            raise
        finally:
            self._writing.discard(entry.key)
        self.state.wrote(entry, wanted)
        for type_, reason, message in pause_news(before, wanted):
            await self.events.post(job_ref(entry), type_=type_, reason=reason, message=message)
        return True

    async def _unshow(self, entry: JobEntry) -> None:
        """The job has no next run to show, and status shows some: a run's manager may
        hold them (a run's record wrote them last), and the operator's apply cannot
        take away what it does not own. One merge patch removes them, whoever holds
        them, before the apply (a reader never sees a suspended or paused job with a
        next run); the apply's answer is watched like any other."""
        try:
            await self.kube.merge_job_status(
                entry.namespace,
                entry.name,
                {"nextRunAt": None, "nextRuns": None},
                field_manager=OPERATOR_MANAGER,
            )
        except KubeApiError as exc:
            if not exc.not_found:
                raise

    def write_owed(self) -> asyncio.Task[None] | None:
        """Write what status owes (new or edited jobs) in the background, until none is
        owed (:meth:`_write_owed`): the writer, or None if none may be owed. Called every
        tick; one writer runs at a time."""
        if self._owed_task is not None and not self._owed_task.done():
            return self._owed_task
        if not self.state.owed_news and not self._candidates:
            return None  # none may have become owed since the last look
        self._owed_task = asyncio.create_task(self._write_owed(), name="owed status writes")
        return self._owed_task

    async def _write_owed(self) -> None:
        """Keep ``OWED_CONCURRENCY`` owed writes in flight, a new one starting as each
        ends, until none is owed or a list comes in (:meth:`WatchState.listing`; the
        next tick after it starts again). The writes run beside the ticks, never in
        them: a tick that waited for them would hold up the due runs behind it, and
        ticks that stopped them at their end left the API server idle at each
        boundary (0.60-0.78 of its rate of first statuses, ``benchmarks/watcher.py``).

        While runs fall due, thousands of jobs can be dirty with a report on its way,
        and every watch event wakes a tick: only the jobs that may have become owed
        since the last look are looked at (:meth:`_owed_keys`), never all of ``dirty``
        (passes over it were a large share of the operator's CPU profile at thousands
        of runs a minute: benchmarks/rounds.md)."""
        room = asyncio.Semaphore(OWED_CONCURRENCY)
        writes: dict[asyncio.Task[None], JobKey] = {}

        def ended(task: asyncio.Task[None]) -> None:
            writes.pop(task, None)
            room.release()

        try:
            while not self.state.listing(self.clock.monotonic()):
                keys = self._owed_keys(started=set(writes.values()))
                if not keys:
                    if not writes:
                        break
                    await asyncio.wait(list(writes), return_when=asyncio.FIRST_COMPLETED)
                    continue
                for at, key in enumerate(keys):
                    # (Cancelled here, by stop(): it looks at every dirty job again.)
                    await room.acquire()
                    if self.state.listing(self.clock.monotonic()):
                        room.release()
                        self._candidates.extendleft(reversed(keys[at:]))  # after the list
                        break
                    task = asyncio.create_task(self._write_one_owed(key))
                    writes[task] = key
                    task.add_done_callback(ended)
                self.metrics.status_writes_pending.set(len(self.state.dirty))
            if writes:
                await asyncio.wait(list(writes))
        finally:
            on_their_way = list(writes)
            for task in on_their_way:
                task.cancel()  # stopped (the lease lost): each is owed again
            if on_their_way:
                await asyncio.wait(on_their_way)
            self.metrics.status_writes_pending.set(len(self.state.dirty))

    def _owed_keys(self, *, started: set[JobKey]) -> list[JobKey]:
        """The next jobs owed a write, from those that may have become owed since the
        last look (``WatchState.owed_news``), each looked at once. A job with a report
        still to go gets its status written by that report, and one being written is
        owed again if it changed meanwhile: either ends by owing the job again (its
        news) if it is still dirty, so passing over it now loses nothing."""
        news = self.state.owed_news
        if news:
            self._candidates.extend(news)
            news.clear()
        keys: dict[JobKey, None] = {}
        while self._candidates and len(keys) < OWED_BATCH:
            key = self._candidates.popleft()
            if (
                key in self.state.dirty
                and key not in self._reports
                and key not in self._writing
                and key not in started
                and schedules(self.claims, key[0])
            ):
                keys[key] = None
        return list(keys)

    async def _write_one_owed(self, key: JobKey) -> None:
        if key not in self.state.dirty:
            return  # written meanwhile (by a report)
        entry = self.state.jobs.get(key)
        self.state.status_written(key)
        if entry is None:
            return
        newly_invalid = entry.spec is None and entry.written.phase is not JobPhase.INVALID
        try:
            written = await self.write(entry)
        except Exception:
            logger.exception("the status write of %s/%s failed", *key)
            return
        if written and newly_invalid:
            await self.events.post(
                job_ref(entry),
                type_=WARNING,
                reason="InvalidSpec",
                message=f"{entry.invalid_reason}; {_remedy(entry)}",
            )

    async def record_cancelled(
        self, entry: JobEntry, run_id: str, scheduled_at: dt.datetime, reason: str
    ) -> bool:
        """Record a run that no worker will see (taken out of the buffer or the queue)
        as Cancelled, under the run's own field manager: the record has one writer,
        since a worker never claims the run. False if the API server refused it (the
        cancel request in status then makes any worker that claims it record it)."""
        spec = entry.spec
        record = RunRecord(
            id=run_id,
            scheduled_at=scheduled_at,
            outcome=RunState.CANCELLED,
            attempts=0,
            finished_at=self.clock.now(),
            error=reason,
        )
        body = record_body(
            record,
            successful=spec.history.successful_runs if spec else 3,
            failed=spec.history.failed_runs if spec else 3,
        )
        try:
            # Forced: ``lastRun`` and the next runs belong to whichever record was last.
            await self.apply_as_run(entry, run_id, body, force=True)
        except KubeApiError as exc:
            if not exc.not_found:
                self.metrics.api_errors.labels(operation="status.apply").inc()
                logger.warning("record of cancelled run %s not written: %s", run_id, exc)
            return False
        return True


def _remedy(entry: JobEntry) -> str:
    """What makes an Invalid job valid again: its spec, or a Calendar it names."""
    if entry.calendar_spec is not None:
        return "create or fix the Calendar (or edit spec.calendars); no restart is needed"
    return "fix the spec and apply it again"
