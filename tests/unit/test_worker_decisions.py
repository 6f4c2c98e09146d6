"""The worker's decisions, without a server: may a claimed run start (every skip
reason), how a failed attempt ends under the retry policy (growth, cap, jitter,
giving up), and the run's moves through the state machine."""

from __future__ import annotations

import datetime as dt
import statistics
from typing import Any

import pytest

from tickwork.api.models import ScheduledJob
from tickwork.core.errors import IllegalTransitionError
from tickwork.core.runs import backfill_run_id, manual_run_id, scheduled_run_id
from tickwork.core.states import RunState
from tickwork.queue.messages import RunMessage
from tickwork_worker.decisions import (
    RunProgress,
    SkipReason,
    attempts_exhausted,
    cancel_request,
    cancelled_outcome,
    failure_outcome,
    next_runs_shown,
    waiting_run,
    why_skip,
)

pytestmark = pytest.mark.unit

UID = "7c8e4d0a-1111-4222-8333-444455556666"
OTHER_UID = "0b1c2d3e-aaaa-4bbb-8ccc-ddddeeeeffff"
AT = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
LATER = AT + dt.timedelta(minutes=1)


def job(*, status: dict[str, Any] | None = None, uid: str = UID, **spec: Any) -> ScheduledJob:
    body: dict[str, Any] = {
        "metadata": {"name": "j", "namespace": "ns", "uid": uid, "generation": 1},
        "spec": {
            "schedule": "* * * * *",
            "task": {"http": {"url": "https://example.com/"}},
            **spec,
        },
        "status": status or {},
    }
    return ScheduledJob.model_validate(body)


def message(*, at: dt.datetime | None = AT, attempt: int = 1, **fields: Any) -> RunMessage:
    run_id = scheduled_run_id(UID, at) if at is not None else manual_run_id(UID, "tok")
    fields.setdefault("run_id", run_id)
    return RunMessage(
        namespace="ns",
        name="j",
        uid=UID,
        attempt=attempt,
        scheduled_at=at.isoformat() if at else None,
        **fields,
    )


def record(run_id: str, outcome: str) -> dict[str, Any]:
    return {"id": run_id, "scheduledAt": AT.isoformat(), "outcome": outcome}


# -- may it start --------------------------------------------------------------------


def test_a_run_of_the_job_as_it_is_may_start() -> None:
    assert why_skip(job(), message()) is None


def test_a_run_of_a_deleted_or_replaced_or_deleting_job_is_skipped() -> None:
    assert why_skip(None, message()) is SkipReason.GONE
    assert why_skip(job(uid=OTHER_UID), message()) is SkipReason.REPLACED
    deleting = job()
    deleting.metadata["deletionTimestamp"] = AT.isoformat()
    assert why_skip(deleting, message()) is SkipReason.DELETING


def test_a_run_id_of_another_object_never_executes() -> None:
    forged = message(run_id=scheduled_run_id(OTHER_UID, AT))
    assert why_skip(job(), forged) is SkipReason.FOREIGN


def test_a_suspended_job_skips_its_runs_and_says_so_in_status() -> None:
    reason = why_skip(job(suspend=True), message())
    assert reason is SkipReason.SUSPENDED
    assert reason.state is RunState.SKIPPED
    assert "suspended" in reason.text
    # A redelivered run that already ended keeps its record: no Skipped over it.
    done = job(suspend=True, status={"lastRun": record(message().run_id, "Succeeded")})
    assert why_skip(done, message()) is SkipReason.ALREADY_FINISHED


def test_a_run_of_a_paused_job_is_skipped_and_says_why() -> None:
    paused = job(status={"phase": "Paused"}, failurePolicy={"pauseAfter": 2})
    reason = why_skip(paused, message())
    assert reason is SkipReason.PAUSED
    assert reason.state is RunState.SKIPPED
    assert "paused after consecutive failed runs" in reason.text
    assert why_skip(job(status={"phase": "Scheduled"}), message()) is None
    # A run that already ended is left as it is: nothing is written over its record.
    done = job(status={"phase": "Paused", "lastRun": record(message().run_id, "Failed")})
    assert why_skip(done, message()) is SkipReason.ALREADY_FINISHED


@pytest.mark.parametrize("outcome", ["Succeeded", "Failed", "Cancelled", "Skipped"])
def test_a_run_that_already_ended_is_not_executed_again(outcome: str) -> None:
    run_id = message().run_id
    in_last = job(status={"lastRun": record(run_id, outcome)})
    in_history = job(status={"runs": [record(run_id, outcome)]})
    assert why_skip(in_last, message()) is SkipReason.ALREADY_FINISHED
    assert why_skip(in_history, message()) is SkipReason.ALREADY_FINISHED
    # Nothing is written for it: its record is already there.
    assert SkipReason.ALREADY_FINISHED.state is None


def test_another_runs_record_or_a_run_still_going_does_not_stop_it() -> None:
    other = scheduled_run_id(UID, LATER)
    assert why_skip(job(status={"lastRun": record(other, "Succeeded")}), message()) is None
    running = {
        "id": message().run_id,
        "scheduledAt": AT.isoformat(),
        "state": "Running",
        "attempt": 1,
    }
    assert why_skip(job(status={"currentRun": running}), message(attempt=2)) is None


def test_a_dead_letter_requeued_by_hand_runs_again_but_a_success_does_not() -> None:
    run_id = message().run_id
    failed = job(status={"lastRun": record(run_id, "Failed")})
    succeeded = job(status={"lastRun": record(run_id, "Succeeded")})
    assert why_skip(failed, message(requeued=True)) is None
    assert why_skip(succeeded, message(requeued=True)) is SkipReason.ALREADY_FINISHED


def queued(at: dt.datetime) -> dict[str, Any]:
    return {
        "queuedRun": {
            "id": scheduled_run_id(UID, at),
            "scheduledAt": at.isoformat(),
            "queuedAt": at.isoformat(),
        }
    }


def cancelling(run_at: dt.datetime, *, terminate: bool = False) -> dict[str, Any]:
    return {
        "cancelRequests": [
            {
                "id": scheduled_run_id(UID, run_at),
                "terminate": terminate,
                "requestedAt": LATER.isoformat(),
                "reason": "cancelled: why",
            }
        ]
    }


def test_a_run_named_in_cancel_requests_is_recorded_cancelled_and_never_starts() -> None:
    reason = why_skip(job(status=cancelling(AT)), message())
    assert reason is SkipReason.CANCELLED
    assert reason.state is RunState.CANCELLED
    # Whatever the policy (the operator decides whom to cancel), suspended or not.
    assert why_skip(job(status=cancelling(AT), suspend=True), message()) is SkipReason.CANCELLED
    # Another run's request, or none: it runs.
    assert why_skip(job(status=cancelling(LATER)), message()) is None
    assert why_skip(job(concurrencyPolicy="Replace", status=queued(LATER)), message()) is None
    # A run that already finished keeps its record.
    done = job(status={**cancelling(AT), "lastRun": record(scheduled_run_id(UID, AT), "Succeeded")})
    assert why_skip(done, message()) is SkipReason.ALREADY_FINISHED


def test_a_cancelled_outcome_says_why_and_is_not_retried() -> None:
    request = cancel_request(job(status=cancelling(AT, terminate=True)), scheduled_run_id(UID, AT))
    assert request is not None
    assert request.terminate
    outcome = cancelled_outcome(request)
    assert outcome.state is RunState.CANCELLED
    assert outcome.error == "cancelled: why"
    assert outcome.retry_delay is None
    assert cancel_request(job(), scheduled_run_id(UID, AT)) is None


def test_skip_reasons_are_the_metric_labels_the_docs_name() -> None:
    assert {r.value for r in SkipReason} == {
        "gone",
        "replaced",
        "deleting",
        "foreign",
        "suspended",
        "paused",
        "already-finished",
        "cancelled",
    }


# -- how a failed attempt ends -------------------------------------------------------

RUNS = [message(at=AT + dt.timedelta(minutes=n)) for n in range(400)]


def delays(attempt: int, *, backoff: int, cap: int) -> list[float]:
    spec = job(retry={"maxAttempts": 10, "backoffSeconds": backoff, "maxBackoffSeconds": cap})
    out = []
    for m in RUNS:
        m2 = RunMessage(**{**m.__dict__, "attempt": attempt})
        outcome = failure_outcome(spec, m2, "boom", permanent=False)
        assert outcome.state is RunState.RETRYING
        assert outcome.next_attempt == attempt + 1
        assert outcome.retry_delay is not None
        out.append(outcome.retry_delay)
    return out


def test_the_delay_grows_per_attempt_until_the_cap_with_jitter() -> None:
    # Backoff 1 s capped at 2 s: a constant delay cannot pass this.
    first, second, third = (delays(n, backoff=1, cap=2) for n in (1, 2, 3))
    assert all(0.5 <= d <= 1 for d in first)
    assert all(1 <= d <= 2 for d in second)
    assert all(1 <= d <= 2 for d in third)  # capped
    assert statistics.mean(second) == pytest.approx(2 * statistics.mean(first), rel=0.05)
    # Jitter: runs that failed together do not come back together.
    assert len({round(d, 3) for d in second}) > 300
    assert statistics.mean(third) == pytest.approx(statistics.mean(second), rel=0.05)


def test_the_same_failure_decided_twice_gives_the_same_delay() -> None:
    assert delays(3, backoff=5, cap=300) == delays(3, backoff=5, cap=300)


def test_a_permanent_failure_or_the_last_attempt_fails_the_run_saying_why() -> None:
    spec = job(retry={"maxAttempts": 3})
    permanent = failure_outcome(spec, message(), "HTTP 404", permanent=True, detail="<html>")
    assert permanent.state is RunState.FAILED
    assert permanent.error is not None
    assert "permanent" in permanent.error
    assert "<html>" in permanent.error  # the detail goes to status ...
    assert permanent.told == "HTTP 404 (the failure is permanent; retrying cannot help)"
    last = failure_outcome(spec, message(attempt=3), "HTTP 503", permanent=False)
    assert last.state is RunState.FAILED
    assert last.error == "HTTP 503 (all 3 attempts failed)"
    assert failure_outcome(spec, message(attempt=2), "x", permanent=False).state is (
        RunState.RETRYING
    )


def test_a_delivery_after_the_last_attempt_fails_without_running() -> None:
    spec = job(retry={"maxAttempts": 2})
    assert attempts_exhausted(spec, message(attempt=2)) is None
    outcome = attempts_exhausted(spec, message(attempt=3))
    assert outcome is not None
    assert outcome.state is RunState.FAILED
    assert "attempt 2 of 2 was cut short" in (outcome.error or "")


# -- the state machine, as the runner moves a run -------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        [RunState.RUNNING, RunState.SUCCEEDED],
        [RunState.RUNNING, RunState.RETRYING],
        [RunState.RUNNING, RunState.FAILED],
        [RunState.RUNNING, RunState.CANCELLED],
        [RunState.SKIPPED],
        [RunState.CANCELLED],
    ],
)
def test_every_path_the_runner_takes_is_in_the_table(path: list[RunState]) -> None:
    progress = RunProgress()
    for state in path:
        assert progress.move(state) is state


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([], RunState.SUCCEEDED),  # an outcome without having run
        ([RunState.SKIPPED], RunState.RUNNING),  # a skipped run starts after all
        ([RunState.RUNNING, RunState.SUCCEEDED], RunState.FAILED),  # a second outcome
        ([RunState.RUNNING, RunState.CANCELLED], RunState.SUCCEEDED),
    ],
)
def test_an_illegal_move_is_refused_and_the_state_stays(
    path: list[RunState], illegal: RunState
) -> None:
    progress = RunProgress()
    for state in path:
        progress.move(state)
    before = progress.state
    with pytest.raises(IllegalTransitionError, match=illegal.value):
        progress.move(illegal)
    assert progress.state is before


# -- what the run's one write shows next ------------------------------------------------


def _minutes(*offsets: int) -> list[dt.datetime]:
    return [AT + dt.timedelta(minutes=m) for m in offsets]


@pytest.mark.parametrize(
    ("spec", "status", "shown"),
    [
        ({}, {}, _minutes(1, 2, 3, 4, 5)),  # the runs after this one, not after now
        ({"schedule": "*/2 * * * *"}, {}, _minutes(2, 4, 6, 8, 10)),
        (
            {"schedule": "@every 90s"},
            {},
            [AT + dt.timedelta(seconds=s) for s in (90, 180, 270, 360, 450)],
        ),
        ({"notAfter": "2026-12-01T09:02:30Z"}, {}, _minutes(1, 2)),  # the schedule ends
        ({"suspend": True}, {}, []),
        ({}, {"phase": "Paused"}, []),
        ({}, {"phase": "Completed"}, []),
        ({"runAt": "2026-12-01T09:00:00Z", "schedule": None}, {}, []),  # one-shot: the operator's
        ({"after": {"jobs": [{"job": "extract"}]}, "schedule": None}, {"nextRunAt": LATER}, []),
    ],
    ids=[
        "every-minute",
        "every-2-minutes",
        "every-90s",
        "not-after",
        "suspended",
        "paused",
        "completed",
        "one-shot",
        "after-other-jobs",
    ],
)
def test_a_run_shows_the_runs_of_its_schedule_that_follow_it(
    spec: dict[str, Any], status: dict[str, Any], shown: list[dt.datetime]
) -> None:
    claimed = job(status=status, **spec)
    claimed.metadata["creationTimestamp"] = "2026-12-01T08:00:00Z"
    assert next_runs_shown(claimed, message()) == shown


def test_a_manual_or_backfilled_run_shows_what_the_job_showed() -> None:
    showing = {
        "nextRunAt": "2026-12-01T09:07:00Z",
        "nextRuns": ["2026-12-01T09:07:00Z", "2026-12-01T09:08:00Z"],
    }
    claimed = job(status=showing)
    assert next_runs_shown(claimed, message(at=None)) == _minutes(7, 8)
    backfilled = message(run_id=backfill_run_id(UID, "q4", AT))
    assert next_runs_shown(claimed, backfilled) == _minutes(7, 8)
    assert next_runs_shown(job(), message(at=None)) == []  # nothing shown: nothing to keep


# -- waiting for a concurrency key ----------------------------------------------------


def test_a_run_waiting_for_its_key_names_the_key_as_the_job_does() -> None:
    waiting = waiting_run(
        message(attempt=2, concurrency_key="ns/nightly-db", concurrency_limit=1, enqueued_at=1.5),
        LATER,
    )
    assert (waiting.state, waiting.waiting_for, waiting.attempt) == (
        RunState.WAITING,
        "nightly-db",
        2,
    )
    assert (waiting.scheduled_at, waiting.started_at, waiting.worker) == (AT, None, None)
    assert waiting.queued_at == dt.datetime.fromtimestamp(1.5, dt.UTC)
    manual = waiting_run(message(at=None, concurrency_key="ns/db"), LATER)
    assert (manual.manual, manual.scheduled_at) == (True, LATER)
