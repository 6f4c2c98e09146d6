"""The leader's status writes and Events: reports of what it published (sent in the
background, after the workers have claimed the runs), and the owed writes of new
or edited jobs (in what is left of each tick).

The operator writes only its own share of status (field manager
``tickwork-operator``); see :class:`~tickwork.kube.status.OperatorStatus`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from tickwork.core.errors import QueueUnavailableError
from tickwork.core.states import JobPhase
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.events import WARNING, EventRecorder, JobRef
from tickwork.kube.status import OPERATOR_MANAGER
from tickwork.queue.protocol import RunQueue
from tickwork_operator.clock import Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import JobEntry, JobKey, WatchState, reported, status_of

logger = logging.getLogger(__name__)

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


def job_ref(entry: JobEntry) -> JobRef:
    return JobRef(namespace=entry.namespace, name=entry.name, uid=entry.uid)


@dataclass
class Report:
    """What one job's status and Events still owe for the due runs handled so far.
    Reports of one job merge: the status written is always the latest wanted one."""

    run_id: str | None = None
    """The latest run published, to report as Queued (unless a worker got there first)."""
    force: bool = False
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


class Reporter:
    def __init__(
        self,
        *,
        state: WatchState,
        queue: RunQueue,
        kube: KubeClient,
        events: EventRecorder,
        metrics: OperatorMetrics,
        clock: Clock,
        hold_seconds: float = REPORT_HOLD_SECONDS,
    ) -> None:
        self.state = state
        self.queue = queue
        self.kube = kube
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.hold_seconds = hold_seconds
        self._reports: dict[JobKey, Report] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        """Jobs with a report still to send."""
        return len(self._reports)

    def owe(self, entry: JobEntry, *, run_id: str | None = None, force: bool = False) -> Report:
        """Owe ``entry`` a status report (merged with one still owed)."""
        report = self._reports.setdefault(entry.key, Report())
        report.run_id = run_id or report.run_id
        report.force = report.force or force
        return report

    def start(self) -> None:
        """Send what is owed, in the background."""
        if self._reports and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._report_all(), name="status reports")

    def stop(self) -> None:
        """Drop what is owed: a new leader reports from its own view."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._reports.clear()

    async def idle(self) -> None:
        """Wait until the reports sent in the background are out."""
        if self._task is not None:
            await self._task

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
        if report.run_id is not None:
            await self._write_queued(entry, report.run_id)
        else:
            await self.write(entry, force=report.force)
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
                        self.state.owe_status(entry.key)
                    return False
                status, version = status_of(current), str(current["metadata"]["resourceVersion"])
            if reported(status, run_id):
                entry.wanted = replace(entry.wanted, phase=status.phase)
            if await self.write(entry, force=True, resource_version=version):
                return True
            if not self.state.owes_status(entry.key):
                return False  # deleted meanwhile: the watch will tell us
            self.state.status_written(entry.key)  # changed meanwhile: read and decide again
            from_watch = False
        self.state.owe_status(entry.key)
        return False

    async def write(
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
                self.state.owe_status(entry.key)
                return False
            self.metrics.api_errors.labels(operation="status.apply").inc()
            logger.warning("status of %s/%s not written: %s", entry.namespace, entry.name, exc)
            self.state.owe_status(entry.key)
            return False
        entry.written = wanted
        entry.resource_version = str(written.get("metadata", {}).get("resourceVersion") or "")
        self.state.status_written(entry.key)
        return True

    async def write_owed(self, deadline: float) -> None:
        """Work off owed status writes until ``deadline`` (monotonic): ten thousand jobs
        applied at once must not hold back the next tick's due runs."""
        while self.clock.monotonic() < deadline:
            # A job with a report still to go gets its status written by that report.
            owed = (key for key in self.state.dirty if key not in self._reports)
            keys = list(itertools.islice(owed, REPORT_CONCURRENCY))
            if not keys:
                break
            await bounded([self._write_one_owed(key) for key in keys], REPORT_CONCURRENCY)
        self.metrics.status_writes_pending.set(len(self.state.dirty))

    async def _write_one_owed(self, key: JobKey) -> None:
        entry = self.state.jobs.get(key)
        self.state.status_written(key)
        if entry is None:
            return
        newly_invalid = entry.spec is None and entry.written.phase is not JobPhase.INVALID
        force = entry.spec is None or entry.suspended
        if await self.write(entry, force=force) and newly_invalid:
            await self.events.post(
                job_ref(entry), type_=WARNING, reason="InvalidSpec",
                message=f"{entry.invalid_reason}; fix the spec and apply it again",
            )  # fmt: skip
