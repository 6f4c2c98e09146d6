"""The executor: claims runs from the queue, executes them and writes their outcome.

The folder is ``worker/``; the import name is ``tickwork_worker``.
"""

import sys

from tickwork.pid1 import exit_on_sigterm_until_handled

# First, before the imports that take seconds: as a container's PID 1 this process
# would otherwise ignore a SIGTERM sent before its own handler is installed.
exit_on_sigterm_until_handled()

# httpx (HTTP tasks) imports its command-line tool — click, rich and pygments, several
# MiB of RSS — whenever those are installed; a worker never runs it. Marked as absent
# before httpx is first imported, httpx falls back to a stub (benchmarks/worker_memory.py).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
