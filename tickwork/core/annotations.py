"""The requests a user makes by annotating a ScheduledJob: every annotation's name and
the grammar of its value, in one place.

The CLI writes them (``kubectl tickwork run-now``, ``trigger``, ``resume``,
``cancel``, ``dlq requeue``, ``dlq purge``); anyone allowed to patch the job may
too. The operator reads them all where it observes a job
(``tickwork_operator.state``) and acts once per new value:

=============================  ==============================================
annotation                     value
=============================  ==============================================
``tickwork.dev/run-now``       a token: each new one asks for one manual run
``tickwork.dev/run-params``    that run's parameters, a JSON object of strings
``tickwork.dev/resume``        a token: each new one resumes a paused job
``tickwork.dev/cancel``        run IDs, comma-separated
``tickwork.dev/requeue``       ``TOKEN`` or ``TOKEN:RUN_ID`` (dead runs)
``tickwork.dev/purge``         ``TOKEN`` or ``TOKEN:RUN_ID`` (dead runs)
=============================  ==============================================

Status records a token by its key (:func:`manual_token_key`): any value fits the
field, and the same token never acts twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tickwork.core.errors import InvalidSpecError

#: Set to a fresh token to ask for a manual run (``kubectl tickwork run-now``).
RUN_NOW_ANNOTATION = "tickwork.dev/run-now"
#: A manual run's parameters (a JSON object of strings), read with the run-now token
#: of the same change; their rules are in :mod:`tickwork.core.params`.
RUN_PARAMS_ANNOTATION = "tickwork.dev/run-params"
#: Set to a fresh token to resume a paused job once, without a change of its spec.
RESUME_ANNOTATION = "tickwork.dev/resume"
#: The run IDs to cancel (``kubectl tickwork cancel RUN_ID``), comma-separated.
CANCEL_ANNOTATION = "tickwork.dev/cancel"
#: Ask the operator to requeue or purge a job's dead runs: the value is a token (each
#: new one acts once), optionally ``TOKEN:RUN_ID`` for one run.
REQUEUE_ANNOTATION = "tickwork.dev/requeue"
PURGE_ANNOTATION = "tickwork.dev/purge"
DEAD_LETTER_ANNOTATIONS = {"requeue": REQUEUE_ANNOTATION, "purge": PURGE_ANNOTATION}
#: Every request annotation, in the order of the table above.
REQUEST_ANNOTATIONS = (
    RUN_NOW_ANNOTATION,
    RUN_PARAMS_ANNOTATION,
    RESUME_ANNOTATION,
    CANCEL_ANNOTATION,
    REQUEUE_ANNOTATION,
    PURGE_ANNOTATION,
)
#: The longest run-params value read at all (the JSON of the most parameters, with
#: every character escaped, stays well below it).
ANNOTATION_LIMIT = 2048

# -- tokens (run-now, resume, requeue, purge) -----------------------------------------

_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def manual_token_key(token: str) -> str:
    """The token as it appears in a run ID: itself if short and plain, else a digest."""
    token = token.strip()
    if not token:
        raise InvalidSpecError("the run-now token must not be empty", field="run-now")
    if _SAFE_TOKEN.match(token):
        return token
    return "h" + hashlib.sha256(token.encode()).hexdigest()[:32]


def same_trigger(token: str, recorded: str | None) -> bool:
    """Whether ``recorded`` (status.lastTriggerToken) already stands for ``token``.

    Status records the token's key (a short digest for a long or odd token, so
    that any annotation value fits the field); the token itself was recorded
    before, and still counts.
    """
    if recorded is None:
        return False
    return recorded == token or recorded == trigger_key(token)


def trigger_key(token: str) -> str | None:
    """The key status records for ``token``; None for a blank token (no trigger)."""
    if not token or token.isspace():
        return None  # most jobs have none: no exception raised and caught per watch event
    try:
        return manual_token_key(token)
    except InvalidSpecError:
        return None


# -- cancel ---------------------------------------------------------------------------

#: Run IDs the cancel annotation holds at most (the newest are kept).
CANCEL_IDS_LIMIT = 16


def cancel_ids(value: str | None) -> list[str]:
    """The run IDs of the cancel annotation's value, in order, each once."""
    if not value:
        return []
    return list(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


def with_cancel(value: str | None, run_id: str, *, pending: Iterable[str]) -> str:
    """The cancel annotation's value once ``run_id`` is added: the IDs already there
    that are still ``pending`` (queued, running, retrying or buffered), then
    ``run_id``; at most :data:`CANCEL_IDS_LIMIT`."""
    still = set(pending)
    kept = [i for i in cancel_ids(value) if i in still and i != run_id]
    return ",".join([*kept, run_id][-CANCEL_IDS_LIMIT:])


# -- requeue and purge ----------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetterRequest:
    """What a requeue or purge annotation asks: ``run_id`` None means every dead run."""

    verb: str
    token: str
    run_id: str | None


def dead_letter_request(verb: str, value: str | None) -> DeadLetterRequest | None:
    """The request an annotation value makes; None for a blank one. The token is kept
    as its key (see :func:`manual_token_key`), so any value fits status."""
    if verb not in DEAD_LETTER_ANNOTATIONS:
        raise ValueError(f"no dead-letter verb {verb!r}")
    token, _, run_id = (value or "").strip().partition(":")
    key = trigger_key(token)
    if key is None:
        return None
    return DeadLetterRequest(verb=verb, token=key, run_id=run_id.strip() or None)
