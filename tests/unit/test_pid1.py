"""tickwork.pid1 installs its SIGTERM handler only where the kernel would drop the
signal: in PID 1, while SIGTERM is at its default (tests/integration/test_pid1_signals.py
sends the signal to a real PID 1)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tickwork import pid1


@pytest.fixture
def sigterm_restored() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.usefixtures("sigterm_restored")
def test_pid_1_gets_the_handler() -> None:
    assert pid1.exit_on_sigterm_until_handled(pid=1)
    assert signal.getsignal(signal.SIGTERM) is pid1._exit_now


@pytest.mark.usefixtures("sigterm_restored")
def test_any_other_process_keeps_the_default_action() -> None:
    assert not pid1.exit_on_sigterm_until_handled(pid=4242)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.usefixtures("sigterm_restored")
def test_a_handler_already_there_is_kept() -> None:
    def own(signum: int, frame: object) -> None:
        del signum, frame

    signal.signal(signal.SIGTERM, own)
    assert not pid1.exit_on_sigterm_until_handled(pid=1)
    assert signal.getsignal(signal.SIGTERM) is own


def test_the_exit_status_is_a_shells_for_sigterm() -> None:
    assert pid1.EXIT_STATUS == 143
