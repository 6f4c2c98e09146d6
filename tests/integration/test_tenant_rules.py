"""Per-namespace task rules (issue 14, items 1 and 3) with a real worker, API server
and Redis: one installation, two tenants. The installation allows no loopback
address, no Python task and no command; team A's exceptions allow an address, one
Python task and commands for its jobs alone. Team B's identical jobs are refused,
each with an error that says who decides, and its HTTP job sends nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support import Jobs, QueueProbe, ScriptedServer, finished, publish
from tickwork_dev.devcluster.components import TickworkProcess, console_script

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]


@pytest.fixture
def team_b(api_client: k8s.ApiClient, crd: None, other_namespace: str) -> Jobs:
    return Jobs(api_client, other_namespace)


def _tasks(endpoint: ScriptedServer) -> dict[str, dict[str, Any]]:
    return {
        "hook": {"http": {"url": endpoint.url, "method": "POST"}},
        "allowed-python": {"python": {"name": "tickwork.sleep", "args": ["0"]}},
        "other-python": {"python": {"name": "tickwork.fail"}},
        "shell": {"command": {"args": ["true"]}},
    }


def test_each_namespace_gets_its_own_exceptions_and_no_one_elses(
    start_worker: Start, jobs: Jobs, team_b: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    exceptions = {
        "egressAllow": ["127.0.0.1/32"],
        "pythonTasks": ["tickwork.sleep"],
        "commandTasks": True,
    }
    tenants = {jobs.namespace: exceptions}
    start_worker(
        TICKWORK_WORKER_EGRESS_ALLOW="",
        TICKWORK_WORKER_PYTHON_TASKS="",
        TICKWORK_WORKER_COMMAND_TASKS="false",
        TICKWORK_WORKER_TENANTS=json.dumps(tenants),
    )
    retry = {"retry": {"maxAttempts": 1}}
    outcomes: dict[tuple[str, str], dict[str, Any]] = {}
    for team in (jobs, team_b):
        for name, task in _tasks(endpoint).items():
            publish(team, probe, name, {**retry, "task": task})
        for name in _tasks(endpoint):
            last = finished(team, name)["lastRun"]
            assert isinstance(last, dict)
            outcomes[team.namespace, name] = last

    a, b = jobs.namespace, team_b.namespace
    assert {name: outcomes[a, name]["outcome"] for name in _tasks(endpoint)} == {
        "hook": "Succeeded",
        "allowed-python": "Succeeded",
        "other-python": "Failed",
        "shell": "Succeeded",
    }
    refused = outcomes[a, "other-python"]["error"]
    assert "'tickwork.fail' is not allowed for jobs in namespace" in refused
    assert {outcomes[b, name]["outcome"] for name in _tasks(endpoint)} == {"Failed"}
    assert outcomes[b, "hook"]["error"].startswith(
        f"POST {endpoint.url}: address not allowed: 127.0.0.1 (127.0.0.1 is in 127.0.0.0/8)"
    )
    assert "worker.tenants" in outcomes[b, "hook"]["error"]
    assert "'tickwork.sleep' is not allowed" in outcomes[b, "allowed-python"]["error"]
    disabled = outcomes[b, "shell"]["error"]
    assert f"command tasks are disabled for jobs in namespace {b!r}" in disabled
    assert len(endpoint.requests) == 1  # team A's call; team B's never left the worker


def test_a_worker_with_a_bad_tenant_rule_refuses_to_start() -> None:
    env = {**os.environ, "TICKWORK_WORKER_TENANTS": '{"team-a": {"egressAllow": ["10.0.0.0/33"]}}'}
    result = subprocess.run(
        [console_script("tickwork-worker")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert re.search(
        r"invalid task rules: tenants\['team-a'\]: .*10\.0\.0\.0/33", result.stdout + result.stderr
    )
