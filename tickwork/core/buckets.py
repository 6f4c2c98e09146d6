"""The bucket index: every job's next due time, grouped into fixed-width time buckets.

The watcher keeps one entry per ScheduledJob (the key) with its next due
instant. Insert, move and remove are O(1) dictionary operations. A tick pops
every entry due by ``now`` in time order, visiting only the buckets between
the last tick and ``now``: with nothing due, a tick costs the same for a
thousand jobs as for a million.

Entries due before the index's cursor (overdue when inserted) go into the
cursor's bucket, so the next tick returns them at once.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Due(Generic[K]):
    key: K
    due: float


class BucketIndex(Generic[K]):
    """Keys with due instants (seconds since the epoch), popped in time order.

    ``start`` is the instant before which nothing will be popped separately:
    the first tick begins there. Time is always an argument; the index reads
    no clock.
    """

    __slots__ = ("_buckets", "_cursor", "_displaced", "_entries", "width")

    def __init__(self, *, start: float, width: float = 1.0) -> None:
        if width <= 0:
            raise ValueError("bucket width must be positive")
        self.width = width
        self._cursor = self._bucket_of(start)
        # bucket number -> {key: due}; dicts double as O(1) ordered sets.
        self._buckets: dict[int, dict[K, float]] = {}
        # key -> due: its bucket is the due instant's (a tuple with the bucket number
        # took 84 bytes more per key, and the watcher holds a key per job) ...
        self._entries: dict[K, float] = {}
        # ... but for the keys overdue when put, which wait in the cursor's bucket.
        self._displaced: dict[K, int] = {}

    def _bucket_of(self, instant: float) -> int:
        return math.floor(instant / self.width)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def due_of(self, key: K) -> float | None:
        return self._entries.get(key)

    @property
    def bucket_count(self) -> int:
        return len(self._buckets)

    def put(self, key: K, due: float) -> None:
        """Insert ``key`` due at ``due``, or move it there if present. O(1)."""
        if key in self._entries:
            self.remove(key)
        own = self._bucket_of(due)
        bucket = max(own, self._cursor)
        self._buckets.setdefault(bucket, {})[key] = due
        self._entries[key] = due
        if bucket != own:
            self._displaced[key] = bucket

    def remove(self, key: K) -> bool:
        """Remove ``key``; return whether it was there. O(1)."""
        due = self._entries.pop(key, None)
        if due is None:
            return False
        bucket = self._displaced.pop(key, None)
        if bucket is None:
            bucket = self._bucket_of(due)
        members = self._buckets[bucket]
        del members[key]
        if not members:
            del self._buckets[bucket]
        return True

    def pop_due(self, now: float) -> list[Due[K]]:
        """Remove and return every entry due at or before ``now``, earliest first.

        Visits the buckets from the cursor to ``now``'s bucket; if the cursor
        is far behind (a replica that just became leader), it visits only the
        non-empty ones instead.
        """
        last = self._bucket_of(now)
        if last < self._cursor:
            return []
        if last - self._cursor > len(self._buckets):
            numbers = sorted(b for b in self._buckets if b <= last)
        else:
            numbers = [b for b in range(self._cursor, last + 1) if b in self._buckets]
        popped: list[Due[K]] = []
        for number in numbers:
            members = self._buckets[number]
            if number < last:
                ready = sorted(members.items(), key=lambda item: item[1])
                del self._buckets[number]
            else:
                ready = sorted(
                    ((key, due) for key, due in members.items() if due <= now),
                    key=lambda item: item[1],
                )
                for key, _ in ready:
                    del members[key]
                if not members:
                    del self._buckets[number]
            for key, due in ready:
                del self._entries[key]
                if self._displaced:
                    self._displaced.pop(key, None)
                popped.append(Due(key, due))
        # The current bucket may still hold entries due later in it.
        self._cursor = last
        return popped
