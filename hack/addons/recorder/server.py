"""A run recorder that runs as a Pod: HTTP tasks call it, tests and benchmarks read it.

``GET|POST /hit/<key>?delay=<seconds>`` counts one execution of ``<key>`` (the
job, or the job and its nominal time), waits ``delay`` seconds, then answers 200,
so a task can be made as long as a test needs. ``GET /counts`` returns every
key's count as JSON, ``GET /inflight`` how many hits are still waiting, and
``GET /traceparents`` the last ``traceparent`` header each key was called with.

It is an OpenTelemetry collector too: ``POST /v1/traces`` takes OTLP/HTTP exports
(protobuf, decoded with OpenTelemetry's own schema, which Tickwork's image has for
its ``traces`` extra), and ``GET /spans?trace=<32 hex digits>`` returns that trace's
spans as JSON: service, name, span ID and parent. Otherwise the standard library
only: it runs on Tickwork's own image.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

_counts: Counter[str] = Counter()
_inflight = 0
_traceparents: dict[str, str] = {}
_spans: list[dict[str, str]] = []
_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _hit(self) -> None:
        global _inflight  # noqa: PLW0603 - the server's one piece of state
        url = urlparse(self.path)
        key = url.path.removeprefix("/hit/")
        delay = float(parse_qs(url.query).get("delay", ["0"])[0])
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with _lock:
            _counts[key] += 1
            _inflight += 1
            if self.headers.get("traceparent"):
                _traceparents[key] = str(self.headers["traceparent"])
        try:
            time.sleep(delay)
        finally:
            with _lock:
                _inflight -= 1
        self._answer(200, b"ok")

    def do_GET(self) -> None:
        if self.path.startswith("/hit/"):
            self._hit()
        elif self.path == "/counts":
            with _lock:
                body = json.dumps(dict(_counts)).encode()
            self._answer(200, body, "application/json")
        elif self.path == "/inflight":
            with _lock:
                body = str(_inflight).encode()
            self._answer(200, body)
        elif self.path == "/traceparents":
            with _lock:
                body = json.dumps(_traceparents).encode()
            self._answer(200, body, "application/json")
        elif self.path.startswith("/spans"):
            trace = parse_qs(urlparse(self.path).query).get("trace", [""])[0]
            with _lock:
                body = json.dumps([s for s in _spans if s["trace"] == trace]).encode()
            self._answer(200, body, "application/json")
        else:
            self._answer(200 if self.path == "/healthz" else 404, b"")

    def do_POST(self) -> None:
        if self.path.startswith("/hit/"):
            self._hit()
        elif self.path == "/v1/traces":
            self._export()
        else:
            self._answer(404, b"")

    def _export(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        found = []
        for resource_spans in request.resource_spans:
            service = next(
                (
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                ),
                "",
            )
            for scope in resource_spans.scope_spans:
                found += [
                    {
                        "service": service,
                        "name": span.name,
                        "trace": span.trace_id.hex(),
                        "span": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(),
                    }
                    for span in scope.spans
                ]
        with _lock:
            _spans.extend(found)
        self._answer(200, b"", "application/x-protobuf")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the API
        del format, args  # quiet: hundreds of hits per test


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", 8080), Handler)  # noqa: S104 - a Pod's own address
    server.daemon_threads = True
    server.serve_forever()
