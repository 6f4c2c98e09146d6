"""What each task kind is told of its run: HTTP headers, a command's environment, a
Python task's keyword arguments (only those it takes, so older tasks keep working).
The same against a real HTTP server, a real program and a registered package:
tests/integration/test_worker.py."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from tickwork.api.models import ScheduledJobSpec
from tickwork.queue.messages import RunMessage
from tickwork_worker.decisions import scheduled_at
from tickwork_worker.tasks.base import RunContext
from tickwork_worker.tasks.command import run_environment
from tickwork_worker.tasks.http import run_headers
from tickwork_worker.tasks.python import RESULT_CHARS, PythonTask, result_text, run_keywords

pytestmark = pytest.mark.unit

AT = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
MANUAL = RunContext(
    run_id="u.manual.t1",
    attempt=2,
    namespace="team-a",
    name="report",
    scheduled_at=AT,
    params={"region": "eu", "dryRun": "true"},
)
SCHEDULED = RunContext(
    run_id="u.20261201T090000Z", attempt=1, namespace="team-a", name="report", scheduled_at=AT
)


def test_http_requests_say_which_run_they_are() -> None:
    assert run_headers(MANUAL) == {
        "Idempotency-Key": "u.manual.t1",
        "Tickwork-Run-Id": "u.manual.t1",
        "Tickwork-Scheduled-Time": "2026-12-01T09:00:00Z",
        "Tickwork-Attempt": "2",
        "X-Tickwork-Attempt": "2",
        "Tickwork-Job": "team-a/report",
        "Tickwork-Params": '{"dryRun":"true","region":"eu"}',
    }
    assert "Tickwork-Params" not in run_headers(SCHEDULED)  # a scheduled run has none


def test_commands_get_the_run_and_its_parameters_in_their_environment() -> None:
    assert run_environment(MANUAL) == {
        "TICKWORK_RUN_ID": "u.manual.t1",
        "TICKWORK_SCHEDULED_TIME": "2026-12-01T09:00:00Z",
        "TICKWORK_ATTEMPT": "2",
        "TICKWORK_JOB": "report",
        "TICKWORK_NAMESPACE": "team-a",
        "TICKWORK_PARAM_REGION": "eu",
        "TICKWORK_PARAM_DRYRUN": "true",
    }


def test_a_manual_runs_nominal_time_is_when_it_was_triggered_on_every_attempt() -> None:
    later = AT + dt.timedelta(minutes=5)
    manual = RunMessage(
        run_id="u.manual.t",
        namespace="n",
        name="j",
        uid="u",
        attempt=3,
        triggered_at=AT.isoformat(),
    )
    assert scheduled_at(manual, later) == AT
    older = RunMessage(run_id="u.manual.t", namespace="n", name="j", uid="u")  # before 0.2
    assert scheduled_at(older, later) == later


# -- python ----------------------------------------------------------------------


def legacy(*, run_id: str) -> str:
    return run_id


def explicit(
    what: str, *, run_id: str, scheduled_time: dt.datetime, attempt: int, params: dict[str, str]
) -> str:
    return f"{what} {run_id} {scheduled_time.isoformat()} {attempt} {sorted(params.items())}"


def only_params(params: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def anything(*args: str, **kwargs: Any) -> str:
    return f"{args} {sorted(kwargs)}"


def traced(*, traceparent: str | None = None) -> str:
    return f"joins {traceparent}"


async def asynchronous(*, attempt: int) -> str:
    await asyncio.sleep(0)
    return f"attempt {attempt}"


@pytest.mark.parametrize(
    ("function", "keywords"),
    [
        (legacy, {"run_id"}),
        (explicit, {"run_id", "scheduled_time", "attempt", "params"}),
        (only_params, {"params"}),
        (anything, {"run_id", "scheduled_time", "attempt", "params", "traceparent"}),
        (traced, {"traceparent"}),
        (lambda: None, set()),
        (max, {"run_id"}),  # a builtin without a readable signature: as before
    ],
)
def test_a_task_is_given_the_run_keywords_it_takes(
    function: Callable[..., Any], keywords: set[str]
) -> None:
    assert run_keywords(function) == keywords


def _call(function: Callable[..., Any], run: RunContext, **task: Any) -> str:
    spec = ScheduledJobSpec.model_validate(
        {"schedule": "@daily", "task": {"python": {"name": "acme.task", **task}}}
    )
    kind = PythonTask({"acme.task": function}, threads=1)
    return asyncio.run(kind.execute(spec, run)).summary


def test_python_tasks_receive_what_they_ask_for_and_the_specs_kwargs_win() -> None:
    assert _call(legacy, MANUAL) == "u.manual.t1"
    assert _call(explicit, MANUAL, args=["build"]) == (
        "build u.manual.t1 2026-12-01T09:00:00+00:00 2 [('dryRun', 'true'), ('region', 'eu')]"
    )
    assert _call(only_params, MANUAL) == "dryRun=true,region=eu"
    assert _call(only_params, SCHEDULED) == ""  # a scheduled run has none
    assert _call(asynchronous, MANUAL) == "attempt 2"
    # A spec written before the keyword existed keeps its own value.
    assert _call(asynchronous, MANUAL, kwargs={"attempt": "from the spec"}) == (
        "attempt from the spec"
    )
    assert _call(anything, MANUAL, args=["a"], kwargs={"k": "v"}) == (
        "('a',) ['attempt', 'k', 'params', 'run_id', 'scheduled_time']"
    )
    # Traces off: no traceparent, and a task taking **kwargs sees no new key; on: it is.
    assert _call(traced, MANUAL) == "joins None"
    parent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    assert _call(traced, dataclasses.replace(MANUAL, traceparent=parent)) == f"joins {parent}"
    assert "traceparent" in _call(anything, dataclasses.replace(MANUAL, traceparent=parent))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        ("done", "done"),
        (42, "42"),
        ({"rows": 3}, "{'rows': 3}"),
        (b"ok\xff", "ok\ufffd"),
        ("x" * (RESULT_CHARS + 10), "x" * RESULT_CHARS),
        (list(range(1_000_000)), None),  # abbreviated, never turned into text whole
    ],
)
def test_a_python_tasks_return_value_becomes_a_bounded_text(
    value: object, text: str | None
) -> None:
    shown = result_text(value)
    assert len(shown) <= RESULT_CHARS
    if text is not None:
        assert shown == text
    else:
        assert shown.startswith("[0, 1, 2")
        assert shown.endswith("...]")
