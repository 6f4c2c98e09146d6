"""The watcher's decisions: which run a job waits for, and what happens when it falls due."""

from __future__ import annotations

import datetime as dt

import pytest

from tickwork.core.planning import (
    BUFFER_LIMIT,
    Action,
    ConcurrencyPolicy,
    JobFacts,
    PendingRun,
    decide,
    pending_for,
    pending_run,
)
from tickwork.core.runs import jitter_seconds, scheduled_run_id
from tickwork.core.schedule import OneShotSchedule, cron_schedule

UID = "0b7c5a52-1f1e-4a8e-9f57-1d3c2b4a5e6f"
CREATED = dt.datetime(2026, 11, 29, 9, 0, 30, tzinfo=dt.UTC)


def at(hour: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 29, hour, minute, second, tzinfo=dt.UTC)


def facts(schedule: str = "*/5 * * * *", **kwargs: object) -> JobFacts:
    values: dict[str, object] = {
        "uid": UID,
        "schedule": cron_schedule(schedule),
        "one_shot": False,
        "created_at": CREATED,
    }
    values.update(kwargs)
    return JobFacts(**values)  # type: ignore[arg-type]


def test_a_new_job_waits_for_its_first_run_after_creation() -> None:
    pending = pending_run(facts(), now=at(9, 1), fresh_start=False)
    assert pending is not None
    assert pending.scheduled_at == at(9, 5)
    assert pending.run_id == scheduled_run_id(UID, at(9, 5))


def test_a_job_created_while_no_watcher_ran_catches_up_from_its_creation() -> None:
    pending = pending_run(facts(), now=at(9, 33), fresh_start=False)
    assert pending is not None
    assert pending.scheduled_at == at(9, 5)  # in the past: decide() applies the deadline


def test_after_a_restart_the_status_says_which_run_is_next() -> None:
    known = facts(next_run_at=at(9, 20), last_schedule_time=at(9, 15), status_is_current=True)
    pending = pending_run(known, now=at(9, 42), fresh_start=False)
    assert pending is not None
    assert pending.scheduled_at == at(9, 20)


def test_an_edit_or_a_resume_starts_from_now_without_a_burst() -> None:
    known = facts(next_run_at=at(9, 20), last_schedule_time=at(9, 15), status_is_current=True)
    pending = pending_run(known, now=at(9, 42), fresh_start=True)
    assert pending is not None
    assert pending.scheduled_at == at(9, 45)


def test_a_stale_status_of_an_older_generation_is_not_trusted() -> None:
    known = facts(next_run_at=at(9, 20), last_schedule_time=at(9, 15), status_is_current=False)
    pending = pending_run(known, now=at(9, 42), fresh_start=False)
    assert pending is not None
    assert pending.scheduled_at == at(9, 45)


def test_one_shot_jobs_wait_for_run_at_until_it_was_published() -> None:
    one = facts(schedule="@daily", one_shot=True, created_at=CREATED)
    one = JobFacts(**{**one.__dict__, "schedule": OneShotSchedule(at(8, 0))})
    pending = pending_run(one, now=at(9, 30), fresh_start=False)
    assert pending is not None
    assert pending.scheduled_at == at(8, 0)  # already past: due at once
    done = JobFacts(**{**one.__dict__, "last_schedule_time": at(8, 0)})
    assert pending_run(done, now=at(9, 30), fresh_start=False) is None


def test_jitter_delays_publishing_deterministically() -> None:
    jittery = facts(jitter_seconds=120)
    pending = pending_for(jittery, at(10, 0))
    assert pending is not None
    delay = jitter_seconds(scheduled_run_id(UID, at(10, 0)), 120)
    assert pending.due_at == at(10, 0) + dt.timedelta(seconds=delay)
    assert pending == pending_for(jittery, at(10, 0))


def test_a_pending_run_holds_no_strings_or_instants_of_its_own() -> None:
    """The watcher holds a pending run per job: its ID is worked out from the job's
    UID (the very string) when asked for, and without jitter it is due at the very
    instant it is scheduled at."""
    scheduled = at(10, 0)
    pending = pending_for(facts(), scheduled)
    assert pending is not None
    assert pending.run_id == scheduled_run_id(UID, scheduled)
    assert pending.uid is UID
    assert pending.due_at is pending.scheduled_at is scheduled
    assert "run_id" not in PendingRun.__slots__


def test_a_due_run_is_published_and_the_next_one_planned() -> None:
    job = facts()
    pending = pending_for(job, at(9, 5))
    assert pending is not None
    decision = decide(job, pending, now=at(9, 5, 1))
    assert decision.action is Action.PUBLISH
    assert decision.scheduled_at == at(9, 5)
    assert decision.run_id == pending.run_id
    assert decision.missed == 0
    assert decision.following is not None
    assert decision.following.scheduled_at == at(9, 10)


def test_after_downtime_only_the_latest_run_within_the_deadline_runs() -> None:
    job = facts(starting_deadline_seconds=600)
    pending = pending_for(job, at(9, 5))
    assert pending is not None
    decision = decide(job, pending, now=at(9, 42))
    assert decision.action is Action.PUBLISH
    assert decision.scheduled_at == at(9, 40)
    assert decision.missed == 7  # 9:05 .. 9:35
    assert decision.latest_missed == at(9, 35)
    assert decision.following is not None
    assert decision.following.scheduled_at == at(9, 45)


def test_a_run_past_its_deadline_is_missed() -> None:
    job = facts(schedule="0 * * * *", starting_deadline_seconds=60)
    pending = pending_for(job, at(9, 0))
    assert pending is not None
    decision = decide(job, pending, now=at(9, 2))
    assert decision.action is Action.MISS
    assert decision.missed == 1
    assert decision.latest_missed == at(9, 0)
    assert "past startingDeadlineSeconds (60s)" in decision.reason


P = ConcurrencyPolicy


@pytest.mark.parametrize(
    ("policy", "action", "cancel", "terminate"),
    [
        (P.ALLOW_ALL, Action.PUBLISH, None, False),
        (P.ALLOW, Action.PUBLISH, None, False),
        (P.SKIP, Action.SKIP, None, False),
        (P.FORBID, Action.SKIP, None, False),
        (P.BUFFER_ONE, Action.BUFFER, None, False),
        (P.BUFFER_ALL, Action.BUFFER, None, False),
        (P.CANCEL_OTHER, Action.BUFFER, "older-run", False),
        (P.REPLACE, Action.BUFFER, "older-run", False),
        (P.TERMINATE_OTHER, Action.PUBLISH, "older-run", True),
    ],
)
def test_concurrency_policy_applies_when_a_run_is_still_active(
    policy: ConcurrencyPolicy, action: Action, cancel: str | None, terminate: bool
) -> None:
    job = facts(concurrency_policy=policy, active_run_id="older-run")
    pending = pending_for(job, at(9, 5))
    assert pending is not None
    decision = decide(job, pending, now=at(9, 5, 1))
    assert decision.action is action
    assert decision.cancel_run_id == cancel
    assert decision.terminate is terminate
    assert decision.run_id == pending.run_id
    assert decision.following is not None  # the schedule goes on either way


@pytest.mark.parametrize("policy", list(ConcurrencyPolicy))
def test_with_no_run_active_and_none_buffered_every_policy_publishes(
    policy: ConcurrencyPolicy,
) -> None:
    job = facts(concurrency_policy=policy)
    pending = pending_for(job, at(9, 5))
    assert pending is not None
    decision = decide(job, pending, now=at(9, 5, 1))
    assert (decision.action, decision.cancel_run_id) == (Action.PUBLISH, None)


@pytest.mark.parametrize(
    ("policy", "active", "buffered", "action"),
    [
        (P.BUFFER_ONE, "older-run", 1, Action.SKIP),  # one waits already
        (P.BUFFER_ALL, "older-run", 1, Action.BUFFER),
        (P.BUFFER_ALL, "older-run", BUFFER_LIMIT - 1, Action.BUFFER),
        (P.BUFFER_ALL, "older-run", BUFFER_LIMIT, Action.SKIP),  # the cap: counted, not lost
        (P.BUFFER_ALL, None, 2, Action.BUFFER),  # behind the runs buffered first, in order
        (P.BUFFER_ONE, None, 1, Action.SKIP),
        (P.CANCEL_OTHER, "older-run", 1, Action.SKIP),  # one waits for the cancel already
        (P.SKIP, None, 3, Action.PUBLISH),  # the policy changed: the buffer is not its
        (P.ALLOW_ALL, "older-run", 3, Action.PUBLISH),
    ],
)
def test_buffered_runs_keep_their_order_and_the_buffer_its_bound(
    policy: ConcurrencyPolicy, active: str | None, buffered: int, action: Action
) -> None:
    job = facts(concurrency_policy=policy, active_run_id=active, buffered=buffered)
    pending = pending_for(job, at(9, 5))
    assert pending is not None
    decision = decide(job, pending, now=at(9, 5, 1))
    assert decision.action is action
    if action is Action.SKIP:
        assert "already buffered" in decision.reason


def test_the_old_names_are_temporals_policies() -> None:
    assert P.FORBID.overlap is P.SKIP
    assert P.ALLOW.overlap is P.ALLOW_ALL
    assert P.REPLACE.overlap is P.CANCEL_OTHER
    assert [p.overlap for p in (P.BUFFER_ONE, P.TERMINATE_OTHER)] == [
        P.BUFFER_ONE,
        P.TERMINATE_OTHER,
    ]
    assert (P.BUFFER_ONE.buffer_limit, P.BUFFER_ALL.buffer_limit) == (1, BUFFER_LIMIT)
    assert not P.TERMINATE_OTHER.buffers


def test_a_run_is_not_blocked_by_itself() -> None:
    job = facts(active_run_id=scheduled_run_id(UID, at(9, 5)))
    pending = pending_for(job, at(9, 5))
    assert pending is not None
    assert decide(job, pending, now=at(9, 5, 1)).action is Action.PUBLISH


def test_a_one_shot_job_has_nothing_after_its_run() -> None:
    base = facts(one_shot=True)
    one = JobFacts(**{**base.__dict__, "schedule": OneShotSchedule(at(9, 5))})
    pending = pending_for(one, at(9, 5))
    assert pending is not None
    decision = decide(one, pending, now=at(9, 5, 1))
    assert (decision.action, decision.following) == (Action.PUBLISH, None)


def test_a_run_at_the_end_of_time_with_jitter_is_due_at_the_last_instant() -> None:
    end = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    one = facts(jitter_seconds=3600, one_shot=True)
    one = JobFacts(**{**one.__dict__, "schedule": OneShotSchedule(end)})
    pending = pending_run(one, now=at(9, 30), fresh_start=True)
    assert pending is not None  # once: OverflowError, and the watcher's tick died on it
    assert pending.scheduled_at == end
    assert pending.due_at == dt.datetime.max.replace(tzinfo=dt.UTC)
