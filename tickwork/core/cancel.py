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

from collections.abc import Iterable

CANCEL_ANNOTATION = "tickwork.dev/cancel"
#: Run IDs the annotation holds at most (the newest are kept).
CANCEL_IDS_LIMIT = 16
#: Why a run cancelled through the annotation was, as its record says.
CANCELLED_BY_USER = f"cancelled: kubectl tickwork cancel ({CANCEL_ANNOTATION})"


def cancel_ids(value: str | None) -> list[str]:
    """The run IDs of the annotation's value, in order, each once."""
    if not value:
        return []
    return list(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


def with_cancel(value: str | None, run_id: str, *, pending: Iterable[str]) -> str:
    """The annotation's value once ``run_id`` is added: the IDs already there that
    are still ``pending`` (queued, running, retrying or buffered), then ``run_id``;
    at most :data:`CANCEL_IDS_LIMIT`."""
    still = set(pending)
    kept = [i for i in cancel_ids(value) if i in still and i != run_id]
    return ",".join([*kept, run_id][-CANCEL_IDS_LIMIT:])


def policy_reason(policy: str, *, terminate: bool) -> str:
    """Why a run cancelled by the job's concurrencyPolicy was, as its record says."""
    how = "terminated" if terminate else "cancelled"
    return f"{how}: a newer run fell due (concurrencyPolicy {policy})"
