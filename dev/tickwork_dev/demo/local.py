"""Watcher and worker in one process, sharing one queue — by default in memory.

This is the prototype's shape (watcher → in-memory queue of IDs → worker)
with production code on both sides; it needs no Redis. Nothing survives the
process, so it is for trying Tickwork out and for machines without Redis.
"""

from __future__ import annotations

import asyncio
import contextlib

from tickwork.queue.memory import MemoryRunQueue
from tickwork.queue.protocol import RunQueue
from tickwork_operator.main import run_operator
from tickwork_operator.settings import OperatorSettings
from tickwork_worker.main import run_worker
from tickwork_worker.settings import WorkerSettings


async def run_local(
    operator: OperatorSettings, worker: WorkerSettings, *, queue: RunQueue | None = None
) -> None:
    """Run until SIGINT/SIGTERM (which kopf catches for the whole process)."""
    shared = queue or MemoryRunQueue()
    stop = asyncio.Event()
    worker_task = asyncio.create_task(run_worker(worker, queue=shared, stop=stop))
    try:
        await run_operator(operator, queue=shared)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await worker_task
