"""Overlap policies and cancelling runs, with the real operator and worker processes
against the real API server and Redis: each policy with runs that outlast the
interval (``@every 10s``), and ``tickwork.dev/cancel`` for a queued and a running run.
(The decisions themselves, in milliseconds: tests/unit/test_overlap_decisions.py.)
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import Jobs, QueueProbe, alive, lead, rfc3339, whole_seconds_from_now
from tickwork.core.annotations import CANCEL_ANNOTATION
from tickwork.core.cancel import CANCELLED_BY_USER
from tickwork.core.runs import scheduled_run_id
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(240)
Start = Callable[..., TickworkProcess]


def sleeping(seconds: int) -> dict[str, Any]:
    return {"python": {"name": "tickwork.sleep", "args": [str(seconds)]}}


def records(jobs: Jobs, name: str) -> list[dict[str, Any]]:
    """The job's finished runs, in the order they were due."""
    return sorted(jobs.status(name).get("runs") or [], key=lambda r: r["scheduledAt"])


def at(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp)


def both(start_operator: Start, start_worker: Start, **worker_env: str) -> None:
    lead(start_operator())
    start_worker(**worker_env)


def test_skip_skips_runs_while_one_is_active(
    start_operator: Start, start_worker: Start, jobs: Jobs
) -> None:
    both(start_operator, start_worker)
    jobs.create(
        "skip",
        {
            "schedule": "@every 10s",
            "concurrencyPolicy": "Skip",
            "history": {"successfulRuns": 5},
            "task": sleeping(15),
        },
    )
    wait_for(lambda: len(records(jobs, "skip")) >= 2, timeout=90, what="two runs")
    first, second = records(jobs, "skip")[:2]
    assert at(second["startedAt"]) >= at(first["finishedAt"])  # never side by side
    assert at(second["scheduledAt"]) - at(first["scheduledAt"]) >= dt.timedelta(seconds=20)
    assert jobs.status("skip")["missedRuns"] >= 1
    assert any(reason == "RunSkipped" for _, reason, _ in jobs.events("skip"))


def test_buffer_one_starts_one_waiting_run_when_the_active_one_ends(
    start_operator: Start, start_worker: Start, jobs: Jobs
) -> None:
    both(start_operator, start_worker)
    jobs.create(
        "buffer-one",
        {
            "schedule": "@every 10s",
            "concurrencyPolicy": "BufferOne",
            "history": {"successfulRuns": 5},
            "task": sleeping(25),
        },
    )
    wait_for(lambda: jobs.status("buffer-one").get("bufferedRuns"), timeout=40, what="a buffer")
    wait_for(lambda: len(records(jobs, "buffer-one")) >= 1, timeout=60, what="the first run")
    # The buffered run is published once the first has ended, then runs.
    wait_for(lambda: len(records(jobs, "buffer-one")) >= 2, timeout=60, what="the second run")
    first, second = records(jobs, "buffer-one")[:2]
    assert at(second["scheduledAt"]) - at(first["scheduledAt"]) == dt.timedelta(seconds=10)
    assert at(second["startedAt"]) >= at(first["finishedAt"])  # it waited, then ran
    assert jobs.status("buffer-one")["missedRuns"] >= 1  # the one due at +20 s: skipped
    reasons = {reason for _, reason, _ in jobs.events("buffer-one")}
    assert {"RunBuffered", "RunReleased", "RunSkipped"} <= reasons


def test_buffer_all_runs_every_run_one_after_another_and_a_suspend_drops_the_rest(
    start_operator: Start, start_worker: Start, jobs: Jobs
) -> None:
    both(start_operator, start_worker)
    jobs.create(
        "buffer-all",
        {
            "schedule": "@every 10s",
            "concurrencyPolicy": "BufferAll",
            "history": {"successfulRuns": 5},
            "task": sleeping(14),
        },
    )
    wait_for(lambda: len(records(jobs, "buffer-all")) >= 3, timeout=120, what="three runs")
    runs = records(jobs, "buffer-all")[:3]
    for before, after in itertools.pairwise(runs):
        assert at(after["scheduledAt"]) - at(before["scheduledAt"]) == dt.timedelta(seconds=10)
        assert at(after["startedAt"]) >= at(before["finishedAt"])
    assert not jobs.status("buffer-all").get("missedRuns")  # none skipped
    wait_for(lambda: jobs.status("buffer-all").get("bufferedRuns"), timeout=20, what="a buffer")
    jobs.patch("buffer-all", {"spec": {"suspend": True}})
    wait_for(
        lambda: not jobs.status("buffer-all").get("bufferedRuns"),
        timeout=30,
        what="the buffer dropped",
    )
    assert jobs.status("buffer-all")["missedRuns"] >= 1
    assert any(reason == "BufferDropped" for _, reason, _ in jobs.events("buffer-all"))


def test_cancel_other_cancels_the_active_run_then_starts_the_new_one(
    start_operator: Start, start_worker: Start, jobs: Jobs, tmp_path: Path
) -> None:
    both(start_operator, start_worker, TICKWORK_WORKER_COMMAND_TASKS="true")
    marker = tmp_path / "term"
    script = f"trap 'echo term >> {marker}; exit 143' TERM; sleep 300 & wait"
    jobs.create(
        "cancel-other",
        {
            "schedule": "@every 10s",
            "concurrencyPolicy": "CancelOther",
            "retry": {"maxAttempts": 3},
            "history": {"failedRuns": 5},
            "task": {"command": {"args": ["sh", "-c", script]}},
        },
    )
    wait_for(lambda: len(records(jobs, "cancel-other")) >= 1, timeout=60, what="a cancelled run")
    [first] = records(jobs, "cancel-other")[:1]
    assert first["outcome"] == "Cancelled"
    assert "concurrencyPolicy CancelOther" in first["error"]
    assert first["attempts"] == 1  # no retry
    assert marker.read_text().strip() == "term"  # cooperatively: SIGTERM first
    wait_for(
        lambda: any(
            a["scheduledAt"] > first["scheduledAt"]
            for a in jobs.status("cancel-other").get("activeRuns") or []
        ),
        timeout=30,
        what="the new run started",
    )
    newer = next(a for a in jobs.status("cancel-other")["activeRuns"])
    assert at(newer["startedAt"]) >= at(first["finishedAt"])  # once the old one was Cancelled


def test_terminate_other_kills_the_active_run_at_once_and_starts_the_new_one(
    start_operator: Start, start_worker: Start, jobs: Jobs, tmp_path: Path
) -> None:
    both(start_operator, start_worker, TICKWORK_WORKER_COMMAND_TASKS="true")
    marker, pids = tmp_path / "term", tmp_path / "pids"
    # The shell outlives a SIGTERM (the trap), not its own sleep: a loop of bare `wait`s
    # would spin once the sleep is gone.
    script = (
        f"trap 'echo term >> {marker}' TERM; sleep 300 & child=$!; echo $child >> {pids}; "
        "while kill -0 $child 2>/dev/null; do wait $child; done"
    )
    jobs.create(
        "terminate",
        {
            "schedule": "@every 10s",
            "concurrencyPolicy": "TerminateOther",
            "history": {"failedRuns": 5},
            "task": {"command": {"args": ["sh", "-c", script]}},
        },
    )
    wait_for(lambda: len(records(jobs, "terminate")) >= 1, timeout=60, what="a terminated run")
    [first] = records(jobs, "terminate")[:1]
    assert first["outcome"] == "Cancelled"
    assert "terminated" in first["error"]
    assert not marker.exists()  # SIGKILL, no SIGTERM before it
    grandchild = int(pids.read_text().split()[0])
    wait_for(lambda: not alive(grandchild), timeout=10, what="the process group killed")

    # The new run was published at once, not after the old one's record (it runs now).
    def newer_run() -> dict[str, str]:
        return next(iter(jobs.status("terminate").get("activeRuns") or []), {})

    wait_for(
        lambda: newer_run().get("scheduledAt", "") > first["scheduledAt"],
        timeout=10,
        what="the new run",
    )
    newer = newer_run()
    assert at(newer["scheduledAt"]) - at(first["scheduledAt"]) == dt.timedelta(seconds=10)
    assert at(newer["queuedAt"]) <= at(first["finishedAt"])


def test_allow_all_runs_side_by_side(
    start_operator: Start, start_worker: Start, jobs: Jobs
) -> None:
    both(start_operator, start_worker)
    jobs.create(
        "allow-all",
        {"schedule": "@every 10s", "concurrencyPolicy": "AllowAll", "task": sleeping(25)},
    )
    wait_for(
        lambda: len(jobs.status("allow-all").get("activeRuns") or []) >= 2,
        timeout=60,
        what="two runs at once",
    )


def test_cancel_takes_a_queued_run_out_of_the_queue_and_records_it_cancelled(
    start_operator: Start, start_worker: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())  # no worker yet: the run stays queued
    run_at = whole_seconds_from_now(2)
    uid = jobs.create("queued", {"runAt": rfc3339(run_at), "task": sleeping(0)})["metadata"]["uid"]
    run_id = scheduled_run_id(uid, run_at)
    wait_for(lambda: probe.locate(run_id) is RunLocation.READY, timeout=30, what="queued")
    wait_for(
        lambda: (jobs.status("queued").get("queuedRun") or {}).get("id") == run_id,
        timeout=20,
        what="queuedRun",
    )
    jobs.patch("queued", {"metadata": {"annotations": {CANCEL_ANNOTATION: run_id}}})
    wait_for(
        lambda: (jobs.status("queued").get("lastRun") or {}).get("outcome") == "Cancelled",
        timeout=30,
        what="Cancelled",
    )
    last = jobs.status("queued")["lastRun"]
    assert (last["id"], last["attempts"], last["error"]) == (run_id, 0, CANCELLED_BY_USER)
    start_worker()
    # The worker drops it at its claim (the queue remembers it done): it never executes.
    wait_for(lambda: probe.locate(run_id) is RunLocation.DONE, timeout=30, what="dropped")
    assert probe.depth().ready == 0
    status = jobs.status("queued")
    assert not status.get("activeRuns")
    assert (status["lastRun"]["outcome"], status["lastRun"]["attempts"]) == ("Cancelled", 0)


def test_cancel_kills_a_running_commands_process_group_and_records_it_cancelled(
    start_operator: Start, start_worker: Start, jobs: Jobs, tmp_path: Path
) -> None:
    both(start_operator, start_worker, TICKWORK_WORKER_COMMAND_TASKS="true")
    pids = tmp_path / "pids"
    run_at = whole_seconds_from_now(2)
    uid = jobs.create(
        "running",
        {
            "runAt": rfc3339(run_at),
            "retry": {"maxAttempts": 3},
            "task": {"command": {"args": ["sh", "-c", f"sleep 300 & echo $! > {pids}; wait"]}},
        },
    )["metadata"]["uid"]
    run_id = scheduled_run_id(uid, run_at)
    wait_for(lambda: pids.exists() and pids.read_text().strip(), timeout=30, what="running")
    grandchild = int(pids.read_text())
    jobs.patch("running", {"metadata": {"annotations": {CANCEL_ANNOTATION: run_id}}})
    wait_for(
        lambda: (jobs.status("running").get("lastRun") or {}).get("outcome") == "Cancelled",
        timeout=30,
        what="Cancelled",
    )
    last = jobs.status("running")["lastRun"]
    assert (last["id"], last["attempts"], last["error"]) == (run_id, 1, CANCELLED_BY_USER)
    wait_for(lambda: not alive(grandchild), timeout=15, what="the process group killed")
    assert not jobs.status("running").get("activeRuns")  # no retry follows
