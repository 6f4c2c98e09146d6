"""What every unit test shares."""

from __future__ import annotations

import pytest

from tickwork.kube import informer as informer_module


@pytest.fixture(autouse=True)
def _heap_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """An informer's list ends with a full collection, a freeze and a ``malloc_trim``
    of the whole process (tickwork.heap). In a test worker that has run hundreds of
    tests they take seconds under load, and a freeze stays for the worker's later
    tests. The unit tests follow the stream; tests/unit/test_informer.py checks the
    settle, tests/unit/test_heap.py what it does."""

    async def no_trim(reason: str) -> None:
        del reason

    monkeypatch.setattr(informer_module, "settle", lambda _: 0)
    monkeypatch.setattr(informer_module, "trim_now", no_trim)
