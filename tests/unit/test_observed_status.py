"""The operator keeps a compact record of a job's status (``Observed``): its own share,
held once with what it wrote; active runs and the last run whole; and of the history
and the dead letters only which runs they are, how they ended and when. Everything
it decides from the history (runs done, failures in a row) comes out the same."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from tickwork.core.buckets import BucketIndex
from tickwork.core.failures import FinishedRun
from tickwork.core.runs import scheduled_run_id
from tickwork.core.states import JobPhase, RunState
from tickwork_operator.entry import LastRun
from tickwork_operator.state import WatchState

pytestmark = pytest.mark.unit
UID = "7c8e4d0a-1111-4222-8333-444455556666"
OTHER = "0d0e0f10-aaaa-4bbb-8ccc-dddddddddddd"
T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def at(minute: int) -> str:
    return (T0 + dt.timedelta(minutes=minute)).isoformat()


def record(minute: int, outcome: str, *, uid: str = UID, ended: bool = True) -> dict[str, Any]:
    run = {
        "id": scheduled_run_id(uid, T0 + dt.timedelta(minutes=minute)),
        "scheduledAt": at(minute),
        "startedAt": at(minute),
        "outcome": outcome,
        "result": "x" * 500,
        "params": {"region": "eu"},
    }
    if ended:
        run["finishedAt"] = at(minute).replace(":00+", ":30+")
    return run


def body(status: dict[str, Any], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team-a",
            "name": "nightly",
            "uid": UID,
            "generation": 1,
            "creationTimestamp": "2026-11-01T00:00:00Z",
        },
        "spec": {"schedule": "* * * * *", "task": {"echo": {"message": "hi"}}, **(spec or {})},
        "status": status,
    }


def test_the_history_is_kept_as_run_ids_outcomes_and_end_times_only() -> None:
    history = [
        record(1, "Succeeded"),
        record(2, "Failed", ended=False),
        record(3, "Succeeded", uid=OTHER),
        record(4, "Failed"),
    ]
    status = {
        "observedGeneration": 1,
        "phase": "Scheduled",
        "runs": history,
        "lastRun": {**record(4, "Failed"), "error": "boom"},
        "deadRuns": [{"id": history[1]["id"], "scheduledAt": at(2), "failedAt": at(2)}],
        "activeRuns": [
            {
                "id": scheduled_run_id(UID, T0 + dt.timedelta(minutes=5)),
                "scheduledAt": at(5),
                "state": "Running",
                "attempt": 1,
            }
        ],
    }
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1))
    entry = state.observe(body(status), now=T0 + dt.timedelta(minutes=5, seconds=10))
    kept = entry.observed
    assert all(type(run) is FinishedRun for run in kept.runs)  # no run models per record
    assert [r.run_id for r in kept.runs] == [r["id"] for r in history]
    ended = [r.finished_at for r in kept.runs]
    assert ended[1] == T0 + dt.timedelta(minutes=2)  # no finishedAt: when it started
    assert ended[0] == T0 + dt.timedelta(minutes=1, seconds=30)
    assert [r.outcome for r in kept.runs][:2] == [RunState.SUCCEEDED, RunState.FAILED]
    # The last run: the very record of the history, its error (the Ready condition
    # quotes it), nothing of its result.
    assert isinstance(kept.last_run, LastRun)
    assert kept.last_run.run is kept.runs[3]
    assert (kept.last_run.id, kept.last_run.outcome) == (history[3]["id"], RunState.FAILED)
    assert kept.last_run.error == "boom"
    assert kept.last_run.finished_at == T0 + dt.timedelta(minutes=4, seconds=30)
    assert kept.dead_run_ids == (history[1]["id"],)
    assert [a.id for a in kept.active_runs] == [status["activeRuns"][0]["id"]]
    assert kept.share is entry.written  # the operator's share is held once
    assert kept.phase is JobPhase.SCHEDULED
    assert kept.observed_generation == 1
    # What the operator decides from the history: the runs done (a foreign one too),
    # and the active run, which is this job's own.
    assert {r["id"] for r in history} <= entry.finished_run_ids()
    assert entry.active_run_id() == status["activeRuns"][0]["id"]
    # The last run first, then the history; the other job's run is not this job's.
    assert [r.run_id for r in entry.finished_runs()] == [
        history[3]["id"],
        history[0]["id"],
        history[1]["id"],
        history[3]["id"],
    ]


def test_a_last_run_apart_from_the_history_is_kept_on_its_own() -> None:
    """lastRun names a run the history does not hold (history off, or not yet written);
    without finishedAt it has no end of its own, which a one-shot's TTL needs."""
    status = {
        "observedGeneration": 1,
        "runs": [record(1, "Succeeded")],
        "lastRun": record(2, "Cancelled", ended=False),
    }
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1))
    last = state.observe(body(status), now=T0 + dt.timedelta(minutes=5)).observed.last_run
    assert last is not None
    assert last.id == status["lastRun"]["id"]
    assert last.outcome is RunState.CANCELLED
    assert last.finished_at is None
    assert last.run.finished_at == T0 + dt.timedelta(minutes=2)  # as near as it says
    assert last.error is None


def test_failures_in_a_row_pause_the_job_from_the_compact_history() -> None:
    spec = {"failurePolicy": {"pauseAfter": 3}}
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1))
    first = [record(1, "Succeeded")]
    status = {
        "observedGeneration": 1,
        "phase": "Scheduled",
        "runs": first,
        "lastRun": first[-1],
        "lastScheduleTime": at(1),
    }
    entry = state.observe(body(status, spec), now=T0 + dt.timedelta(minutes=1, seconds=40))
    assert entry.streak is not None
    assert entry.streak.count == 0  # counting starts from what had finished
    later = [*first, record(2, "Failed"), record(3, "Failed", ended=False), record(4, "Failed")]
    status = {**status, "runs": later, "lastRun": later[-1], "lastScheduleTime": at(4)}
    entry = state.observe(body(status, spec), now=T0 + dt.timedelta(minutes=4, seconds=40))
    assert entry.streak is not None
    assert entry.streak.count == 3
    assert entry.paused
    assert entry.wanted.phase is JobPhase.PAUSED


def test_a_mangled_share_of_status_does_not_hide_the_other() -> None:
    history = [record(1, "Failed")]
    history[0]["error"] = "e" * 5000  # over the record's limit: not the operator's to check
    history[0]["newerField"] = True  # a field of a newer version
    status = {
        "observedGeneration": 1,
        "phase": "Scheduled",
        "runs": history,
        "lastScheduleTime": at(1),
    }
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1))
    entry = state.observe(body(status), now=T0 + dt.timedelta(minutes=1, seconds=40))
    assert [r.run_id for r in entry.observed.runs] == [history[0]["id"]]
    assert entry.written.last_schedule_time == T0 + dt.timedelta(minutes=1)
    mangled = {**status, "phase": "Sleeping", "observedGeneration": "one"}
    entry = state.observe(body(mangled), now=T0 + dt.timedelta(minutes=1, seconds=50))
    assert entry.written.phase is None  # the operator's share is read as empty ...
    assert [r.run_id for r in entry.observed.runs] == [history[0]["id"]]  # ... not the runs'


def test_jobs_share_one_set_of_field_names_and_models_behave_as_before() -> None:
    """Every share the operator holds (observed, written, wanted) and the models in it
    share their set of explicitly set fields with equal ones of other jobs (728 bytes
    each, two per job); equality, dumps without unset fields and copies with changes
    behave as with sets of their own."""
    from tickwork.api.models import OperatorStatus  # noqa: PLC0415
    from tickwork.api.sharing import compact  # noqa: PLC0415
    from tickwork.kube.status import operator_body, updated  # noqa: PLC0415

    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1.0))
    shares = []
    for name in ("a", "b"):
        job = body({"phase": "Scheduled", "observedGeneration": 1, "nextRunAt": at(5)})
        job["metadata"]["name"] = name
        entry = state.observe(job, now=T0)
        shares += [entry.observed.share, entry.wanted]
    sets = {id(share.__pydantic_fields_set__) for share in shares}
    assert len(sets) == 1
    conditions = [c for share in shares for c in share.conditions]
    assert len({id(c.__pydantic_fields_set__) for c in conditions}) == 1
    # A copy with a change gets a set of its own; the shared one is left alone.
    first = shares[0]
    fresh = OperatorStatus.model_validate({"phase": "Scheduled"})
    before = set(fresh.model_fields_set)
    compact(fresh)
    changed = fresh.model_copy(update={"missed_runs": 3})
    assert "missed_runs" in changed.model_fields_set
    assert fresh.model_fields_set == before
    assert changed.__pydantic_fields_set__ is not fresh.__pydantic_fields_set__
    assert compact(OperatorStatus.model_validate({"phase": "Scheduled"})).model_dump(
        exclude_unset=True
    ) == {"phase": JobPhase.SCHEDULED}
    assert updated(first, missed_runs=2) == updated(shares[2], missed_runs=2)
    assert operator_body(first) == operator_body(shares[2])
    with pytest.raises(ValueError, match="frozen"):
        first.missed_runs = 4  # type: ignore[misc]


def test_jobs_read_from_json_share_their_instants_on_the_minute_and_condition_texts() -> None:
    """Two jobs listed from the API server (each its own JSON) hold one datetime per
    instant on the minute (nextRunAt, nextRuns) and one copy of each condition text;
    an instant off the minute (a transition time) stays each job's own, and every
    value reads back as it was written."""
    state = WatchState(
        index=BucketIndex(start=T0.timestamp(), width=1.0), schedule_in_status=True
    )  # the share holds the next runs
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "Scheduled",
        "message": "the schedule is valid and indexed",
        "lastTransitionTime": "2026-12-01T08:59:31.250000+00:00",
    }
    shares = []
    for name in ("a", "b"):
        # json.loads per job, as each comes in its own list page or watch event
        status = json.loads(
            json.dumps(
                {
                    "phase": "Scheduled",
                    "observedGeneration": 1,
                    "nextRunAt": at(5),
                    "nextRuns": [at(5), at(65)],
                    "conditions": [condition],
                }
            )
        )
        job = body(status)
        job["metadata"]["name"] = name
        shares.append(state.observe(job, now=T0).observed.share)
    a, b = shares
    assert a.next_run_at is b.next_run_at is a.next_runs[0]
    assert a.next_runs[1] is b.next_runs[1]
    assert a.next_runs == [T0 + dt.timedelta(minutes=5), T0 + dt.timedelta(minutes=65)]
    ready_a, ready_b = a.conditions[0], b.conditions[0]
    assert ready_a.message is ready_b.message
    assert ready_a.reason is ready_b.reason
    assert ready_a.last_transition_time is not ready_b.last_transition_time
    assert ready_a.last_transition_time.isoformat() == condition["lastTransitionTime"]
    assert a == b


def test_a_share_read_from_json_holds_its_values_in_dicts_keyed_by_shared_keys() -> None:
    """The operator's share of a typical job (phase, generation, the next runs, its
    Ready condition), read from the JSON of 300 jobs: held in instance dicts keyed by
    each model class's shared keys, with the lists of next runs and the empty lists
    shared, it takes 480 to 570 bytes a job (Python 3.11, by the hash seed); with lists
    of its own ~750, and with a dict of its own keys for the share and for the
    condition, as pydantic builds them, ~1,230. Equal models, equal dumps, still
    frozen."""
    from tickwork.api.models import OperatorStatus  # noqa: PLC0415
    from tickwork_operator.reading import status_of  # noqa: PLC0415

    status = {
        "phase": "Scheduled",
        "observedGeneration": 1,
        "nextRunAt": at(60),
        "nextRuns": [at(60 * hour) for hour in range(1, 6)],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Scheduled",
                "message": f"next run at {at(60)}",
                "lastTransitionTime": at(0),
                "observedGeneration": 1,
            }
        ],
    }
    # Measured in a fresh interpreter: in a test process, the tables that hold shared
    # instants and texts were filled by earlier tests, and one of them growing during
    # the measurement (a dict doubling its table) would count against these shares.
    measure = f"""
import json, tracemalloc
from tickwork_operator.reading import status_of
bodies = [json.loads(json.dumps({{"status": {status!r}}})) for _ in range(300)]
status_of(bodies[0])  # the shared instants and texts, and the class's keys, exist
tracemalloc.start()
shares = [status_of(job)[0] for job in bodies]
print(tracemalloc.get_traced_memory()[0] / len(shares))
"""
    # A fixed hash seed: the layout of the interned tables moves the figure by ~80 bytes.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, "-c", measure],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    assert float(done.stdout) < 600
    shares = [status_of(json.loads(json.dumps({"status": status})))[0] for _ in range(2)]
    plain = OperatorStatus.model_validate(status)
    assert shares[0] == shares[1]
    assert shares[0].model_dump() == plain.model_dump()
    assert shares[0].conditions[0] == plain.conditions[0]
    with pytest.raises(ValueError, match="frozen"):
        shares[0].conditions[0].reason = "Other"  # type: ignore[misc]


def test_jobs_on_one_schedule_share_their_lists_which_nothing_can_change() -> None:
    """The lists of a share (nextRuns, and the empty lists of the fields a job does
    not use) are one object for every job holding equal ones; such a list refuses
    every change (it would change every job's), and copies of it are plain lists."""
    import copy  # noqa: PLC0415

    from tickwork.api.models import OperatorStatus  # noqa: PLC0415
    from tickwork.api.sharing import SharedList  # noqa: PLC0415
    from tickwork_operator.reading import status_of  # noqa: PLC0415

    status = {
        "phase": "Scheduled",
        "nextRunAt": at(60),
        "nextRuns": [at(60 * hour) for hour in range(1, 6)],
    }
    a, b = (status_of(json.loads(json.dumps({"status": status})))[0] for _ in range(2))
    assert a.next_runs is b.next_runs
    assert a.buffered_runs is b.buffered_runs is a.backfills is a.cancel_requests
    assert type(a.next_runs) is SharedList
    assert a.next_runs == [T0 + dt.timedelta(minutes=60 * hour) for hour in range(1, 6)]
    for change in (
        lambda runs: runs.append(T0),
        lambda runs: runs.sort(),
        lambda runs: runs.__setitem__(0, T0),
        lambda runs: runs.clear(),
    ):
        with pytest.raises(TypeError, match="shared list"):
            change(a.next_runs)
    assert len(b.next_runs) == 5
    assert a.buffered_runs == []
    assert type(copy.deepcopy(a.next_runs)) is list
    assert type(a.model_copy(deep=True).next_runs) is list
    plain = OperatorStatus.model_validate(status)
    assert a.model_dump(mode="json") == plain.model_dump(mode="json")
    assert a == plain
    other = status_of(json.loads(json.dumps({"status": {**status, "nextRuns": [at(60)]}})))[0]
    assert other.next_runs is not a.next_runs


def test_a_watch_event_leaves_the_job_holding_the_strings_it_held() -> None:
    """Every event's body is parsed anew: the job keeps its own name, UID and creation
    time (its key and its pending run refer to them) rather than this event's equal
    copies, which would double them for as long as the job is watched."""
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1.0))
    first = state.observe(json.loads(json.dumps(body({}))), now=T0)
    later = state.observe(json.loads(json.dumps(body({"phase": "Scheduled"}))), now=T0)
    assert later is not first
    assert later.name is first.name
    assert later.uid is first.uid
    assert later.created_at is first.created_at
    (key,) = state.jobs
    assert key[1] is later.name
    assert later.pending is not None
    assert later.pending.uid is later.uid


def test_jobs_on_one_schedule_work_out_their_next_runs_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The five runs of status.nextRuns follow from the schedule and the next run
    alone: a job indexed after another on the same schedule, waiting for the same run,
    takes the runs the first worked out (the same tuple) and works out none of them;
    a job on another schedule works out its own."""
    from tickwork.core.schedule import CronSchedule  # noqa: PLC0415
    from tickwork_operator import entry as entries  # noqa: PLC0415

    monkeypatch.setattr(entries, "_UPCOMING", {})
    worked_out: list[dt.datetime] = []
    next_run_after = CronSchedule.next_run_after

    def counted(self: CronSchedule, moment: dt.datetime) -> dt.datetime | None:
        worked_out.append(moment)
        return next_run_after(self, moment)

    monkeypatch.setattr(CronSchedule, "next_run_after", counted)
    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1.0))

    def index(name: str, schedule: str) -> tuple[tuple[dt.datetime, ...], int]:
        job = body({}, {"schedule": schedule})
        job["metadata"]["name"] = name
        job["metadata"]["uid"] = f"{UID[:-2]}{len(state.jobs):02d}"
        before = len(worked_out)
        entry = state.observe(job, now=T0)
        assert state.shows(entry) == entry.upcoming_runs  # what status should show
        return entry.upcoming_runs, len(worked_out) - before

    first, by_first = index("a", "17 5 * * *")
    second, by_second = index("b", "17 5 * * *")
    other, by_other = index("c", "18 5 * * *")
    assert len(first) == len(other) == 5
    assert second is first
    assert by_second == by_first - 4  # its pending run only
    assert by_other == by_first
    assert other[0] == first[0] + dt.timedelta(minutes=1)


def test_the_share_a_watch_event_brings_back_unchanged_is_the_one_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Most events leave the operator's share as it was (the echo of its own write, a
    worker's write): the share read from it is the one the job holds, and is not
    compacted again; a share that changed is new. Jobs without status yet hold one
    pair of empty shares."""
    from tickwork.api.sharing import compact  # noqa: PLC0415
    from tickwork.kube.status import operator_body  # noqa: PLC0415
    from tickwork_operator import reading as entries  # noqa: PLC0415

    state = WatchState(index=BucketIndex(start=T0.timestamp(), width=1.0))
    new = state.observe(body({}), now=T0)
    other = body({})
    other["metadata"] |= {"name": "other", "uid": OTHER}
    assert state.observe(other, now=T0).observed.share is new.observed.share
    compacted: list[object] = []
    monkeypatch.setattr(entries, "compact", lambda model: compacted.append(model) or compact(model))
    held = (new.written, new.wanted)
    echo = json.loads(json.dumps({"status": operator_body(new.wanted)}))
    share, _ = entries.status_of(echo, previous=held)
    assert share is new.wanted
    assert [type(model).__name__ for model in compacted] == ["RunStatusOutline"]
    changed = json.loads(json.dumps({"status": {**echo["status"], "missedRuns": 2}}))
    share, _ = entries.status_of(changed, previous=held)
    assert share is not new.wanted
    assert share.missed_runs == 2
    assert [type(model).__name__ for model in compacted][1:] == [
        "OperatorStatus",
        "RunStatusOutline",
    ]


def test_the_read_outline_of_the_runs_share_is_the_written_model_itself() -> None:
    """The operator validates the workers' share with RunStatusOutline (no result,
    error or parameters). What workers write is that outline with whole records, as
    subclasses: a field of the outline is declared once, for both."""
    from tickwork.api.status import (  # noqa: PLC0415
        DeadRun,
        RunName,
        RunOutline,
        RunRecord,
        RunStatus,
        RunStatusOutline,
    )

    for outline, whole in {
        RunStatusOutline: RunStatus,
        RunOutline: RunRecord,
        RunName: DeadRun,
    }.items():
        assert issubclass(whole, outline)
        assert set(outline.model_fields) <= set(whole.model_fields)
    # The outline reads a record whole, mangled parts it does not read included.
    record = {
        "id": "u.1",
        "scheduledAt": "2026-12-01T09:00:00Z",
        "outcome": "Succeeded",
        "result": 7,
        "unknownOfANewerVersion": True,
    }
    read = RunStatusOutline.model_validate({"runs": [record], "deadRuns": [{"id": "u.0"}]})
    assert [type(run) for run in read.runs] == [RunOutline]
    assert [run.id for run in read.dead_runs] == ["u.0"]
    with pytest.raises(ValidationError):
        RunStatus.model_validate({"runs": [record]})
