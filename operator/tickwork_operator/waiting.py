"""The leader's buffered runs and cancels: runs that wait for the job, and runs to stop.

A run that ``concurrencyPolicy`` buffers (BufferOne, BufferAll, CancelOther) waits
in ``status.bufferedRuns`` and is published, the oldest first, once status shows no
run of the job active (:func:`~tickwork_operator.buffers.buffer_plan` decides).
A cancel (the ``tickwork.dev/cancel`` annotation, CancelOther, TerminateOther) takes
a run out of the buffer or the queue, or names it in ``status.cancelRequests`` for
its worker to stop. Queued runs of deleted jobs are withdrawn. A released run goes
out through the one publish path,
:meth:`Publisher.publish <tickwork_operator.publisher.Publisher.publish>`.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Protocol

from tickwork.api.models import CANCEL_REQUESTS_LIMIT, BufferedRun, CancelRequest, QueuedRun
from tickwork.core.cancel import CANCELLED_BY_USER
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.planning import Decision
from tickwork.kube.events import NORMAL, WARNING
from tickwork.kube.status import updated
from tickwork.queue.messages import EnqueueOutcome
from tickwork_operator.buffers import DropAll, PublishHead, buffer_plan
from tickwork_operator.claims import schedules
from tickwork_operator.parts import Part, Shared
from tickwork_operator.reporter import Reporter, job_ref
from tickwork_operator.state import JobEntry

logger = logging.getLogger(__name__)

#: Runs an Event about a dropped buffer names.
_NAMED = 5


class Publish(Protocol):
    """The one way a run is published (:meth:`tickwork_operator.publisher.Publisher.publish`):
    None if Redis is away."""

    async def __call__(
        self, entry: JobEntry, queued: QueuedRun, *, trigger: str
    ) -> EnqueueOutcome | None: ...


class WaitingRuns(Part):
    def __init__(self, shared: Shared, *, reporter: Reporter, publish: Publish) -> None:
        super().__init__(shared)
        self.reporter = reporter
        self.publish = publish

    def buffer(self, entry: JobEntry, decision: Decision, *, now: dt.datetime) -> None:
        """Keep the run in ``status.bufferedRuns`` until no run of the job is active."""
        assert decision.scheduled_at is not None  # noqa: S101 - a buffered run is named
        assert decision.run_id is not None  # noqa: S101
        waiting = BufferedRun(
            id=decision.run_id, scheduled_at=decision.scheduled_at, buffered_at=now
        )
        entry.wanted = updated(
            entry.wanted,
            buffered_runs=[*(b for b in entry.wanted.buffered_runs if b.id != waiting.id), waiting],
        )
        told = f"run {decision.run_id} {decision.reason}"
        self.reporter.owe(entry).events.append((NORMAL, "RunBuffered", told))

    async def request_cancel(
        self, entry: JobEntry, run_id: str, *, terminate: bool, reason: str
    ) -> None:
        """Stop ``run_id``: take it out of the queue if it has not started (and record it
        Cancelled), and name it in ``status.cancelRequests`` (written at once) for the
        worker that has it, or will claim it, to stop it and record it Cancelled."""
        known = next((r for r in entry.wanted.cancel_requests if r.id == run_id), None)
        if known is not None and (known.terminate or not terminate):
            return
        request = CancelRequest(
            id=run_id, requested_at=self.clock.now(), terminate=terminate, reason=reason[:256]
        )
        others = [r for r in entry.wanted.cancel_requests if r.id != run_id]
        kept = [*others, request][-CANCEL_REQUESTS_LIMIT:]
        entry.wanted = updated(entry.wanted, cancel_requests=kept)
        withdrawn = await self.cancel(run_id)
        if withdrawn:
            queued = entry.wanted.queued_run
            moment = queued.scheduled_at if queued and queued.id == run_id else self.clock.now()
            await self.reporter.record_cancelled(entry, run_id, moment, reason)
        await self.reporter.write(entry)
        how = "withdrawn from the queue" if withdrawn else "its worker is asked to stop it"
        await self.events.post(
            job_ref(entry),
            type_=NORMAL,
            reason="RunCancelled",
            message=f"run {run_id} {how}: {reason}",
        )

    async def run_waiting(self) -> None:
        """Act on buffered runs and cancels: drop the buffer of a job that may not run
        (suspended, paused, invalid), take cancelled runs out, and publish the first
        buffered run of each job that has no run active."""
        for entry in self.state.waiting_jobs():
            if not self.holds_lease():
                return
            if not schedules(self.claims, entry.namespace):
                continue  # another release schedules the namespace
            with self.state.acting_on(entry, now=self.clock.now):
                try:
                    await self._act_on_waiting(entry)
                except QueueUnavailableError:
                    return  # next tick

    async def _act_on_waiting(self, entry: JobEntry) -> None:
        for run_id in entry.cancels_to_act_on():
            buffered = next((b for b in entry.wanted.buffered_runs if b.id == run_id), None)
            if buffered is None:
                await self.request_cancel(entry, run_id, terminate=False, reason=CANCELLED_BY_USER)
                continue
            entry.wanted = updated(
                entry.wanted,
                buffered_runs=[b for b in entry.wanted.buffered_runs if b.id != run_id],
            )
            await self.reporter.record_cancelled(
                entry, run_id, buffered.scheduled_at, CANCELLED_BY_USER
            )
            await self.reporter.write(entry)
            await self.events.post(
                job_ref(entry),
                type_=NORMAL,
                reason="RunCancelled",
                message=f"buffered run {run_id} cancelled: {CANCELLED_BY_USER}",
            )
        plan = buffer_plan(
            entry.wanted.buffered_runs,
            valid=entry.spec is not None,
            suspended=entry.suspended,
            paused=entry.paused,
            active=entry.active_run_id() is not None,
        )
        if isinstance(plan, DropAll):
            waiting = plan.runs
            self.metrics.runs_skipped.labels(reason="missed").inc(len(waiting))
            entry.wanted = updated(
                entry.wanted,
                buffered_runs=[],
                missed_runs=(entry.wanted.missed_runs or 0) + len(waiting),
                last_missed_time=max(b.scheduled_at for b in waiting),
            )
            named = ", ".join(b.id for b in waiting[:_NAMED]) + (
                ", ..." if len(waiting) > _NAMED else ""
            )
            told = (
                f"{len(waiting)} buffered run(s) dropped and counted missed: {plan.why} ({named})"
            )
            await self._write_and_tell(entry, WARNING, "BufferDropped", told)
        elif isinstance(plan, PublishHead):
            head, rest = plan.head, list(plan.rest)
            queued = QueuedRun(
                id=head.id, scheduled_at=head.scheduled_at, queued_at=self.clock.now()
            )
            if await self.publish(entry, queued, trigger="buffer") is None:
                return
            entry.wanted = updated(entry.wanted, buffered_runs=rest)
            told = (
                f"buffered run {head.id} published: no run is active now "
                f"({len(rest)} still buffered)"
            )
            await self._write_and_tell(entry, NORMAL, "RunReleased", told)

    async def _write_and_tell(self, entry: JobEntry, type_: str, reason: str, told: str) -> None:
        """Write the job's share of status now, then post the Event that says why."""
        await self.reporter.write(entry)
        await self.events.post(job_ref(entry), type_=type_, reason=reason, message=told)

    async def cancel(self, run_id: str) -> bool | None:
        """Take a run out of the queue if it has not started; None if Redis is away."""
        try:
            return await self.queue.cancel(run_id)
        except QueueUnavailableError as exc:
            self.metrics.api_errors.labels(operation="queue.cancel").inc()
            logger.warning("could not cancel %s: %s", run_id, exc)
            return None

    async def withdraw(self) -> None:
        """Take queued runs of deleted jobs out of the queue (a run already claimed is
        not touched: its worker finds the job gone)."""
        for run_id in self.state.withdrawn_runs():
            withdrawn = await self.cancel(run_id)
            if withdrawn is None:
                return  # Redis is away: next tick
            self.state.withdrawal_done(run_id)
            if withdrawn:
                logger.info("withdrew %s: its job was deleted", run_id)
