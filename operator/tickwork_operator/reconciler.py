"""The leader's housekeeping: re-publish runs that status shows active but the queue
has lost, keep the queue's own timers going (expired leases, due retries) and
report its depth, and delete finished one-shot jobs whose TTL ran out.
"""

from __future__ import annotations

import contextlib
import logging

from tickwork.api.models import ActiveRun, QueuedRun
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.runs import parse_run_id
from tickwork.kube.client import KubeApiError
from tickwork.queue.messages import EnqueueOutcome, RunLocation, RunMessage
from tickwork_operator.claims import schedules
from tickwork_operator.parts import Part, Shared
from tickwork_operator.state import JobEntry

logger = logging.getLogger(__name__)

#: A TTL deletion the API server refused is tried again this much later.
TTL_RETRY_SECONDS = 30.0


class Reconciler(Part):
    def __init__(self, shared: Shared, *, queue_name: str) -> None:
        super().__init__(shared)
        self.queue_name = queue_name

    async def reconcile(self) -> int:
        """Re-publish runs that status shows active but the queue has lost."""
        if not self.holds_lease():
            return 0
        republished = 0
        unheard: list[str] = []
        for entry in self.state.active_jobs():
            run_id = entry.active_run_id()
            if run_id is None or not schedules(self.claims, entry.namespace):
                continue
            try:
                location = await self.queue.locate(run_id)
                if location is RunLocation.DONE:
                    # Finished (or cancelled) but status never heard: stop counting
                    # it as active, or Forbid would skip every later run. The watch
                    # may have replaced the entry while the queue was asked: the
                    # live one is marked (a later event copies it from there).
                    for held in {
                        id(e): e
                        for e in (entry, self.state.jobs.get(entry.key))
                        if e is not None and e.uid == entry.uid
                    }.values():
                        held.settled_run_ids = held.settled_run_ids | {run_id}
                        self.state.track_active(held)
                    unheard.append(run_id)
                    continue
                if location is not None:
                    continue
                if await self.queue.enqueue(_lost(entry, run_id)) is EnqueueOutcome.ENQUEUED:
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
            logger.warning(
                "%d run(s) done in the queue but not yet in status, e.g. %s",
                len(unheard),
                ", ".join(unheard[:3]),
            )
        self.metrics.reconciliations.inc()
        return republished

    async def maintain_queue(self) -> None:
        try:
            await self.queue.reap_expired()
            await self.queue.promote_due()
            depth = await self.queue.depth()
        except QueueUnavailableError as exc:
            self.metrics.api_errors.labels(operation="queue.maintain").inc()
            self.metrics.redis_up.labels(queue=self.queue_name).set(0)
            logger.warning("queue maintenance postponed: %s", exc)
            return
        self.metrics.redis_up.labels(queue=self.queue_name).set(1)
        for state, value in (
            ("ready", depth.ready),
            ("in_flight", depth.in_flight),
            ("delayed", depth.delayed),
            ("dead", depth.dead),
            ("parked", depth.parked),
            ("waiting_for_key", depth.waiting_for_key),
        ):
            self.metrics.queue_depth.labels(state=state).set(value)
        normal = depth.ready - depth.ready_high - depth.ready_low
        for priority, value in (
            ("High", depth.ready_high),
            ("Normal", normal),
            ("Low", depth.ready_low),
        ):
            self.metrics.queue_ready.labels(priority=priority).set(max(0, value))
        self.metrics.queue_backlog.labels(queue=self.queue_name).set(depth.backlog)
        self.metrics.queue_remembered.set(depth.remembered)
        self.metrics.queue_dead_oldest.set(depth.oldest_dead_seconds)
        self.metrics.queue_oldest_waiting.set(depth.oldest_waiting_seconds)
        if depth.memory_used_bytes is not None:
            self.metrics.redis_memory_used.set(depth.memory_used_bytes)
            self.metrics.redis_memory_max.set(depth.memory_max_bytes or 0)

    def forget_queue(self) -> None:
        """A standby reports no queue: autoscalers and alerts must see the leader's only."""
        self.metrics.queue_depth.clear()
        self.metrics.queue_ready.clear()
        self.metrics.queue_backlog.clear()
        self.metrics.redis_up.clear()

    async def delete_finished(self, entry: JobEntry) -> None:
        if not self.may_act(entry.namespace):
            self.state.index.put(
                ("ttl", entry.namespace, entry.name), self.clock.wall() + TTL_RETRY_SECONDS
            )
            return
        try:
            await self.kube.delete_job(entry.namespace, entry.name, entry.uid)
            logger.info("deleted finished one-shot job %s/%s (ttl)", entry.namespace, entry.name)
        except KubeApiError as exc:
            if not exc.not_found and not exc.conflict:
                self.metrics.api_errors.labels(operation="job.delete").inc()
                self.state.index.put(
                    ("ttl", entry.namespace, entry.name), self.clock.wall() + TTL_RETRY_SECONDS
                )


def _lost(entry: JobEntry, run_id: str) -> RunMessage:
    """The message of a run the queue lost, rebuilt from status: the attempt a worker
    reported, the nominal time (a manual run's: when it was triggered), a manual
    run's parameters, and the job's priority and concurrency key."""
    current = next((run for run in entry.observed.active_runs if run.id == run_id), None)
    source: ActiveRun | QueuedRun | None = current
    # Status as observed, or as this leader wrote it (a catch-up names its run before
    # publishing it, and the watch may not have brought that write back yet).
    for queued in (entry.observed.queued_run, entry.wanted.queued_run):
        if source is None and queued is not None and queued.id == run_id:
            source = queued
    attempt = current.attempt if current is not None else 1
    moment = source.scheduled_at.isoformat() if source is not None else None
    manual = source is not None and source.manual
    if source is None:
        # Status does not name it (no queuedRun without the schedule in status): a
        # scheduled run's ID names its instant.
        with contextlib.suppress(ValueError):
            named = parse_run_id(run_id).scheduled_at
            moment = named.isoformat() if named is not None else None
    return RunMessage(
        run_id=run_id,
        namespace=entry.namespace,
        name=entry.name,
        uid=entry.uid,
        attempt=attempt,
        scheduled_at=None if manual else moment,
        triggered_at=moment if manual else None,
        generation=entry.generation,
        params=source.params if source is not None else None,
        **entry.routing(),
    )
