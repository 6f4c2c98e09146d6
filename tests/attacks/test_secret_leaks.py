"""Attack: "a Secret's value leaves in no form" (docs/security.md). A tenant whose
job may use Secrets of its namespace (``worker.secrets.enabled``) tries to read one
back through what the run leaves behind: status, Events, the worker's log and the
dead letters. On the code before issue 46, a value with the newline that
``kubectl create secret --from-file`` keeps, used as a header, made the HTTP
library fail with ``Illegal header value b'<value>\\n'``: an escaped copy that
redaction (exact text only) let through into all four. Real worker process, real
API server and Redis.
"""

from __future__ import annotations

import html
import json
import secrets
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support import Jobs, QueueProbe, ScriptedServer, create_secret, finished, publish
from tickwork_dev.devcluster.components import TickworkProcess

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
MARK = secrets.token_hex(12)
"""A part of the value found in every form of it (hex is escaped by no encoding)."""
VALUE = f"tok/{MARK}+'\"&="


def _task(url: str, key: str) -> dict[str, Any]:
    reference = {"secretKeyRef": {"name": "api", "key": key}}
    return {"http": {"url": url, "headers": [{"name": "Authorization", "valueFrom": reference}]}}


def _left_behind(jobs: Jobs, probe: QueueProbe, worker: TickworkProcess, name: str) -> str:
    """Everything a run leaves where a tenant or an observer may read it."""
    dead = [(letter.message.run_id, letter.error) for letter in probe.dead()]
    return json.dumps([jobs.get(name), jobs.events(name), dead]) + worker.log_path.read_text(
        errors="replace"
    )


@pytest.fixture
def worker(start_worker: Start, api_client: k8s.ApiClient, namespace: str) -> TickworkProcess:
    create_secret(
        api_client,
        namespace,
        "api",
        {
            "from-file": VALUE + "\n",
            "two-lines": f"{VALUE}\nsecond-line-{MARK}",
            "plain": VALUE,
        },
    )
    # Previews on, as an installer may ask: the worst case for what status may show.
    return start_worker(TICKWORK_WORKER_PREVIEWS="true")


def test_a_value_with_a_final_newline_is_sent_trimmed_and_never_shown(
    worker: TickworkProcess, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    publish(jobs, probe, "from-file", {"task": _task(endpoint.url, "from-file")})
    last = finished(jobs, "from-file")["lastRun"]
    assert MARK not in _left_behind(jobs, probe, worker, "from-file")
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Succeeded", 1)
    [request] = endpoint.requests
    assert request["headers"]["Authorization"] == VALUE  # type: ignore[index]


def test_a_value_a_header_cannot_carry_fails_once_naming_the_header_only(
    worker: TickworkProcess, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    spec = {
        "retry": {"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 1},
        "task": _task(endpoint.url, "two-lines"),
    }
    publish(jobs, probe, "two-lines", spec)
    last = finished(jobs, "two-lines")["lastRun"]
    assert MARK not in _left_behind(jobs, probe, worker, "two-lines")
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Failed", 1)  # retrying cannot help
    assert "header 'Authorization' holds a line break" in last["error"]
    assert endpoint.requests == []


def test_a_server_echoing_the_value_in_every_encoding_gets_none_into_status(
    worker: TickworkProcess, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    echoes = [
        repr(VALUE),
        repr(VALUE.encode()),
        json.dumps(VALUE),
        html.escape(VALUE),
        urllib.parse.quote(VALUE, safe=""),
        urllib.parse.quote_plus(VALUE),
    ]
    endpoint.script = [(500, 0.0)]
    # The value last, cut by the 512-byte preview: a piece of it at the cut goes too.
    endpoint.body = (" | ".join(echoes) + " " * 512).encode()[: 512 - 20] + VALUE.encode()
    spec = {"retry": {"maxAttempts": 1}, "task": _task(endpoint.url, "plain")}
    publish(jobs, probe, "echo", spec)
    last = finished(jobs, "echo")["lastRun"]
    assert MARK[:12] not in _left_behind(jobs, probe, worker, "echo")
    assert isinstance(last, dict)
    assert last["outcome"] == "Failed"
    assert last["error"].startswith("HTTP 500: '[redacted]' | b'[redacted]' | \"[redacted]\"")
