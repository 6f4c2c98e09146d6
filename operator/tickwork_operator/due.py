"""What a due run's decision changes, worked out before anything is done: the
operator's share of status, whether that share is written before the run is queued,
the Events of the report and the runs counted skipped or missed. Pure: the
:class:`~tickwork_operator.publisher.Publisher` carries the plan out
(tests/unit/test_due_plan.py drives it with a table).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.api.models import OperatorStatus, ScheduledJobSpec
from tickwork.core.catchup import CatchupPolicy
from tickwork.core.planning import Action, Decision
from tickwork.kube.events import NORMAL, WARNING

#: An Event of the report: its type, reason and message.
Event = tuple[str, str, str]


@dataclass(frozen=True)
class DuePlan:
    changes: Mapping[str, Any]
    """Fields of the operator's share to set once the decision is carried out."""
    durable: bool = False
    """The share, naming the run (``queuedRun``), is written before the run is queued:
    the decision depends on when it is made (see :func:`decided_by_the_clock`)."""
    reported: bool = True
    """The publish names the run in status (``queuedRun``); else its record will."""
    report: bool = False
    """A report of the share is owed."""
    events: tuple[Event, ...] = ()
    missed: int = 0
    """Runs counted missed."""
    skipped: int = 0
    """Runs skipped because one is still running (``Forbid``)."""


def due_plan(
    wanted: OperatorStatus,
    decision: Decision,
    *,
    now: dt.datetime,
    keeps_schedule: bool,
    next_runs: Callable[[dt.datetime | None], list[dt.datetime] | None],
    by_the_clock: bool,
    overtaken: bool,
) -> DuePlan:
    """The plan for ``decision`` of a job whose share is ``wanted``: ``keeps_schedule``
    (the operator writes the schedule to status), ``next_runs`` (the runs shown from a
    next run on), ``by_the_clock`` (:func:`decided_by_the_clock`), ``overtaken`` (a
    run of the job is still on its way, whose record would show this run as next)."""
    following = decision.following.scheduled_at if decision.following else None
    shown: dict[str, Any] = (
        {"next_run_at": following, "next_runs": next_runs(following)}
        if keeps_schedule
        else {"next_run_at": None, "next_runs": None}
    )
    missed: dict[str, Any] = {}
    if decision.missed:
        missed = {
            "missed_runs": (wanted.missed_runs or 0) + decision.missed,
            "last_missed_time": decision.latest_missed or wanted.last_missed_time,
        }
    if decision.action is Action.PUBLISH:
        return _published(
            decision,
            shown,
            missed,
            now=now,
            keeps_schedule=keeps_schedule,
            by_the_clock=by_the_clock,
            overtaken=overtaken,
        )
    if decision.action is Action.BUFFER:  # the buffer itself: WaitingRuns.buffer
        changes = {"last_schedule_time": decision.scheduled_at, **shown, **missed}
        return DuePlan(changes, missed=decision.missed)
    if decision.action is Action.SKIP:
        changes = {
            **shown,
            "last_schedule_time": decision.scheduled_at,
            "missed_runs": (wanted.missed_runs or 0) + 1 + decision.missed,
            "last_missed_time": decision.scheduled_at,
        }
        told = (NORMAL, "RunSkipped", decision.reason)
        return DuePlan(changes, report=True, events=(told,), skipped=1)
    # Missed: Ready turns False (Missed) for a one-shot when the state refreshes its
    # lifecycle from this write; one place decides Ready (core.states.readiness).
    changes = {
        **shown,
        "missed_runs": (wanted.missed_runs or 0) + decision.missed,
        "last_missed_time": decision.latest_missed,
        "last_schedule_time": decision.latest_missed,
    }
    told = (WARNING, "MissedRun", decision.reason)
    return DuePlan(changes, report=True, events=(told,), missed=decision.missed)


def _published(
    decision: Decision,
    shown: dict[str, Any],
    missed: dict[str, Any],
    *,
    now: dt.datetime,
    keeps_schedule: bool,
    by_the_clock: bool,
    overtaken: bool,
) -> DuePlan:
    """A run published: its time, the next runs and the runs it counts missed. Without
    the schedule in status a run on time is published with no write of the operator's
    (its worker's record says it), and a time an earlier decision wrote leaves."""
    if keeps_schedule:
        changes = {"last_schedule_time": decision.scheduled_at, **shown, **missed}
    elif by_the_clock:
        changes = {"last_schedule_time": decision.scheduled_at, **missed}
    else:
        changes = {"last_schedule_time": None}
    reported = by_the_clock or keeps_schedule
    events: tuple[Event, ...] = ()
    if reported and decision.missed:
        caught_up = decision.following is not None and decision.following.scheduled_at <= now
        which = "the oldest run caught up" if caught_up else "the latest due run"
        assert decision.scheduled_at is not None  # noqa: S101 - a publish names its run
        at = decision.scheduled_at.isoformat()
        text = f"{decision.missed} run(s) missed while no watcher ran; {which} ({at}) was published"
        events = ((WARNING, "MissedRuns", text),)
    # Not reported but overtaken: the next runs are owed, as the records would not say.
    return DuePlan(
        changes,
        durable=by_the_clock,
        reported=reported,
        report=reported or overtaken,
        events=events,
        missed=decision.missed,
    )


def decided_by_the_clock(decision: Decision, spec: ScheduledJobSpec | None) -> bool:
    """Would the same run, decided again later, be decided otherwise? A run on time, or
    the oldest one owed under catch-up ``All``, is decided again the same way (and
    published again as a no-op: run IDs); a caught-up run of ``Latest`` (or of no
    policy, CronJob's way) and any decision that counts runs missed is not."""
    if decision.missed:
        return True
    if not decision.late or spec is None:
        return False
    rule = spec.catchup_rule
    return rule is None or rule.policy is not CatchupPolicy.ALL
