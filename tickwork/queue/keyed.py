"""The memory queue's concurrency keys: at most ``limit`` runs naming a key in flight.

The same rule as the Redis scripts (tickwork.queue.keys: CLAIM, WAIT_KEY,
``free_slot``, REBALANCE): a run whose key has every place in flight is claimed to
wait, then waits, in order, in the key's list; a run leaving the in-flight set gives
its place up and the key's oldest waiting run goes back to the claim end of ready.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Collection

from tickwork.queue.messages import RunMessage


class ConcurrencyKeys:
    """Places held and runs waiting, per ``<namespace>/<key>``."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}  # run ID -> the key whose place it holds
        self._held: Counter[str] = Counter()
        self._waiting: dict[str, deque[str]] = {}  # appendleft = wait, pop = return

    def full(self, message: RunMessage) -> bool:
        """Whether ``message``'s key has no place free."""
        key = message.concurrency_key
        return key is not None and self._held[key] >= (message.concurrency_limit or 1)

    def wait(self, message: RunMessage) -> None:
        """``message``'s run waits for a place of its key, after those waiting now."""
        assert message.concurrency_key is not None  # noqa: S101 - only a keyed run waits
        self._waiting.setdefault(message.concurrency_key, deque()).appendleft(message.run_id)

    def take(self, message: RunMessage) -> None:
        """``message``'s run is claimed: it holds a place of its key (if it names one)."""
        if message.concurrency_key is not None:
            self._owners[message.run_id] = message.concurrency_key
            self._held[message.concurrency_key] += 1

    def free(self, run_id: str) -> str | None:
        """``run_id`` left the in-flight set: its place is free; the run to return, if
        one of the key's waited."""
        key = self._owners.pop(run_id, None)
        if key is None:
            return None
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]
        return self._next(key)

    def _next(self, key: str) -> str | None:
        waiting = self._waiting.get(key)
        if not waiting:
            return None
        run_id = waiting.pop()
        if not waiting:
            del self._waiting[key]
        return run_id

    def rebalance(
        self, in_flight: Collection[str], message: Callable[[str], RunMessage | None]
    ) -> list[str]:
        """Places recounted from the runs in flight; the waiting runs of keys with places
        free (a limit raised since they began to wait), to return."""
        self._owners = {r: key for r, key in self._owners.items() if r in in_flight}
        self._held = Counter(self._owners.values())
        back: list[str] = []
        for key, waiting in list(self._waiting.items()):
            oldest = message(waiting[-1])
            limit = (oldest.concurrency_limit if oldest else None) or 1
            for _ in range(max(0, limit - self._held[key])):
                run_id = self._next(key)
                if run_id is None:
                    break
                back.append(run_id)
        return back

    def waiting(self) -> int:
        return sum(len(waiting) for waiting in self._waiting.values())
