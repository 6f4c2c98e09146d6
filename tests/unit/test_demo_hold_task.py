"""`tickwork.hold`, the demo task the lingering-thread attack in Pods calls: an
attempt that starts while an earlier attempt of its run still holds a thread in the
same process fails permanently, saying so; once that thread ended, it succeeds."""

from __future__ import annotations

import threading
import time

import pytest

import tickwork_demo_tasks as demo
from tickwork.core.errors import PermanentTaskError


def test_a_retry_beside_the_first_attempts_thread_fails_and_after_it_succeeds() -> None:
    first = threading.Thread(target=demo.hold, args=("0.5",), kwargs={"run_id": "r1", "attempt": 1})
    first.start()
    deadline = time.monotonic() + 5
    while "r1" not in demo._HELD:  # the first attempt has its thread
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(PermanentTaskError, match="ran beside an earlier attempt's thread"):
        demo.hold("0", run_id="r1", attempt=2)
    assert demo.hold("0", run_id="other", attempt=2) == "held other in attempt 2"
    first.join()
    assert demo.hold("0", run_id="r1", attempt=2) == "held r1 in attempt 2"
