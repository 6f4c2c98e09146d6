"""The run queue: identities of due runs, between the watcher and the workers.

:mod:`.protocol` is the interface; :mod:`.redis_queue` the production
implementation (keys and Lua scripts in :mod:`.keys`); :mod:`.memory` the
single-process one. :func:`open_queue` picks one from settings.
"""

from __future__ import annotations

from tickwork.queue.connection import create_client
from tickwork.queue.memory import MemoryRunQueue
from tickwork.queue.messages import FairShare
from tickwork.queue.protocol import RunQueue
from tickwork.queue.redis_queue import RedisRunQueue
from tickwork.queue.settings import RedisSettings


def open_queue(settings: RedisSettings | None) -> RunQueue:
    """A Redis queue for ``settings``, or the in-memory queue when settings is None."""
    if settings is None:
        return MemoryRunQueue()
    return RedisRunQueue(create_client(settings), settings)


__all__ = [
    "FairShare",
    "MemoryRunQueue",
    "RedisRunQueue",
    "RedisSettings",
    "RunQueue",
    "open_queue",
]
