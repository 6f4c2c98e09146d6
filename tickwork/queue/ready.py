"""The memory queue's ready runs: one list per priority, claimed in turns.

The same rule as the Redis queue's ``pop_ready`` (tickwork.queue.keys): with only
Normal runs waiting, one FIFO; while High or Low runs wait, each claim takes the
level whose turn it is in :data:`~tickwork.queue.messages.PRIORITY_TURNS`, or the
highest level with runs waiting when that one has none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from tickwork.queue.messages import PRIORITY_TURNS

#: Where each turn looks, in order: its own level, then the highest with runs waiting.
_ORDER = {"H": "HNL", "N": "NHL", "L": "LHN"}


def level(priority: str | None) -> str:
    """``H``, ``N`` or ``L`` for a message's priority (absent: Normal)."""
    return {"High": "H", "Low": "L"}.get(priority or "", "N")


class ReadyRuns:
    """Run IDs ready to claim. ``appendleft`` enqueues, ``append`` returns a run to the
    claim end, ``pop`` claims; ``level_of`` says which list a run belongs to."""

    def __init__(self, level_of: Callable[[str], str]) -> None:
        self._lists: dict[str, deque[str]] = {"H": deque(), "N": deque(), "L": deque()}
        self._level_of = level_of
        self._turns = 0

    def appendleft(self, run_id: str) -> None:
        self._lists[self._level_of(run_id)].appendleft(run_id)

    def append(self, run_id: str) -> None:
        self._lists[self._level_of(run_id)].append(run_id)

    def extend(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            self.append(run_id)

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._lists.values())

    def count(self, name: str) -> int:
        """Runs in list ``name`` (``H``, ``N`` or ``L``)."""
        return len(self._lists[name])

    def heads(self) -> list[str]:
        """The run at the claim end of each list."""
        return [runs[-1] for runs in self._lists.values() if runs]

    def pop(self) -> str:
        """The run to claim next (IndexError when none is ready)."""
        if not self._lists["H"] and not self._lists["L"]:
            return self._lists["N"].pop()
        turn = PRIORITY_TURNS[self._turns % len(PRIORITY_TURNS)]
        self._turns += 1
        for name in _ORDER[turn]:
            if self._lists[name]:
                return self._lists[name].pop()
        raise IndexError("no run is ready")  # pragma: no cover - H or L had runs
