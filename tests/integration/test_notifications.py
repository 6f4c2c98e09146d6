"""Notifications (issue 51, item 1) on real parts: the ``tickwork-worker`` process, a
real Redis queue and API server, and a real HTTP receiver. A run that fails for good
tells the job's notifier once, in its shape, its URL read from a Secret where the job
says so; a notifier that refuses is tried again, and one that never answers fails
no run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s

from tests.support import (
    Jobs,
    QueueProbe,
    ScriptedServer,
    create_secret,
    finished,
    publish,
    serving,
)
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(180)
Start = Callable[..., TickworkProcess]
ONE_TRY = {"maxAttempts": 1}


@pytest.fixture
def receiver() -> Iterator[ScriptedServer]:
    with serving(ScriptedServer()) as server:
        yield server


@pytest.fixture
def second_receiver() -> Iterator[ScriptedServer]:
    with serving(ScriptedServer()) as server:
        yield server


def _bodies(server: ScriptedServer) -> list[dict[str, object]]:
    return [json.loads(str(r["body"])) for r in server.requests]


def test_a_run_that_failed_for_good_is_told_once_in_each_notifiers_shape(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    endpoint: ScriptedServer,
    receiver: ScriptedServer,
    second_receiver: ScriptedServer,
) -> None:
    worker = start_worker()
    endpoint.script = [(500, 0.0)]
    receiver.script = [(503, 0.0)]  # the first try is refused: tried again
    notify = [
        {"url": receiver.url, "format": "Slack"},
        {"url": second_receiver.url},
    ]
    spec = {"retry": ONE_TRY, "task": {"http": {"url": endpoint.url}}, "notify": notify}
    _, run_id = publish(jobs, probe, "nightly", spec)
    assert finished(jobs, "nightly")["lastRun"]["outcome"] == "Failed"
    wait_for(
        lambda: worker.metric("tickwork_notices_total", 'outcome="sent"') == 2.0,
        timeout=30,
        interval=0.2,
        what="both notices sent",
    )
    slack, plain = _bodies(receiver), _bodies(second_receiver)
    assert len(slack) == 2  # the 503, then the one taken
    assert len(plain) == 1
    assert run_id in str(slack[-1]["text"])
    assert "HTTP 500" in str(slack[-1]["text"])
    assert plain[0]["job"] == "nightly"
    assert (plain[0]["runId"], plain[0]["event"], plain[0]["attempts"]) == (run_id, "Failed", 1)
    assert worker.metric("tickwork_notices_total", 'outcome="failed"') in (None, 0.0)


def test_a_notifier_url_from_a_secret_is_used_and_never_shown(
    start_worker: Start,
    jobs: Jobs,
    probe: QueueProbe,
    endpoint: ScriptedServer,
    receiver: ScriptedServer,
    api_client: k8s.ApiClient,
) -> None:
    hook = receiver.url + "/T0/B1/secret-token-4242"
    create_secret(api_client, jobs.namespace, "hooks", {"slack": hook})
    worker = start_worker()
    endpoint.script = [(500, 0.0)]
    notifier = {"urlFrom": {"secretKeyRef": {"name": "hooks", "key": "slack"}}, "format": "Teams"}
    spec = {"retry": ONE_TRY, "task": {"http": {"url": endpoint.url}}, "notify": [notifier]}
    publish(jobs, probe, "secretive", spec)
    finished(jobs, "secretive")
    wait_for(lambda: receiver.requests, timeout=30, interval=0.2, what="the notice")
    [request] = receiver.requests
    assert request["path"] == "/hook/T0/B1/secret-token-4242"
    card = json.loads(str(request["body"]))
    assert card["@type"] == "MessageCard"
    assert "secretive" in str(card["title"])
    assert "secret-token-4242" not in worker.log()


def test_a_notifier_that_never_answers_fails_no_run_and_is_counted(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    worker = start_worker()
    endpoint.script = [(500, 0.0)]
    dead_end = "http://127.0.0.1:9/nothing-listens-here"
    spec = {
        "retry": ONE_TRY,
        "task": {"http": {"url": endpoint.url}},
        "notify": [{"url": dead_end}],
    }
    publish(jobs, probe, "unheard", spec)
    assert finished(jobs, "unheard")["lastRun"]["outcome"] == "Failed"
    wait_for(
        lambda: worker.metric("tickwork_notices_total", 'outcome="failed"') == 1.0,
        timeout=60,
        interval=0.2,
        what="the notice given up",
    )
    # The worker still runs: a second job succeeds.
    endpoint.script = []
    publish(
        jobs,
        probe,
        "fine",
        {"task": {"http": {"url": endpoint.url}}, "notify": [{"url": dead_end}]},
    )
    assert finished(jobs, "fine")["lastRun"]["outcome"] == "Succeeded"
