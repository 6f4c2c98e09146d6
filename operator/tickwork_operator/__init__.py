"""The watcher: a kopf operator that finds due runs in time buckets and publishes them.

The folder is ``operator/`` (the architecture's name), the import name is
``tickwork_operator`` so that nothing shadows the standard library's
``operator`` module.
"""

import sys

from tickwork.pid1 import exit_on_sigterm_until_handled

# First, before the imports that take seconds: as a container's PID 1 this process
# would otherwise ignore a SIGTERM sent before its own handler is installed.
exit_on_sigterm_until_handled()

# kopf imports the official client's object models whenever the ``kubernetes``
# package is installed, only to recognise its objects in helpers the operator does
# not use (adopt, owner references): with kopf's login through that client, a good
# part of the operator's RSS at start (benchmarks/rounds.md). Absent while kopf is first
# imported, kopf uses stand-ins; Tickwork's credential loader imports the package
# later only for a kubeconfig it cannot read itself (an exec plugin, an auth provider).
if "kubernetes" not in sys.modules and "kopf" not in sys.modules:
    sys.modules["kubernetes"] = None  # type: ignore[assignment]
    try:
        import kopf  # noqa: F401
    finally:
        del sys.modules["kubernetes"]
