"""Tickwork: scheduled jobs for Kubernetes.

``tickwork.core`` and ``tickwork.api`` are pure (no I/O, time passed in);
``tickwork.queue`` and ``tickwork.kube`` are the shared edges; the watcher is
``tickwork_operator`` (folder ``operator/``) and the executor is
``tickwork_worker`` (folder ``worker/``).
"""

__version__ = "0.1.0"
