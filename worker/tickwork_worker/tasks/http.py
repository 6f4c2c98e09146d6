"""The ``http`` task: call a URL, the run ID as ``Idempotency-Key``.

Success is a status in ``successCodes`` (default: any 2xx). A 4xx other than
408 and 429 is permanent (the request itself is wrong; retrying repeats the
mistake); 408, 429, 5xx, timeouts and connection errors are retried.
Redirects are not followed. Neither headers nor bodies are ever logged.
"""

from __future__ import annotations

import httpx

from tickwork import __version__
from tickwork.api.models import ScheduledJobSpec
from tickwork_worker.tasks.base import (
    PermanentTaskError,
    RetryableTaskError,
    RunContext,
    TaskResult,
)

_RETRYABLE_4XX = frozenset({408, 429})
_BODY_PREVIEW = 512


class HttpTask:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        task = spec.task.http
        assert task is not None  # noqa: S101 - dispatched by kind
        headers = {h.name: h.value for h in task.headers}
        headers.setdefault("User-Agent", f"tickwork/{__version__}")
        headers["Idempotency-Key"] = run.run_id
        headers["X-Tickwork-Attempt"] = str(run.attempt)
        try:
            response = await self._client.request(
                task.method.value,
                task.url,
                headers=headers,
                content=task.body.encode() if task.body else None,
                timeout=spec.timeout_seconds,
                follow_redirects=False,
            )
        except httpx.TimeoutException as exc:
            raise RetryableTaskError(f"{task.method} {task.url}: timed out ({exc})") from None
        except httpx.HTTPError as exc:
            raise RetryableTaskError(
                f"{task.method} {task.url}: {type(exc).__name__}: {exc}"
            ) from None
        code = response.status_code
        preview = response.text[:_BODY_PREVIEW]
        summary = f"HTTP {code}" + (f": {preview}" if preview else "")
        succeeded = code in task.success_codes if task.success_codes else 200 <= code < 300  # noqa: PLR2004
        if succeeded:
            return TaskResult(summary=summary)
        if 400 <= code < 500 and code not in _RETRYABLE_4XX:  # noqa: PLR2004
            raise PermanentTaskError(summary)
        raise RetryableTaskError(summary)
