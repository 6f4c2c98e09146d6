"""Overlap and cancel, end to end: the real control plane and Redis, the operator, the
worker and the CLI as users run them. A ``BufferAll`` job whose runs outlast its
``@every 10s`` interval builds a buffer in status; the user cancels a buffered run and
then the running one with ``kubectl tickwork cancel``, with a leader change in
between; the next buffered run starts once the cancelled one is recorded, and a
suspend drops the rest. (The decisions in milliseconds:
tests/unit/test_overlap_decisions.py.)"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import Jobs, lead
from tickwork.core.cancel import CANCELLED_BY_USER
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, console_script, wait_for

Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(300)


def cli(cluster: Cluster, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script("tickwork"), "-n", namespace, *args],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def record(jobs: Jobs, name: str, run_id: str) -> dict[str, Any] | None:
    return next((r for r in jobs.status(name).get("runs") or [] if r["id"] == run_id), None)


def alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    except FileNotFoundError:
        return False


def test_a_buffered_job_survives_a_leader_change_and_its_runs_can_be_cancelled(
    start_operator: Start,
    start_worker: Start,
    cluster: Cluster,
    jobs: Jobs,
    namespace: str,
    tmp_path: Path,
) -> None:
    first_leader = start_operator("op-a")
    lead(first_leader)
    start_worker(TICKWORK_WORKER_COMMAND_TASKS="true")
    pids = tmp_path / "pids"
    jobs.create(
        "queue-up",
        {
            "schedule": "@every 10s",
            "concurrencyPolicy": "BufferAll",
            "history": {"successfulRuns": 10, "failedRuns": 10},
            "task": {"command": {"args": ["sh", "-c", f"sleep 300 & echo $! >> {pids}; wait"]}},
        },
    )

    # The first run runs on; the next ones wait in status.
    wait_for(
        lambda: len(jobs.status("queue-up").get("bufferedRuns") or []) >= 2,
        timeout=60,
        interval=0.5,
        what="two buffered runs",
    )
    [running] = jobs.status("queue-up")["activeRuns"]
    doomed, waiting = [b["id"] for b in jobs.status("queue-up")["bufferedRuns"][:2]]

    # Cancel a buffered run: it leaves the buffer and is recorded Cancelled, never run.
    done = cli(cluster, namespace, "cancel", doomed)
    assert done.returncode == 0, done.stderr

    # Two writes, the record first (as the run's manager), then the buffer without it
    # (the operator's share): wait for both.
    def buffered() -> list[str]:
        return [b["id"] for b in jobs.status("queue-up").get("bufferedRuns") or []]

    wait_for(
        lambda: record(jobs, "queue-up", doomed) and doomed not in buffered(),
        timeout=30,
        what="its record, and the buffer without it",
    )
    cancelled = record(jobs, "queue-up", doomed)
    assert cancelled is not None
    assert (cancelled["outcome"], cancelled["attempts"]) == ("Cancelled", 0)
    assert waiting in buffered()

    # The leader goes; the standby takes over with the buffer it finds in status.
    standby = start_operator("op-b")
    first_leader.kill()
    lead(standby, timeout=60)
    assert waiting in [b["id"] for b in jobs.status("queue-up")["bufferedRuns"]]

    # Cancel the running run: its process group dies, it is recorded Cancelled, and the
    # next buffered run starts only then.
    grandchild = int(pids.read_text().split()[0])
    assert alive(grandchild)
    done = cli(cluster, namespace, "cancel", running["id"])
    assert done.returncode == 0, done.stderr
    wait_for(lambda: record(jobs, "queue-up", running["id"]), timeout=30, what="Cancelled")
    stopped = record(jobs, "queue-up", running["id"])
    assert stopped is not None
    assert (stopped["outcome"], stopped["attempts"], stopped["error"]) == (
        "Cancelled",
        1,
        CANCELLED_BY_USER,
    )
    wait_for(lambda: not alive(grandchild), timeout=15, what="the process group killed")
    wait_for(
        lambda: any(a["id"] == waiting for a in jobs.status("queue-up").get("activeRuns") or []),
        timeout=30,
        what="the next buffered run",
    )
    started = next(a for a in jobs.status("queue-up")["activeRuns"] if a["id"] == waiting)
    assert started["startedAt"] >= stopped["finishedAt"]

    # A finished run cannot be cancelled again; a suspend drops the buffer.
    again = cli(cluster, namespace, "cancel", running["id"])
    assert again.returncode == 1
    assert "already finished (Cancelled)" in again.stderr
    assert cli(cluster, namespace, "suspend", "queue-up").returncode == 0
    wait_for(
        lambda: not jobs.status("queue-up").get("bufferedRuns"),
        timeout=30,
        what="the buffer dropped",
    )
    assert jobs.status("queue-up")["missedRuns"] >= 1
    assert any(reason == "BufferDropped" for _, reason, _ in jobs.events("queue-up"))
