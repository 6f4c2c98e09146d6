"""Every status field has one writer, and the bodies come from the API models.

(The same against the real API server, where server-side apply merges them:
tests/integration/test_operator.py::test_each_status_field_has_one_writer_and_overlapping_runs_keep_each_other.)
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import pytest

from tickwork.api.models import (
    DEAD_RUNS_LISTED,
    ActiveRun,
    DeadRun,
    OperatorStatus,
    RunRecord,
    RunStatus,
    ScheduledJobStatus,
)
from tickwork.core.annotations import DeadLetterRequest, dead_letter_request
from tickwork.core.states import JobPhase, RunState
from tickwork.kube import status as writes
from tickwork.kube.status import (
    CONDITION_READY,
    RUNS_LIMIT,
    TRIM_BATCH,
    active_body,
    holds_legacy_share,
    operator_body,
    owned_fields,
    record_body,
    run_manager,
    to_drop,
    trim_due,
    trim_patch,
    updated,
    with_condition,
    withdrawal_body,
)

pytestmark = pytest.mark.unit
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
BERLIN = dt.timezone(dt.timedelta(hours=1))


def _record(run_id: str, minute: int, outcome: RunState = RunState.SUCCEEDED) -> RunRecord:
    at = T0 + dt.timedelta(minutes=minute)
    return RunRecord(id=run_id, scheduled_at=at, outcome=outcome, finished_at=at)


def test_the_two_shares_split_every_status_field_between_them() -> None:
    operator, runs = set(OperatorStatus.model_fields), set(RunStatus.model_fields)
    assert not operator & runs
    assert operator | runs == set(ScheduledJobStatus.model_fields)


def test_the_operator_body_names_only_the_operators_fields() -> None:
    share = with_condition(
        updated(
            OperatorStatus(),
            phase=JobPhase.SCHEDULED,
            observed_generation=3,
            next_run_at=T0.astimezone(BERLIN),
            missed_runs=2,
        ),
        CONDITION_READY,
        status=True,
        reason="Scheduled",
        message="ok",
        now=T0,
    )
    body = operator_body(share)
    wire = {field.alias for field in OperatorStatus.model_fields.values()}
    assert set(body) <= wire
    assert body["nextRunAt"] == "2026-12-01T09:00:00Z"  # kept in UTC whatever zone it came in
    assert body["conditions"][0]["observedGeneration"] == 3
    assert body["phase"] == "Scheduled"


def test_a_condition_keeps_its_transition_time_until_its_status_flips() -> None:
    later = T0 + dt.timedelta(hours=1)
    share = with_condition(OperatorStatus(), "Ready", status=True, reason="A", message="", now=T0)
    same = with_condition(share, "Ready", status=True, reason="B", message="", now=later)
    flipped = with_condition(same, "Ready", status=False, reason="C", message="", now=later)
    assert same.conditions[0].last_transition_time == T0
    assert same.conditions[0].reason == "B"
    assert flipped.conditions[0].last_transition_time == later


def test_a_runs_bodies_name_only_its_own_entries() -> None:
    active = ActiveRun(id="u.1", scheduled_at=T0, state=RunState.RUNNING, attempt=1)
    assert active_body(active) == {
        "activeRuns": [
            {
                "id": "u.1",
                "scheduledAt": "2026-12-01T09:00:00Z",
                "state": "Running",
                "attempt": 1,
                "manual": False,
            }
        ],
    }
    body = record_body(_record("u.1", 0), successful=3, failed=3)
    assert set(body) == {"lastRun", "runs", "lastSuccessfulTime"}
    assert [r["id"] for r in body["runs"]] == ["u.1"]
    failed = record_body(_record("u.2", 1, RunState.FAILED), successful=3, failed=3)
    assert set(failed) == {"lastRun", "runs"}  # lastSuccessfulTime stays the last success's
    unkept = record_body(_record("u.3", 2), successful=0, failed=3)
    assert set(unkept) == {"lastRun", "lastSuccessfulTime"}  # the history keeps no successes


def test_run_managers_are_distinct_stable_and_short() -> None:
    ids = [f"{'u' * 36}.2026120{day}T090000Z" for day in range(1, 10)]
    managers = {run_manager(run_id) for run_id in ids}
    assert len(managers) == len(ids)
    assert run_manager(ids[0]) == run_manager(ids[0])
    assert all(len(m) <= 128 for m in managers)  # the API server's limit


def test_the_oldest_records_beyond_each_limit_are_dropped_by_finish_time() -> None:
    history = [
        _record("s1", 1),
        _record("f1", 2, RunState.FAILED),
        _record("s2", 3),
        _record("s3", 4),
        _record("f2", 5, RunState.FAILED),
    ]
    assert to_drop(history, _record("s4", 6), successful=2, failed=1) == ["s2", "f1", "s1"]
    assert to_drop(history, _record("s4", 6), successful=5, failed=5) == []
    # Order of the list does not matter, only when each run finished.
    assert to_drop(list(reversed(history)), _record("s4", 6), successful=2, failed=1) == [
        "s2",
        "f1",
        "s1",
    ]
    # The run that just ended is never dropped, even when its limit is 0.
    assert "s4" not in to_drop(history, _record("s4", 6), successful=0, failed=0)


def _managed(manager: str, *fields: str) -> dict[str, object]:
    return {
        "manager": manager,
        "operation": "Apply",
        "subresource": "status",
        "fieldsV1": {"f:status": {f"f:{name}": {} for name in fields}},
    }


def test_a_withdrawal_gives_up_everything_but_what_else_its_manager_still_owns() -> None:
    status = ScheduledJobStatus(
        runs=[_record("old", 1), _record("new", 2)],
        last_run=_record("new", 2),
        last_successful_time=T0 + dt.timedelta(minutes=2),
    )
    metadata = {
        "managedFields": [
            _managed(run_manager("old"), "runs"),
            _managed(run_manager("new"), "runs", "lastRun", "lastSuccessfulTime"),
            _managed("tickwork-operator", "phase", "nextRunAt"),
        ]
    }
    assert owned_fields(metadata, "tickwork-operator") == {"phase", "nextRunAt"}
    assert withdrawal_body(metadata, status, "old") is None  # no status at all: entry goes too
    kept = withdrawal_body(metadata, status, "new")
    assert kept is not None
    assert set(kept) == {"lastRun", "lastSuccessfulTime"}
    assert json.dumps(kept["lastRun"]) == json.dumps(status.last_run.to_wire())  # type: ignore[union-attr]
    assert withdrawal_body({}, status, "new") is None  # a copy without managedFields


def test_status_of_older_versions_and_other_zones_reads_cleanly() -> None:
    status = ScheduledJobStatus.model_validate(
        {
            "phase": "Scheduled",
            "currentRun": {"id": "x"},  # a field of an older version
            "nextRunAt": "2026-12-01T10:00:00+01:00",
        }
    )
    assert status.next_run_at == T0
    assert status.operator_share().to_wire()["nextRunAt"] == "2026-12-01T09:00:00Z"


def test_the_api_docs_name_every_status_field_and_its_writer() -> None:
    text = (Path(__file__).parents[2] / "docs/api.md").read_text()
    table = text[text.index("| written by | fields |") : text.index("`activeRuns` and `runs` are")]
    rows = [line for line in table.splitlines() if line.startswith(("| the", "| each"))]
    operator_row, runs_row = rows
    for share, row in ((OperatorStatus, operator_row), (RunStatus, runs_row)):
        for field in share.model_fields.values():
            assert f"`{field.alias}" in row, (field.alias, share.__name__)


def test_the_first_trim_after_an_upgrade_lets_the_old_workers_manager_go() -> None:
    legacy = {
        "managedFields": [
            _managed("tickwork-worker", "runs", "lastRun"),
            _managed(run_manager("new"), "runs", "lastRun"),
        ]
    }
    assert holds_legacy_share(legacy)
    assert not holds_legacy_share({"managedFields": [_managed(run_manager("new"), "runs")]})


def test_records_past_the_limits_leave_in_batches_or_near_the_schema_bound() -> None:
    drop = [f"old{index}" for index in range(TRIM_BATCH)]
    assert trim_due(drop, held=10, placed=False)
    assert not trim_due(drop[:-1], held=10, placed=False)  # a few over: left for a later run
    assert trim_due(drop[:1], held=RUNS_LIMIT - TRIM_BATCH + 1, placed=False)  # near maxItems
    assert not trim_due([], held=RUNS_LIMIT, placed=True)  # nothing over the limits


def test_records_over_the_limits_leave_at_once_after_a_placed_record() -> None:
    """An older version's records have no place, and placed records never displace
    them: without a trim after a placed write, a job whose runs all succeed would keep
    them over its limits for good (found by the upgrade test in Pods)."""
    history = [_record(f"old{minute}", minute) for minute in range(3)]
    trims = 0
    for minute in range(3, 9):
        record = _record(f"new{minute}", minute)
        slot = writes.history_slot(history, record.outcome, successful=3, failed=3)
        record = record.model_copy(update={"slot": slot})
        history = [r for r in history if r.slot is None or r.slot != slot] + [record]
        drop = to_drop(history, record, successful=3, failed=3)
        assert not trim_due(drop, len(history), placed=False)  # never a batch of 4
        if trim_due(drop, len(history), placed=True):
            trims += 1
            history = [r for r in history if r.id not in drop]
    assert [r.id for r in history] == ["new6", "new7", "new8"]
    assert trims == 3  # one per old record, while the places filled; none after


def test_a_trim_patch_tests_each_removed_records_id_at_its_index_from_the_end() -> None:
    written = {
        "metadata": {"uid": "u-1"},
        "status": {"runs": [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}]},
    }
    assert trim_patch(written, ["c", "a", "gone"]) == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "test", "path": "/status/runs/2/id", "value": "c"},
        {"op": "remove", "path": "/status/runs/2"},
        {"op": "test", "path": "/status/runs/0/id", "value": "a"},
        {"op": "remove", "path": "/status/runs/0"},
    ]
    assert trim_patch(written, ["gone"]) == []
    assert trim_patch({"status": {}}, ["a"]) == []


def test_a_trim_patch_removes_exactly_what_to_drop_names() -> None:
    history = [_record(f"s{index}", index) for index in range(6)]
    record = _record("s6", 6)
    written = {
        "metadata": {"uid": "u"},
        "status": {"runs": [r.to_wire() for r in [*history, record]]},
    }
    drop = to_drop(history, record, successful=2, failed=1)
    runs = list(written["status"]["runs"])
    for operation in trim_patch(written, drop):  # applied as the API server would
        if operation["path"] == "/metadata/uid":
            continue
        index = int(operation["path"].split("/")[3])  # /status/runs/<index>[/id]
        if operation["op"] == "remove":
            del runs[index]
        else:
            assert runs[index]["id"] == operation["value"]
    assert [r["id"] for r in runs] == ["s5", "s6"]


def test_a_failed_run_lists_itself_as_dead_until_the_list_is_full() -> None:
    failed = _record("u.1", 1, RunState.FAILED).model_copy(update={"error": "HTTP 500"})
    body = record_body(failed, successful=3, failed=3, dead_listed=0)
    assert body["deadRuns"] == [
        {
            "id": "u.1",
            "scheduledAt": "2026-12-01T09:01:00Z",
            "failedAt": "2026-12-01T09:01:00Z",
            "attempts": 1,
            "error": "HTTP 500",
        }
    ]
    assert "deadRuns" not in record_body(failed, successful=3, failed=3)  # not dead-lettered
    full = record_body(failed, successful=3, failed=3, dead_listed=DEAD_RUNS_LISTED)
    assert "deadRuns" not in full
    assert full["lastRun"]["id"] == "u.1"  # the record itself is written all the same


def test_a_dead_run_stays_listed_through_trims_and_leaves_when_it_starts_again() -> None:
    dead = DeadRun(id="old", scheduled_at=T0, failed_at=T0, attempts=3)
    status = ScheduledJobStatus(runs=[_record("old", 1, RunState.FAILED)], dead_runs=[dead])
    metadata = {"managedFields": [_managed(run_manager("old"), "runs", "deadRuns")]}
    trimmed = withdrawal_body(metadata, status, "old")
    assert trimmed == {"deadRuns": [dead.to_wire()]}  # the history trim keeps it listed
    assert withdrawal_body(metadata, status, "old", keep_dead=False) is None  # requeued, purged
    # A trim removes records only (see trim_patch): the entry in deadRuns stays.
    written = {"metadata": {"uid": "u"}, "status": status.to_wire()}
    assert all(
        op["path"].startswith(("/status/runs/", "/metadata/uid"))
        for op in trim_patch(written, ["old"])
    )


@pytest.mark.parametrize(
    ("verb", "value", "token", "run_id"),
    [
        ("requeue", "t1", "t1", None),
        ("purge", "t2:u.20261201T090000Z", "t2", "u.20261201T090000Z"),
        ("requeue", " t3 : u.1 ", "t3", "u.1"),
    ],
)
def test_requeue_and_purge_annotations_name_a_token_and_maybe_one_run(
    verb: str, value: str, token: str, run_id: str | None
) -> None:
    assert dead_letter_request(verb, value) == DeadLetterRequest(verb, token, run_id)


@pytest.mark.parametrize("value", [None, "", "  ", ":u.1"])
def test_a_blank_token_asks_for_nothing(value: str | None) -> None:
    assert dead_letter_request("requeue", value) is None


def _placed(run_id: str, minute: int, outcome: RunState, slot: str | None) -> RunRecord:
    at = dt.datetime(2026, 12, 1, 9, minute, tzinfo=dt.UTC)
    return RunRecord(id=run_id, scheduled_at=at, outcome=outcome, slot=slot)


def test_a_record_takes_the_first_free_place_of_its_kind_then_the_oldest() -> None:
    ok, bad = RunState.SUCCEEDED, RunState.SKIPPED

    def place(history: list[RunRecord], outcome: RunState) -> str | None:
        return writes.history_slot(history, outcome, successful=3, failed=2)

    assert place([], ok) == "s0"
    assert place([], bad) == "f0"
    two = [_placed("a", 1, ok, "s0"), _placed("b", 2, ok, "s2")]
    assert place(two, ok) == "s1"  # the first free place
    full = [_placed("c", 3, ok, "s1"), *two, _placed("x", 0, bad, "f0")]
    assert place(full, ok) == "s0"  # the oldest success's place (a, 09:01)
    assert place(full, bad) == "f1"
    # A record of an older version (no place) or past a lowered limit holds none.
    legacy = [*full, _placed("old", 0, ok, None), _placed("far", 0, ok, "s7")]
    assert place(legacy, ok) == "s0"
    assert writes.history_slot(full, ok, successful=0, failed=2) is None
    assert writes.history_manager("s1") == "tickwork-runs-s1"


def _written(*records: RunRecord) -> dict[str, object]:
    runs = [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in records]
    return {"metadata": {"uid": "u"}, "status": {"runs": runs}}


def _ok(run_id: str, minute: int, slot: str | None = None) -> RunRecord:
    return _record(run_id, minute).model_copy(update={"slot": slot})


def _bad(run_id: str, minute: int) -> RunRecord:
    return _record(run_id, minute, RunState.FAILED)


# history as written (the new record last), placed -> the records the patch removes
TRIM_TABLE = [
    ([_ok("a", 0, "s0"), _ok("b", 1, "s1")], True, []),  # within the limits (2 + 2)
    ([_ok("old", 0), _ok("a", 1, "s0"), _ok("b", 2, "s1")], True, ["old"]),  # at once
    ([_ok("old", 0), _ok("a", 1), _ok("b", 2)], False, []),  # 1 over: waits for a batch
    ([_bad(f"f{i}", i) for i in range(6)], False, ["f0", "f1", "f2", "f3"]),  # a batch of 4
    ([_bad(f"f{i}", i) for i in range(5)], False, []),  # 3 over: not yet
    ([_bad("f0", 0), _bad("f1", 1), _bad("f2", 2), _ok("a", 3, "s0")], True, ["f0"]),
]


@pytest.mark.parametrize(("history", "placed", "removed"), TRIM_TABLE)
def test_the_trim_plan(history: list[RunRecord], placed: bool, removed: list[str]) -> None:
    patch = writes.trim_plan(_written(*history), history[-1], successful=2, failed=2, placed=placed)
    removals = [op["path"] for op in patch if op["op"] == "remove"]
    ids = [r.id for r in history]
    assert removals == [f"/status/runs/{ids.index(run_id)}" for run_id in reversed(removed)]
    assert (patch[0] if patch else None) == (
        {"op": "test", "path": "/metadata/uid", "value": "u"} if removed else None
    )


def test_a_history_this_version_cannot_read_is_left_as_it_is() -> None:
    written = {"metadata": {"uid": "u"}, "status": {"runs": [{"id": "x"}]}}  # no outcome
    assert writes.trim_plan(written, _ok("a", 0), successful=0, failed=0, placed=True) == []


def _histories() -> list[tuple[list[RunRecord], RunRecord]]:
    """Every history of up to 4 records of two kinds, each with a new record of either
    kind, in it (as written) or not (a record the history does not keep)."""
    pool = [_ok(f"s{i}", i) if i % 2 else _bad(f"f{i}", i) for i in range(8)]
    found = []
    for size in range(5):
        for history in itertools.combinations(pool[: size + 2], size):
            for new in (_ok("n", 9), _bad("n", 9)):
                found += [(list(history), new), ([*history, new], new)]
    return found


@pytest.mark.parametrize(("successful", "failed"), [(0, 0), (1, 0), (0, 2), (2, 1), (3, 3)])
def test_a_history_within_its_limits_is_read_without_validating_it(
    successful: int, failed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for history, new in _histories():
        runs = _written(*history)["status"]["runs"]  # type: ignore[index]
        within = writes.within_limits(runs, new, successful=successful, failed=failed)
        drop = writes.to_drop(history, new, successful=successful, failed=failed)
        kept = sum(r.outcome is new.outcome for r in [*history, new] if r.id != new.id) + 1
        limit = successful if new.outcome is RunState.SUCCEEDED else failed
        # Within: nothing to drop. Not within: something to drop, or the new record
        # itself is past its kind's limit (it never drops itself).
        assert within == (not drop and kept <= limit), (history, new)

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("validated")

    monkeypatch.setattr(ScheduledJobStatus, "model_validate", refused)
    short = _written(_ok("a", 0, "s0"))
    assert writes.trim_plan(short, _ok("b", 1), successful=2, failed=2, placed=True) == []
    with pytest.raises(AssertionError, match="validated"):
        writes.trim_plan(short, _ok("b", 1), successful=0, failed=2, placed=True)
