"""Attack: run a job's work twice at once through a Python task that ignores its
timeout. A plain function runs in a thread, which nothing can stop: on the code
before issue 46 the attempt ended at the hard timeout and its retry started while
the first thread still ran. Now the run waits for the thread before it goes on, and
a thread that never ends makes the worker unhealthy and exit without handing the
run back (its lease expires; the thread dies with the process). Real worker
process, API server and Redis; the task is an installed package, as users ship
theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import Jobs, QueueProbe, finished, publish, task_package
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
SOURCE = (
    "import pathlib, time\n"
    "def task(path, seconds, *, attempt):\n"
    "    log = pathlib.Path(path)\n"
    "    with log.open('a') as out:\n"
    "        out.write(f'start {attempt}\\n')\n"
    "    time.sleep(float(seconds) if attempt == 1 else 0)  # ignores any timeout\n"
    "    with log.open('a') as out:\n"
    "        out.write(f'end {attempt}\\n')\n"
)


def _spec(path: Path, seconds: float) -> dict[str, object]:
    python = {"name": "acme.task", "args": [str(path), str(seconds)]}
    return {
        "timeoutSeconds": 1,
        "task": {"python": python},
        "retry": {"maxAttempts": 2, "backoffSeconds": 1, "maxBackoffSeconds": 1},
    }


def test_a_retry_never_runs_beside_the_thread_of_the_attempt_before(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, tmp_path: Path
) -> None:
    start_worker(PYTHONPATH=task_package(tmp_path, SOURCE))
    log = tmp_path / "attempts.log"
    publish(jobs, probe, "slow", _spec(log, 5))
    last = finished(jobs, "slow", timeout=60)["lastRun"]
    assert log.read_text().split("\n")[:-1] == ["start 1", "end 1", "start 2", "end 2"]
    assert isinstance(last, dict)
    assert (last["outcome"], last["attempts"]) == ("Succeeded", 2)


def test_a_thread_that_never_ends_makes_the_worker_restart_holding_its_run(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, tmp_path: Path
) -> None:
    worker = start_worker(
        PYTHONPATH=task_package(tmp_path, SOURCE), TICKWORK_WORKER_STUCK_SECONDS="2"
    )
    log = tmp_path / "attempts.log"
    _, run_id = publish(jobs, probe, "stuck", _spec(log, 3600))
    # Waited for by its reason: a slow claim loop on a busy machine fails liveness too.
    wait_for(
        lambda: "still runs 2s after its timeout" in worker.get("/healthz")[1],
        timeout=30,
        what="the worker to report its thread",
    )
    assert worker.get("/healthz")[0] != 200
    assert log.read_text() == "start 1\n"  # no second attempt beside it
    # SIGTERM, as the kubelet restarts it: the process ends, not held by the thread.
    assert worker.stop(timeout=60) == 70
    # Not handed back: it is redelivered when its lease expires, the thread gone with
    # the process.
    assert probe.locate(run_id) is RunLocation.IN_FLIGHT
    assert worker.log_matches("run not handed back: a thread of its attempt still runs")
