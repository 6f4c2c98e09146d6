"""Runs that fail in a row and the pause they lead to, as pure functions: what counts,
what resets, each run once, and what the pause says."""

from __future__ import annotations

import datetime as dt

import pytest

from tickwork.core.failures import (
    STREAK_RUN_IDS,
    FinishedRun,
    Streak,
    describe_pause,
    follow,
    restart,
)
from tickwork.core.states import RunState

pytestmark = pytest.mark.unit

NINE = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
F, S, K, C = RunState.FAILED, RunState.SUCCEEDED, RunState.SKIPPED, RunState.CANCELLED


def run(minute: int, outcome: RunState, run_id: str | None = None) -> FinishedRun:
    return FinishedRun(
        run_id=run_id or f"r{minute}",
        outcome=outcome,
        finished_at=NINE + dt.timedelta(minutes=minute, seconds=5),
    )


@pytest.mark.parametrize(
    ("outcomes", "count", "paused"),
    [
        ([], 0, False),
        ([F], 1, False),
        ([F, F], 2, False),
        ([F, F, F], 3, True),
        ([F, S, F], 1, False),  # a success starts the count again
        ([F, F, S, F, F], 2, False),
        ([F, K, F, C, F], 3, True),  # skipped and cancelled runs tried nothing
        ([S, S, S], 0, False),
        ([F, F, F, F, F], 3, True),  # paused, the streak stands still
        ([F, F, F, S], 3, True),  # and a success after the pause does not undo it
    ],
)
def test_runs_that_failed_for_good_count_in_a_row(
    outcomes: list[RunState], count: int, paused: bool
) -> None:
    history = [run(minute, outcome) for minute, outcome in enumerate(outcomes)]
    streak = follow(Streak(), history, pause_after=3)
    assert (streak.count, streak.paused) == (count, paused)


def test_runs_are_counted_in_the_order_they_finished_whatever_order_status_lists() -> None:
    history = [run(2, F), run(0, F), run(1, S)]  # lastRun first, then the history
    assert follow(Streak(), history, pause_after=5).count == 1


def test_each_run_counts_once_however_often_status_shows_it() -> None:
    streak = Streak()
    history: list[FinishedRun] = []
    for minute in range(3):
        history.append(run(minute, F))
        for _ in range(3):  # every watch event shows the whole history again
            streak = follow(streak, history, pause_after=10)
    assert streak.count == 3
    assert streak.run_ids == ("r0", "r1", "r2")
    assert streak.counted_until == history[-1].finished_at


def test_a_success_after_the_streak_is_not_recounted_and_old_failures_stay_counted() -> None:
    history = [run(0, F), run(1, F), run(2, S)]
    streak = follow(Streak(), history, pause_after=5)
    assert streak == Streak(count=0, counted_until=history[-1].finished_at)
    # The failures stay in status.runs; seen again, they do not count again.
    assert follow(streak, [*history, run(3, S)], pause_after=5) == streak
    assert follow(streak, [*history, run(3, F)], pause_after=5).count == 1


def test_a_requeued_dead_run_that_fails_again_is_the_same_run() -> None:
    streak = follow(Streak(), [run(0, F, "dead")], pause_after=5)
    again = follow(streak, [run(7, F, "dead")], pause_after=5)
    assert (again.count, again.run_ids) == (1, ("dead",))
    # ... and when it succeeds at last, the streak ends.
    assert follow(streak, [run(7, S, "dead")], pause_after=5).count == 0


def test_the_pause_is_when_the_run_that_reached_the_count_finished() -> None:
    history = [run(0, F), run(1, F), run(2, F)]
    streak = follow(Streak(), history, pause_after=2)
    assert streak.paused_at == history[1].finished_at
    assert streak.run_ids == ("r0", "r1")  # the runs that paused it, not the one after


def test_a_restart_counts_only_what_finishes_after_it() -> None:
    history = [run(0, F), run(1, F)]
    fresh = restart(history)
    assert fresh == Streak(counted_until=history[-1].finished_at)
    assert restart([]) == Streak()
    assert follow(fresh, history, pause_after=1) == fresh
    assert follow(fresh, [*history, run(2, F)], pause_after=1).paused


def test_the_streak_names_its_newest_runs_within_a_bound() -> None:
    history = [run(minute, F) for minute in range(STREAK_RUN_IDS + 5)]
    streak = follow(Streak(), history, pause_after=100)
    assert streak.count == STREAK_RUN_IDS + 5
    assert streak.run_ids == tuple(f"r{m}" for m in range(5, STREAK_RUN_IDS + 5))


def test_the_pause_names_its_runs_and_the_way_out() -> None:
    streak = follow(Streak(), [run(0, F), run(1, F)], pause_after=2)
    text = describe_pause(streak, 2)
    assert text.startswith(
        "paused after 2 consecutive failed runs (failurePolicy.pauseAfter 2; r0, r1)"
    )
    assert "kubectl tickwork resume" in text
    assert "tickwork.dev/resume" in text
    many = follow(Streak(), [run(m, F) for m in range(15)], pause_after=15)
    assert f"the last {STREAK_RUN_IDS}: r5, " in describe_pause(many, 15)
