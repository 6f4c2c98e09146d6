"""The leader's backfills: the runs of each range in ``spec.backfills``, published in order.

A backfill (``spec.backfills``, which ``kubectl tickwork backfill`` adds) names a
range of the schedule's instants; each becomes a run of its own
(:func:`~tickwork.core.runs.backfill_run_id`), published through the one publish
path, :meth:`Publisher.publish <tickwork_operator.publisher.Publisher.publish>`,
as the operator-wide :class:`~tickwork_operator.pacing.Pace` allows and as the
job's ``concurrencyPolicy`` says (a buffered backfilled run waits here, not in
``status.bufferedRuns``). Progress is kept in ``status.backfills``, so a new
leader goes on where the old one stopped.
"""

from __future__ import annotations

import datetime as dt
import logging

from tickwork.api.models import BackfillProgress, QueuedRun
from tickwork.core.backfill import next_backfill_run, refusal
from tickwork.core.cancel import policy_reason
from tickwork.core.planning import Action, ConcurrencyPolicy, overlap
from tickwork.core.runs import backfill_run_id
from tickwork.kube.events import NORMAL, WARNING
from tickwork.kube.status import updated
from tickwork_operator.claims import schedules
from tickwork_operator.pacing import Pace
from tickwork_operator.parts import Part, Shared
from tickwork_operator.reporter import Reporter
from tickwork_operator.state import JobEntry
from tickwork_operator.waiting import Publish, WaitingRuns

logger = logging.getLogger(__name__)


class Backfills(Part):
    def __init__(
        self,
        shared: Shared,
        *,
        reporter: Reporter,
        pace: Pace,
        publish: Publish,
        waiting: WaitingRuns,
    ) -> None:
        """``waiting``: where the concurrencyPolicy's cancels of the active run go."""
        super().__init__(shared)
        self.reporter = reporter
        self.pace = pace
        self.publish = publish
        self.waiting = waiting

    async def run_backfills(self) -> None:
        """Publish the next runs of every unfinished backfill, as the pace allows."""
        for key in list(self.state.backfilling):
            entry = self.state.jobs.get(key)
            if entry is None:
                self.state.backfilling.pop(key, None)
                continue
            if entry.spec is None or entry.schedule is None or entry.suspended or entry.paused:
                continue  # a suspended or paused job's backfill waits for the resume
            if not self.holds_lease():
                return
            if not schedules(self.claims, entry.namespace):
                continue  # another release schedules the namespace
            try:
                with self.state.acting_on(entry, now=self.clock.now):
                    going = await self._backfill(entry)
            except Exception:
                logger.exception("backfill of %s/%s failed; it is tried again", *key)
                continue
            if not going:
                return  # out of pace (or Redis away): next tick

    async def _backfill(self, entry: JobEntry) -> bool:
        """Work on ``entry``'s backfills in order; False when the pace ran out or Redis is
        away (the rest waits for the next tick)."""
        assert entry.schedule is not None  # noqa: S101 - checked by the caller
        progress = list(entry.wanted.backfills)
        for index in range(len(progress)):
            while progress[index].completed_at is None:
                now = self.clock.now()
                step = await self._backfill_step(entry, progress[index], now=now)
                if step is None:
                    return False
                progress[index] = step
                entry.wanted = updated(entry.wanted, backfills=list(progress))
                self.reporter.owe(entry)
        self.state.track_backfills(entry)
        return True

    async def _backfill_step(
        self, entry: JobEntry, record: BackfillProgress, *, now: dt.datetime
    ) -> BackfillProgress | None:
        """One more run of the backfill, or its end; None to wait (pace, Redis)."""
        assert entry.schedule is not None  # noqa: S101
        if record.done_until is None and record.published == 0 and record.skipped == 0:
            why = refusal(entry.schedule, record.from_, record.to)
            if why is not None:
                self.reporter.owe(entry).events.append(
                    (WARNING, "BackfillRefused", (f"backfill {record.name!r} refused: {why}"))
                )
                return record.model_copy(update={"completed_at": now, "message": why})
        moment = next_backfill_run(
            entry.schedule, start=record.from_, end=record.to, done_until=record.done_until
        )
        if moment is None:
            self.reporter.owe(entry).events.append(
                (
                    NORMAL,
                    "BackfillComplete",
                    (
                        f"backfill {record.name!r} complete: {record.published} run(s) published, "
                        f"{record.skipped} skipped (concurrencyPolicy)"
                    ),
                )
            )
            return record.model_copy(update={"completed_at": now})
        run_id = backfill_run_id(entry.uid, record.name, moment)
        action, reason = await self._backfill_overlap(entry, run_id)
        if action is Action.SKIP:
            self.metrics.runs_skipped.labels(reason="forbid").inc()
            logger.info("backfilled run %s %s", run_id, reason)
            return record.model_copy(update={"done_until": moment, "skipped": record.skipped + 1})
        # A backfill is a queue of its own: under a buffering policy its next run waits
        # here (not in status.bufferedRuns) until no run of the job is active or buffered.
        if action is Action.BUFFER or not self.pace.take(self.clock.monotonic()):
            return None
        queued = QueuedRun(id=run_id, scheduled_at=moment, queued_at=now)
        if await self.publish(entry, queued, trigger="backfill") is None:
            return None
        return record.model_copy(update={"done_until": moment, "published": record.published + 1})

    async def _backfill_overlap(self, entry: JobEntry, run_id: str) -> tuple[Action, str]:
        """The concurrencyPolicy's verdict on a backfilled run, with the active run
        cancelled (CancelOther) or terminated (TerminateOther) if it says so."""
        action, cancel, reason = overlap(entry.facts(), run_id)
        if cancel is not None:
            policy = entry.facts().concurrency_policy.overlap
            terminate = policy is ConcurrencyPolicy.TERMINATE_OTHER
            why = policy_reason(policy.value, terminate=terminate)
            await self.waiting.request_cancel(entry, cancel, terminate=terminate, reason=why)
        return action, reason
