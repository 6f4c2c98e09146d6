"""The resilience drills, small: each breaks a running Tickwork and must lose no run.
(Full scale: `make drills`; numbers in benchmarks/results/drills.json.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tickwork_dev.devcluster import drills
from tickwork_dev.devcluster.cluster import existing_cluster

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(existing_cluster() is not None, reason="drills start their own parts"),
]


def test_killing_workers_again_and_again_loses_no_run(tmp_path: Path) -> None:
    result = drills.worker_kills(tmp_path, runs=150, kills=15, interval=0.7)
    assert result.lost == 0, result
    assert result.executions >= result.runs
    assert result.notes["outcomes"] == {"Succeeded": 150}
    assert result.beyond_attempts == 0, result  # a repeat is always a new attempt


def test_a_redis_crash_loses_no_run(tmp_path: Path) -> None:
    result = drills.redis_restart(tmp_path, runs=60)
    assert result.lost == 0, result
    assert result.beyond_attempts == 0, result


def test_killing_the_leader_loses_no_run(tmp_path: Path) -> None:
    result = drills.leader_kill(tmp_path, runs=60)
    assert result.lost == 0, result
    assert result.recovery_seconds is not None
    assert result.recovery_seconds <= 15  # the standby took over in time


def test_restarting_the_api_server_loses_no_run(tmp_path: Path) -> None:
    result = drills.apiserver_restart(tmp_path, runs=60)
    assert result.lost == 0, result
    assert result.beyond_attempts == 0, result


def test_an_api_server_outage_longer_than_status_retries_loses_no_record(tmp_path: Path) -> None:
    # Runs that end while the API server is away keep their outcome until it is back;
    # they used to be acknowledged after ~15 s of retries, their record never written.
    result = drills.apiserver_outage(tmp_path, runs=40, down_seconds=25)
    assert result.lost == 0, result
    assert result.notes["outcomes"] == {"Succeeded": 40}
    assert result.duplicates == 0, result  # nor executed again for want of a record
