"""Cancelling runs: the ``tickwork.dev/cancel`` annotation, and what a cancel asks of
the operator, as pure functions.

``kubectl tickwork cancel RUN_ID`` adds the run ID to the annotation of the run's
job, a comma-separated list: two cancels of one job each add their own ID (the CLI
writes the annotation conditionally on the object's resourceVersion and tries again
on a conflict, so neither overwrites the other), and IDs of runs that are no longer
pending leave it at the next cancel. The operator turns each ID into action: a
buffered run leaves ``status.bufferedRuns``, a queued one leaves the queue, and a
running one is named in ``status.cancelRequests``, which workers watch. Each is
recorded Cancelled.
"""

from __future__ import annotations

from tickwork.core.annotations import CANCEL_ANNOTATION

#: Why a run cancelled through the annotation was, as its record says.
CANCELLED_BY_USER = f"cancelled: kubectl tickwork cancel ({CANCEL_ANNOTATION})"


def policy_reason(policy: str, *, terminate: bool) -> str:
    """Why a run cancelled by the job's concurrencyPolicy was, as its record says."""
    how = "terminated" if terminate else "cancelled"
    return f"{how}: a newer run fell due (concurrencyPolicy {policy})"
