"""The worker's access to a job: read it to decide whether a run may start, and
write the run's share of its status (its ``activeRuns`` entry while it runs or
waits for a retry, then its record), as the run's own field manager: no write
reads or re-sends another run's entries or the operator's fields.

Over 400 lines: a run's reads of its job and its writes of status share the watched
copy and the conditional-write rules, which change together.

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

from tickwork.api.models import ActiveRun, RunRecord, ScheduledJob
from tickwork.core.states import RunState
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.status import (
    LEGACY_WORKER_MANAGER,
    TRIM_MANAGER,
    active_body,
    history_manager,
    history_slot,
    holds_legacy_share,
    keeps,
    record_body,
    run_manager,
    trim_plan,
    withdrawal_body,
)
from tickwork.queue.messages import Claim
from tickwork_worker.decisions import (
    RECORD_PATIENCE_SECONDS,
    AfterRefusal,
    Outcome,
    after_refusal,
    next_runs_shown,
    on_schedule,
    scheduled_at,
)
from tickwork_worker.lease import Lease
from tickwork_worker.metrics import WorkerMetrics
from tickwork_worker.start_checks import WATCH_WAIT_SECONDS, StartChecks

logger = logging.getLogger(__name__)

#: A JSON patch whose ``test`` failed (or an object the schema refused).
_INVALID = 422
#: Status writes in flight at once per worker. Reads of jobs whose runs are
#: starting are not limited, so at the top of a busy minute they go first.
_STATUS_WRITES_IN_FLIGHT = 16
#: How long a trim waits for the watch to bring the record it follows: the watch lags
#: the API server by milliseconds, by seconds only on a saturated one; past this the
#: trim is sent anyway (and done twice by the API server, no worse than without).
_WATCH_CATCH_UP_SECONDS = 2.0
#: How often a record is written into its place of the history against a newer copy
#: of the job (another write came first) before it goes the way of a run that ran long.
_PLACE_ATTEMPTS = 3


class _StaleCopy(Exception):  # noqa: N818 - not an error: the job changed meanwhile
    """A write conditional on the job's resourceVersion found a newer version."""


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

    @property
    def wrote(self) -> bool:
        """Did (or does) the mark go to status?"""
        return self._delay <= 0 or self._writing

    async def settle(self) -> None:
        if self._task is None:
            return
        if self._writing:
            await self._task
        else:
            self._task.cancel()


class JobAccess:
    def __init__(
        self,
        *,
        kube: KubeClient,
        metrics: WorkerMetrics,
        jobs: JobCache | None,
        watch_wait: float = WATCH_WAIT_SECONDS,
    ) -> None:
        """``watch_wait``: see :data:`.start_checks.WATCH_WAIT_SECONDS`."""
        self.kube = kube
        self.metrics = metrics
        self.jobs = jobs
        self._writes = asyncio.Semaphore(_STATUS_WRITES_IN_FLIGHT)
        self.checks = (
            None
            if jobs is None
            else StartChecks(kube, copy=jobs, counted=self._counted, watch_wait=watch_wait)
        )

    def _counted(self, read: str, jobs: int) -> None:
        self.metrics.start_checks.labels(read=read).inc()
        self.metrics.start_checks_answered.labels(read=read).inc(jobs)

    async def read(
        self, claim: Claim, *, to_start: bool = False, fresh: bool = False
    ) -> ScheduledJob | None:
        """The job as the watched copy has it if that can vouch for it, else as the API
        server has it.

        ``to_start``: the job decides whether the run may start, so its spec is never
        older than the API server's at this moment. The copy serves if the job's
        current metadata (a consistent read, shared by the claims of a namespace that
        arrive together: :mod:`.start_checks`) shows no
        spec change since the copy's (a suspend, an edit: each raises the generation)
        and the job is neither gone nor being deleted: a watch lagging behind the API
        server cannot start a run that a suspend or a delete has already stopped.
        (Writes of status need no such care: they are conditional on the
        resourceVersion they were built on.) ``fresh``: from the API server, whatever
        the copy has."""
        message = claim.message
        body = None
        # A redelivered or requeued run is checked against the API server itself: it
        # may have finished moments ago, and only the truth may decide to run it again.
        # A copy not listed yet vouches for nothing: no check, the job itself is read.
        if (
            self.jobs is not None
            and self.checks is not None
            and self.jobs.synced
            and message.attempt == 1
            and not message.requeued
            and not fresh
        ):
            generation = message.generation or 0
            if to_start:
                now = await self.checks.metadata(message.namespace, message.name)
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

    async def mark(self, claim: Claim, lease: Lease, job: ScheduledJob, run: ActiveRun) -> bool:
        """Show the run in ``activeRuns`` (Running, Retrying, Waiting for its key). A run
        that ended before (a dead letter requeued by hand) keeps the ``lastRun`` it may
        still own until its new record replaces it, and leaves ``deadRuns``."""
        kept = withdrawal_body(job.metadata, job.status, run.id, keep_dead=False) or {}
        shown = next_runs_shown(job, claim.message)
        return await self.write(claim, lease, {**kept, **active_body(run, shown)})

    async def finish(
        self,
        claim: Claim,
        lease: Lease,
        job: ScheduledJob,
        outcome: Outcome,
        *,
        started_at: dt.datetime | None,
        marked: bool = False,
    ) -> bool:
        """Write the run's record into status; False if the API server refused it.

        A run of the schedule that ended at its first attempt without a mark in status
        (``marked``: Running, Retrying) and not for good Failed — nearly every run —
        writes its record in its place of the history (:meth:`_place`): one write,
        the history's limits kept, nothing to trim. Any other run applies as its own
        manager: its record (and takes ``lastRun``), its ``activeRuns`` entry removed;
        another run of the job that ends at the same moment adds its own, untouched.
        Records past the job's history limits then leave, in batches (see :meth:`trim`).
        """
        record = RunRecord(
            id=claim.run_id,
            scheduled_at=scheduled_at(claim.message, started_at or dt.datetime.now(dt.UTC)),
            outcome=outcome.state,
            attempts=claim.message.attempt,
            started_at=started_at,
            finished_at=dt.datetime.now(dt.UTC),
            result=outcome.result,
            error=outcome.error,
            params=claim.message.params,
        )
        limits = job.spec.history
        message = claim.message
        marked = marked or message.waited  # shown Waiting for its key: an entry to take out
        placed = (
            not marked
            and message.attempt == 1
            and not message.requeued
            and outcome.state is not RunState.FAILED
            and on_schedule(message)
        )
        written: dict[str, Any] = {}
        if placed and keeps(record, successful=limits.successful_runs, failed=limits.failed_runs):
            done = await self._place(claim, lease, job, record, written)
            if done is not None:
                if done and written:
                    await self.trim(claim, written, record, job, placed=True)
                return done
        # A failed run goes to the dead-letter queue: it lists itself in deadRuns.
        dead = None
        if outcome.state is RunState.FAILED:
            dead = sum(1 for entry in job.status.dead_runs if entry.id != record.id)
        body = record_body(
            record,
            successful=limits.successful_runs,
            failed=limits.failed_runs,
            dead_listed=dead,
            shown=next_runs_shown(job, claim.message),
        )
        if not await self.write(claim, lease, body, record=True, written=written):
            return False
        if written:
            await self.trim(claim, written, record, job, placed=False)
        return True

    async def _place(
        self,
        claim: Claim,
        lease: Lease,
        job: ScheduledJob,
        record: RunRecord,
        written: dict[str, Any],
    ) -> bool | None:
        """Write ``record`` in its place of the history (:func:`history_slot`) as that
        place's manager, over the record it held, with ``lastRun`` and the next runs:
        the run's one write. The place is chosen on the newest copy of the job, and the
        write is conditional on that copy's resourceVersion, so that two runs of a job
        that end together never take one place. True/False as :meth:`finish`; None if
        the job kept changing under it (the caller writes as the run's own manager)."""
        message = claim.message
        limits = job.spec.history
        copy = self._newest(claim, job)
        for _ in range(_PLACE_ATTEMPTS):
            version = str(copy.metadata.get("resourceVersion") or "") or None
            slot = history_slot(
                copy.status.runs,
                record.outcome,
                successful=limits.successful_runs,
                failed=limits.failed_runs,
            )
            if slot is None or version is None:
                return None
            body = record_body(
                record.model_copy(update={"slot": slot}),
                successful=limits.successful_runs,
                failed=limits.failed_runs,
                shown=next_runs_shown(copy, message),
            )
            try:
                return await self.write(
                    claim,
                    lease,
                    body,
                    record=True,
                    written=written,
                    manager=history_manager(slot),
                    resource_version=version,
                )
            except _StaleCopy:
                self.metrics.stale_copies.inc()
                fresh = await self.get(claim)
                if fresh is None or (fresh.get("metadata") or {}).get("uid") != message.uid:
                    return True  # gone or replaced meanwhile: nothing left to report to
                try:
                    copy = ScheduledJob.model_validate(fresh)
                except ValidationError:
                    return None
        return None

    def _newest(self, claim: Claim, job: ScheduledJob) -> ScheduledJob:
        """The newest copy of the job this worker holds: the watched one if it can vouch
        for it (another run's record may have come since ``job`` was read), else ``job``."""
        message = claim.message
        if self.jobs is None:
            return job
        held = self.jobs.resource_version(message.namespace, message.name, message.uid)
        if held is not None and held == job.metadata.get("resourceVersion"):
            return job  # nothing came since: the copy is ``job`` (no second decode)
        body = self.jobs.get(
            message.namespace, message.name, message.uid, int(job.metadata.get("generation") or 0)
        )
        if body is None:
            return job
        try:
            return ScheduledJob.model_validate(body)
        except ValidationError:
            return job

    async def trim(
        self,
        claim: Claim,
        written: dict[str, Any],
        record: RunRecord,
        job: ScheduledJob,
        *,
        placed: bool,
    ) -> None:
        """Let records past the history limits go, as seen in the object just written,
        in batches or at once after a ``placed`` record
        (:func:`~tickwork.kube.status.trim_due`): one JSON patch removes
        them all, each ``test``-ed by its ``id`` at its index, so a history another
        run changed meanwhile refuses it and nothing another run added is touched.
        A refused or failed trim is left for the job's next run. With the watched copy
        on, the patch waits (briefly) until the watch has brought the object just
        written, so that the API server does it once."""
        limits = job.spec.history
        message = claim.message
        patch = trim_plan(
            written,
            record,
            successful=limits.successful_runs,
            failed=limits.failed_runs,
            placed=placed,
        )
        if patch:
            if self.jobs is not None:
                # Sent at once, the patch would find the record not yet in the API
                # server's watch cache and be done twice there (JobCache.until_watched).
                version = str((written.get("metadata") or {}).get("resourceVersion") or "")
                await self.jobs.until_watched(
                    message.namespace, version, seconds=_WATCH_CATCH_UP_SECONDS
                )
            since = self.jobs.mark() if self.jobs is not None else 0
            try:
                result = await self.kube.patch_job_status(
                    message.namespace, message.name, patch, field_manager=TRIM_MANAGER
                )
            except KubeApiError as exc:
                if exc.status == _INVALID:
                    logger.debug(
                        "history of %s/%s changed meanwhile; the next run trims it",
                        message.namespace,
                        message.name,
                        extra={"run_id": claim.run_id},
                    )
                else:
                    self._not_trimmed(claim, exc)
                return
            if self.jobs is not None:
                self.jobs.observe(result, since=since)
        if holds_legacy_share(written.get("metadata") or {}):
            try:
                await self.kube.apply_job_status(
                    message.namespace,
                    message.name,
                    message.uid,
                    None,
                    field_manager=LEGACY_WORKER_MANAGER,
                    force=False,
                )
            except KubeApiError as exc:
                self._not_trimmed(claim, exc)

    @staticmethod
    def _not_trimmed(claim: Claim, exc: KubeApiError) -> None:
        if not exc.not_found:
            logger.warning(
                "history of %s/%s not trimmed: %s",
                claim.message.namespace,
                claim.message.name,
                exc,
                extra={"run_id": claim.run_id},
            )

    async def write(
        self,
        claim: Claim,
        lease: Lease,
        body: dict[str, Any],
        *,
        record: bool = False,
        written: dict[str, Any] | None = None,
        manager: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Apply ``body`` as the run's field manager (or ``manager``); False if the API
        server refused it. ``written`` receives the object as the API server returned
        it. With ``resource_version`` the write is conditional on it: a newer object
        raises :class:`_StaleCopy`.

        The body names only this run's entries (and ``lastRun``, which the run that
        ends last takes over), so it is applied unconditionally: runs of one job that
        end together never drop each other's records or clear each other's entry.

        While the API server is away, a progress mark (Running, Retrying) is given
        up after a few tries. The run's record is not: acknowledging a run whose
        outcome status never heard of would lose it, so the worker keeps trying
        (its heartbeat keeps the lease) until the write lands, the job is gone, the
        worker shuts down and hands the run back, or ten minutes have passed (the
        caller then dead-letters the run with its outcome).
        """
        message = claim.message
        attempt = 0
        give_up = time.monotonic() + RECORD_PATIENCE_SECONDS
        while True:
            attempt += 1
            lease.check()  # status is written only under a lease this worker still holds
            try:
                async with self._writes:
                    since = self.jobs.mark() if self.jobs is not None else 0
                    # Forced: ``lastRun``, the next runs and the oldest record of the
                    # place taken over belong to other managers, knowingly replaced.
                    result = await self.kube.apply_job_status(
                        message.namespace,
                        message.name,
                        message.uid,
                        body,
                        field_manager=manager or run_manager(message.run_id),
                        force=True,
                        resource_version=resource_version,
                    )
            except KubeApiError as exc:
                step = after_refusal(
                    not_found=exc.not_found,
                    conflict=exc.conflict,
                    unavailable=exc.unavailable,
                    conditional=resource_version is not None,
                    record=record,
                    attempt=attempt,
                    patient_seconds=give_up - time.monotonic(),
                )
                if step.next is AfterRefusal.STALE:
                    raise _StaleCopy from exc
                if step.next is AfterRefusal.DONE:
                    return True  # gone, or another object under the name: nothing to tell
                if step.next is AfterRefusal.GIVE_UP:
                    logger.error(  # noqa: TRY400 - the API error says it all; no traceback
                        "status not written (attempt %d): %s",
                        attempt,
                        exc,
                        extra={"run_id": message.run_id},
                    )
                    return False
                if step.warn:
                    logger.warning(
                        "the run's record is not written yet (%d attempts): %s",
                        attempt,
                        exc,
                        extra={"run_id": message.run_id},
                    )
                await asyncio.sleep(step.wait_seconds)  # the API server is unavailable
            else:
                if self.jobs is not None:
                    self.jobs.observe(result, since=since)  # the next run of the job sees it
                if written is not None:
                    written.update(result)
                return True
