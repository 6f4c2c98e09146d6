"""One claimed run, from the queue to its outcome in status.

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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tickwork.api.models import RunRecord, ScheduledJob
from tickwork.core.errors import PermanentTaskError, QueueUnavailableError
from tickwork.core.planning import ConcurrencyPolicy
from tickwork.core.retry import GiveUp, after_failure
from tickwork.core.runs import belongs_to
from tickwork.core.states import FINAL_STATES, JobPhase, RunState, job_phase
from tickwork.core.text import cap_optional
from tickwork.kube.cache import JobCache
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.events import NORMAL, WARNING, EventRecorder, JobRef
from tickwork.kube.status import WORKER_MANAGER, RunInfo, finished_body, running_body
from tickwork.queue.messages import Claim, RunMessage
from tickwork.queue.protocol import RunQueue
from tickwork_worker.metrics import WorkerMetrics
from tickwork_worker.tasks.base import RetryableTaskError, RunContext, TaskKind
from tickwork_worker.tasks.secrets import SecretValues

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
#: How long a task cancelled for a lost lease gets to end before its slot is reused.
_STOP_SECONDS = 5.0


class LeaseLostError(Exception):
    """The lease expired and the run went to another worker: stop, write nothing."""


class _Lease:
    """A claim's lease as far as this worker can prove it holds it.

    Held until ``until`` (``time.monotonic()``): when the claim or the last renewal
    that Redis confirmed was *sent*, plus the lease, less a margin. Redis set its
    deadline later than that, so no one else can have claimed the run before. Past
    it, or once Redis says the token is gone, the lease is lost for good.
    """

    def __init__(self, sent_at: float, seconds: float) -> None:
        self.seconds = seconds
        self.margin = min(2.0, seconds / 5)
        self.until = sent_at + seconds - self.margin
        self.lost = asyncio.Event()
        self.why = ""

    def renewed(self, sent_at: float) -> None:
        self.until = max(self.until, sent_at + self.seconds - self.margin)

    def lose(self, why: str) -> None:
        if not self.lost.is_set():
            self.why = why
            self.lost.set()

    def check(self) -> None:
        """Raise LeaseLostError unless the lease is provably still held."""
        if time.monotonic() >= self.until:
            self.lose(f"not renewed within its {self.seconds:g}s")
        if self.lost.is_set():
            raise LeaseLostError(self.why)


def _not_this_job(job: ScheduledJob | None, message: RunMessage) -> str | None:
    """Why ``job`` is not the object the run belongs to, or None if it is."""
    if job is None:
        return "gone"
    if job.metadata.get("uid") != message.uid:
        return "replaced"
    if job.metadata.get("deletionTimestamp"):
        return "deleting"  # a delete waiting on finalizers is a delete
    if not belongs_to(message.run_id, message.uid):
        return "foreign"  # a run ID of another object: never execute under it
    return None


def why_skip(job: ScheduledJob | None, claim: Claim) -> str | None:
    """Why a claimed run must not execute, or None if it may."""
    message = claim.message
    mismatch = _not_this_job(job, message)
    if mismatch is not None:
        return mismatch
    assert job is not None  # noqa: S101 - _not_this_job said it is the run's object
    if job.spec.suspend:
        return "suspended"
    status = job.status
    finished = [status.last_run, *status.runs] if status.last_run else list(status.runs)
    for record in finished:
        if record.id != message.run_id or record.outcome not in FINAL_STATES:
            continue
        # A dead letter requeued by hand is meant to run again; anything else
        # that already ended (a redelivery after a crash) must not.
        if not (message.requeued and record.outcome is RunState.FAILED):
            return "already-finished"
    queued = status.queued_run
    if (
        job.spec.concurrency_policy is ConcurrencyPolicy.REPLACE
        and queued is not None
        and queued.id != message.run_id
        and message.scheduled_at is not None
        and queued.scheduled_at > dt.datetime.fromisoformat(message.scheduled_at)
    ):
        return "superseded"
    return None


class _RunningMarker:
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


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended. Texts are capped here, once, before they reach status,
    Events, logs or the dead-letter queue."""

    state: RunState
    result: str | None = None
    error: str | None = None
    retry_delay: float | None = None
    next_attempt: int | None = None
    brief: str | None = None
    """The error without the task's detail (an answer's body): what Events say."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "result", cap_optional(self.result))
        object.__setattr__(self, "error", cap_optional(self.error))
        object.__setattr__(self, "brief", cap_optional(self.brief))

    @property
    def told(self) -> str:
        """The error as Events may tell it."""
        return self.brief or self.error or ""


class Runner:
    def __init__(
        self,
        *,
        queue: RunQueue,
        kube: KubeClient,
        events: EventRecorder,
        metrics: WorkerMetrics,
        kinds: dict[str, TaskKind],
        worker_name: str,
        lease_seconds: float,
        soft_timeout_ratio: float,
        running_after_seconds: float = 0.0,
        jobs: JobCache | None = None,
    ) -> None:
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
        self._writes = asyncio.Semaphore(_STATUS_WRITES_IN_FLIGHT)
        self._leases: dict[str, _Lease] = {}
        """The lease of every claim in hand, by token."""

    async def _read(self, claim: Claim, *, to_start: bool = False) -> ScheduledJob | None:
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
            body = await self._get(claim)
            if body is None:
                return None
        try:
            return ScheduledJob.model_validate(body)
        except ValidationError:
            return None  # the operator reports invalid specs; nothing can run

    async def _get(self, claim: Claim) -> dict[str, Any] | None:
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

    async def process(self, claim: Claim) -> None:
        """Handle one claim to the end. Cancellation (shutdown) hands the run back."""
        message = claim.message
        log = {"run_id": message.run_id, "attempt": message.attempt}
        lease = self._leases[claim.token] = _Lease(claim.sent_at, self.lease_seconds)
        heartbeat = asyncio.create_task(self._heartbeat(claim, lease))
        try:
            job = await self._read(claim, to_start=True)
            reason = why_skip(job, claim)
            if reason is not None:
                await self._skip(claim, job, reason)
                return
            assert job is not None  # noqa: S101 - why_skip returned None
            await self._execute(claim, job)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.queue.release(claim))
            logger.info("handed run back on shutdown", extra=log)
            raise
        except LeaseLostError as exc:
            # Nothing more is written for this attempt: the run is redelivered (or
            # already was) as a new attempt, and its record is that attempt's to write.
            self.metrics.leases_lost.inc()
            why = str(exc) or lease.why or "Redis gave the run to another worker"
            logger.warning("lease lost (%s): the attempt was stopped, nothing written", why,
                           extra=log)  # fmt: skip
        except KubeApiError as exc:
            if exc.unavailable:
                # The API server is unreachable: leave the lease to expire and the run
                # to be redelivered, rather than run it blind.
                logger.warning("cannot read the job (%s); the run will be redelivered", exc,
                               extra=log)  # fmt: skip
            else:
                # Refused (403: the worker's RBAC does not cover the namespace; 400):
                # asking again cannot help. Dead-letter the run, saying why.
                await self._refused(claim, exc)
        except QueueUnavailableError as exc:
            # Redis went away while the run ended (ack, retry, bury): the lease
            # expires and the run is redelivered; its record in status, if written,
            # keeps it from running again.
            logger.warning("the queue is unavailable (%s); the run will be redelivered", exc,
                           extra=log)  # fmt: skip
        except Exception:
            # Tickwork's own fault, not the task's: say so loudly, count it, and let
            # the lease expire so that the run is redelivered.
            self.metrics.internal_errors.inc()
            logger.exception("internal error while handling a run", extra=log)
        finally:
            heartbeat.cancel()
            del self._leases[claim.token]

    async def _reread(self, claim: Claim) -> ScheduledJob | None:
        """The job from the API server itself; None if it is gone or another object."""
        body = await self._get(claim)
        if body is None or (body.get("metadata") or {}).get("uid") != claim.message.uid:
            return None
        try:
            return ScheduledJob.model_validate(body)
        except ValidationError:
            return None

    async def _fresh(self, claim: Claim, job: ScheduledJob) -> ScheduledJob:
        """The job re-read after an attempt; the copy at hand if the API server is away
        or refuses: an attempt that ran must be recorded, not redelivered and run again."""
        try:
            return await self._read(claim) or job
        except KubeApiError as exc:
            logger.warning("recording on the job as read before (%s)", exc,
                           extra={"run_id": claim.run_id})  # fmt: skip
            return job

    async def _refused(self, claim: Claim, error: KubeApiError) -> None:
        reason = (f"the API server refused to let this worker read "
                  f"{claim.message.namespace}/{claim.message.name} ({error}): "
                  "check the worker's RBAC and watchNamespaces")  # fmt: skip
        logger.error("%s", reason, extra={"run_id": claim.run_id})
        if await self.queue.bury(claim, error=reason):
            self.metrics.dead_lettered.inc()

    async def _heartbeat(self, claim: Claim, lease: _Lease) -> None:
        """Renew the lease every third of it; after a failed renewal try again every
        second. A renewal that has not landed when the lease runs out, or that Redis
        refuses (the token is gone), loses the lease."""
        interval = self.lease_seconds / 3
        pause = interval
        while True:
            # The renewal period, but never past the moment the lease runs out.
            await asyncio.sleep(max(0.0, min(pause, lease.until - time.monotonic())))
            sent_at = time.monotonic()
            if sent_at >= lease.until:
                lease.lose(f"Redis did not confirm a renewal within {self.lease_seconds:g}s")
                return
            try:
                held = await asyncio.wait_for(
                    self.queue.heartbeat(claim, lease_seconds=self.lease_seconds),
                    timeout=lease.until - sent_at,
                )
            except Exception as exc:  # noqa: BLE001 - unreachable or slow Redis: try again
                logger.debug("lease not renewed yet: %r", exc, extra={"run_id": claim.run_id})
                pause = min(1.0, interval)
                continue
            if not held:
                lease.lose("Redis gave the run to another worker")
                return
            lease.renewed(sent_at)
            pause = interval

    async def _skip(self, claim: Claim, job: ScheduledJob | None, reason: str) -> None:
        self.metrics.skipped.labels(reason=reason).inc()
        logger.info("skipping run: %s", reason, extra={"run_id": claim.run_id})
        if job is not None and reason in ("suspended", "superseded"):
            state = RunState.CANCELLED if reason == "superseded" else RunState.SKIPPED
            text = {
                "suspended": "skipped: the job is suspended",
                "superseded": "cancelled: a newer run replaced it (concurrencyPolicy Replace)",
            }[reason]
            await self._finish(claim, job, Outcome(state=state, error=text), started_at=None)
        await self.queue.ack(claim)

    # -- execution ----------------------------------------------------------------

    async def _execute(self, claim: Claim, job: ScheduledJob) -> None:
        message = claim.message
        spec = job.spec
        started_at = dt.datetime.now(dt.UTC)
        if message.enqueued_at is not None:
            self.metrics.queue_wait.observe(max(0.0, started_at.timestamp() - message.enqueued_at))
        if message.attempt > spec.retry.max_attempts:
            # Redelivered after its worker died on the last attempt.
            outcome = Outcome(
                state=RunState.FAILED,
                error=f"attempt {message.attempt - 1} of {spec.retry.max_attempts} was cut "
                "short (its worker stopped answering) and no attempts are left",
            )
            await self._conclude(claim, job, outcome, started_at=started_at)
            return
        info = self._run_info(claim, started_at)
        marker = _RunningMarker(
            lambda: self._write(claim, job, lambda j: running_body(j.status, info,
                                                                 state=RunState.RUNNING)),
            self.running_after_seconds,
        )  # fmt: skip
        await marker.start()
        self.metrics.in_flight.inc()
        begun = time.perf_counter()
        try:
            outcome = await self._attempt(claim, job)
        finally:
            self.metrics.in_flight.dec()
            self.metrics.duration.observe(time.perf_counter() - begun)
            await marker.settle()
        await self._conclude(claim, job, outcome, started_at=started_at)

    def _run_info(self, claim: Claim, started_at: dt.datetime) -> RunInfo:
        message = claim.message
        return RunInfo(
            id=message.run_id,
            scheduled_at=_scheduled_at(claim, started_at),
            attempt=message.attempt,
            queued_at=dt.datetime.fromtimestamp(message.enqueued_at, dt.UTC)
            if message.enqueued_at
            else None,
            started_at=started_at,
            worker=self.worker_name,
            manual=message.scheduled_at is None,
        )

    async def _attempt(self, claim: Claim, job: ScheduledJob) -> Outcome:
        """One attempt of the task. Whatever it read from Secrets is taken out of the
        outcome's texts before they go anywhere."""
        message = claim.message
        secrets = SecretValues(self.kube, message.namespace)
        context = RunContext(
            run_id=message.run_id, attempt=message.attempt, namespace=message.namespace,
            name=message.name, scheduled_at=_scheduled_at(claim, None), secrets=secrets,
        )  # fmt: skip
        outcome = await self._attempt_in(claim, job, context)
        return dataclasses.replace(outcome, result=secrets.redact(outcome.result),
                                   error=secrets.redact(outcome.error),
                                   brief=secrets.redact(outcome.brief))  # fmt: skip

    async def _attempt_in(self, claim: Claim, job: ScheduledJob, context: RunContext) -> Outcome:
        spec = job.spec
        kind = self.kinds[spec.task.kind]
        lease = self._leases[claim.token]
        lease.check()  # a run that waited for its Running mark may have lost it meanwhile
        task = asyncio.create_task(kind.execute(spec, context))
        watch = asyncio.create_task(self._watch_for_replacement(claim, job, task))
        soft = spec.timeout_seconds * self.soft_timeout_ratio
        try:
            if not await self._under_lease(task, lease, soft):
                task.cancel()
                ended = await self._under_lease(task, lease, spec.timeout_seconds - soft)
                error = f"timed out after {spec.timeout_seconds}s" + (
                    "" if ended else " (abandoned: it ignored cancellation)"
                )
                return self._failure(claim, job, error, permanent=False)
            return Outcome(state=RunState.SUCCEEDED, result=task.result().summary)
        except LeaseLostError:
            raise  # not the task's failure: the attempt belongs to nobody now
        except asyncio.CancelledError:
            if watch.done() and watch.exception() is None and watch.result():
                return Outcome(state=RunState.CANCELLED, error="cancelled: a newer run replaced "
                               "it (concurrencyPolicy Replace)")  # fmt: skip
            raise
        except PermanentTaskError as exc:
            return self._failure(claim, job, str(exc), permanent=True, detail=exc.detail)
        except RetryableTaskError as exc:
            return self._failure(claim, job, str(exc), permanent=False, detail=exc.detail)
        except Exception as exc:  # noqa: BLE001 - whatever a task raises is its failure
            # (a header httpx cannot encode, an invalid URL, a NUL in a command's
            # arguments, a bug in a Python task): a failed attempt under the retry
            # policy, not a run left to wait out its lease.
            return self._failure(claim, job, f"{type(exc).__name__}: {exc}", permanent=False)
        finally:
            watch.cancel()
            if not task.done():
                task.cancel()

    @staticmethod
    async def _under_lease(task: asyncio.Task[Any], lease: _Lease, seconds: float) -> bool:
        """Wait up to ``seconds`` for ``task``; True once it has ended. If the lease is
        lost first, cancel the task, give it a moment to end (a command's process group
        is killed, an HTTP request closed), and raise LeaseLostError."""
        lost = asyncio.create_task(lease.lost.wait())
        try:
            await asyncio.wait({task, lost}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
        if lease.lost.is_set():
            task.cancel()
            await asyncio.wait({task}, timeout=_STOP_SECONDS)
            raise LeaseLostError(lease.why)
        return task.done()

    async def _watch_for_replacement(
        self, claim: Claim, job: ScheduledJob, task: asyncio.Task[Any]
    ) -> bool:
        """With Replace, cancel the task once a newer run of the job is published."""
        if job.spec.concurrency_policy is not ConcurrencyPolicy.REPLACE:
            return False
        while not task.done():
            await asyncio.sleep(self.lease_seconds / 3)  # the same cadence as the heartbeat
            with contextlib.suppress(KubeApiError):
                fresh = await self._read(claim)
                if fresh is not None and why_skip(fresh, claim) == "superseded":
                    task.cancel()
                    return True
        return False

    def _failure(
        self, claim: Claim, job: ScheduledJob, error: str, *, permanent: bool,
        detail: str | None = None,
    ) -> Outcome:  # fmt: skip
        retry = job.spec.retry
        decision = after_failure(
            claim.run_id,
            attempt=claim.message.attempt,
            max_attempts=retry.max_attempts,
            permanent=permanent,
            base=retry.backoff_seconds,
            cap=retry.max_backoff_seconds,
        )
        text = f"{error}: {detail}" if detail else error  # the detail: status only
        if isinstance(decision, GiveUp):
            return Outcome(state=RunState.FAILED, error=f"{text} ({decision.reason})",
                           brief=f"{error} ({decision.reason})")  # fmt: skip
        return Outcome(
            state=RunState.RETRYING,
            error=text,
            brief=error,
            retry_delay=decision.delay_seconds,
            next_attempt=decision.next_attempt,
        )

    # -- the outcome ----------------------------------------------------------------

    async def _conclude(
        self, claim: Claim, job: ScheduledJob, outcome: Outcome, *, started_at: dt.datetime
    ) -> None:
        ref = JobRef(namespace=claim.message.namespace, name=claim.message.name,
                     uid=claim.message.uid)  # fmt: skip
        if outcome.state is RunState.RETRYING:
            assert outcome.retry_delay is not None  # noqa: S101 - set with RETRYING
            assert outcome.next_attempt is not None  # noqa: S101
            fresh = await self._fresh(claim, job)
            info = self._run_info(claim, started_at)
            retrying = RunState.RETRYING
            await self._write(claim, fresh, lambda j: running_body(j.status, info, state=retrying))
            self.metrics.retries.inc()
            await self.events.post(
                ref, type_=NORMAL, reason="RunRetrying",
                message=f"attempt {claim.message.attempt} of run {claim.run_id} failed, retrying "
                f"in {outcome.retry_delay:.0f}s: {outcome.told}",
            )  # fmt: skip
            if not await self.queue.retry(
                claim, delay_seconds=outcome.retry_delay, attempt=outcome.next_attempt
            ):
                raise LeaseLostError
            return
        recorded = await self._finish(claim, job, outcome, started_at=started_at)
        self.metrics.runs.labels(outcome=outcome.state.value).inc()
        if not recorded and outcome.state is not RunState.FAILED:
            # Status refused the record: keep the outcome where an operator sees it.
            self.metrics.dead_lettered.inc()
            error = f"{outcome.state.value}, but status refused its record (see the worker's log)"
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
        elif not await self.queue.ack(claim):
            raise LeaseLostError

    async def _finish(
        self,
        claim: Claim,
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
        fresh = await self._fresh(claim, job) if stale else job
        record = RunRecord(
            id=claim.run_id,
            scheduled_at=_scheduled_at(claim, started_at or dt.datetime.now(dt.UTC)),
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

        return await self._write(claim, fresh, build, record=True)

    async def _write(
        self,
        claim: Claim,
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
        lease = self._leases[claim.token]
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
            current = await self._reread(claim)
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


def _scheduled_at(claim: Claim, default: dt.datetime | None) -> Any:
    text = claim.message.scheduled_at
    if text:
        return dt.datetime.fromisoformat(text)
    return default
