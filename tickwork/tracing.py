"""OpenTelemetry traces of runs: off unless an OTLP endpoint is configured.

Turned on by OpenTelemetry's own variables: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT`` (OTLP over HTTP; ``OTEL_SERVICE_NAME``,
``OTEL_EXPORTER_OTLP_HEADERS`` and the rest as the SDK reads them), with the optional
dependency installed (``pip install 'tickwork[traces]'``). ``OTEL_SDK_DISABLED=true``
turns it off again. Off, :func:`attempt` hands out one shared object whose methods do
nothing: a run pays an attribute lookup and a call.

A run's trace is derived from its ID, by every process alike: the trace ID is the
first 16 bytes of SHA-256 of the run ID, and every span of the run hangs under one
parent span ID derived the same way (a parent no process exports). So the operator's
publish and the attempts of a run, whichever worker made them, land in one trace, and
nothing travels through Redis to link them. The operator's span is
``tickwork.publish``; each attempt is a span (``tickwork.attempt``) with a child per
phase: ``tickwork.read`` (the job read before it starts), ``tickwork.execute`` (the
task) and ``tickwork.status`` (the outcome written). The task is told its
``execute`` span as a W3C ``traceparent`` (an HTTP header, a ``TRACEPARENT``
variable, a Python task's ``traceparent`` keyword), so the services it calls join
the trace.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

logger = logging.getLogger(__name__)

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def run_trace_id(run_id: str) -> int:
    """The trace of run ``run_id``: the first 16 bytes of SHA-256 of its ID."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big")


def run_parent_id(run_id: str) -> int:
    """The span every span of the run hangs under (exported by no process)."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[16:24], "big") or 1


def traceparent(trace_id: int, span_id: int) -> str:
    """The W3C ``traceparent`` of a sampled span."""
    return f"00-{trace_id:032x}-{span_id:016x}-01"


class _Off:
    """Tracing off: every method does nothing."""

    enabled = False
    traceparent: str | None = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        del name
        yield

    def end(self, outcome: str) -> None:
        del outcome


OFF = _Off()


_NOTHING = contextlib.nullcontext()


def _run_context(run_id: str) -> Any:
    """An OpenTelemetry context whose current span is the run's shared parent."""
    from opentelemetry import trace  # noqa: PLC0415 - the optional dependency

    parent = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=run_trace_id(run_id),
            span_id=run_parent_id(run_id),
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
    )
    return trace.set_span_in_context(parent)


@contextlib.contextmanager
def _span(
    tracer: Any, name: str, context: Any, attributes: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """A span around the block, in ``context``; an exception marks it failed."""
    span = tracer.start_span(name, context=context, attributes=attributes)
    try:
        yield span
    except BaseException as exc:
        span.record_exception(exc)
        _failed(span, type(exc).__name__)
        raise
    finally:
        span.end()


class RunTrace:
    """The spans of one attempt of a run."""

    enabled = True

    def __init__(self, tracer: Any, run_id: str, attributes: Mapping[str, Any]) -> None:
        from opentelemetry import trace  # noqa: PLC0415 - the optional dependency

        self._tracer = tracer
        self._trace_id = run_trace_id(run_id)
        self._span = tracer.start_span(
            "tickwork.attempt",
            context=_run_context(run_id),
            attributes={"tickwork.run_id": run_id, **attributes},
        )
        self._context = trace.set_span_in_context(self._span)
        self.traceparent: str | None = None
        """The ``execute`` span's traceparent, while the task runs."""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """A child span of the attempt around the block; an exception marks it failed."""
        with _span(self._tracer, f"tickwork.{name}", self._context) as span:
            if name == "execute":
                self.traceparent = traceparent(self._trace_id, span.get_span_context().span_id)
            yield

    def end(self, outcome: str) -> None:
        """End the attempt's span with the run's outcome (Succeeded, Failed, ...)."""
        self._span.set_attribute("tickwork.outcome", outcome)
        if outcome not in ("Succeeded", "Skipped"):
            _failed(self._span, outcome)
        self._span.end()


AttemptTrace = RunTrace | _Off


def _job(namespace: str, name: str, **more: Any) -> dict[str, Any]:
    """A span's attributes: the job's, and ``more`` (each as ``tickwork.<key>``)."""
    return {
        "tickwork.namespace": namespace,
        "tickwork.job": name,
        **{f"tickwork.{key}": value for key, value in more.items()},
    }


def _failed(span: Any, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    span.set_status(Status(StatusCode.ERROR, description))


class Tracing:
    """Where a process's spans go: nowhere (off), or an OTLP exporter."""

    def __init__(self, tracer: Any = None) -> None:
        self._tracer = tracer

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def attempt(self, run_id: str, namespace: str, name: str, attempt: int) -> AttemptTrace:
        """The trace of attempt ``attempt`` of run ``run_id`` of job ``namespace/name``
        (the shared no-op when off)."""
        if self._tracer is None:
            return OFF
        return RunTrace(self._tracer, run_id, _job(namespace, name, attempt=attempt))

    def publishing(
        self, run_id: str, namespace: str, name: str, trigger: str
    ) -> contextlib.AbstractContextManager[None]:
        """The operator's ``tickwork.publish`` span of run ``run_id`` around the block
        (the shared no-op when off)."""
        if self._tracer is None:
            return _NOTHING
        attributes = _job(namespace, name, run_id=run_id, trigger=trigger)
        return _span(self._tracer, "tickwork.publish", _run_context(run_id), attributes)


def configured(service: str, environ: Mapping[str, str] = os.environ) -> Tracing:
    """Tracing as the environment sets it up (off without an OTLP endpoint)."""
    if not any(environ.get(name) for name in _ENDPOINTS):
        return Tracing()
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return Tracing()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError:
        logger.error(  # noqa: TRY400 - the reason is the message
            "an OTLP endpoint is set but OpenTelemetry is not installed: traces stay off "
            "(pip install 'tickwork[traces]')"
        )
        return Tracing()
    return exporting(BatchSpanProcessor(OTLPSpanExporter()), service)


def exporting(processor: Any, service: str) -> Tracing:
    """Tracing whose spans go to ``processor`` (a batch exporter, or a test's)."""
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415

    name = os.environ.get("OTEL_SERVICE_NAME") or service
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(processor)
    logger.info("traces on: spans of every run go to the OTLP endpoint")
    # The provider sends what is still buffered when the process exits.
    return Tracing(provider.get_tracer("tickwork"))
