"""One claimed run, from the queue to its outcome in status.

Over 400 lines: the steps of one run, in the order that makes a killed worker
harmless, read best in one place.

The pieces: :mod:`~tickwork_worker.decisions` (may it start, how did it end:
pure), :mod:`~tickwork_worker.lease` (the heartbeat), and
:mod:`~tickwork_worker.job_access` (reading the job, writing status); this
module puts them in order.

The order matters and is what makes a killed worker harmless: read the job
(from the worker's watched copy, else the API server), skip what must not
run, mark it Running,
execute under a soft and a hard timeout while heartbeats keep the lease,
write the outcome to status, and only then tell the queue (ack, retry or
bury). A worker that dies anywhere before the last step leaves a lease that
expires; the run is redelivered, and the status check makes sure a finished
run is not executed twice.

A worker that can no longer prove it holds the lease (Redis unreachable until
the lease ran out, or the run taken by another worker after this one was
paused) cancels the attempt and writes nothing more: the run belongs to
whoever is redelivered it, as a new attempt.

A plain Python function cannot be stopped: past its timeout its thread runs on.
The run then waits, holding its lease, until the thread ends, so that no retry
runs beside it; if it has not ended ``stuck_seconds`` later, the worker reports itself
unhealthy (``stuck``), keeps holding the run, and exits without handing it back,
which ends the thread; the run is redelivered once the lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from tickwork.api.models import ActiveRun, CancelRequest, ScheduledJob, ScheduledJobSpec
from tickwork.core.errors import PermanentTaskError, QueueUnavailableError
from tickwork.core.states import RunState
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.events import NORMAL, WARNING, EventRecorder, JobRef
from tickwork.queue.messages import Claim
from tickwork.queue.protocol import RunQueue
from tickwork.tracing import AttemptTrace, Tracing
from tickwork_worker.decisions import (
    Outcome,
    RunProgress,
    SkipReason,
    attempts_exhausted,
    cancel_request,
    cancelled_outcome,
    failure_outcome,
    scheduled_at,
    waiting_run,
    why_skip,
)
from tickwork_worker.job_access import JobAccess, RunningMarker
from tickwork_worker.lease import Lease, LeaseLostError, heartbeat, under_lease
from tickwork_worker.metrics import WorkerMetrics
from tickwork_worker.notify import Notifications, failed_notice
from tickwork_worker.tasks.base import RetryableTaskError, RunContext, TaskKinds, TaskResult
from tickwork_worker.tasks.secrets import SecretValues

logger = logging.getLogger(__name__)


class Runner:
    def __init__(
        self,
        *,
        queue: RunQueue,
        kube: KubeClient,
        events: EventRecorder,
        metrics: WorkerMetrics,
        kinds: TaskKinds,
        worker_name: str,
        lease_seconds: float,
        soft_timeout_ratio: float,
        running_after_seconds: float = 0.0,
        jobs: JobCache | None = None,
        stuck_seconds: float = 120.0,
        start_check_watch_seconds: float = 0.25,
        tracing: Tracing | None = None,
        notifications: Notifications | None = None,
    ) -> None:
        """``stuck_seconds``: how long past its timeout a task's thread may run before
        the worker reports itself unhealthy; ``tracing``: where the runs' spans go
        (tickwork.tracing; none: off)."""
        self.queue = queue
        self.kube = kube
        self.events = events
        self.metrics = metrics
        self.kinds = kinds
        self.worker_name = worker_name
        self.lease_seconds = lease_seconds
        self.soft_timeout_ratio = soft_timeout_ratio
        self.running_after_seconds = running_after_seconds
        self.jobs = jobs
        self.stuck_seconds = stuck_seconds
        self.access = JobAccess(
            kube=kube, metrics=metrics, jobs=jobs, watch_wait=start_check_watch_seconds
        )
        self._leases: dict[str, Lease] = {}
        """The lease of every claim in hand, by token."""
        self.tracing = tracing or Tracing()
        self.notifications = notifications
        """Who tells the jobs' notifiers of failed runs (spec.notify; none: nobody)."""
        self._traces: dict[str, AttemptTrace] = {}
        """The trace of every claim in hand, by token, and how its attempt ended."""
        self._ended: dict[str, str] = {}
        self._held: set[str] = set()
        """Tokens of runs whose attempt left a thread running: never handed back."""
        self.stuck = ""
        """Why the worker must restart (a task's thread that does not end), or empty."""

    async def process(self, claim: Claim, ended: Callable[[], None] = lambda: None) -> None:
        """Handle one claim to the end. Cancellation (shutdown) hands the run back.
        ``ended()`` is called once nothing more is executed for the run: what is left
        is to write its outcome and tell the queue."""
        message = claim.message
        log = message.log_fields()
        logger.info("run claimed", extra={**log, "event": "claimed"})
        lease = self._leases[claim.token] = Lease(claim.sent_at, self.lease_seconds)
        trace = self._traces[claim.token] = self.tracing.attempt(
            message.run_id, message.namespace, message.name, message.attempt
        )
        renewals = asyncio.create_task(heartbeat(self.queue, claim, lease))
        try:
            if claim.waits_for_key:
                ended()
                await self._wait_for_key(claim, lease)
            else:
                await self._start_or_skip(claim, trace, ended)
        except asyncio.CancelledError:
            if claim.token in self._held:  # its thread may still run: the lease expires
                logger.warning("run not handed back: a thread of its attempt still runs", extra=log)
                raise
            with contextlib.suppress(Exception):
                await asyncio.shield(self.queue.release(claim))
            logger.info("handed run back on shutdown", extra=log)
            raise
        except LeaseLostError as exc:
            # Nothing more is written for this attempt: the run is redelivered (or
            # already was) as a new attempt, and its record is that attempt's to write.
            self.metrics.leases_lost.inc()
            why = str(exc) or lease.why or "Redis gave the run to another worker"
            logger.warning(
                "lease lost (%s): the attempt was stopped, nothing written", why, extra=log
            )
        except KubeApiError as exc:
            if exc.unavailable:
                # The API server is unreachable: leave the lease to expire and the run
                # to be redelivered, rather than run it blind.
                logger.warning(
                    "cannot read the job (%s); the run will be redelivered", exc, extra=log
                )
            else:
                # Refused (403: the worker's RBAC does not cover the namespace; 400):
                # asking again cannot help. Dead-letter the run, saying why.
                await self._refused(claim, exc)
        except QueueUnavailableError as exc:
            # Redis went away while the run ended (ack, retry, bury): the lease
            # expires and the run is redelivered; its record in status, if written,
            # keeps it from running again.
            logger.warning(
                "the queue is unavailable (%s); the run will be redelivered", exc, extra=log
            )
        except Exception:
            # Tickwork's own fault, not the task's: say so loudly, count it, and let
            # the lease expire so that the run is redelivered.
            self.metrics.internal_errors.inc()
            logger.exception("internal error while handling a run", extra=log)
        finally:
            renewals.cancel()
            del self._leases[claim.token]
            del self._traces[claim.token]
            trace.end(self._ended.pop(claim.token, "Abandoned"))

    async def _start_or_skip(
        self, claim: Claim, trace: AttemptTrace, ended: Callable[[], None]
    ) -> None:
        message = claim.message
        with trace.phase("read"):
            job = await self.access.read(claim, to_start=True)
        progress = RunProgress()
        reason = why_skip(job, message)
        if reason is SkipReason.PAUSED:
            # A pause and its end are status, not spec (no new generation): the
            # watched copy may not have the end yet. The API server has.
            job = await self.access.read(claim, to_start=True, fresh=True)
            reason = why_skip(job, message)
        if reason is not None:
            ended()
            await self._skip(claim, job, reason, progress)
            return
        assert job is not None  # noqa: S101 - why_skip returned None
        await self._execute(claim, job, progress, ended)

    async def _wait_for_key(self, claim: Claim, lease: Lease) -> None:
        """Show the run Waiting in status, then hand it to its concurrency key's
        waiting list: in that order, so that no worker starts it (and shows it Running)
        before its Waiting entry is written. Not shown (the API server away, the job
        gone), it waits all the same; whoever claims it next decides."""
        message = claim.message
        waiting = waiting_run(message, dt.datetime.now(dt.UTC))
        self._ended[claim.token] = "Waiting"
        with contextlib.suppress(KubeApiError):
            job = await self.access.read(claim)
            if job is not None:  # as a mark: what the run's manager owns stays
                await self.access.mark(claim, lease, job, waiting)
        if await self.queue.wait_for_key(claim):
            logger.info(
                "run waits for a place of its concurrency key",
                extra={**message.log_fields(), "event": "waiting", "key": waiting.waiting_for},
            )

    async def _refused(self, claim: Claim, error: KubeApiError) -> None:
        reason = (
            f"the API server refused to let this worker read "
            f"{claim.message.namespace}/{claim.message.name} ({error}): "
            "check the worker's RBAC and watchNamespaces"
        )
        logger.error("%s", reason, extra={"run_id": claim.run_id})
        if await self.queue.bury(claim, error=reason):
            self.metrics.dead_lettered.inc()

    async def _skip(
        self, claim: Claim, job: ScheduledJob | None, reason: SkipReason, progress: RunProgress
    ) -> None:
        self.metrics.skipped.labels(reason=reason.value).inc()
        self._ended[claim.token] = "Skipped"
        logger.info(
            "run skipped: %s",
            reason.value,
            extra={
                **claim.message.log_fields(),
                "event": "skipped",
                "reason": reason.value,
                "outcome": reason.state.value if reason.state is not None else None,
            },
        )
        if job is not None and reason.state is not None:
            request = cancel_request(job, claim.run_id)
            text = request.reason if reason is SkipReason.CANCELLED and request else reason.text
            outcome = Outcome(state=progress.move(reason.state), error=text or reason.text)
            await self.access.finish(
                claim, self._leases[claim.token], job, outcome, started_at=None
            )
        await self.queue.ack(claim)

    # -- execution ----------------------------------------------------------------

    async def _execute(
        self, claim: Claim, job: ScheduledJob, progress: RunProgress, ended: Callable[[], None]
    ) -> None:
        message = claim.message
        lease = self._leases[claim.token]
        started_at = dt.datetime.now(dt.UTC)
        if message.enqueued_at is not None:
            self.metrics.queue_wait.observe(max(0.0, started_at.timestamp() - message.enqueued_at))
        if message.attempt == 1:
            due = scheduled_at(message, started_at)
            self.metrics.started_late(message.namespace, (started_at - due).total_seconds())
        progress.move(RunState.RUNNING)
        logger.info("run started", extra={**message.log_fields(), "event": "started"})
        exhausted = attempts_exhausted(job, message)
        if exhausted is not None:  # redelivered after its worker died on the last attempt
            ended()
            await self._conclude(claim, job, exhausted, progress, started_at=started_at)
            return
        running = self._active(claim, started_at, RunState.RUNNING)
        marker = RunningMarker(
            lambda: self.access.mark(claim, lease, job, running), self.running_after_seconds
        )
        await marker.start()
        self.metrics.in_flight.inc()
        begun = time.perf_counter()
        try:
            with self._traces[claim.token].phase("execute"):
                outcome = await self._attempt(claim, job)
        finally:
            self.metrics.in_flight.dec()
            self.metrics.duration.observe(time.perf_counter() - begun)
            await marker.settle()
        ended()
        await self._conclude(
            claim, job, outcome, progress, started_at=started_at, marked=marker.wrote
        )

    def _active(self, claim: Claim, started_at: dt.datetime, state: RunState) -> ActiveRun:
        message = claim.message
        return ActiveRun(
            id=message.run_id,
            scheduled_at=scheduled_at(message, started_at),
            state=state,
            attempt=message.attempt,
            queued_at=dt.datetime.fromtimestamp(message.enqueued_at, dt.UTC)
            if message.enqueued_at
            else None,
            started_at=started_at,
            worker=self.worker_name,
            manual=message.scheduled_at is None,
            params=message.params,
        )

    async def _attempt(self, claim: Claim, job: ScheduledJob) -> Outcome:
        """One attempt of the task. Whatever it read from Secrets is taken out of the
        outcome's texts before they go anywhere."""
        message = claim.message
        secrets = SecretValues(self.kube, message.namespace)
        context = RunContext(
            run_id=message.run_id,
            attempt=message.attempt,
            namespace=message.namespace,
            name=message.name,
            scheduled_at=scheduled_at(message, dt.datetime.now(dt.UTC)),
            params=message.params or {},
            secrets=secrets,
            job_uid=message.uid,
            traceparent=self._traces[claim.token].traceparent,
        )
        outcome = await self._attempt_in(claim, job, context)
        await self._until_threads_end(claim, context, self.stuck_seconds)
        return dataclasses.replace(
            outcome,
            result=secrets.redact(outcome.result),
            error=secrets.redact(outcome.error),
            brief=secrets.redact(outcome.brief),
        )

    async def _until_threads_end(self, claim: Claim, context: RunContext, seconds: float) -> None:
        """Wait, under the lease, for threads the attempt left running; past ``seconds``
        the worker is stuck: it holds the run until it restarts."""
        running = [thread for thread in context.threads if not thread.done()]
        if not running:
            return
        self._held.add(claim.token)
        log = claim.message.log_fields()
        logger.warning(
            "the attempt's thread runs past its timeout; the run waits for it", extra=log
        )
        waiting = asyncio.ensure_future(asyncio.wait([asyncio.wrap_future(t) for t in running]))
        if await under_lease(waiting, self._leases[claim.token], seconds):
            self._held.discard(claim.token)
            return
        waiting.cancel()
        self.stuck = (
            f"a thread of run {claim.run_id} still runs {seconds:g}s after its "
            "timeout; a restart ends it"
        )
        logger.error("%s", self.stuck, extra=log)
        await asyncio.Future()  # hold the run, and its lease, until the worker stops

    async def _execute_kind(self, spec: ScheduledJobSpec, context: RunContext) -> TaskResult:
        """The task, by the kind registered for its spec's model (none: it fails for good)."""
        return await self.kinds.of(spec.task).execute(spec, context)

    async def _attempt_in(self, claim: Claim, job: ScheduledJob, context: RunContext) -> Outcome:
        spec = job.spec
        lease = self._leases[claim.token]
        lease.check()  # a run that waited for its Running mark may have lost it meanwhile
        task = asyncio.create_task(self._execute_kind(spec, context))
        watch = asyncio.create_task(self._watch_for_cancel(claim, task, context))
        soft = spec.timeout_seconds * self.soft_timeout_ratio
        try:
            if not await under_lease(task, lease, soft):
                task.cancel()
                ended = await under_lease(task, lease, spec.timeout_seconds - soft)
                error = f"timed out after {spec.timeout_seconds}s" + (
                    "" if ended else " (abandoned: it ignored cancellation)"
                )
                return failure_outcome(job, claim.message, error, permanent=False)
            return Outcome(state=RunState.SUCCEEDED, result=task.result().summary)
        except LeaseLostError:
            raise  # not the task's failure: the attempt belongs to nobody now
        except asyncio.CancelledError:
            request = watch.result() if watch.done() and not watch.cancelled() else None
            if request is not None and not watch.exception():
                return cancelled_outcome(request)
            raise
        except PermanentTaskError as exc:
            return failure_outcome(job, claim.message, str(exc), permanent=True, detail=exc.detail)
        except RetryableTaskError as exc:
            return failure_outcome(job, claim.message, str(exc), permanent=False, detail=exc.detail)
        except Exception as exc:  # noqa: BLE001 - whatever a task raises is its failure
            # (a header httpx cannot encode, an invalid URL, a NUL in a command's
            # arguments, a bug in a Python task): a failed attempt under the retry
            # policy, not a run left to wait out its lease.
            error = f"{type(exc).__name__}: {exc}"
            return failure_outcome(job, claim.message, error, permanent=False)
        finally:
            watch.cancel()
            if not task.done():
                task.cancel()

    async def _watch_for_cancel(
        self, claim: Claim, task: asyncio.Task[Any], context: RunContext
    ) -> CancelRequest | None:
        """Cancel the task once status names the run in ``cancelRequests`` (kubectl
        tickwork cancel, CancelOther, TerminateOther); the request, or None if the task
        ended first. Reads come from the watched copy when it serves the run (each
        costs nothing: every second), else from the API server at the heartbeat's
        cadence (a third of the lease)."""
        message = claim.message
        cached = self.jobs is not None and message.attempt == 1 and not message.requeued
        pause = min(1.0, self.lease_seconds / 3) if cached else self.lease_seconds / 3
        while not task.done():
            await asyncio.sleep(pause)
            with contextlib.suppress(KubeApiError):
                request = cancel_request(await self.access.read(claim), claim.run_id)
                if request is not None and not task.done():
                    context.stop.at_once = request.terminate
                    task.cancel()
                    return request
        return None

    # -- the outcome ----------------------------------------------------------------

    async def _conclude(
        self,
        claim: Claim,
        job: ScheduledJob,
        outcome: Outcome,
        progress: RunProgress,
        *,
        started_at: dt.datetime,
        marked: bool = True,
    ) -> None:
        self._ended[claim.token] = outcome.state.value
        with self._traces[claim.token].phase("status"):
            progress.move(outcome.state)
            lease = self._leases[claim.token]
            log = {
                **claim.message.log_fields(),
                "outcome": outcome.state.value,
                "duration_seconds": round(
                    (dt.datetime.now(dt.UTC) - started_at).total_seconds(), 3
                ),
            }
            ref = JobRef(
                namespace=claim.message.namespace, name=claim.message.name, uid=claim.message.uid
            )
            if outcome.state is RunState.RETRYING:
                assert outcome.retry_delay is not None  # noqa: S101 - set with RETRYING
                assert outcome.next_attempt is not None  # noqa: S101
                await self.access.mark(
                    claim, lease, job, self._active(claim, started_at, RunState.RETRYING)
                )
                self.metrics.retries.inc()
                logger.info(
                    "run failed, retrying in %.0fs",
                    outcome.retry_delay,
                    extra={
                        **log,
                        "event": "retrying",
                        "retry_in_seconds": outcome.retry_delay,
                        "error": outcome.told,
                    },
                )
                await self.events.post(
                    ref,
                    type_=NORMAL,
                    reason="RunRetrying",
                    message=f"attempt {claim.message.attempt} of run {claim.run_id} failed, "
                    f"retrying in {outcome.retry_delay:.0f}s: {outcome.told}",
                )
                if not await self.queue.retry(
                    claim, delay_seconds=outcome.retry_delay, attempt=outcome.next_attempt
                ):
                    raise LeaseLostError
                return
            recorded = await self.access.finish(
                claim, lease, job, outcome, started_at=started_at, marked=marked
            )
            self.metrics.runs.labels(outcome=outcome.state.value).inc()
            annotations = job.metadata.get("annotations") or {}
            self.metrics.finished(
                claim.message.namespace,
                claim.message.name,
                outcome.state.value,
                annotations=annotations,
            )
            dead = outcome.state is RunState.FAILED or not recorded
            logger.log(
                logging.WARNING if dead else logging.INFO,
                "run dead-lettered" if dead else "run finished",
                extra={
                    **log,
                    "event": "dead-lettered" if dead else "finished",
                    "recorded": recorded,
                },
            )
            if not recorded and outcome.state is not RunState.FAILED:
                # Status refused the record: keep the outcome where an operator sees it.
                self.metrics.dead_lettered.inc()
                error = (
                    f"{outcome.state.value}, but status refused its record (see the worker's log)"
                )
                if not await self.queue.bury(claim, error=error):
                    raise LeaseLostError
            elif outcome.state is RunState.FAILED:
                self.metrics.dead_lettered.inc()
                await self.events.post(
                    ref,
                    type_=WARNING,
                    reason="RunFailed",
                    message=f"run {claim.run_id} failed: {outcome.told}",
                )
                if not await self.queue.bury(claim, error=outcome.error or "failed"):
                    raise LeaseLostError
                if job.spec.notify and self.notifications is not None:
                    self.notifications.tell(job, failed_notice(claim.message, outcome))
            elif not await self.queue.ack(claim):
                raise LeaseLostError
