"""Runs after other jobs (issue 50, item 3) on real parts: the real API server, Redis,
operator and a worker. `report` runs after both `extract` and `load` succeeded, once,
with the run that completed the set as its parameter; while it waits, status.after
says for which job and since when. `alert` runs after `extract` failed: it never runs.
`daily` runs after `extract` within the 10-second windows of its own `@every 20s`
schedule. Two jobs that run after one another are Invalid, the cycle named."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from tests.support import Jobs, lead, rfc3339
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(240)

ECHO = {"echo": {"message": "done"}}


def test_a_job_runs_after_its_upstream_jobs_succeeded_with_their_run_as_parameter(
    start_operator: Callable[..., TickworkProcess],
    start_worker: Callable[..., TickworkProcess],
    jobs: Jobs,
) -> None:
    lead(start_operator(TICKWORK_OPERATOR_NAMESPACES=jobs.namespace))
    start_worker()
    jobs.create("report", {"after": {"jobs": [{"job": "extract"}, {"job": "load"}]}, "task": ECHO})
    failed_only = {"jobs": [{"job": "extract", "outcome": "Failed"}]}
    jobs.create("alert", {"after": failed_only, "task": ECHO})

    def waits_for(name: str) -> list[str] | None:
        after = jobs.status(name).get("after")
        return None if after is None else list(after.get("waitingFor") or [])

    wait_for(
        lambda: waits_for("report") == ["extract", "load"],
        timeout=30,
        interval=0.2,
        what="report waiting for both",
    )
    # extract runs first; report then waits for load alone, since extract's end.
    soon = rfc3339(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2))
    jobs.create("extract", {"runAt": soon, "task": ECHO})
    wait_for(
        lambda: waits_for("report") == ["load"], timeout=60, interval=0.2, what="extract counted"
    )
    extract = jobs.status("extract")["lastRun"]
    assert jobs.status("report")["after"]["since"] == _whole(extract["finishedAt"])
    assert not jobs.status("report").get("lastRun")  # not before load

    soon = rfc3339(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2))
    jobs.create("load", {"runAt": soon, "task": ECHO})
    wait_for(
        lambda: (jobs.status("report").get("lastRun") or {}).get("outcome") == "Succeeded",
        timeout=60,
        interval=0.5,
        what="report's run",
    )
    load = jobs.status("load")["lastRun"]
    report = jobs.status("report")
    assert report["lastRun"]["params"] == {"upstreamRun": load["id"], "upstreamJob": "load"}
    assert report["lastRun"]["scheduledAt"] == _whole(load["finishedAt"])
    # Each upstream run counts once: report waits for both again.
    wait_for(
        lambda: waits_for("report") == ["extract", "load"],
        timeout=30,
        interval=0.2,
        what="report waiting for both again",
    )
    assert [r["id"] for r in report["runs"]] == [report["lastRun"]["id"]]
    # alert counts failed runs of extract only: still waiting, never ran.
    assert waits_for("alert") == ["extract"]
    assert not jobs.status("alert").get("lastRun")


def test_jobs_that_run_after_one_another_are_invalid_with_the_cycle_named(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs
) -> None:
    lead(start_operator(TICKWORK_OPERATOR_NAMESPACES=jobs.namespace))
    jobs.create("ping", {"after": {"jobs": [{"job": "pong"}]}, "task": ECHO})
    jobs.create("pong", {"after": {"jobs": [{"job": "ping"}]}, "task": ECHO})

    def invalid(name: str) -> str | None:
        status = jobs.status(name)
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        return ready.get("message") if status.get("phase") == "Invalid" else None

    wait_for(
        lambda: invalid("ping") and invalid("pong"), timeout=30, interval=0.2, what="both Invalid"
    )
    assert "ping -> pong -> ping" in (invalid("ping") or "")
    jobs.patch("pong", {"spec": {"after": None, "runAt": "2030-01-01T00:00:00Z"}})
    wait_for(
        lambda: jobs.status("ping").get("phase") == "Scheduled",
        timeout=30,
        interval=0.2,
        what="ping valid again once the cycle broke",
    )


def _whole(instant: str) -> str:
    """``instant`` rounded up to the second, as status writes instants."""
    moment = dt.datetime.fromisoformat(instant)
    if moment.microsecond:
        moment = moment.replace(microsecond=0) + dt.timedelta(seconds=1)
    return rfc3339(moment)


def test_with_a_schedule_a_job_runs_after_its_upstream_within_a_window(
    start_operator: Callable[..., TickworkProcess],
    start_worker: Callable[..., TickworkProcess],
    jobs: Jobs,
) -> None:
    """Windows open every 20 s from notBefore and last 10 s: the run is due as extract's
    run ends if that is within a window, else when the next window opens."""
    lead(start_operator(TICKWORK_OPERATOR_NAMESPACES=jobs.namespace))
    start_worker()
    anchor = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=2)
    after = {"jobs": [{"job": "extract"}], "windowSeconds": 10}
    spec = {"schedule": "@every 20s", "notBefore": rfc3339(anchor), "after": after}
    jobs.create("daily", {**spec, "task": ECHO})
    # extract ends between two windows (14 s after the first opened), as a rule.
    jobs.create("extract", {"runAt": rfc3339(anchor + dt.timedelta(seconds=14)), "task": ECHO})
    wait_for(
        lambda: (jobs.status("daily").get("lastRun") or {}).get("outcome") == "Succeeded",
        timeout=90,
        interval=0.5,
        what="daily's run",
    )
    ended = dt.datetime.fromisoformat(_whole(jobs.status("extract")["lastRun"]["finishedAt"]))
    since_opening = (ended - anchor).total_seconds() % 20
    due = ended if since_opening < 10 else ended + dt.timedelta(seconds=20 - since_opening)
    daily = jobs.status("daily")["lastRun"]
    assert daily["scheduledAt"] == rfc3339(due), (rfc3339(ended), daily)
    assert daily["params"]["upstreamJob"] == "extract"
