"""How the CronJob comparison scores runs that are late, missing, or gone for good:
the accounting behind the headline ratio must not flatter either side."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import benchmark_module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return benchmark_module("cronjob.py")


def _window(
    lags: dict[float, list[float]], *, until: float, skipped: tuple[float, ...] = ()
) -> dict[str, Any]:
    scheduled = [start for start, values in lags.items() for _ in values]
    return {
        "lags": [lag for values in lags.values() for lag in values],
        "writes": 30,
        "window": (600.0, 720.0),
        "observed_until": until,
        "scheduled": scheduled,
        "minutes": 2,
        "skipped_for_good": list(skipped),
    }


def test_runs_all_seen_give_plain_percentiles(bench: ModuleType) -> None:
    window = _window({600.0: [1.0] * 10, 660.0: [2.0] * 10}, until=780.0)
    summary = bench.summarize(window, 10, 2)
    assert summary["runs"] == 20
    assert summary["lag_p99_seconds"] == 2.0
    assert not summary["lag_percentiles_are_lower_bounds"]
    assert not summary["lag_p99_unbounded"]
    assert summary["api_writes_per_run"] == 1.5


def test_missing_runs_count_at_their_lower_bound(bench: ModuleType) -> None:
    # Half the second minute never started by t=780: each counts as >= 780 - 660 s.
    window = _window({600.0: [1.0] * 10, 660.0: [2.0] * 5}, until=780.0)
    summary = bench.summarize(window, 10, 2)
    assert summary["runs_not_started_in_time"] == 5
    assert summary["lag_p99_seconds"] == 120.0
    assert summary["lag_p99_lower_bound_seconds"] == 120.0
    assert summary["lag_percentiles_are_lower_bounds"]
    assert not summary["lag_p99_unbounded"]


def test_runs_skipped_for_good_make_the_percentile_unbounded(bench: ModuleType) -> None:
    window = _window({600.0: [5.0] * 10, 660.0: [5.0] * 2}, until=780.0, skipped=(660.0,) * 8)
    summary = bench.summarize(window, 10, 2)
    assert summary["runs_skipped_for_good"] == 8
    assert summary["lag_p99_seconds"] is None
    assert summary["lag_p99_unbounded"]
    assert summary["lag_p99_lower_bound_seconds"] == 120.0  # what the window alone shows
    assert summary["lag_p50_seconds"] == 5.0  # most runs were on time
    ours = bench.summarize(_window({600.0: [1.0] * 10, 660.0: [3.0] * 10}, until=780.0), 10, 2)
    ratio = bench.p99_ratio(ours, summary)
    assert ratio["p99_lag_ratio_unbounded"]
    assert ratio["p99_lag_ratio_cronjob_over_tickwork"] is None
    assert math.isclose(ratio["p99_lag_ratio_at_least"], 40.0)


def test_no_ratio_is_claimed_while_tickwork_itself_is_censored(bench: ModuleType) -> None:
    late = bench.summarize(_window({600.0: [1.0] * 10, 660.0: []}, until=780.0), 10, 2)
    other = bench.summarize(_window({600.0: [9.0] * 10, 660.0: [9.0] * 10}, until=780.0), 10, 2)
    assert bench.p99_ratio(late, other) == {"p99_lag_ratio_cronjob_over_tickwork": None}


def test_cpu_per_run_counts_every_process_on_a_run_path_but_no_bystander(
    bench: ModuleType,
) -> None:
    window = {
        **_window({600.0: [1.0] * 10, 660.0: [2.0] * 10}, until=780.0),
        "cpu_seconds": {
            "kube-apiserver": 0.2,
            "etcd": 0.02,
            "redis-server": 0.01,
            "tickwork-operator-0": 0.06,
            "tickwork-worker-1": 0.04,
            "tickwork-worker-2": 0.05,
            "kube-controller-manager": 1.0,
        },
    }
    summary = bench.summarize(window, 10, 2)
    # 20 scheduled runs: per run, the workers' CPU together, the bystander apart.
    assert summary["cpu_ms_per_run"] == {
        "etcd": 1.0,
        "kube-apiserver": 10.0,
        "kube-controller-manager": 50.0,
        "redis-server": 0.5,
        "tickwork-operator": 3.0,
        "tickwork-workers": 4.5,
    }
    assert summary["cpu_ms_per_run_total"] == 19.0


def test_profile_parts_take_each_functions_cumulative_share(bench: ModuleType) -> None:
    top = """File: kube-apiserver
Showing nodes accounting for 37.64s, 57.65% of 65.29s total
      flat  flat%   sum%        cum   cum%
         0     0%     0%     33.15s 50.77%  x/handlers.(*patcher).patchResource.func3
     0.01s  0.1%   0.1%      9.16s 14.03%  x/customresource.statusStrategy.ValidateUpdate
     0.01s  0.1%   0.1%      1.00s  1.53%  x/handlers.handleList (inline)
     0.01s  0.1%   0.1%      0.10s  0.15%  x/handlers.handleList
"""
    parts = bench.parts_of(top)
    assert parts == {"status_writes": 50.77, "status_writes.validation": 14.03, "reads": 1.53}


def test_profile_parts_are_none_without_a_profile(bench: ModuleType, tmp_path: Path) -> None:
    assert bench.profile_parts(tmp_path / "absent.pprof") is None
