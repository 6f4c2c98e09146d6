"""SIGTERM for a process that is its container's first process (PID 1).

The first process of a container is the init of its PID namespace, and the kernel
drops every signal sent to an init that has no handler for it, SIGKILL excepted.
The operator and the worker install their SIGTERM handlers only once they run:
a Pod deleted while they import (a few seconds) or wait for Redis (up to a minute)
lost its SIGTERM and was killed only at the end of its grace period, 30 to 40 s
later (measured in the Pods tests: a release uninstalled right after its install
took 58 s to go).

Imported first by both packages, :func:`exit_on_sigterm_until_handled` gives such a
process what any other process gets from the default action: it ends at once.
Nothing is in flight before the real handlers are installed (no run claimed, no
Lease held), so there is nothing to drain.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

#: The exit status of a process ended by SIGTERM, as a shell reports it.
EXIT_STATUS = 128 + signal.SIGTERM


def _exit_now(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    os._exit(EXIT_STATUS)


def exit_on_sigterm_until_handled(*, pid: int | None = None) -> bool:
    """As PID 1 with SIGTERM still at its default, end the process on SIGTERM.

    The process's own handler replaces this one (``loop.add_signal_handler``, kopf's).
    Any other process keeps the default action, which already ends it. Returns
    whether the handler was installed; ``pid`` stands in for ``os.getpid()`` in tests.
    """
    if (os.getpid() if pid is None else pid) != 1:
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _exit_now)
    return True
