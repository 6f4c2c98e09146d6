"""The conditions the operator's share of status should show (issue 49's "decide,
then do"): a table of what the operator knows against the plan it makes. Carrying
the plan out (WatchState.refresh_wanted, the write) is tested in
test_operator_decisions.py and on the real API server."""

from __future__ import annotations

import pytest

from tickwork.core.states import Readiness
from tickwork_operator.wanted import (
    SUSPENDED,
    UNPAUSED,
    UNSTALLED,
    UNSUSPENDED,
    ConditionChange,
    condition_plan,
)

pytestmark = pytest.mark.unit

READY = Readiness(ready=True, reason="Scheduled", message="runs are published on schedule")
PAUSE = "paused after 3 consecutive failed runs"
PAUSED = ConditionChange("Paused", status=True, reason="ConsecutiveFailures", message=PAUSE)
READY_NOW = ConditionChange("Ready", status=True, reason="Scheduled", message=READY.message)
NONE: frozenset[str] = frozenset()
BOTH = frozenset({"Ready", "Suspended", "Paused"})

# valid, suspended, paused, conditions status shows -> the plan after Ready
TABLE = [
    (True, False, None, NONE, ()),  # a healthy job: Ready only
    (True, True, None, NONE, (SUSPENDED,)),
    (True, True, None, BOTH, (SUSPENDED, UNPAUSED)),  # suspended while paused was shown
    (True, False, None, frozenset({"Suspended"}), (UNSUSPENDED,)),  # resumed
    (False, True, None, frozenset({"Suspended"}), ()),  # invalid: Ready says why, nothing else
    (True, False, PAUSE, NONE, (PAUSED,)),
    (True, False, PAUSE, frozenset({"Paused"}), (PAUSED,)),  # still paused: the same change
    (True, True, PAUSE, NONE, (SUSPENDED, PAUSED)),
    (True, False, None, frozenset({"Paused"}), (UNPAUSED,)),  # resumed from a pause
    (False, False, None, frozenset({"Paused"}), (UNPAUSED,)),
]


@pytest.mark.parametrize(("valid", "suspended", "paused", "shown", "after_ready"), TABLE)
def test_the_condition_plan(
    valid: bool,
    suspended: bool,
    paused: str | None,
    shown: frozenset[str],
    after_ready: tuple[ConditionChange, ...],
) -> None:
    plan = condition_plan(ready=READY, valid=valid, suspended=suspended, paused=paused, shown=shown)
    assert plan == (READY_NOW, *after_ready)


NOT_READY = [
    Readiness(ready=False, reason="InvalidSpec", message="unknown time zone"),
    Readiness(ready=False, reason="Paused", message=PAUSE),
    Readiness(ready=False, reason="LastRunFailed", message="run u.1 failed: HTTP 500"),
    Readiness(ready=False, reason="Missed", message="the one-shot run could not start"),
]


@pytest.mark.parametrize("ready", NOT_READY, ids=[r.reason for r in NOT_READY])
def test_stalled_says_what_ready_says_while_it_is_false_and_leaves_false(
    ready: Readiness,
) -> None:
    """kstatus (Flux, kpt) reads Stalled: a job no run of which will go right until
    a person acts shows Failed there, not InProgress until a timeout."""
    plan = condition_plan(ready=ready, valid=True, suspended=False, paused=None, shown=NONE)
    said = {"reason": ready.reason, "message": ready.message}
    not_ready = ConditionChange("Ready", status=False, **said)
    assert plan == (not_ready, ConditionChange("Stalled", status=True, **said))
    # Ready again: Stalled turns False if status showed it, and is not added if not.
    shown = frozenset({"Ready", "Stalled"})
    again = condition_plan(ready=READY, valid=True, suspended=False, paused=None, shown=shown)
    assert again == (READY_NOW, UNSTALLED)
    assert condition_plan(ready=READY, valid=True, suspended=False, paused=None, shown=NONE) == (
        READY_NOW,
    )
