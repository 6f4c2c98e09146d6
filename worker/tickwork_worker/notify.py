"""Telling a job's notifiers (``spec.notify``) that a run failed for good.

The worker that records the failure tells each notifier that asks for the event, in
the background: the run's ack never waits for it, and nothing a notifier does (an
unreachable endpoint, a Secret gone, an error of its own) fails or holds up a run.
Each notice is told once per run and event, whichever worker has it (the queue
notes it, ``RunQueue.admit_notice``), and at most ``per_minute`` a minute per
namespace. A notice is POSTed as JSON shaped for Slack, Teams or as plain fields
(:func:`notice_body`), through the namespace's HTTP client and so under its egress
rules, like an http task; a URL from a Secret is never logged, and the error text
is the run's, already rid of the Secret values its attempt read. A refused answer
(408, 429, 5xx, a timeout, a connection error) is tried again, ``attempts`` in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tickwork import __version__
from tickwork.api.models import ScheduledJob
from tickwork.api.notify import Notifier, NotifyEvent, NotifyFormat
from tickwork.core.errors import PermanentTaskError, QueueUnavailableError
from tickwork.kube.client import KubeClient
from tickwork.queue.messages import RunMessage
from tickwork.queue.protocol import RunQueue
from tickwork_worker.decisions import Outcome, scheduled_at
from tickwork_worker.tasks.base import RetryableTaskError
from tickwork_worker.tasks.egress import EgressRefusedError
from tickwork_worker.tasks.http import RETRYABLE_4XX, redact_url
from tickwork_worker.tasks.secrets import SecretValues

logger = logging.getLogger(__name__)

#: Seconds before the second try; doubled for each one after.
BACKOFF_SECONDS = 1.0
#: How long a stopping worker waits for the notices on their way.
CLOSE_SECONDS = 5.0


@dataclass(frozen=True)
class Notice:
    """What a notice tells."""

    event: NotifyEvent
    namespace: str
    job: str
    run_id: str
    scheduled_at: dt.datetime | None
    attempts: int
    error: str


def failed_notice(message: RunMessage, outcome: Outcome) -> Notice:
    """The notice of a run that failed for good."""
    return Notice(
        event=NotifyEvent.FAILED,
        namespace=message.namespace,
        job=message.name,
        run_id=message.run_id,
        scheduled_at=scheduled_at(message, None),
        attempts=message.attempt,
        error=outcome.error or "failed",
    )


def notice_body(shape: NotifyFormat, notice: Notice) -> dict[str, Any]:
    """The JSON body of ``notice`` for a notifier of ``shape``."""
    scheduled = notice.scheduled_at.isoformat() if notice.scheduled_at else None
    headline = (
        f"Tickwork: run {notice.run_id} of {notice.namespace}/{notice.job} failed "
        f"after {notice.attempts} attempt(s)"
    )
    if shape is NotifyFormat.SLACK:
        return {"text": f"{headline}: {notice.error}"}
    if shape is NotifyFormat.TEAMS:
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": headline,
            "title": headline,
            "text": notice.error,
        }
    return {
        "event": notice.event.value,
        "namespace": notice.namespace,
        "job": notice.job,
        "runId": notice.run_id,
        "scheduledAt": scheduled,
        "attempts": notice.attempts,
        "error": notice.error,
    }


class Notifications:
    """The notices of one worker, told in the background."""

    def __init__(
        self,
        *,
        queue: RunQueue,
        kube: KubeClient,
        client_for: Callable[[str], httpx.AsyncClient],
        per_minute: int = 30,
        attempts: int = 3,
        timeout_seconds: float = 10.0,
        counted: Callable[[str], None] = lambda _outcome: None,
    ) -> None:
        self.queue = queue
        self.kube = kube
        self.client_for = client_for
        self.per_minute = per_minute
        self.attempts = attempts
        self.timeout_seconds = timeout_seconds
        self.counted = counted
        """Called with each notice's outcome: sent, failed, duplicate, limited."""
        self._telling: set[asyncio.Task[None]] = set()

    def tell(self, job: ScheduledJob, notice: Notice) -> None:
        """Tell every notifier of ``job`` that asks for ``notice.event``, in the background."""
        for index, notifier in enumerate(job.spec.notify):
            if notice.event in notifier.events:
                task = asyncio.create_task(self._tell(notifier, index, notice))
                self._telling.add(task)
                task.add_done_callback(self._telling.discard)

    async def close(self) -> None:
        """Give the notices still on their way ``CLOSE_SECONDS``, then drop them."""
        if self._telling:
            _, late = await asyncio.wait(set(self._telling), timeout=CLOSE_SECONDS)
            for task in late:
                task.cancel()

    async def _tell(self, notifier: Notifier, index: int, notice: Notice) -> None:
        log = {"run_id": notice.run_id, "namespace": notice.namespace, "job": notice.job}
        try:
            key = f"{notice.run_id}/{notice.event.value}/{index}"
            admitted = await self.queue.admit_notice(
                key, notice.namespace, per_minute=self.per_minute
            )
            if admitted != "send":
                self.counted(admitted)
                logger.info("notice not sent: %s", admitted, extra=log)
                return
            where = await self._send(notifier, notice)
            self.counted("sent")
            logger.info("notice sent to %s", where, extra=log)
        except (
            QueueUnavailableError,
            RetryableTaskError,
            PermanentTaskError,
            EgressRefusedError,
        ) as exc:
            self.counted("failed")
            logger.warning("notice not sent: %s", exc, extra=log)
        except Exception:  # a notifier never fails a run, nor the worker
            self.counted("failed")
            logger.exception("notice not sent", extra=log)

    async def _send(self, notifier: Notifier, notice: Notice) -> str:
        """POST the notice, tried again on a refusal; where it went (redacted)."""
        secrets = SecretValues(self.kube, notice.namespace)
        if notifier.url_from is not None:
            url = await secrets.read(notifier.url_from.secret_key_ref)
            where = "the URL of Secret " + notifier.url_from.secret_key_ref.name
        else:
            url = notifier.url or ""
            where = redact_url(url)
        body = json.dumps(notice_body(notifier.format, notice)).encode()
        headers = {"Content-Type": "application/json", "User-Agent": f"tickwork/{__version__}"}
        client = self.client_for(notice.namespace)
        delay = BACKOFF_SECONDS
        for attempt in range(1, self.attempts + 1):
            code, why = await self._post(client, url, body, headers)
            if code is not None and 200 <= code < 300:  # noqa: PLR2004
                return where
            if code is not None and 400 <= code < 500 and code not in RETRYABLE_4XX:  # noqa: PLR2004
                raise PermanentTaskError(f"{where}: {why}")
            if attempt < self.attempts:
                await asyncio.sleep(delay)
                delay *= 2
        raise RetryableTaskError(f"{where}: {why} ({self.attempts} tries)")

    async def _post(
        self, client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int | None, str]:
        """The endpoint's status code (None: no answer), and what to say of it (never
        the URL)."""
        try:
            response = await client.post(
                url, content=body, headers=headers, timeout=self.timeout_seconds
            )
        except EgressRefusedError:
            raise
        except httpx.HTTPError as exc:
            return None, type(exc).__name__
        with contextlib.suppress(httpx.HTTPError):
            await response.aclose()
        return response.status_code, f"HTTP {response.status_code}"
