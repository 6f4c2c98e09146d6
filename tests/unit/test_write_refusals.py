"""What a worker does after a status write the API server did not take
(:func:`tickwork_worker.decisions.after_refusal`), as a table: the record of a run
is never given up while the API server is merely away, a progress mark is."""

from __future__ import annotations

from typing import Any

import pytest

from tickwork_worker.decisions import MARK_ATTEMPTS, AfterRefusal, after_refusal

pytestmark = pytest.mark.unit

AWAY = {"not_found": False, "conflict": False, "unavailable": True}
REFUSED = {"not_found": False, "conflict": False, "unavailable": False}
GONE = {"not_found": True, "conflict": False, "unavailable": False}
CONFLICT = {"not_found": False, "conflict": True, "unavailable": False}


@pytest.mark.parametrize(
    ("error", "options", "expected"),
    [
        (GONE, {"record": True}, AfterRefusal.DONE),
        (GONE, {"record": False, "conditional": True}, AfterRefusal.DONE),
        (CONFLICT, {"conditional": True}, AfterRefusal.STALE),
        (CONFLICT, {"conditional": False}, AfterRefusal.DONE),  # another uid has the name
        (REFUSED, {"record": True}, AfterRefusal.GIVE_UP),  # 400, 403, 422: asking again
        (REFUSED, {"record": False}, AfterRefusal.GIVE_UP),
        (AWAY, {"record": True, "attempt": 50}, AfterRefusal.RETRY),  # patience left
        (AWAY, {"record": True, "attempt": 3, "patient_seconds": 0.0}, AfterRefusal.GIVE_UP),
        (AWAY, {"record": False, "attempt": MARK_ATTEMPTS - 1}, AfterRefusal.RETRY),
        (AWAY, {"record": False, "attempt": MARK_ATTEMPTS}, AfterRefusal.GIVE_UP),
    ],
)
def test_what_follows_a_refused_write(
    error: dict[str, bool], options: dict[str, Any], expected: AfterRefusal
) -> None:
    facts: dict[str, Any] = {
        "conditional": False,
        "record": True,
        "attempt": 1,
        "patient_seconds": 300.0,
        **error,
        **options,
    }
    assert after_refusal(**facts).next is expected


def test_the_pause_doubles_from_half_a_second_to_eight_and_a_record_warns_every_few_tries() -> None:
    steps = [
        after_refusal(**AWAY, conditional=False, record=True, attempt=attempt, patient_seconds=60.0)
        for attempt in range(1, 14)
    ]
    assert [step.wait_seconds for step in steps] == [0.5, 1, 2, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8]
    assert [i + 1 for i, step in enumerate(steps) if step.warn] == [6, 12]
