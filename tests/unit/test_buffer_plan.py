"""What the operator does with a job's buffered runs (issue 49's "decide, then do"):
a table of the job's state against the plan. Carrying it out (publish, status,
Events) is in test_overlap_decisions.py and on the real API server in
tests/integration/test_overlap.py."""

from __future__ import annotations

import datetime as dt

import pytest

from tickwork.api.models import BufferedRun
from tickwork_operator.buffers import DropAll, PublishHead, buffer_plan

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
A, B, C = (
    BufferedRun(
        id=f"u.{n}",
        scheduled_at=T0 + dt.timedelta(minutes=n),
        buffered_at=T0 + dt.timedelta(minutes=n),
    )
    for n in range(3)
)
ABC = (A, B, C)

# waiting, valid, suspended, paused, a run active -> plan
TABLE = [
    ((), True, False, False, False, None),  # nothing waits
    ((), False, True, True, True, None),
    (ABC, True, False, False, True, None),  # the active run ends first
    (ABC, True, False, False, False, PublishHead(A, (B, C))),  # oldest first
    ((A,), True, False, False, False, PublishHead(A, ())),
    (ABC, False, False, False, False, DropAll(ABC, "the spec is invalid")),
    (ABC, True, True, False, True, DropAll(ABC, "the job is suspended")),  # active or not
    (ABC, True, False, True, False, DropAll(ABC, "the job is paused after failed runs")),
    (ABC, False, True, True, False, DropAll(ABC, "the spec is invalid")),  # the first reason
]


@pytest.mark.parametrize(("waiting", "valid", "suspended", "paused", "active", "plan"), TABLE)
def test_the_buffer_plan(
    waiting: tuple[BufferedRun, ...],
    valid: bool,
    suspended: bool,
    paused: bool,
    active: bool,
    plan: DropAll | PublishHead | None,
) -> None:
    decided = buffer_plan(
        list(waiting), valid=valid, suspended=suspended, paused=paused, active=active
    )
    assert decided == plan
