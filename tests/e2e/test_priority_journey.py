"""Priorities on real parts (issue 50, item 5): the real API server, Redis, operator and
a worker. Nine one-shot jobs of three priorities fall due while no worker runs; then
one worker with one slot takes them one at a time, in the queue's turns
(tickwork.queue.messages.PRIORITY_TURNS): High first, yet Normal and Low runs keep
their turns however many High runs wait."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from tests.support import Jobs, QueueProbe, lead, rfc3339
from tickwork.queue.messages import PRIORITY_TURNS
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(240)

LEVELS = {"H": "High", "N": "Normal", "L": "Low"}


def test_runs_waiting_for_a_worker_start_in_the_priority_turns(
    start_operator: Callable[..., TickworkProcess],
    start_worker: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
) -> None:
    lead(start_operator())
    due = rfc3339(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3))
    names: dict[str, str] = {}
    for n in range(9):
        level = "LNH"[n % 3]  # created Low first: creation order must not decide
        name = f"{LEVELS[level].lower()}-{n}"
        spec: dict[str, object] = {"runAt": due, "task": {"echo": {"message": name}}}
        if level != "N":
            spec["priority"] = LEVELS[level]  # Normal is the default: left out
        jobs.create(name, spec)
        names[name] = level
    # No worker yet: every run waits, each in its priority's list.
    wait_for(lambda: probe.depth().ready == 9, timeout=60, interval=0.2, what="nine runs queued")
    depth = probe.depth()
    assert (depth.ready_high, depth.ready_low) == (3, 3)

    start_worker(TICKWORK_WORKER_CONCURRENCY="1")

    def started() -> dict[str, str]:
        return {
            name: str(jobs.status(name).get("lastRun", {}).get("startedAt", "")) for name in names
        }

    wait_for(lambda: all(started().values()), timeout=120, interval=0.5, what="nine runs")
    order = "".join(names[name] for name, _ in sorted(started().items(), key=lambda i: i[1]))
    # The turns HHNHLHNH with three of each waiting: a turn whose level has run out
    # goes to the highest level with runs left.
    assert PRIORITY_TURNS == "HHNHLHNH"
    assert order == "HHNHLNNLL", order
    assert {jobs.status(name)["lastRun"]["outcome"] for name in names} == {"Succeeded"}
