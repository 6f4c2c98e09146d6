"""The worker's access to a job: read it to decide whether a run may start, and
write the worker's share of its status (the Running mark, Retrying, the run's
record), conditional on the resourceVersion each write was built on.

Reads come from the worker's watched copy (:class:`~tickwork.kube.cache.JobCache`)
when it can vouch for them, else from the API server; every status write is
made under a lease the worker still holds (:class:`~tickwork_worker.lease.Lease`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from tickwork.api.models import RunRecord, ScheduledJob
from tickwork.core.planning import ConcurrencyPolicy
from tickwork.core.states import JobPhase, RunState, job_phase
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.status import WORKER_MANAGER, finished_body
from tickwork.queue.messages import Claim
from tickwork_worker.decisions import Outcome, scheduled_at
from tickwork_worker.lease import Lease
from tickwork_worker.metrics import WorkerMetrics

logger = logging.getLogger(__name__)

_STATUS_ATTEMPTS = 6
#: How long a run's record is retried while the API server is away; past this it
#: is dead-lettered with its outcome (an outage this long wants a person anyway).
_RECORD_PATIENCE_SECONDS = 600.0
#: Status writes in flight at once per worker. Reads of jobs whose runs are
#: starting are not limited, so at the top of a busy minute they go first.
_STATUS_WRITES_IN_FLIGHT = 16
#: A run shorter than this finishes before another run of its job can start
#: and finish around it (schedules are at least a minute apart), except with
#: concurrencyPolicy Allow, where manual runs may overlap within the window.
_QUICK_RUN_SECONDS = 1.0
_OVERLAP_WINDOW_SECONDS = 0.2
#: Conditional status writes overtaken by another writer, built anew each time,
#: before the write is given up (it takes a burst of writes to one job).
_OVERTAKEN_ATTEMPTS = 20


class RunningMarker:
    """Marks a run Running in status — at once, or only if it is still going after
    ``delay`` seconds: a run that ends sooner goes straight from Queued to its
    outcome, one status write fewer when thousands of short runs start together.
    The final write never overtakes the Running one (``settle`` waits for it)."""

    def __init__(self, write: Callable[[], Awaitable[object]], delay: float) -> None:
        self._write = write
        self._delay = delay
        self._writing = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._delay <= 0:
            await self._write()
            return
        self._task = asyncio.create_task(self._later())

    async def _later(self) -> None:
        await asyncio.sleep(self._delay)  # the grace a quick run gets
        self._writing = True
        await self._write()

    async def settle(self) -> None:
        if self._task is None:
            return
        if self._writing:
            await self._task
        else:
            self._task.cancel()


class JobAccess:
    def __init__(self, *, kube: KubeClient, metrics: WorkerMetrics, jobs: JobCache | None) -> None:
        self.kube = kube
        self.metrics = metrics
        self.jobs = jobs
        self._writes = asyncio.Semaphore(_STATUS_WRITES_IN_FLIGHT)

    async def read(self, claim: Claim, *, to_start: bool = False) -> ScheduledJob | None:
        """The job as the watched copy has it if that can vouch for it, else as the API
        server has it.

        ``to_start``: the job decides whether the run may start, so its spec is never
        older than the API server's at this moment. The copy serves if the job's
        current metadata (one cheap consistent read, see ``job_metadata``) shows no
        spec change since the copy's (a suspend, an edit: each raises the generation)
        and the job is neither gone nor being deleted: a watch lagging behind the API
        server cannot start a run that a suspend or a delete has already stopped.
        (Writes of status need no such care: they are conditional on the
        resourceVersion they were built on.)"""
        message = claim.message
        body = None
        # A redelivered or requeued run is checked against the API server itself: it
        # may have finished moments ago, and only the truth may decide to run it again.
        if self.jobs is not None and message.attempt == 1 and not message.requeued:
            generation = message.generation or 0
            if to_start:
                now = await self.kube.job_metadata(message.namespace, message.name)
                if now is None:
                    return None  # gone
                if now.get("uid") != message.uid or "deletionTimestamp" in now:
                    generation = -1  # read the object itself: why_skip says why not
                else:
                    generation = max(generation, int(now.get("generation") or 0))
            if generation >= 0:
                body = self.jobs.get(message.namespace, message.name, message.uid, generation)
        if body is not None:
            self.metrics.job_reads.labels(source="cache").inc()
        else:
            self.metrics.job_reads.labels(source="api").inc()
            body = await self.get(claim)
            if body is None:
                return None
        try:
            return ScheduledJob.model_validate(body)
        except ValidationError:
            return None  # the operator reports invalid specs; nothing can run

    async def get(self, claim: Claim) -> dict[str, Any] | None:
        """The job from the API server itself (None if gone), taken into the copy."""
        message = claim.message
        since = self.jobs.mark() if self.jobs is not None else 0
        try:
            body = await self.kube.get_job(message.namespace, message.name)
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise
        if self.jobs is not None:
            self.jobs.observe(body, since=since)
        return body

    async def reread(self, claim: Claim) -> ScheduledJob | None:
        """The job from the API server itself; None if it is gone or another object."""
        body = await self.get(claim)
        if body is None or (body.get("metadata") or {}).get("uid") != claim.message.uid:
            return None
        try:
            return ScheduledJob.model_validate(body)
        except ValidationError:
            return None

    async def fresh(self, claim: Claim, job: ScheduledJob) -> ScheduledJob:
        """The job re-read after an attempt; the copy at hand if the API server is away
        or refuses: an attempt that ran must be recorded, not redelivered and run again."""
        try:
            return await self.read(claim) or job
        except KubeApiError as exc:
            logger.warning("recording on the job as read before (%s)", exc,
                           extra={"run_id": claim.run_id})  # fmt: skip
            return job

    async def finish(
        self,
        claim: Claim,
        lease: Lease,
        job: ScheduledJob,
        outcome: Outcome,
        *,
        started_at: dt.datetime | None,
    ) -> bool:
        """Write the run's record into status; False if the API server refused it.

        The history is re-sent whole (server-side apply), so it is re-read
        when another run of the job may have finished meanwhile: the run took a
        while, or runs of this job may overlap. A quick run needs no extra read from
        the API server; the watched copy is always worth a look.
        """
        elapsed = (dt.datetime.now(dt.UTC) - started_at).total_seconds() if started_at else 0.0
        may_overlap = job.spec.concurrency_policy is ConcurrencyPolicy.ALLOW
        stale = (
            self.jobs is not None
            or started_at is None
            or elapsed > _QUICK_RUN_SECONDS
            or (may_overlap and elapsed > _OVERLAP_WINDOW_SECONDS)
        )
        fresh = await self.fresh(claim, job) if stale else job
        record = RunRecord(
            id=claim.run_id,
            scheduled_at=scheduled_at(claim.message, started_at or dt.datetime.now(dt.UTC)),
            outcome=outcome.state,
            attempts=claim.message.attempt,
            started_at=started_at,
            finished_at=dt.datetime.now(dt.UTC),
            result=outcome.result,
            error=outcome.error,
        )

        def build(current: ScheduledJob) -> dict[str, Any]:
            other = current.status.current_run
            if other is not None and other.id == claim.run_id:
                other = None  # this run's own mark: removed with the record
            phase = job_phase(
                suspended=current.spec.suspend,
                valid=True,
                one_shot=current.spec.one_shot,
                current_run=other.state if other is not None else None,
                last_outcome=outcome.state,
            )
            if outcome.state is RunState.SKIPPED and phase is JobPhase.CANCELLED:
                phase = JobPhase.SUSPENDED
            return finished_body(
                current.status,
                record,
                phase=phase,
                successful_history=current.spec.history.successful_runs,
                failed_history=current.spec.history.failed_runs,
            )

        return await self.write(claim, lease, fresh, build, record=True)

    async def write(
        self,
        claim: Claim,
        lease: Lease,
        job: ScheduledJob,
        build: Callable[[ScheduledJob], dict[str, Any]],
        *,
        record: bool = False,
    ) -> bool:
        """Apply the worker's share of status, built on ``job``; False if the API
        server refused it.

        The share includes the whole history, so the apply is conditional on the
        resourceVersion it was built on: if another writer got in first (another run
        of the job finished, the operator reported), the job is read again from the
        API server and the share built anew. Runs of one job that end together
        therefore never drop each other's records or clear each other's current run.

        While the API server is away, a progress mark (Running, Retrying) is given
        up after a few tries. The run's record is not: acknowledging a run whose
        outcome status never heard of would lose it, so the worker keeps trying
        (its heartbeat keeps the lease) until the write lands, the job is gone, the
        worker shuts down and hands the run back, or ten minutes have passed (the
        caller then dead-letters the run with its outcome).
        """
        message = claim.message
        delay = 0.5
        attempt = 0
        give_up = time.monotonic() + _RECORD_PATIENCE_SECONDS
        overtaken = 0
        current: ScheduledJob | None = job
        while True:
            attempt += 1
            lease.check()  # status is written only under a lease this worker still holds
            try:
                await self._apply_on(claim, current, build)
            except KubeApiError as exc:
                if exc.not_found:
                    return True  # gone meanwhile: nothing left to report to
                if exc.conflict and overtaken < _OVERTAKEN_ATTEMPTS:
                    overtaken += 1  # another writer first (or the job was replaced)
                    current = None
                    continue
                tired = attempt == _STATUS_ATTEMPTS if not record else time.monotonic() > give_up
                if not exc.unavailable or tired:
                    logger.error(  # noqa: TRY400 - the API error says it all; no traceback
                        "status not written (attempt %d): %s", attempt, exc,
                        extra={"run_id": message.run_id},
                    )  # fmt: skip
                    return False
                if attempt % _STATUS_ATTEMPTS == 0:
                    logger.warning(
                        "the run's record is not written yet (%d attempts): %s", attempt, exc,
                        extra={"run_id": message.run_id},
                    )  # fmt: skip
                await asyncio.sleep(delay)  # backoff while the API server is unavailable
                delay = min(delay * 2, 8.0)
            else:
                return True  # written, or the job is gone or replaced: nothing to report to

    async def _apply_on(
        self,
        claim: Claim,
        current: ScheduledJob | None,
        build: Callable[[ScheduledJob], dict[str, Any]],
    ) -> dict[str, Any] | None:
        """One apply built on ``current`` (read from the API server first if None) and
        conditional on its resourceVersion; None if the job is gone or replaced."""
        if current is None:
            current = await self.reread(claim)
            if current is None:
                return None
        message = claim.message
        async with self._writes:
            since = self.jobs.mark() if self.jobs is not None else 0
            written = await self.kube.apply_job_status(
                message.namespace, message.name, message.uid, build(current),
                field_manager=WORKER_MANAGER,
                resource_version=current.metadata.get("resourceVersion"),
            )  # fmt: skip
        if self.jobs is not None:
            self.jobs.observe(written, since=since)  # the next run of the job builds on it
        return written
