"""``make demo``'s first five minutes: no Redis needed, and a table that does not scroll."""

from __future__ import annotations

import pytest

from tickwork_dev.demo.__main__ import Screen, choose_queue

pytestmark = pytest.mark.unit

TABLE = """NAME        SCHEDULE   PHASE       LAST        AGE
hello-now              Scheduled               {age}
"""
DONE = """NAME        SCHEDULE   PHASE       LAST        AGE
hello-now              Completed   Succeeded   {age}
"""


@pytest.mark.parametrize(
    ("requested", "redis_server", "queue", "notice"),
    [
        ("auto", "/usr/bin/redis-server", "redis", False),
        ("auto", None, "memory", True),
        ("memory", "/usr/bin/redis-server", "memory", False),
        ("memory", None, "memory", False),
        ("redis", "/usr/bin/redis-server", "redis", False),
    ],
)
def test_the_demo_falls_back_to_memory_only_when_redis_is_missing_and_not_asked_for(
    requested: str, redis_server: str | None, queue: str, notice: bool
) -> None:
    chosen, said = choose_queue(requested, redis_server=redis_server)
    assert chosen == queue
    assert bool(said) == notice
    if notice:
        assert "\n" not in said
        assert "in-memory queue" in said


def test_asking_for_redis_without_redis_server_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="apt-get install redis-server"):
        choose_queue("redis", redis_server=None)


def test_off_a_terminal_only_tables_that_changed_are_printed_age_aside() -> None:
    screen = Screen(terminal=False)
    first = screen.frame("t", TABLE.format(age="2s"))
    assert first is not None
    assert "hello-now" in first
    assert screen.frame("t", TABLE.format(age="4s")) is None
    assert screen.frame("t", TABLE.format(age="6s")) is None
    changed = screen.frame("t", DONE.format(age="8s"))
    assert changed is not None
    assert "Succeeded" in changed
    assert Screen.CLEAR not in changed


def test_on_a_terminal_every_frame_redraws_in_place() -> None:
    screen = Screen(terminal=True)
    for age in ("2s", "4s"):
        frame = screen.frame("t", TABLE.format(age=age))
        assert frame is not None
        assert frame.startswith(Screen.CLEAR)
        assert age in frame
