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
