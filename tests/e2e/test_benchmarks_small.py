"""The benchmark scripts, at toy scale: they run end to end on their own control plane
and what they report holds (every run published or executed, at most two status
writes per run). Their timings are not asserted — speed is for `make bench-*`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tickwork_dev.devcluster.cluster import existing_cluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(existing_cluster() is not None, reason="benchmarks start their own parts"),
]


def bench(script: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "result.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / script),
            "--out",
            str(out),
            "--plot",
            str(tmp_path / "plot.png"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert out.exists(), f"{script} wrote no result:\n{result.stdout}\n{result.stderr[-3000:]}"
    assert (tmp_path / "plot.png").stat().st_size > 0
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_the_watcher_benchmark_publishes_the_whole_burst(tmp_path: Path) -> None:
    # Enough jobs that their first statuses outlast the benchmark's 3-s look at the
    # index: at 200 all of them could be written before it saw the index whole, and the
    # API server's CPU from then on (its share per first status) was 0.0.
    report = bench(
        "watcher.py",
        tmp_path,
        *("--burst", "40", "--burst-lead", "10", "--sizes", "2000", "--window", "3"),
        *("--ceiling-writes", "300", "--ceiling-concurrency", "16"),
    )
    lag = report["publish_lag"]
    assert lag["published"] == 40
    assert lag["lag_p50_seconds"] >= 0  # never before the due second
    [empty, scaled] = report["scale"]
    assert (empty["jobs"], scaled["jobs"]) == (0, 2000)
    assert scaled["ticks"] > 0
    assert scaled["rss_mib"] > 0
    assert scaled["apiserver_ms_per_first_status"] > 0
    assert scaled["status_backfill_over_floor"] > 0


def test_the_watcher_benchmark_compares_two_trees_first_statuses_by_turns(
    tmp_path: Path,
) -> None:
    report = bench(
        "watcher.py",
        tmp_path,
        "--sizes",
        "100",
        "--compare-with",
        str(ROOT),
        "--rounds",
        "1",
        "--ceiling-writes",
        "100",
        "--ceiling-concurrency",
        "16",
        "32",
        "--same-jobs-ceiling",
    )
    found = report["first_statuses"]
    assert [start["tree"] for start in found["starts"]] == ["before", "after"]
    for start in found["starts"]:
        # Measured one after the other; at 100 jobs the writes may end with the index
        # (both rounded to 0.1 s), so they can be equal but never out of order.
        assert 0 < start["index_warm_seconds"] <= start["status_backfill_seconds"]
        assert start["ceiling_after"]["ceiling_per_second"] > 0  # measured after each start
        assert start["over_floor"] >= start["over_floor_of_its_own_ceiling"] - 0.01
    ceiling = report["status_write_ceiling"]
    assert ceiling["ceiling_per_second"] == max(ceiling["of_every_start"])  # the strictest
    assert len(ceiling["of_every_start"]) == 2
    assert found["floor_seconds"] == pytest.approx(100 / ceiling["ceiling_per_second"], abs=0.1)
    assert found["median"]["after"]["over_floor"] > 0
    assert ceiling["apiserver_ms_per_write_by_concurrency"]["16"] > 0
    # The sustained ceiling: every job of each start written once more, each a change.
    for start in found["starts"]:
        again = start["same_jobs_ceiling"]
        assert again["writes"] == again["changed"] == 100
        assert set(again["per_second_by_concurrency"]) == {"16", "32"}
        assert start["over_floor_of_the_same_jobs"] == pytest.approx(
            start["status_backfill_seconds"] * again["ceiling_per_second"] / 100, abs=0.01
        )
        # The burst after the start also wrote its jobs twice: first writes over rewrites.
        burst = start["ceiling_after"]
        assert set(burst["rewrite_per_second_by_concurrency"]) == {"16", "32"}
        assert burst["rewrites_changed"] == 2 * 100  # each level's 100 jobs, each changed
        assert start["over_floor_of_the_same_jobs_as_first_writes"] == pytest.approx(
            start["over_floor_of_the_same_jobs"] * burst["first_over_rewrite"], abs=0.02
        )
    best = max(found["same_jobs_ceiling_of_every_start"])
    assert found["same_jobs_floor_seconds"] == pytest.approx(100 / best, abs=0.1)
    assert found["median"]["after"]["over_same_jobs_floor"] > 0


def test_the_worker_benchmark_runs_everything_with_at_most_two_status_writes(
    tmp_path: Path,
) -> None:
    report = bench("worker.py", tmp_path, "--runs", "40", "--workers", "1", "2")
    ceiling = report["ceiling"]
    assert ceiling["status_patches_per_second"] > 0
    assert ceiling["metadata_checks_per_second"] > 0
    assert ceiling["job_gets_per_second"] > 0
    for row in report["end_to_end"]:
        assert row["runs"] == 40
        assert row["status_writes_per_run"] <= 2, row


def test_the_run_writes_benchmark_sends_each_variants_write_as_described(
    tmp_path: Path,
) -> None:
    # 4 runs before the rounds and 4 in them: each history of 3 is full, and every
    # run of the rounds replaces its oldest record.
    report = bench("run_writes.py", tmp_path, "--jobs", "4", "--rounds", "4")
    assert report["writes_per_run"] == dict.fromkeys(
        ("placed", "placed_no_rules", "json_patch", "atomic_history", "outcome_only"), 1.0
    )
    held = report["a_job_after_the_rounds"]
    for variant, job in held.items():
        assert job["last_run"] == job["expected_last_run"], variant
    # As shipped: the history at its limit, each place under its own manager.
    for variant in ("placed", "placed_no_rules"):
        assert (held[variant]["records"], held[variant]["place_managers"]) == (3, 3), variant
    # One writer: the history at its limit, one manager beside the creator's.
    for variant in ("json_patch", "atomic_history"):
        job = held[variant]
        assert (job["records"], job["managers"], job["place_managers"]) == (3, 2, 0), variant
        assert job["bytes"] < held["placed"]["bytes"], variant
        assert job["next_run_at"] == held["placed"]["next_run_at"] is not None
    # The least a run writes: its outcome, no history, no next runs.
    assert (held["outcome_only"]["records"], held["outcome_only"]["managers"]) == (0, 2)
    assert held["outcome_only"]["next_run_at"] is None
    assert all(ms > 0 for ms in report["apiserver_ms_per_run"].values())
    # Every write reached etcd once, counted in its own variant's API group.
    assert set(report["storage_tries_per_write"]) == set(report["writes_per_run"])
    assert all(tries >= 1 for tries in report["storage_tries_per_write"].values()), report


def test_the_run_queue_benchmark_loses_and_repeats_nothing(tmp_path: Path) -> None:
    report = bench(
        "runqueue.py",
        tmp_path,
        "--runs",
        "300",
        "--systems",
        "tickwork",
        "tickwork-fair",
        "dramatiq",
    )
    rows = {row["system"]: row for row in report["results"]}
    assert set(rows) == {"tickwork", "tickwork-fair", "dramatiq"}
    for row in rows.values():
        assert (row["executions"], row["lost"]) == (300, 0), row
    for ours in (rows["tickwork"], rows["tickwork-fair"]):  # parked runs all came back
        assert ours["duplicate_executions"] == 0
        assert ours["round_trips_per_run"] <= 3  # enqueues and acks coalesced, claims batched
    assert report["fair_share_vs_none"] > 0


def test_the_clients_benchmark_measures_all_four_clients(tmp_path: Path) -> None:
    report = bench("kube_clients.py", tmp_path, "--writes", "60", "--rounds", "1", "--jobs", "20")
    assert set(report["summary"]) == {"tickwork", "httpx-h2", "httpx-h1", "official"}
    for row in report["rounds"]:
        assert row["writes"] == 60
        assert row["client_cpu_ms_per_write"] > 0
    assert report["cpu_per_write_ratio"]["tickwork"] == 1.0
