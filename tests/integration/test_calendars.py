"""A job that keeps off a Calendar's days, with the real operator and worker processes
against the real API server and Redis (issue 50, item 2): no run on the calendar's
days, ``status.nextRunAt`` past them; the calendar edited, the job re-planned from
then with no restart and no burst; the calendar deleted, the job Invalid, saying
which; the calendar back, the job scheduled again.
(The planning itself, with the test's clock: tests/unit/test_calendar_jobs.py.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.support import Jobs, lead
from tickwork.api import models
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(240)
Start = Callable[..., TickworkProcess]


class Calendars:
    """Calendars of the test namespace, through the real API."""

    def __init__(self, jobs: Jobs) -> None:
        self.api = jobs.api
        self.args = (models.GROUP, models.VERSION, jobs.namespace, "calendars")

    def create(self, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": models.API_VERSION, "kind": "Calendar", "metadata": {"name": name}}
        self.api.create_namespaced_custom_object(*self.args, {**body, "spec": spec})

    def patch(self, name: str, spec: dict[str, Any]) -> None:
        self.api.patch_namespaced_custom_object(*self.args, name, {"spec": spec})

    def delete(self, name: str) -> None:
        self.api.delete_namespaced_custom_object(*self.args, name)


def ready(jobs: Jobs, name: str) -> dict[str, Any]:
    conditions = jobs.status(name).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def test_a_job_keeps_off_its_calendars_days_and_follows_the_calendar_as_it_changes(
    start_operator: Start, start_worker: Start, jobs: Jobs, api_client: k8s.ApiClient
) -> None:
    calendars = Calendars(jobs)
    today, one_day = dt.datetime.now(dt.UTC).date(), dt.timedelta(days=1)
    # Yesterday to tomorrow: whenever the test runs, its instants fall on the freeze.
    calendars.create(
        "freeze",
        {
            "timeZone": "UTC",
            "ranges": [{"from": str(today - one_day), "to": str(today + one_day)}],
            "description": "release freeze",
        },
    )
    lead(start_operator())
    start_worker()
    # Its instants count from ten minutes ago: sixty of them fell on the freeze already.
    since = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=10)
    jobs.create(
        "nightly",
        {
            "schedule": "@every 10s",
            "notBefore": since.isoformat().replace("+00:00", "Z"),
            "calendars": {"notOn": ["freeze"]},
            "history": {"successfulRuns": 20},
            "task": {"echo": {"message": "hi"}},
        },
    )
    first_day_after = dt.datetime.combine(today + dt.timedelta(days=2), dt.time(), dt.UTC)

    def planned_past_the_freeze() -> bool:
        status = jobs.status("nightly")
        shown = status.get("nextRunAt")
        return (
            status.get("phase") == "Scheduled"
            and shown is not None
            and (dt.datetime.fromisoformat(shown) >= first_day_after)
        )

    wait_for(planned_past_the_freeze, timeout=30, what="nextRunAt past the freeze")
    assert not jobs.status("nightly").get("runs")  # none ran on the calendar's days

    # The freeze is lifted: the job runs from now on, not the runs it had ruled out.
    lifted_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    calendars.patch("freeze", {"ranges": [], "dates": ["2099-01-01"]})
    wait_for(lambda: jobs.status("nightly").get("runs"), timeout=30, what="a run")
    records = jobs.status("nightly")["runs"]
    first = min(dt.datetime.fromisoformat(r["scheduledAt"]) for r in records)
    # None of the instants ruled out before: the first run is one due after the change.
    assert first >= lifted_at - dt.timedelta(seconds=10), records
    assert all(r["outcome"] == "Succeeded" for r in records)

    # The calendar goes: the job is Invalid, and says which calendar it misses.
    calendars.delete("freeze")
    wait_for(
        lambda: jobs.status("nightly").get("phase") == "Invalid",
        timeout=30,
        what="phase Invalid",
    )
    assert "Calendar 'freeze' not found" in ready(jobs, "nightly")["message"]
    wait_for(
        lambda: any(reason == "InvalidSpec" for _, reason, _ in jobs.events("nightly")),
        timeout=30,
        what="an InvalidSpec Event",
    )
    # Back: scheduled again, with no restart of the operator.
    calendars.create("freeze", {"dates": ["2099-01-01"]})
    wait_for(
        lambda: jobs.status("nightly").get("phase") == "Scheduled",
        timeout=30,
        what="phase Scheduled again",
    )
    assert ready(jobs, "nightly")["status"] == "True"
