"""Run identities: deterministic IDs and deterministic jitter.

A run ID names one run of one ScheduledJob for good: the resource's uid plus
the scheduled instant, or plus the token of a manual trigger. Enqueueing the
same run twice therefore yields the same ID, which the queue deduplicates;
a resource deleted and re-created under the same name gets a new uid, so its
runs never collide with the old one's.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from dataclasses import dataclass

from tickwork.core.annotations import manual_token_key

_TIMESTAMP_FORMAT = "%Y%m%dT%H%M%SZ"
_MANUAL = "manual"
_BACKFILL = "backfill"


def _check_uid(uid: str) -> None:
    if not uid or "." in uid:
        raise ValueError(f"a resource uid without dots is required, not {uid!r}")


def scheduled_run_id(uid: str, scheduled_at: dt.datetime) -> str:
    """The ID of the run of resource ``uid`` scheduled at ``scheduled_at`` (aware)."""
    _check_uid(uid)
    if scheduled_at.tzinfo is None:
        raise ValueError("scheduled_at must be timezone-aware")
    stamp = scheduled_at.astimezone(dt.UTC).strftime(_TIMESTAMP_FORMAT)
    return f"{uid}.{stamp}"


def manual_run_id(uid: str, token: str) -> str:
    """The ID of the manual run that annotation token ``token`` requests."""
    _check_uid(uid)
    return f"{uid}.{_MANUAL}.{manual_token_key(token)}"


def backfill_run_id(uid: str, backfill: str, scheduled_at: dt.datetime) -> str:
    """The ID of the run at ``scheduled_at`` of backfill ``backfill`` (spec.backfills[].name):
    distinct from the scheduled run of that instant (a backfill runs it again), the same
    for every leader (a publish that a new leader repeats is deduplicated)."""
    return f"{uid}.{_BACKFILL}.{backfill}.{scheduled_run_id(uid, scheduled_at).split('.')[1]}"


@dataclass(frozen=True)
class RunIdParts:
    uid: str
    scheduled_at: dt.datetime | None
    token: str | None
    backfill: str | None = None


@functools.lru_cache(maxsize=1024)
def parse_run_id(run_id: str) -> RunIdParts:
    """Split a run ID back into its resource uid and its instant or token. (Cached: a
    worker parses a run's ID several times while it handles the run.)"""
    uid, _, rest = run_id.partition(".")
    if not uid or not rest:
        raise ValueError(f"{run_id!r} is not a Tickwork run ID")
    if rest.startswith(f"{_MANUAL}."):
        return RunIdParts(uid=uid, scheduled_at=None, token=rest[len(_MANUAL) + 1 :])
    backfill = None
    if rest.startswith(f"{_BACKFILL}."):
        backfill, _, rest = rest[len(_BACKFILL) + 1 :].rpartition(".")
        if not backfill:
            raise ValueError(f"{run_id!r} is not a Tickwork run ID")
    try:
        moment = dt.datetime.strptime(rest, _TIMESTAMP_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError as exc:
        raise ValueError(f"{run_id!r} is not a Tickwork run ID") from exc
    return RunIdParts(uid=uid, scheduled_at=moment, token=None, backfill=backfill)


def belongs_to(run_id: str, uid: str) -> bool:
    """Whether ``run_id`` names a run of the resource ``uid``.

    Status can be written by anyone allowed to patch it: a run ID read from
    there that names another resource is a forgery (it would make that
    resource's real run look done) and must be ignored.
    """
    try:
        return parse_run_id(run_id).uid == uid
    except ValueError:
        return False


def jitter_seconds(run_id: str, max_seconds: int) -> int:
    """A delay in ``[0, max_seconds]`` that depends only on the run ID.

    Deterministic so that a re-published run (after a restart, by a standby
    replica) lands on the same instant, and spread evenly so that many jobs
    scheduled for the same minute do not stampede.
    """
    if max_seconds <= 0:
        return 0
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % (max_seconds + 1)
