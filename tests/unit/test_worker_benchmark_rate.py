"""benchmarks/worker.py's steady rate: the runs between the 10th and the 90th percent
done over the time between them, each moment interpolated between the samples, so
that neither the burst's start (slots filling) nor its last runs (slots emptying)
count."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.support import benchmark_module

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return benchmark_module("worker.py")


def test_a_slow_start_and_a_long_tail_leave_the_steady_rate_alone(bench: ModuleType) -> None:
    # 1,000 runs: nothing for 2 s, then 200 a second, then the last 50 over 10 s.
    samples = [(0.5 * i, 0.0) for i in range(5)]
    samples += [(2 + 0.5 * i, min(950.0, 100.0 * i)) for i in range(1, 11)]
    samples += [(7 + i, 950 + 5.0 * i) for i in range(1, 11)]
    assert samples[-1] == (17, 1000.0)
    assert bench.steady_rate(samples, 1000) == pytest.approx(200.0)
    assert 1000 / samples[-1][0] < 60  # the whole burst's rate, start and tail in it


def test_a_moment_between_two_samples_is_interpolated(bench: ModuleType) -> None:
    samples = [(1.0, 0.0), (2.0, 50.0), (3.0, 100.0)]
    assert bench.steady_rate(samples, 100) == pytest.approx(50.0)
