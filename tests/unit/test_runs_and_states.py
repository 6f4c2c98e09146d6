"""Run IDs, jitter, catch-up after missed runs, and the run state machine."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from tickwork.core.annotations import trigger_key
from tickwork.core.catchup import catch_up
from tickwork.core.cron import CronExpression
from tickwork.core.errors import IllegalTransitionError, InvalidSpecError
from tickwork.core.runs import (
    belongs_to,
    jitter_seconds,
    manual_run_id,
    parse_run_id,
    scheduled_run_id,
)
from tickwork.core.schedule import OneShotSchedule, cron_schedule
from tickwork.core.states import (
    FINAL_STATES,
    TRANSITIONS,
    JobPhase,
    RunState,
    job_phase,
    transition,
)

UID = "d2db5bc7-045c-430a-90ac-640ebbcff12d"
AT = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def test_scheduled_run_ids_are_deterministic_and_round_trip() -> None:
    run_id = scheduled_run_id(UID, AT)
    assert run_id == f"{UID}.20261201T090000Z"
    berlin = AT.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert scheduled_run_id(UID, berlin) == run_id  # the instant, not its zone
    parts = parse_run_id(run_id)
    assert (parts.uid, parts.scheduled_at, parts.token) == (UID, AT, None)


def test_different_resources_and_instants_get_different_ids() -> None:
    other_uid = "11111111-2222-3333-4444-555555555555"
    ids = {
        scheduled_run_id(UID, AT),
        scheduled_run_id(other_uid, AT),
        scheduled_run_id(UID, AT + dt.timedelta(minutes=1)),
        manual_run_id(UID, "deploy-42"),
    }
    assert len(ids) == 4


@pytest.mark.parametrize(
    ("token", "expected_suffix"),
    [
        ("deploy-42", "manual.deploy-42"),
        ("2026-11-29T10:00:00Z", None),  # colons: hashed
        ("x" * 64, None),  # too long: hashed
    ],
)
def test_manual_run_ids_keep_plain_tokens_and_hash_others(
    token: str, expected_suffix: str | None
) -> None:
    run_id = manual_run_id(UID, token)
    assert run_id == manual_run_id(UID, token)
    suffix = run_id.removeprefix(f"{UID}.")
    if expected_suffix:
        assert suffix == expected_suffix
    else:
        assert suffix.startswith("manual.h")
        assert len(suffix) == len("manual.h") + 32
    assert parse_run_id(run_id).token == suffix.removeprefix("manual.")


def test_empty_manual_tokens_are_refused() -> None:
    with pytest.raises(InvalidSpecError, match="must not be empty"):
        manual_run_id(UID, "  ")


@pytest.mark.parametrize(
    ("token", "key"), [("", None), (" \t", None), (" nightly ", "nightly"), ("a b", None)]
)
def test_a_blank_token_triggers_nothing_and_others_are_keyed_as_run_ids_are(
    token: str, key: str | None
) -> None:
    if key is None and token.strip():
        key = manual_run_id(UID, token).removeprefix(f"{UID}.manual.")  # hashed
    assert trigger_key(token) == key


@pytest.mark.parametrize("bad", ["", "no-instant", f"{UID}.notatime"])
def test_foreign_strings_are_not_run_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Tickwork run ID"):
        parse_run_id(bad)


@pytest.mark.parametrize(
    ("run_id", "owner"),
    [
        (scheduled_run_id(UID, dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), True),
        (manual_run_id(UID, "now-1"), True),
        (scheduled_run_id("other-uid", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), False),
        (manual_run_id("other-uid", "now-1"), False),
        (f"{UID}.notatime", False),  # looks like ours, is no run ID
        ("", False),
    ],
)
def test_a_run_id_belongs_only_to_the_object_whose_uid_it_carries(run_id: str, owner: bool) -> None:
    assert belongs_to(run_id, UID) is owner


def test_jitter_is_deterministic_bounded_and_spread() -> None:
    ids = [scheduled_run_id(UID, AT + dt.timedelta(minutes=m)) for m in range(2000)]
    values = [jitter_seconds(run_id, 59) for run_id in ids]
    assert values == [jitter_seconds(run_id, 59) for run_id in ids]
    assert min(values) == 0
    assert max(values) == 59
    # Roughly uniform: every ten-second slice gets a fair share of 2000 runs.
    for low in range(0, 60, 10):
        share = sum(low <= v < low + 10 for v in values)
        assert 250 < share < 420
    assert jitter_seconds(ids[0], 0) == 0


def test_catch_up_runs_the_latest_run_within_the_deadline() -> None:
    schedule = cron_schedule("*/5 * * * *", "UTC")
    now = dt.datetime(2026, 1, 1, 1, 1, 30, tzinfo=dt.UTC)
    result = catch_up(
        schedule,
        last_scheduled=now - dt.timedelta(hours=1, minutes=1),
        now=now,
        starting_deadline_seconds=300,
    )
    assert result.run == dt.datetime(2026, 1, 1, 1, 0, tzinfo=dt.UTC)
    assert result.missed == 11
    assert result.latest_missed == dt.datetime(2026, 1, 1, 0, 55, tzinfo=dt.UTC)


def test_catch_up_past_the_deadline_runs_nothing() -> None:
    schedule = cron_schedule("0 * * * *", "UTC")
    now = dt.datetime(2026, 1, 1, 5, 30, tzinfo=dt.UTC)
    result = catch_up(
        schedule, last_scheduled=now - dt.timedelta(hours=3), now=now, starting_deadline_seconds=60
    )
    assert result.run is None
    assert result.missed == 3
    assert result.latest_missed == dt.datetime(2026, 1, 1, 5, 0, tzinfo=dt.UTC)


def test_catch_up_without_a_deadline_still_starts_only_one_run() -> None:
    schedule = cron_schedule("* * * * *", "UTC")
    now = dt.datetime(2026, 1, 1, 0, 10, tzinfo=dt.UTC)
    result = catch_up(
        schedule,
        last_scheduled=now - dt.timedelta(minutes=10),
        now=now,
        starting_deadline_seconds=None,
    )
    assert (result.run, result.missed) == (now, 9)


def test_catch_up_with_nothing_due() -> None:
    schedule = OneShotSchedule(AT)
    result = catch_up(
        schedule, last_scheduled=AT, now=AT + dt.timedelta(days=1), starting_deadline_seconds=10
    )
    assert (result.run, result.missed, result.latest_missed) == (None, 0, None)


def test_catch_up_of_a_year_down_counts_every_minute_without_walking_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedule = cron_schedule("* * * * *", "Europe/Berlin")
    now = dt.datetime(2026, 11, 29, 10, 0, 30, tzinfo=dt.UTC)
    steps = {"next_match": 0, "prev_match": 0}
    for name in steps:
        original = getattr(CronExpression, name)

        def counting(
            self: CronExpression,
            minute: int,
            _name: str = name,
            _original: Callable[[CronExpression, int], int | None] = original,
        ) -> int | None:
            steps[_name] += 1
            return _original(self, minute)

        monkeypatch.setattr(CronExpression, name, counting)
    result = catch_up(
        schedule,
        last_scheduled=now - dt.timedelta(days=365),
        now=now,
        starting_deadline_seconds=300,
    )
    # Every minute of the 365 days (DST's lost and gained hours cancel out)
    # but the one that still runs...
    assert result.missed == 365 * 1440 - 1
    assert result.run == dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)
    # ...found with a handful of slot searches, not 525,600.
    assert steps["next_match"] + steps["prev_match"] < 10


def test_every_state_has_a_transition_entry_and_final_states_are_dead_ends() -> None:
    assert set(TRANSITIONS) == set(RunState)
    for state in FINAL_STATES - {RunState.FAILED}:
        assert TRANSITIONS[state] == frozenset()
    # A dead-lettered run can only be requeued by hand.
    assert TRANSITIONS[RunState.FAILED] == {RunState.QUEUED}


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (RunState.QUEUED, RunState.RUNNING),
        (RunState.RUNNING, RunState.SUCCEEDED),
        (RunState.RUNNING, RunState.RETRYING),
        (RunState.RUNNING, RunState.QUEUED),  # lease expired: redelivered
        (RunState.RETRYING, RunState.QUEUED),
        (RunState.FAILED, RunState.QUEUED),
    ],
)
def test_allowed_transitions(current: RunState, target: RunState) -> None:
    assert transition(current, target) is target


@pytest.mark.parametrize(
    ("current", "target", "message"),
    [
        (RunState.SUCCEEDED, RunState.RUNNING, "from Succeeded it may go to none: it is final"),
        (RunState.QUEUED, RunState.SUCCEEDED, "it may go to Cancelled, Running, Skipped"),
        (RunState.CANCELLED, RunState.QUEUED, "none: it is final"),
    ],
)
def test_illegal_transitions_say_what_is_allowed(
    current: RunState, target: RunState, message: str
) -> None:
    with pytest.raises(IllegalTransitionError, match=f"cannot go from {current} to {target}") as e:
        transition(current, target)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("kwargs", "phase"),
    [
        ({}, JobPhase.SCHEDULED),
        ({"suspended": True}, JobPhase.SUSPENDED),
        ({"valid": False, "active": True}, JobPhase.INVALID),
        ({"valid": False, "finished": True}, JobPhase.INVALID),
        # finished: no run is left (a one-shot run published, a recurring job past notAfter)
        ({"finished": True}, JobPhase.COMPLETED),
        ({"finished": True, "suspended": True}, JobPhase.COMPLETED),
        ({"finished": True, "active": True}, JobPhase.SCHEDULED),
        ({"paused": True}, JobPhase.PAUSED),
        ({"paused": True, "active": True}, JobPhase.PAUSED),  # a run under way may finish
        ({"paused": True, "suspended": True}, JobPhase.SUSPENDED),
        ({"paused": True, "valid": False}, JobPhase.INVALID),
    ],
)
def test_job_phase_is_the_lifecycle(kwargs: dict[str, bool], phase: JobPhase) -> None:
    arguments = {
        "suspended": False,
        "valid": True,
        "finished": False,
        "active": False,
        "paused": False,
    } | kwargs
    assert job_phase(**arguments) is phase
