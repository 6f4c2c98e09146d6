"""The retry schedule: exponential growth to a cap, equal jitter in [d/2, d], and the
same answer when a decision is made twice."""

from __future__ import annotations

import statistics

import pytest

from tickwork.core.retry import GiveUp, RetryLater, after_failure, backoff_seconds

pytestmark = pytest.mark.unit
RUNS = [f"uid-{n}.20261201T090000Z" for n in range(1000)]


@pytest.mark.parametrize(
    ("attempt", "nominal"), [(1, 1), (2, 2), (3, 4), (5, 16), (7, 60), (30, 60)]
)
def test_the_delay_doubles_per_attempt_up_to_the_cap(attempt: int, nominal: float) -> None:
    delays = [backoff_seconds(run, attempt, base=1, cap=60) for run in RUNS]
    assert all(nominal / 2 <= d <= nominal for d in delays)
    # Equal jitter: spread over the whole upper half, centred in it.
    assert min(delays) < nominal * 0.52
    assert max(delays) > nominal * 0.98
    assert statistics.mean(delays) == pytest.approx(nominal * 0.75, rel=0.03)


def test_runs_that_failed_together_come_back_spread_out() -> None:
    delays = [backoff_seconds(run, 4, base=2, cap=300) for run in RUNS]
    assert len({round(d, 3) for d in delays}) > 900  # hardly two at the same moment
    per_second = {int(d) for d in delays}
    assert per_second == set(range(8, 16))  # every second of [8 s, 16 s) gets some


def test_the_draw_is_a_pure_function_of_run_and_attempt() -> None:
    run = RUNS[0]
    assert backoff_seconds(run, 3, base=1, cap=60) == backoff_seconds(run, 3, base=1, cap=60)
    draws = {backoff_seconds(run, 3, base=1, cap=60) / 4 for run in RUNS[:50]}
    assert len(draws) == 50
    # A later attempt of the same run draws anew, not the same fraction scaled up.
    fractions = [backoff_seconds(run, n, base=1, cap=10**6) / 2 ** (n - 1) for n in (1, 2, 3)]
    assert len(set(fractions)) == 3


def test_after_failure_retries_until_the_last_attempt_unless_permanent() -> None:
    run = RUNS[1]
    decision = after_failure(run, attempt=2, max_attempts=3, permanent=False, base=1, cap=60)
    assert decision == RetryLater(backoff_seconds(run, 2, base=1, cap=60), next_attempt=3)
    assert 1 <= decision.delay_seconds <= 2
    last = after_failure(run, attempt=3, max_attempts=3, permanent=False, base=1, cap=60)
    assert last == GiveUp("all 3 attempts failed")
    permanent = after_failure(run, attempt=1, max_attempts=3, permanent=True, base=1, cap=60)
    assert permanent == GiveUp("the failure is permanent; retrying cannot help")
