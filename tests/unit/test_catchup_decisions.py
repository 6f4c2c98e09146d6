"""Catch-up after an outage and backfills, as pure decisions over an injected clock:
each policy with and without a window, how the window and startingDeadlineSeconds
combine, the cap of All, a catch-up handed out run by run (as the operator records it)
across daylight-saving changes (checked against the minute-by-minute references), the
operator-wide pace, and the runs a backfill covers."""

from __future__ import annotations

import datetime as dt

import pytest

from tickwork.core import civil
from tickwork.core.backfill import (
    MAX_BACKFILL_RUNS,
    backfill_runs,
    next_backfill_run,
    refusal,
)
from tickwork.core.catchup import (
    MAX_CATCHUP_RUNS,
    CatchupPolicy,
    CatchupRule,
    catch_up,
)
from tickwork.core.daylight import DaylightSavingChoice, RepeatedTime, SkippedTime
from tickwork.core.runs import backfill_run_id, belongs_to, parse_run_id, scheduled_run_id
from tickwork.core.schedule import Schedule, cron_schedule
from tickwork_dev.reference import chosen_fires, vixie_fires
from tickwork_operator.pacing import Pace

pytestmark = pytest.mark.unit

UID = "7c8e4d0a-1111-4222-8333-444455556666"
NINE = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
EVERY_MINUTE = cron_schedule("* * * * *")
NONE, LATEST, ALL = CatchupPolicy.NONE, CatchupPolicy.LATEST, CatchupPolicy.ALL


def at(minutes: float) -> dt.datetime:
    return NINE + dt.timedelta(minutes=minutes)


def owed(
    schedule: Schedule, rule: CatchupRule | None, *, last: dt.datetime, now: dt.datetime
) -> tuple[list[dt.datetime], int]:
    """Every run the catch-up hands out, one decision after the other as the operator
    records each (lastScheduleTime), and the runs counted missed."""
    runs: list[dt.datetime] = []
    missed = 0
    while True:
        result = catch_up(
            schedule, last_scheduled=last, now=now, starting_deadline_seconds=None, rule=rule
        )
        missed += result.missed
        if result.run is None:
            return runs, missed
        runs.append(result.run)
        last = result.run
        if not result.more:
            return runs, missed


# Down from 08:55 (its run was the last published) until 09:00:30: 08:56 .. 09:00 owed.
CASES = [
    # policy, windowSeconds, runs started (minutes after 09:00), missed
    (None, None, [0], 4),  # no catchup: CronJob's way, the latest
    (NONE, None, [], 5),
    (NONE, 3600, [], 5),
    (LATEST, None, [0], 4),
    (LATEST, 3600, [0], 4),
    (LATEST, 20, [], 5),  # 09:00 is 30 s old: outside a 20 s window
    (ALL, None, [-4, -3, -2, -1, 0], 0),
    (ALL, 3600, [-4, -3, -2, -1, 0], 0),
    (ALL, 150, [-2, -1, 0], 2),  # 08:58:00 is 150 s old: the window includes it
    (ALL, 149, [-1, 0], 3),
    (ALL, 20, [], 5),
]


@pytest.mark.parametrize(("policy", "window", "started", "missed"), CASES)
def test_each_policy_starts_what_it_allows_oldest_first_and_counts_the_rest(
    policy: CatchupPolicy | None, window: int | None, started: list[int], missed: int
) -> None:
    rule = None if policy is None else CatchupRule.of(policy, window, None)
    runs, counted = owed(EVERY_MINUTE, rule, last=at(-5), now=at(0.5))
    assert runs == [at(m) for m in started]
    assert counted == missed


def test_the_window_and_the_starting_deadline_combine_the_shorter_counts() -> None:
    assert CatchupRule.of(ALL, 3600, 150).window_seconds == 150
    assert CatchupRule.of(ALL, 100, 3600).window_seconds == 100
    assert CatchupRule.of(ALL, None, 150).window_seconds == 150
    assert CatchupRule.of(ALL, None, None).window_seconds is None
    runs, missed = owed(EVERY_MINUTE, CatchupRule.of(ALL, 3600, 150), last=at(-5), now=at(0.5))
    assert (runs, missed) == ([at(-2), at(-1), at(0)], 2)


@pytest.mark.parametrize("policy", [NONE, LATEST, ALL])
def test_a_run_on_time_or_a_little_late_starts_whatever_the_policy(
    policy: CatchupPolicy,
) -> None:
    rule = CatchupRule.of(policy, 10, None)
    for late in (0.0, 0.005, 9.9):
        result = catch_up(
            EVERY_MINUTE,
            last_scheduled=at(0) - dt.timedelta(microseconds=1),
            now=at(0) + dt.timedelta(seconds=late),
            starting_deadline_seconds=None,
            rule=rule,
        )
        assert (result.run, result.missed, result.late) == (at(0), 0, False)
    # jitterSeconds widens the grace: the operator passes 10 s plus the job's jitter.
    result = catch_up(
        EVERY_MINUTE,
        last_scheduled=at(0) - dt.timedelta(microseconds=1),
        now=at(0) + dt.timedelta(seconds=40),
        starting_deadline_seconds=None,
        rule=CatchupRule.of(NONE, None, None),
        grace_seconds=10 + 45,
    )
    assert result.run == at(0)


def test_all_starts_at_most_the_newest_hundred_and_counts_the_rest_without_walking() -> None:
    # Down a whole year on a per-minute job: 525,600 runs missed, counted, not visited.
    last = at(0) - dt.timedelta(days=365)
    rule = CatchupRule.of(ALL, None, None)
    first = catch_up(
        EVERY_MINUTE, last_scheduled=last, now=at(0.5), starting_deadline_seconds=None, rule=rule
    )
    assert first.run == at(-(MAX_CATCHUP_RUNS - 1))
    assert first.missed == 365 * 24 * 60 - MAX_CATCHUP_RUNS
    assert first.latest_missed == at(-MAX_CATCHUP_RUNS)
    assert first.more
    assert first.late
    runs, missed = owed(EVERY_MINUTE, CatchupRule.of(ALL, None, None), last=last, now=at(0.5))
    assert len(runs) == MAX_CATCHUP_RUNS == len(set(runs))
    assert runs == sorted(runs)
    assert missed == 365 * 24 * 60 - MAX_CATCHUP_RUNS


def test_a_catch_up_resumed_from_any_recorded_run_hands_out_the_rest_once() -> None:
    rule = CatchupRule.of(ALL, None, None)
    everything, _ = owed(EVERY_MINUTE, rule, last=at(-30), now=at(0.5))
    for stop in range(len(everything)):
        # An operator restarted after the run at ``stop`` was recorded goes on after it.
        rest, missed = owed(EVERY_MINUTE, rule, last=everything[stop], now=at(0.5))
        assert everything[: stop + 1] + rest == everything
        assert missed == 0


def _minutes(moments: list[dt.datetime]) -> list[int]:
    return [civil.to_minute(m) for m in moments]


@pytest.mark.parametrize(
    ("expression", "zone", "down_from", "back_at"),
    [
        ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z"),
        ("*/30 * * * *", "Europe/Berlin", "2026-10-24T23:00:00Z", "2026-10-25T03:00:00Z"),
        ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z"),
        ("15 2 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z", "2026-04-06T00:00:00Z"),
        ("*/15 * * * *", "Pacific/Chatham", "2026-04-04T12:00:00Z", "2026-04-05T00:00:00Z"),
        ("45 2 * * *", "Pacific/Chatham", "2026-09-26T00:00:00Z", "2026-09-28T00:00:00Z"),
    ],
)
def test_all_across_a_clock_change_starts_exactly_the_runs_cron_would_have(
    expression: str, zone: str, down_from: str, back_at: str
) -> None:
    schedule = cron_schedule(expression, zone)
    start, end = dt.datetime.fromisoformat(down_from), dt.datetime.fromisoformat(back_at)
    runs, missed = owed(schedule, CatchupRule.of(ALL, None, None), last=start, now=end)
    reference = vixie_fires(
        schedule.cron, schedule.timeline.zone, civil.to_minute(start) + 1, civil.to_minute(end)
    )
    assert _minutes(runs) == reference
    assert missed == 0
    assert backfill_runs(schedule, start + dt.timedelta(minutes=1), end) == len(reference)


@pytest.mark.parametrize("repeated", list(RepeatedTime))
@pytest.mark.parametrize("skipped", list(SkippedTime))
def test_a_backfill_follows_the_jobs_daylight_saving_choice(
    repeated: RepeatedTime, skipped: SkippedTime
) -> None:
    choice = DaylightSavingChoice(repeated=repeated, skipped=skipped)
    schedule = cron_schedule("30 2 * * *", "Europe/Berlin", choice)
    for start, end in (
        ("2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z"),
        ("2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z"),
    ):
        begin, finish = dt.datetime.fromisoformat(start), dt.datetime.fromisoformat(end)
        runs, done = [], None
        while (
            moment := next_backfill_run(schedule, start=begin, end=finish, done_until=done)
        ) is not None:
            runs.append(moment)
            done = moment
        reference = chosen_fires(
            schedule.cron,
            schedule.timeline.zone,
            civil.to_minute(begin),
            civil.to_minute(finish),
            choice,
        )
        assert _minutes(runs) == reference
        assert backfill_runs(schedule, begin, finish) == len(reference)


def test_a_backfill_includes_both_ends_and_refuses_what_it_must() -> None:
    hourly = cron_schedule("0 * * * *")
    start, end = at(0), at(180)
    runs, done = [], None
    while (moment := next_backfill_run(hourly, start=start, end=end, done_until=done)) is not None:
        runs.append(moment)
        done = moment
    assert runs == [at(0), at(60), at(120), at(180)]
    assert refusal(hourly, start, end) is None
    assert refusal(hourly, end, start) == "a backfill's to must be later than its from"
    too_long = at(60 * (MAX_BACKFILL_RUNS + 1))
    assert "more than the 1000" in (refusal(hourly, start, too_long) or "")
    assert refusal(hourly, start, at(60 * (MAX_BACKFILL_RUNS - 1))) is None


def test_backfilled_runs_have_ids_of_their_own_that_name_their_job() -> None:
    run_id = backfill_run_id(UID, "nov-reports", at(0))
    assert run_id == f"{UID}.backfill.nov-reports.20261201T090000Z"
    assert run_id != scheduled_run_id(UID, at(0))
    parts = parse_run_id(run_id)
    assert (parts.uid, parts.scheduled_at, parts.backfill, parts.token) == (
        UID,
        at(0),
        "nov-reports",
        None,
    )
    assert belongs_to(run_id, UID)
    assert not belongs_to(run_id, "someone-else")
    with pytest.raises(ValueError, match="not a Tickwork run ID"):
        parse_run_id(f"{UID}.backfill.20261201T090000Z")


def test_the_pace_allows_a_burst_then_a_steady_rate() -> None:
    pace = Pace(per_second=10, burst=10, now=0.0)
    assert sum(pace.take(0.0) for _ in range(25)) == 10
    assert pace.wait(0.0) == pytest.approx(0.1)
    assert sum(pace.take(0.5) for _ in range(25)) == 5  # half a second: five more
    assert sum(pace.take(100.0) for _ in range(25)) == 10  # never more than the burst
    slow = Pace(per_second=0.5, burst=0, now=0.0)  # a burst of at least one
    assert slow.take(0.0)
    assert not slow.take(1.0)
    assert slow.wait(1.0) == pytest.approx(1.0)
    assert slow.take(2.0)
