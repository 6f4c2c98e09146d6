"""Attack: read what a task brought back through a job's status, which everyone
bound to ``view`` in the namespace may read (docs/security.md, "Who may create
ScheduledJobs"). On the defaults status keeps no answer, output or log: a server's
internal error page, or a command's printout, stays out of it unless the installer
asks for previews. Before issue 46, status kept an answer's first 512 bytes and the
last lines of every output. Real worker process, API server and Redis.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.support import Jobs, QueueProbe, ScriptedServer, finished, publish
from tickwork_dev.devcluster.components import TickworkProcess

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
PAGE = b"internal error page: db-primary.internal:5432 user=billing"


@pytest.mark.parametrize("code", [200, 500])
def test_status_keeps_no_answer_on_the_defaults(
    code: int, start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    endpoint.body = PAGE
    endpoint.script = [(code, 0.0)]
    start_worker(TICKWORK_WORKER_PREVIEWS="false")  # the chart's default
    spec = {"retry": {"maxAttempts": 1}, "task": {"http": {"url": endpoint.url}}}
    publish(jobs, probe, "page", spec)
    last = finished(jobs, "page")["lastRun"]
    assert b"db-primary" not in json.dumps([jobs.get("page"), jobs.events("page")]).encode()
    assert isinstance(last, dict)
    told = last["result"] if code == 200 else last["error"]
    assert told.startswith(f"HTTP {code}")


def test_status_keeps_no_command_output_on_the_defaults(
    start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    start_worker(TICKWORK_WORKER_PREVIEWS="false", TICKWORK_WORKER_COMMAND_TASKS="true")
    task = {"command": {"args": ["/bin/sh", "-c", "echo db-primary.internal; exit 3"]}}
    publish(jobs, probe, "printout", {"retry": {"maxAttempts": 1}, "task": task})
    last = finished(jobs, "printout")["lastRun"]
    assert "db-primary" not in json.dumps([jobs.status("printout"), jobs.events("printout")])
    assert isinstance(last, dict)
    assert last["error"].startswith("exit 3")
