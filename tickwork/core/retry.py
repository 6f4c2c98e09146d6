"""What to do after a failed attempt: retry after a backoff, or give up.

Exponential backoff with "equal jitter": the delay for attempt *n* is drawn
from ``[d/2, d]`` with ``d = min(cap, base * 2**(n-1))``, so retries of many
runs that failed together spread out, yet none comes back sooner than half
its nominal delay. The random draw is derived from the run ID and attempt,
so the decision is a pure function and re-deciding gives the same answer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryLater:
    delay_seconds: float
    next_attempt: int


@dataclass(frozen=True)
class GiveUp:
    reason: str


def _fraction(run_id: str, attempt: int) -> float:
    digest = hashlib.sha256(f"{run_id}#{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def backoff_seconds(run_id: str, attempt: int, *, base: float, cap: float) -> float:
    """The delay before attempt ``attempt + 1``, after attempt ``attempt`` failed."""
    nominal = min(cap, base * 2 ** max(0, attempt - 1))
    return float(nominal / 2 + _fraction(run_id, attempt) * nominal / 2)


def after_failure(
    run_id: str,
    *,
    attempt: int,
    max_attempts: int,
    permanent: bool,
    base: float,
    cap: float,
) -> RetryLater | GiveUp:
    """Decide about a run whose attempt number ``attempt`` (1-based) just failed."""
    if permanent:
        return GiveUp("the failure is permanent; retrying cannot help")
    if attempt >= max_attempts:
        return GiveUp(f"all {max_attempts} attempts failed")
    return RetryLater(
        delay_seconds=backoff_seconds(run_id, attempt, base=base, cap=cap),
        next_attempt=attempt + 1,
    )
