"""Traces of runs (tickwork.tracing): off without an OTLP endpoint (one shared no-op,
no traceparent handed on); on, an attempt's spans in the trace derived from its run
ID, under one parent every attempt shares, its phases as children, failures marked;
the traceparent reaches an HTTP request's headers, a program's environment and a
Python task's keywords. Through a real exporter: tests/integration/test_traces.py."""

from __future__ import annotations

import datetime as dt

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tickwork import tracing
from tickwork_worker.tasks.base import RunContext
from tickwork_worker.tasks.command import run_environment
from tickwork_worker.tasks.http import run_headers

pytestmark = pytest.mark.unit

RUN = "team-a.nightly.0f1e2d3c.1767225600"


def _on() -> tuple[tracing.Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return tracing.exporting(SimpleSpanProcessor(exporter), "tickwork-test"), exporter


def test_without_an_endpoint_tracing_is_off_and_costs_one_shared_object() -> None:
    for environ in (
        {},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"},
    ):
        off = tracing.configured("tickwork-worker", environ)
        assert not off.enabled
        trace = off.attempt(RUN, "team-a", "nightly", 1)
        assert trace is tracing.OFF
        with trace.phase("execute"):
            pass
        assert trace.traceparent is None
        trace.end("Succeeded")
    assert tracing.configured(
        "w", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}
    ).enabled


def test_an_attempts_spans_are_in_the_runs_trace_with_its_phases_as_children() -> None:
    on, exporter = _on()
    first = on.attempt(RUN, "team-a", "nightly", 1)
    with first.phase("read"):
        pass
    with first.phase("execute"):
        parent = first.traceparent
    with pytest.raises(RuntimeError), first.phase("status"):
        raise RuntimeError("the API server went away")
    first.end("Retrying")
    second = on.attempt(RUN, "team-a", "nightly", 2)
    second.end("Succeeded")
    spans = {
        (span.name, (span.attributes or {}).get("tickwork.attempt")): span
        for span in exporter.get_finished_spans()
    }
    assert {span.context.trace_id for span in spans.values()} == {tracing.run_trace_id(RUN)}
    attempt, again = spans["tickwork.attempt", 1], spans["tickwork.attempt", 2]
    assert attempt.parent is not None
    assert again.parent is not None
    assert attempt.parent.span_id == again.parent.span_id == tracing.run_parent_id(RUN)
    assert attempt.attributes is not None
    assert attempt.attributes["tickwork.run_id"] == RUN
    assert attempt.attributes["tickwork.outcome"] == "Retrying"
    assert attempt.status.status_code is StatusCode.ERROR  # a failed attempt
    assert again.status.status_code is StatusCode.UNSET
    execute = spans["tickwork.execute", None]
    assert parent == f"00-{tracing.run_trace_id(RUN):032x}-{execute.context.span_id:016x}-01"
    for phase in ("read", "execute", "status"):
        child = spans[f"tickwork.{phase}", None]
        assert child.parent is not None
        assert child.parent.span_id == attempt.context.span_id
    status = spans["tickwork.status", None]
    assert status.status.status_code is StatusCode.ERROR
    assert [event.name for event in status.events] == ["exception"]


def test_the_trace_id_is_the_runs_own_and_differs_between_runs() -> None:
    assert tracing.run_trace_id(RUN) == tracing.run_trace_id(RUN)
    assert tracing.run_trace_id(RUN) != tracing.run_trace_id(RUN + "1")
    assert 0 < tracing.run_trace_id(RUN) < 2**128
    assert 0 < tracing.run_parent_id(RUN) < 2**64


def _run(traceparent: str | None) -> RunContext:
    return RunContext(
        run_id=RUN,
        attempt=1,
        namespace="team-a",
        name="nightly",
        scheduled_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        traceparent=traceparent,
    )


def test_the_traceparent_reaches_headers_environment_and_python_keywords() -> None:
    parent = f"00-{tracing.run_trace_id(RUN):032x}-{7:016x}-01"
    assert run_headers(_run(parent))["traceparent"] == parent
    assert run_environment(_run(parent))["TRACEPARENT"] == parent
    assert "traceparent" not in run_headers(_run(None))
    assert "TRACEPARENT" not in run_environment(_run(None))


def test_the_operators_publish_span_is_in_the_runs_trace_beside_the_attempts() -> None:
    off = tracing.Tracing()
    assert off.publishing(RUN, "team-a", "nightly", "schedule") is off.publishing(
        "other", "team-b", "x", "manual"
    )  # one shared no-op
    on, exporter = _on()
    with on.publishing(RUN, "team-a", "nightly", "schedule"):
        pass
    with pytest.raises(ConnectionError), on.publishing(RUN, "team-a", "nightly", "schedule"):
        raise ConnectionError("Redis away")
    on.attempt(RUN, "team-a", "nightly", 1).end("Succeeded")
    published, failed, attempt = exporter.get_finished_spans()
    assert (published.name, attempt.name) == ("tickwork.publish", "tickwork.attempt")
    assert published.attributes is not None
    assert published.attributes["tickwork.trigger"] == "schedule"
    for span in (published, failed, attempt):
        assert span.context.trace_id == tracing.run_trace_id(RUN)
        assert span.parent is not None
        assert span.parent.span_id == tracing.run_parent_id(RUN)
    assert failed.status.status_code is StatusCode.ERROR
