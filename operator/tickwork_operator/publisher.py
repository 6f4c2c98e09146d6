"""The leader's publishing: due runs and run-now triggers, and the one publish path.

A due entry of the bucket index is planned by :func:`tickwork.core.planning.decide`
(publish, buffer, skip, or miss), a trigger names a manual run. Every run goes out
through :meth:`Publisher.publish`, these and those of the two parts a
:class:`Publisher` owns: buffered runs and cancels (:mod:`~tickwork_operator.waiting`,
which also carries out a decision to buffer a run or cancel the active one) and
backfills (:mod:`~tickwork_operator.backfills`). It enqueues (run IDs make a second
publish a no-op), notes the run as active, and updates the operator's share of
status, which the :class:`~tickwork_operator.reporter.Reporter` sends; each caller
checks the Lease first. Late runs (caught up after an outage, backfilled) take a
token of the operator-wide :class:`~tickwork_operator.pacing.Pace` first.
"""

from __future__ import annotations

import datetime as dt
import logging

from tickwork.api.models import QueuedRun
from tickwork.core.annotations import same_trigger, trigger_key
from tickwork.core.cancel import policy_reason
from tickwork.core.errors import InvalidParamsError, QueueUnavailableError
from tickwork.core.params import parse_params
from tickwork.core.planning import Action, Decision, PendingRun, decide
from tickwork.core.runs import manual_run_id
from tickwork.core.states import JobPhase
from tickwork.kube.events import NORMAL, WARNING
from tickwork.kube.status import updated
from tickwork.queue.messages import EnqueueOutcome, RunMessage
from tickwork_operator.backfills import Backfills
from tickwork_operator.dependencies import trigger_params
from tickwork_operator.due import DuePlan, decided_by_the_clock, due_plan
from tickwork_operator.pacing import Pace
from tickwork_operator.parts import Part, Shared
from tickwork_operator.reporter import Reporter, job_ref
from tickwork_operator.state import JobEntry, Trigger
from tickwork_operator.waiting import WaitingRuns

logger = logging.getLogger(__name__)

#: A due entry that could not be handled (Redis away, the Lease in doubt) is due
#: again this much later.
RETRY_DELAY = 1.0


class Publisher(Part):
    def __init__(self, shared: Shared, *, reporter: Reporter, pace: Pace) -> None:
        super().__init__(shared)
        self.reporter = reporter
        self.pace = pace
        self.waiting = WaitingRuns(shared, reporter=reporter, publish=self.publish)
        self.backfills = Backfills(
            shared, reporter=reporter, pace=pace, publish=self.publish, waiting=self.waiting
        )

    def _retry_in(self, namespace: str) -> float:
        if self.claims is None or not self.holds_lease():
            return RETRY_DELAY
        return self.claims.retry_in(namespace)

    # -- the one publish path ----------------------------------------------------

    async def publish(
        self, entry: JobEntry, queued: QueuedRun, *, trigger: str, reported: bool = True
    ) -> EnqueueOutcome | None:
        """The one way a run is published, scheduled or manual: enqueue it, note it
        active, and want status to name it (``queuedRun``; not ``reported``: name none,
        as the run's record will). None if Redis is away."""
        moment = queued.scheduled_at.isoformat()
        message = RunMessage(
            run_id=queued.id,
            namespace=entry.namespace,
            name=entry.name,
            uid=entry.uid,
            scheduled_at=None if queued.manual else moment,
            triggered_at=moment if queued.manual else None,
            generation=entry.generation,
            params=queued.params,
            **entry.routing(),
        )
        try:
            with self.tracing.publishing(message.run_id, entry.namespace, entry.name, trigger):
                outcome = await self.queue.enqueue(message)
        except QueueUnavailableError as exc:
            self.metrics.api_errors.labels(operation="queue.enqueue").inc()
            logger.warning("could not publish %s, retrying: %s", message.run_id, exc)
            return None
        if outcome is EnqueueOutcome.ENQUEUED:
            self.metrics.runs_published.labels(trigger=trigger).inc()
            logger.info(
                "run published",
                extra={**message.log_fields(), "event": "published", "trigger": trigger},
            )
        else:
            logger.info(
                "run published again: the queue has it (%s)",
                outcome,
                extra={**message.log_fields(), "event": "republished", "trigger": trigger},
            )
        entry.published_run_id = queued.id
        self.state.track_active(entry)
        entry.wanted = updated(entry.wanted, queued_run=queued if reported else None)
        return outcome

    # -- due runs -----------------------------------------------------------------

    async def run_due(self, entry: JobEntry) -> None:
        """Decide and publish; the status report follows in the background."""
        if entry.pending is None or entry.spec is None or entry.suspended or entry.paused:
            return
        pending = entry.pending
        if not self.may_act(entry.namespace):
            # The Lease (or the namespace's claim) may be someone else's by now: publish
            # nothing, keep the entry (a leader again, or the new leader from its own
            # index, publishes it; or this one, once it holds the namespace).
            if self.claims is not None and self.holds_lease():
                why = self.claims.why_not(entry.namespace)
                self.metrics.runs_held_back.labels(reason=why).inc()
            self.reindex(entry, pending, retry=True)
            return
        with self.state.acting_on(entry, now=self.clock.now):
            if not await self._resume_written(entry):
                self.reindex(entry, pending, retry=True)
                return
            now = self.clock.now()
            decision = decide(entry.facts(), pending, now=now)
            if decision.late and not self.pace.take(self.clock.monotonic()):
                # Caught up, but the operator-wide pace says not yet: the same decision
                # again when a token is there (it may then find more runs missed).
                wait = self.pace.wait(self.clock.monotonic())
                self.state.index.put(("run", entry.namespace, entry.name), self.clock.wall() + wait)
                return
            if not await self._carry_out(entry, decision, now=now):
                self.reindex(entry, pending, retry=True)
                return
            entry.pending = decision.following
            self.reindex(entry, decision.following)

    async def _carry_out(self, entry: JobEntry, decision: Decision, *, now: dt.datetime) -> bool:
        """Carry ``decision`` out: the cancel it asks for, then its plan (:func:`due_plan`),
        worked out on the share the cancel left. False if it must be decided again."""
        spec = entry.spec
        assert spec is not None  # noqa: S101 - run_due decides for valid specs only
        if decision.cancel_run_id is not None:
            why = policy_reason(spec.concurrency_policy.overlap.value, terminate=decision.terminate)
            await self.waiting.request_cancel(
                entry, decision.cancel_run_id, terminate=decision.terminate, reason=why
            )
        plan = due_plan(
            entry.wanted,
            decision,
            now=now,
            keeps_schedule=self.state.keeps_schedule(entry),
            next_runs=entry.next_runs,
            by_the_clock=decided_by_the_clock(decision, spec),
            overtaken=entry.active_run_id() is not None,
        )
        if decision.action is Action.PUBLISH:
            if not await self._publish_due(entry, decision, plan, now=now):
                return False
        else:
            entry.wanted = updated(entry.wanted, **plan.changes)
            if decision.action is Action.BUFFER:
                self.waiting.buffer(entry, decision, now=now)
        if plan.missed:
            self.metrics.runs_skipped.labels(reason="missed").inc(plan.missed)
        if plan.skipped:
            self.metrics.runs_skipped.labels(reason="forbid").inc(plan.skipped)
        if plan.report:
            self.reporter.owe(entry).events.extend(plan.events)
        return True

    async def _resume_written(self, entry: JobEntry) -> bool:
        """Status no longer says Paused (written now if it still does; False if that
        failed). A worker skips a run of a job whose status says Paused, re-reading the
        job first: the end of a pause must be there before the first run after it."""
        if entry.written.phase is not JobPhase.PAUSED or entry.paused:
            return True
        return await self.reporter.write(entry)

    def reindex(self, entry: JobEntry, pending: PendingRun | None, *, retry: bool = False) -> None:
        key = ("run", entry.namespace, entry.name)
        if pending is None:
            self.state.index.remove(key)
        elif retry:
            self.state.index.put(key, self.clock.wall() + self._retry_in(entry.namespace))
        else:
            self.state.index.put(key, pending.due_at.timestamp())

    async def _publish_due(
        self, entry: JobEntry, decision: Decision, plan: DuePlan, *, now: dt.datetime
    ) -> bool:
        """Publish ``decision``'s run as ``plan`` says; False if it must be decided again
        (Redis away, or the durable write refused)."""
        assert decision.scheduled_at is not None  # noqa: S101 - a publish names its run
        assert decision.run_id is not None  # noqa: S101
        queued = QueuedRun(
            id=decision.run_id,
            scheduled_at=decision.scheduled_at,
            queued_at=now,
            params=trigger_params(entry, decision.scheduled_at),  # spec.after: the upstream run
        )
        # Which run a catch-up starts and how many it counts missed depend on when it
        # is decided: a leader taking over before the report went out would decide
        # again later, count one more missed and start a second run. Such a decision
        # is written first, naming its run (queuedRun): a run that status names and
        # the queue lacks is published by the reconciler.
        if plan.durable:
            before = entry.wanted
            entry.wanted = updated(entry.wanted, **plan.changes, queued_run=queued)
            if not await self.reporter.write(entry):
                entry.wanted = before
                return False
            entry.published_run_id = queued.id
            self.state.track_active(entry)
        outcome = await self.publish(entry, queued, trigger="schedule", reported=plan.reported)
        if outcome is None and not plan.durable:
            return False
        if outcome is EnqueueOutcome.ENQUEUED:
            lag = (now - decision.scheduled_at).total_seconds()
            self.metrics.schedule_lag.observe(max(0.0, lag))
        if not plan.durable:
            entry.wanted = updated(entry.wanted, **plan.changes)
        return True

    # -- manual runs --------------------------------------------------------------

    async def run_triggers(self) -> None:
        """Publish a manual run for every new run-now token."""
        for key, trigger in self.state.take_triggers():
            entry = self.state.jobs.get(key)
            if entry is None:
                continue
            try:
                await self.run_now(entry, trigger)
            except Exception:
                # Tried again next tick; the rest of this tick (reports, reconciling,
                # owed status writes) must not wait on one trigger that keeps failing.
                self.state.retry_trigger(key, trigger)
                logger.exception("run-now %s/%s failed; it is retried", *key)

    async def run_now(self, entry: JobEntry, trigger: Trigger) -> None:
        token = trigger.token
        key = trigger_key(token)
        if key is None or same_trigger(token, entry.wanted.last_trigger_token):
            return
        if not self.may_act(entry.namespace):
            self.state.retry_trigger(entry.key, trigger)
            return
        if entry.spec is None or entry.suspended or entry.paused:
            why = (
                "the spec is invalid"
                if entry.spec is None
                else "the job is suspended"
                if entry.suspended
                else "the job is paused after failed runs: resume it "
                "first (kubectl tickwork resume)"
            )
            await self._ignore(entry, token, why)
            return
        try:
            params = parse_params(trigger.params)
        except InvalidParamsError as exc:
            await self._ignore(entry, token, f"{exc}; fix the parameters and use a new token")
            return
        if not await self._resume_written(entry):
            self.state.retry_trigger(entry.key, trigger, newer_wins=False)  # next tick
            return
        now = self.clock.now()
        run_id = manual_run_id(entry.uid, token)
        queued = QueuedRun(
            id=run_id, scheduled_at=now, queued_at=now, manual=True, params=params or None
        )
        if await self.publish(entry, queued, trigger="manual") is None:
            self.state.retry_trigger(entry.key, trigger, newer_wins=False)  # next tick
            return
        # The token as a key: it fits status whatever the annotation holds.
        entry.wanted = updated(entry.wanted, last_trigger_token=key)
        report = self.reporter.owe(entry)
        named = f", parameters {', '.join(sorted(params))}" if params else ""
        text = f"manual run {run_id} published (token {token!r}{named})"
        report.events.append((NORMAL, "RunNow", text))

    async def _ignore(self, entry: JobEntry, token: str, why: str) -> None:
        """Act on ``token`` by refusing it, once, saying why (a new token may try again)."""
        entry.wanted = updated(entry.wanted, last_trigger_token=trigger_key(token))
        await self.events.post(
            job_ref(entry),
            type_=WARNING,
            reason="RunNowIgnored",
            message=f"run-now {token!r} ignored: {why}",
        )
        await self.reporter.write(entry)
