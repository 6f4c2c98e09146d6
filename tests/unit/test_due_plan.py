"""What a due run's decision changes (tickwork_operator.due), as tables: the share of
status each action leaves, whether it is written before the run is queued, the
Events and the runs counted. The operator's tests (test_operator_decisions.py) show
the publisher carrying the plans out."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tickwork.api.models import OperatorStatus, ScheduledJobSpec
from tickwork.core.planning import Action, Decision, PendingRun
from tickwork_operator.due import decided_by_the_clock, due_plan

pytestmark = pytest.mark.unit

T = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
NEXT = T + dt.timedelta(hours=1)
SHOWN = [NEXT, NEXT + dt.timedelta(hours=1)]


def decision(
    action: Action,
    *,
    missed: int = 0,
    late: bool = False,
    at: dt.datetime = T,
    following: dt.datetime | None = NEXT,
) -> Decision:
    return Decision(
        action=action,
        scheduled_at=at,
        run_id="u.20261201T090000Z",
        cancel_run_id=None,
        terminate=False,
        missed=missed,
        latest_missed=at - dt.timedelta(hours=1) if missed else None,
        following=PendingRun(following, following, "u") if following else None,
        reason="why",
        late=late,
    )


def plan(
    d: Decision,
    *,
    keeps: bool = True,
    clock: bool = False,
    overtaken: bool = False,
    wanted: OperatorStatus | None = None,
) -> Any:
    return due_plan(
        wanted or OperatorStatus(missed_runs=2),
        d,
        now=T,
        keeps_schedule=keeps,
        next_runs=lambda first: SHOWN if first == NEXT else None,
        by_the_clock=clock,
        overtaken=overtaken,
    )


SCHEDULE = {"last_schedule_time": T, "next_run_at": NEXT, "next_runs": SHOWN}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # A run on time, the schedule in status: its time and the next runs, reported.
        (
            plan(decision(Action.PUBLISH)),
            {"changes": SCHEDULE, "durable": False, "reported": True, "report": True},
        ),
        # Without the schedule in status: nothing of the operator's to write or report
        # (a time an earlier decision wrote leaves)...
        (
            plan(decision(Action.PUBLISH), keeps=False),
            {"changes": {"last_schedule_time": None}, "reported": False, "report": False},
        ),
        # ... unless a run of the job is still on its way: the next runs are owed.
        (
            plan(decision(Action.PUBLISH), keeps=False, overtaken=True),
            {"reported": False, "report": True},
        ),
        # A decision by the clock is written first, naming the run, with what it missed.
        (
            plan(decision(Action.PUBLISH, missed=3), keeps=False, clock=True),
            {
                "changes": {
                    "last_schedule_time": T,
                    "missed_runs": 5,
                    "last_missed_time": T - dt.timedelta(hours=1),
                },
                "durable": True,
                "reported": True,
                "missed": 3,
            },
        ),
        (plan(decision(Action.BUFFER)), {"changes": SCHEDULE, "report": False, "events": ()}),
        (
            plan(decision(Action.SKIP)),
            {
                "changes": {**SCHEDULE, "missed_runs": 3, "last_missed_time": T},
                "skipped": 1,
                "events": (("Normal", "RunSkipped", "why"),),
            },
        ),
        (
            plan(decision(Action.MISS, missed=1, following=None)),
            {
                "changes": {
                    "next_run_at": None,
                    "next_runs": None,
                    "missed_runs": 3,
                    "last_missed_time": T - dt.timedelta(hours=1),
                    "last_schedule_time": T - dt.timedelta(hours=1),
                },
                "missed": 1,
                "events": (("Warning", "MissedRun", "why"),),
            },
        ),
    ],
)
def test_what_a_decision_changes(case: Any, expected: dict[str, Any]) -> None:
    for name, value in expected.items():
        assert getattr(case, name) == value, name


def test_a_run_published_after_missed_ones_says_which_it_was() -> None:
    latest = plan(decision(Action.PUBLISH, missed=2), clock=True)
    [(kind, reason, text)] = latest.events
    assert (kind, reason) == ("Warning", "MissedRuns")
    assert "2 run(s) missed" in text
    assert "the latest due run (2026-12-01T09:00:00+00:00)" in text
    oldest = plan(decision(Action.PUBLISH, missed=2, following=T), clock=True)
    assert "the oldest run caught up" in oldest.events[0][2]


def spec(catchup: str | None) -> ScheduledJobSpec:
    body: dict[str, Any] = {"schedule": "0 9 * * *", "task": {"echo": {"message": "m"}}}
    if catchup:
        body["catchup"] = {"policy": catchup}
    return ScheduledJobSpec.model_validate(body)


@pytest.mark.parametrize(
    ("missed", "late", "catchup", "expected"),
    [
        (0, False, None, False),  # on time: decided the same way again
        (1, False, None, True),  # it counts runs missed
        (0, True, None, True),  # caught up, CronJob's way: the latest only
        (0, True, "Latest", True),
        (0, True, "All", False),  # the oldest owed: decided the same way again
    ],
)
def test_which_decisions_depend_on_when_they_are_made(
    missed: int, late: bool, catchup: str | None, expected: bool
) -> None:
    d = decision(Action.PUBLISH, missed=missed, late=late)
    assert decided_by_the_clock(d, spec(catchup)) is expected
    assert decided_by_the_clock(decision(Action.PUBLISH, late=True), None) is False
