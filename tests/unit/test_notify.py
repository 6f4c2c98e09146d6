"""Notices of ``spec.notify`` (issue 51, item 1): their bodies, and how a worker tells
them: once per run, tried again on a refusal, given up on a client error, never
raising (the HTTP endpoint is httpx's MockTransport; the queue the memory one)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import httpx
import pytest

from tickwork.api.models import ScheduledJob
from tickwork.api.notify import NotifyEvent, NotifyFormat
from tickwork.queue.memory import MemoryRunQueue
from tickwork_worker import notify
from tickwork_worker.notify import Notice, Notifications, notice_body
from tickwork_worker.tasks.egress import EgressRefusedError

pytestmark = pytest.mark.unit

NOTICE = Notice(
    event=NotifyEvent.FAILED,
    namespace="team-a",
    job="nightly",
    run_id="uid.20261201T020000Z",
    scheduled_at=dt.datetime(2026, 12, 1, 2, tzinfo=dt.UTC),
    attempts=3,
    error="HTTP 500 (all 3 attempts failed)",
)


def test_each_shape_says_which_run_failed_and_why() -> None:
    slack = notice_body(NotifyFormat.SLACK, NOTICE)
    assert slack == {
        "text": "Tickwork: run uid.20261201T020000Z of team-a/nightly failed after 3 "
        "attempt(s): HTTP 500 (all 3 attempts failed)"
    }
    teams = notice_body(NotifyFormat.TEAMS, NOTICE)
    assert (teams["@type"], teams["text"]) == ("MessageCard", NOTICE.error)
    assert "team-a/nightly" in teams["title"]
    assert notice_body(NotifyFormat.JSON, NOTICE) == {
        "event": "Failed",
        "namespace": "team-a",
        "job": "nightly",
        "runId": NOTICE.run_id,
        "scheduledAt": "2026-12-01T02:00:00+00:00",
        "attempts": 3,
        "error": NOTICE.error,
    }


def job(*notifiers: dict[str, Any]) -> ScheduledJob:
    return ScheduledJob.model_validate(
        {
            "metadata": {"name": "nightly", "namespace": "team-a"},
            "spec": {"schedule": "@daily", "task": {"echo": {}}, "notify": list(notifiers)},
        }
    )


class Endpoint:
    """Answers each POST with the next scripted status (200 once the script is out)."""

    def __init__(self, *script: int | Exception) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.script.pop(0) if self.script else 200
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer)


async def tell(endpoint: Endpoint, *jobs: ScheduledJob, per_minute: int = 30) -> list[str]:
    outcomes: list[str] = []
    client = httpx.AsyncClient(transport=httpx.MockTransport(endpoint))
    told = Notifications(
        queue=MemoryRunQueue(),
        kube=None,  # type: ignore[arg-type] - no notifier here reads a Secret
        client_for=lambda _namespace: client,
        per_minute=per_minute,
        counted=outcomes.append,
    )
    for one in jobs:
        told.tell(one, NOTICE)
    await told.close()
    await client.aclose()
    return sorted(outcomes)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notify, "BACKOFF_SECONDS", 0.0)


@pytest.mark.asyncio
async def test_a_refusal_is_tried_again_and_a_client_error_given_up() -> None:
    endpoint = Endpoint(503, httpx.ConnectError("refused"), 200)
    assert await tell(endpoint, job({"url": "https://hooks.example/a"})) == ["sent"]
    assert len(endpoint.requests) == 3
    assert json.loads(endpoint.requests[-1].content)["runId"] == NOTICE.run_id
    gone = Endpoint(404)
    assert await tell(gone, job({"url": "https://hooks.example/b"})) == ["failed"]
    assert len(gone.requests) == 1  # a 404 is not asked again
    down = Endpoint(*[httpx.ConnectError("refused")] * 5)
    assert await tell(down, job({"url": "https://hooks.example/c"})) == ["failed"]
    assert len(down.requests) == 3  # the default attempts
    # The namespace's egress rules refuse the address: given up at once, as an http task.
    walled = Endpoint(EgressRefusedError("address not allowed: 10.0.0.1"))
    assert await tell(walled, job({"url": "https://hooks.example/d"})) == ["failed"]
    assert len(walled.requests) == 1


@pytest.mark.asyncio
async def test_a_run_is_told_once_per_notifier_and_a_namespace_so_many_a_minute() -> None:
    endpoint = Endpoint()
    twice = job({"url": "https://hooks.example/a"}, {"url": "https://hooks.example/b"})
    # The same run told twice (a redelivered failure, say): each notifier hears once.
    assert await tell(endpoint, twice, twice) == ["duplicate", "duplicate", "sent", "sent"]
    limited = Endpoint()
    assert await tell(limited, twice, per_minute=1) == ["limited", "sent"]
    assert len(limited.requests) == 1
