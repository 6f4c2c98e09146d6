"""The metrics the alerts rely on behave as the alerts assume: counters they take
increase() of start at zero, and only the leader says whether Redis answers.
"""

from __future__ import annotations

import pytest

from tickwork.core.buckets import BucketIndex
from tickwork.core.errors import QueueUnavailableError
from tickwork.queue.memory import MemoryRunQueue
from tickwork_operator.clock import Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.reconciler import Reconciler
from tickwork_operator.state import WatchState
from tickwork_worker.metrics import WorkerMetrics


def test_the_counters_alerts_take_increase_of_start_at_zero() -> None:
    # A labelled child appears when first used; increase() cannot see its first value,
    # so the first missed or failed run would never alert.
    operator, worker = OperatorMetrics().registry, WorkerMetrics().registry
    assert operator.get_sample_value("tickwork_runs_skipped_total", {"reason": "missed"}) == 0
    assert worker.get_sample_value("tickwork_runs_total", {"outcome": "Failed"}) == 0
    assert worker.get_sample_value("tickwork_runs_total", {"outcome": "Succeeded"}) == 0


class _Unreachable(MemoryRunQueue):
    down = False

    async def reap_expired(self, *, limit: int = 1000) -> int:
        if self.down:
            raise QueueUnavailableError("cannot reach Redis")
        return await super().reap_expired(limit=limit)


@pytest.mark.asyncio
async def test_redis_up_follows_the_leaders_queue_maintenance_and_a_standby_has_none() -> None:
    metrics = OperatorMetrics()
    queue = _Unreachable(clock=lambda: 0.0)
    reconciler = Reconciler(
        state=WatchState(index=BucketIndex(start=0.0, width=1.0)), queue=queue,
        kube=None,  # type: ignore[arg-type]  # maintenance never calls the API server
        metrics=metrics, clock=Clock(wall=lambda: 0.0, monotonic=lambda: 0.0),
        holds_lease=lambda: True, queue_name="default",
    )  # fmt: skip

    def up() -> float | None:
        return metrics.registry.get_sample_value("tickwork_redis_up", {"queue": "default"})

    assert up() is None
    await reconciler.maintain_queue()
    assert up() == 1
    queue.down = True
    await reconciler.maintain_queue()
    assert up() == 0
    queue.down = False
    await reconciler.maintain_queue()
    assert up() == 1
    reconciler.forget_queue()
    assert up() is None
