"""The leader acts on requeue and purge requests: dead letters through the Kubernetes API.

A user who may patch a ScheduledJob asks with an annotation
(``tickwork.dev/requeue`` or ``tickwork.dev/purge``: a token, or ``TOKEN:RUN_ID``
for one run), so reaching the dead-letter queue takes the user's RBAC on that job,
not the Redis password. Each new token acts once (``status.lastRequeueToken`` /
``lastPurgeToken``), only on runs of this very job (a run ID of another job is
refused with an Event), and only on runs the job's status lists in ``deadRuns``
(or the one run named). A requeued run leaves ``deadRuns`` when it starts again;
a purged one is withdrawn here, by an apply as that run's own field manager.
"""

from __future__ import annotations

import logging
from typing import Any

from tickwork.api.models import ScheduledJobStatus
from tickwork.core.annotations import DeadLetterRequest
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.runs import belongs_to
from tickwork.kube.client import KubeApiError
from tickwork.kube.events import NORMAL, WARNING
from tickwork.kube.status import updated, withdrawal_body
from tickwork_operator.parts import Part, Shared
from tickwork_operator.reporter import Reporter
from tickwork_operator.state import JobEntry

logger = logging.getLogger(__name__)


class DeadLetterDesk(Part):
    def __init__(self, shared: Shared, *, reporter: Reporter) -> None:
        super().__init__(shared)
        self.reporter = reporter

    async def act(self) -> None:
        """Every request the watch brought since the last tick."""
        for key, ask in self.state.take_dead_letter_asks():
            entry = self.state.jobs.get(key)
            if entry is None:
                continue
            if not self.may_act(entry.namespace):
                self.state.retry_dead_letter_ask(key, ask)
                continue
            try:
                await self._act(entry, ask)
            except (QueueUnavailableError, KubeApiError) as exc:
                self.state.retry_dead_letter_ask(key, ask)  # next tick
                logger.warning("%s of dead runs of %s/%s postponed: %s", ask.verb, *key, exc)

    async def _act(self, entry: JobEntry, ask: DeadLetterRequest) -> None:
        listed = [d for d in entry.observed.dead_run_ids if belongs_to(d, entry.uid)]
        if ask.run_id is not None and not belongs_to(ask.run_id, entry.uid):
            why = f"{ask.verb} {ask.run_id!r} refused: not a run of this job"
            await self._done(entry, ask, WARNING, "DeadLetterRequestRefused", why)
            return
        targets = [ask.run_id] if ask.run_id is not None else listed
        acted = []
        for run_id in targets:
            if ask.verb == "requeue":
                moved = await self.queue.requeue_dead(run_id)
            else:
                moved = await self.queue.purge_dead(run_id)
            if run_id in listed and (ask.verb == "purge" or not moved):
                await self._unlist(entry, run_id)  # gone from the queue: gone from status
            if moved:
                acted.append(run_id)
        done = "requeued" if ask.verb == "requeue" else "purged"
        await self._done(
            entry,
            ask,
            NORMAL,
            f"DeadRuns{done.capitalize()}",
            f"{done} {len(acted)} dead run(s) (token {ask.token!r})"
            + (f": {', '.join(acted)}" if acted else ""),
        )
        logger.info(
            "%s %d dead run(s) of %s/%s",
            done,
            len(acted),
            *entry.key,
            extra={
                "event": f"dead-{ask.verb}",
                "namespace": entry.namespace,
                "job": entry.name,
                "runs": acted,
            },
        )

    async def _unlist(self, entry: JobEntry, run_id: str) -> None:
        """Take ``run_id`` out of ``deadRuns``: its own manager applies what it still
        owns without it (nothing at all drops the manager). Rare, so the object is
        read afresh for its ``managedFields``."""
        body = await self.kube.get_job(entry.namespace, entry.name)
        status = ScheduledJobStatus.model_validate(body.get("status") or {})
        kept = withdrawal_body(body.get("metadata") or {}, status, run_id, keep_dead=False)
        await self.apply_as_run(entry, run_id, kept, force=False)

    async def _done(
        self, entry: JobEntry, ask: DeadLetterRequest, type_: str, reason: str, message: str
    ) -> None:
        field = "last_requeue_token" if ask.verb == "requeue" else "last_purge_token"
        token: dict[str, Any] = {field: ask.token}
        entry.wanted = updated(entry.wanted, **token)
        self.reporter.owe(entry).events.append((type_, reason, message))
