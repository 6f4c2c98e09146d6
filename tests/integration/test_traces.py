"""Traces through a real exporter (issue 51, item 3): a worker process started with an
OTLP endpoint sends its spans to a receiver listening here, over OTLP/HTTP, protobuf
decoded with OpenTelemetry's own schema. The run's HTTP task gets the ``execute``
span as its ``traceparent``, and every span lands in the trace derived from the run
ID. Off (no endpoint), no ``traceparent`` is sent: test_worker's idempotency test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support import (
    Jobs,
    QueueProbe,
    ScriptedServer,
    finished,
    publish,
    rfc3339,
    serving,
    whole_seconds_from_now,
)
from tickwork.tracing import run_parent_id, run_trace_id
from tickwork_dev.devcluster.components import wait_for

pytestmark = pytest.mark.timeout(120)


class _Collector(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.server.lock:
            self.server.exports.append((self.path, self.headers.get("Content-Type"), request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        return


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver on loopback that keeps every export."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Collector)
        self.lock = threading.Lock()
        self.exports: list[tuple[str, str | None, ExportTraceServiceRequest]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """Every span received, with its resource's attributes."""
        found = []
        with self.lock:
            for _, _, request in self.exports:
                for resource_spans in request.resource_spans:
                    resource = {
                        a.key: a.value.string_value for a in resource_spans.resource.attributes
                    }
                    for scope in resource_spans.scope_spans:
                        found += [(resource, span) for span in scope.spans]
        return found


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving(Receiver()) as server:
        yield server


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attribute in span.attributes:
        value = attribute.value
        out[attribute.key] = (
            value.string_value if value.HasField("string_value") else value.int_value
        )
    return out


def test_a_runs_spans_reach_the_receiver_and_its_http_task_joins_the_trace(
    start_worker: Any,
    jobs: Jobs,
    probe: QueueProbe,
    endpoint: ScriptedServer,
    receiver: Receiver,
    namespace: str,
) -> None:
    start_worker(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.url,
        OTEL_BSP_SCHEDULE_DELAY="100",  # ms: the batch goes out soon after the run
        OTEL_SERVICE_NAME="worker-under-test",
    )
    _, run_id = publish(jobs, probe, "traced", {"task": {"http": {"url": endpoint.url}}})
    assert finished(jobs, "traced")["lastRun"]["outcome"] == "Succeeded"  # type: ignore[index]
    [request] = endpoint.requests
    headers = request["headers"]
    assert isinstance(headers, dict)
    version, trace_hex, span_hex, flags = headers["traceparent"].split("-")
    assert (version, flags) == ("00", "01")
    assert trace_hex == f"{run_trace_id(run_id):032x}"  # whoever runs it: from the run ID

    wanted = {"tickwork.attempt", "tickwork.read", "tickwork.execute", "tickwork.status"}
    wait_for(
        lambda: wanted <= {span.name for _, span in receiver.spans()},
        timeout=30,
        interval=0.1,
        what="the run's spans at the receiver",
    )
    assert {path for path, _, _ in receiver.exports} == {"/v1/traces"}
    assert {kind for _, kind, _ in receiver.exports} == {"application/x-protobuf"}
    spans = {span.name: (resource, span) for resource, span in receiver.spans()}
    assert {span.trace_id.hex() for _, span in spans.values()} == {trace_hex}
    resource, attempt = spans["tickwork.attempt"]
    assert resource["service.name"] == "worker-under-test"
    assert attempt.parent_span_id.hex() == f"{run_parent_id(run_id):016x}"
    assert _attributes(attempt) == {
        "tickwork.run_id": run_id,
        "tickwork.namespace": namespace,
        "tickwork.job": "traced",
        "tickwork.attempt": 1,
        "tickwork.outcome": "Succeeded",
    }
    for phase in ("read", "execute", "status"):
        assert spans[f"tickwork.{phase}"][1].parent_span_id == attempt.span_id, phase
    # The task's traceparent is the execute span: the endpoint's own spans nest there.
    assert spans["tickwork.execute"][1].span_id.hex() == span_hex
    execute, status = spans["tickwork.execute"][1], spans["tickwork.status"][1]
    assert execute.end_time_unix_nano <= status.start_time_unix_nano  # written after


def test_the_operators_publish_and_the_workers_attempt_share_the_runs_trace(
    start_operator: Any,
    start_worker: Any,
    jobs: Jobs,
    endpoint: ScriptedServer,
    receiver: Receiver,
) -> None:
    """publish -> claim -> execute -> status write, by two processes, in one trace: the
    operator's publish span and the worker's attempt hang under the run's parent."""
    otlp = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    start_operator(OTEL_SERVICE_NAME="operator-under-test", **otlp)
    start_worker(OTEL_SERVICE_NAME="worker-under-test", **otlp)
    jobs.create(
        "published",
        {"runAt": rfc3339(whole_seconds_from_now(0)), "task": {"http": {"url": endpoint.url}}},
    )
    status = finished(jobs, "published")
    run_id = status["lastRun"]["id"]  # type: ignore[index]
    trace_hex = f"{run_trace_id(run_id):032x}"

    def of_the_run() -> dict[str, tuple[dict[str, Any], Any]]:
        return {
            span.name: (resource, span)
            for resource, span in receiver.spans()
            if span.trace_id.hex() == trace_hex
        }

    wait_for(
        lambda: {"tickwork.publish", "tickwork.attempt"} <= set(of_the_run()),
        timeout=30,
        interval=0.1,
        what="the publish and the attempt at the receiver",
    )
    spans = of_the_run()
    (operator, publish), (worker, attempt) = spans["tickwork.publish"], spans["tickwork.attempt"]
    assert (operator["service.name"], worker["service.name"]) == (
        "operator-under-test",
        "worker-under-test",
    )
    parent = f"{run_parent_id(run_id):016x}"
    assert publish.parent_span_id.hex() == attempt.parent_span_id.hex() == parent
    assert _attributes(publish)["tickwork.trigger"] == "schedule"
    # Published, then claimed (the claim may return before the enqueue's reply does).
    assert publish.start_time_unix_nano <= attempt.start_time_unix_nano
