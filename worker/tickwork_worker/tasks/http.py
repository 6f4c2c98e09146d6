"""The ``http`` task: call a URL, the run ID as ``Idempotency-Key``.

Every request says which run it is (:func:`run_headers`: ``Tickwork-Run-Id``,
``Tickwork-Scheduled-Time``, ``Tickwork-Attempt``, ``Tickwork-Job``, and a manual
run's parameters as JSON in ``Tickwork-Params``); these replace a header of the
same name the job sets. A ``bodyTemplate`` is filled in for the run
(:mod:`tickwork.core.templates`) and sent as JSON.

Success is a status in ``successCodes`` (default: any 2xx). A 3xx and a 4xx
other than 408 and 429 are permanent (the request itself is wrong; retrying
repeats the mistake); 408, 429, 5xx, timeouts and connection errors are
retried. Redirects are not followed. Neither headers nor bodies are ever logged, and URLs
in messages lose their user, password and query. Header values and the body may
come from Secrets of the job's namespace (``valueFrom``, ``bodyFrom``).

Connections go only where the worker's egress policy allows (see ``egress``): a
refused address fails the run at once with "address not allowed". The answer is
not read unless the installer asks for previews; then it is streamed and only its
first bytes are read, for the preview in status;
``Accept-Encoding: identity`` is asked for unless the job sets it, and whatever
``Content-Encoding`` a server sends anyway is decoded with a bound or not at all
(:mod:`tickwork_worker.tasks.replies`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

import httpx

from tickwork import __version__
from tickwork.api.models import ScheduledJobSpec
from tickwork.core.params import encode_params
from tickwork.core.templates import render_template
from tickwork_worker.tasks.base import (
    PermanentTaskError,
    RetryableTaskError,
    RunContext,
    TaskResult,
)
from tickwork_worker.tasks.egress import EgressRefusedError
from tickwork_worker.tasks.replies import UndecodableError, codings, decoded_prefix, printable

#: The 4xx answers worth asking again (timeout, throttled); any other 4xx is permanent.
RETRYABLE_4XX = frozenset({408, 429})


class HttpTask:
    def __init__(
        self,
        client: httpx.AsyncClient | Callable[[str], httpx.AsyncClient],
        *,
        previews: bool = False,
    ) -> None:
        """``client``: one for every job, or the client for a job's namespace (whose
        egress rules it enforces; see tenants); ``previews``: read the answer's first
        bytes for status (off: the answer is not read at all)."""
        self._client_for = client if callable(client) else (lambda _namespace: client)
        self._previews = previews

    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        task = spec.task.http
        assert task is not None  # noqa: S101 - dispatched by kind
        headers = {
            h.name: header_value(h.name, await run.value(h.value, h.value_from))
            for h in task.headers
        }
        if task.body_template is not None:
            body = render_template(task.body_template, run.values())
            _default(headers, "Content-Type", "application/json")
        else:
            body = await run.value(task.body, task.body_from)
        where = f"{task.method} {redact_url(task.url)}"
        _default(headers, "User-Agent", f"tickwork/{__version__}")
        _default(headers, "Accept-Encoding", "identity")
        for name, value in run_headers(run).items():
            _replace(headers, name, value)
        try:
            async with self._client_for(run.namespace).stream(
                task.method.value,
                task.url,
                headers=headers,
                content=body.encode() if body else None,
                timeout=spec.timeout_seconds,
                follow_redirects=False,
            ) as response:
                code = response.status_code
                preview = run.cut(await _preview(response), end=True) if self._previews else ""
        except EgressRefusedError as exc:
            raise PermanentTaskError(f"{where}: {exc}") from None
        except httpx.TimeoutException as exc:
            raise RetryableTaskError(f"{where}: timed out ({_without(exc, task.url)})") from None
        except httpx.LocalProtocolError as exc:
            # The request itself could not be written: its message quotes the request.
            raise PermanentTaskError(
                f"{where}: the request cannot be sent as given ({type(exc).__name__})"
            ) from None
        except httpx.HTTPError as exc:
            raise RetryableTaskError(
                f"{where}: {type(exc).__name__}: {_without(exc, task.url)}"
            ) from None
        succeeded = code in task.success_codes if task.success_codes else 200 <= code < 300  # noqa: PLR2004
        if succeeded:
            return TaskResult(summary=f"HTTP {code}" + (f": {preview}" if preview else ""))
        # The body's preview goes to status only: Events are readable more widely.
        if 300 <= code < 400:  # noqa: PLR2004 - the same URL redirects again on a retry
            raise PermanentTaskError(
                f"HTTP {code}: redirects are not followed; point url at "
                "the target, or list the code in successCodes"
            )
        if 400 <= code < 500 and code not in RETRYABLE_4XX:  # noqa: PLR2004
            raise PermanentTaskError(f"HTTP {code}", detail=preview or None)
        raise RetryableTaskError(f"HTTP {code}", detail=preview or None)


def run_headers(run: RunContext) -> dict[str, str]:
    """The headers that say which run a request is (the same on every attempt, but
    for the attempt's number)."""
    headers = {
        "Idempotency-Key": run.run_id,
        "Tickwork-Run-Id": run.run_id,
        "Tickwork-Scheduled-Time": run.scheduled_time,
        "Tickwork-Attempt": str(run.attempt),
        "X-Tickwork-Attempt": str(run.attempt),  # the name of earlier versions
        "Tickwork-Job": f"{run.namespace}/{run.name}",
    }
    if run.params:
        headers["Tickwork-Params"] = encode_params(run.params)  # JSON, ASCII: any value fits
    if run.traceparent:
        headers["traceparent"] = run.traceparent  # the called service joins the run's trace
    return headers


def header_value(name: str, value: str) -> str:
    """``value`` as a header carries it: without surrounding whitespace, which HTTP
    does not count as part of a field value (a Secret made from a file ends in a
    newline). A line break or NUL inside is refused, naming the header only."""
    value = value.strip(" \t\r\n")
    if any(c in value for c in "\r\n\0"):
        raise PermanentTaskError(
            f"the value of header {name!r} holds a line break or a NUL "
            "character, which HTTP header values cannot"
        )
    return value


def _default(headers: dict[str, str], name: str, value: str) -> None:
    """Set ``name`` unless the job set it (in any case)."""
    if not any(key.lower() == name.lower() for key in headers):
        headers[name] = value


def _replace(headers: dict[str, str], name: str, value: str) -> None:
    """Set ``name``, dropping what the job set under it (in any case)."""
    for key in [key for key in headers if key.lower() == name.lower()]:
        del headers[key]
    headers[name] = value


def redact_url(url: str) -> str:
    """``url`` fit for messages: no user or password, no query (tokens live there)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "…" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _without(exc: Exception, url: str) -> str:
    """An HTTP library's message with the URL in it redacted."""
    return str(exc).replace(url, redact_url(url))


async def _preview(response: httpx.Response) -> str:
    """The first characters of the answer, decoded with a bound (see replies)."""
    steps = codings(response.headers.get("Content-Encoding"))
    if isinstance(steps, str):
        return f"[answer not decoded: {steps}]"
    try:
        prefix = await decoded_prefix(response.aiter_raw(), steps)
    except UndecodableError as exc:
        return f"[answer not decoded: it is not valid {exc}]"
    return printable(prefix.decode(response.encoding or "utf-8", errors="replace"))
