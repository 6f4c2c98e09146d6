"""Runs after other jobs' runs (``spec.after``, issue 50 item 3): the schedule their
runs make (tickwork.core.after), and the operator planning from it as upstream runs
end, refusing cycles, and handing the upstream run ID to the run it starts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.unit.test_operator_decisions import T0, Leader, messages
from tickwork.core.after import AfterSchedule, Finish, find_cycle, whole_second
from tickwork.core.runs import scheduled_run_id

pytestmark = pytest.mark.unit

EXTRACT, LOAD, REPORT = (
    "0b1c2d3e-aaaa-4bbb-8ccc-000000000001",
    "0b1c2d3e-aaaa-4bbb-8ccc-000000000002",
    "0b1c2d3e-aaaa-4bbb-8ccc-000000000003",
)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def ended(job: str, seconds: float) -> Finish:
    return Finish(job=job, run_id=f"{job}-run-{seconds}", at=at(seconds))


# -- the schedule -----------------------------------------------------------------------


def test_all_is_due_when_the_last_upstream_ended_each_after_the_last_run() -> None:
    both = AfterSchedule(
        jobs=("extract", "load"),
        finishes=(ended("extract", 10), ended("load", 40)),
    )
    assert both.next_run_after(at(0)) == at(40)
    assert both.trigger(at(0)) == ended("load", 40)  # the last to end starts the run
    assert both.next_run_after(at(40)) is None  # each upstream run counts once
    assert both.next_run_after(at(20)) is None  # extract ended before the last run
    assert both.last_run_at_or_before(at(39)) is None
    assert both.last_run_at_or_before(at(40)) == at(40)
    assert (both.count_runs_between(at(0), at(40)), both.count_runs_between(at(40), at(99))) == (
        1,
        0,
    )
    one = AfterSchedule(jobs=("extract", "load"), finishes=(ended("extract", 10),))
    assert one.next_run_after(at(0)) is None


def test_all_counts_only_runs_that_ended_within_the_timeout_of_one_another() -> None:
    apart = AfterSchedule(
        jobs=("extract", "load"),
        finishes=(ended("extract", 0), ended("load", 3601)),
        timeout=dt.timedelta(hours=1),
    )
    assert apart.next_run_after(at(-1)) is None
    progress = apart.progress(at(-1), now=at(3601))
    assert progress.waiting_for == ("extract",)  # ended too long ago: it must end again
    assert [f.job for f in progress.counted] == ["load"]
    assert progress.since == at(3601)
    close = AfterSchedule(
        jobs=("extract", "load"),
        finishes=(ended("extract", 1), ended("load", 3601)),
        timeout=dt.timedelta(hours=1),
    )
    assert close.next_run_after(at(-1)) == at(3601)
    assert close.progress(at(-1), now=at(3601)).waiting_for == ()


def test_any_is_due_at_each_upstream_run_that_ended_after_the_last_run() -> None:
    either = AfterSchedule(
        jobs=("extract", "load"),
        finishes=(ended("extract", 10), ended("load", 40)),
        require_all=False,
    )
    assert either.next_run_after(at(0)) == at(10)
    assert either.next_run_after(at(10)) == at(40)
    assert either.next_run_after(at(40)) is None
    assert either.count_runs_between(at(0), at(99)) == 2
    assert either.last_run_at_or_before(at(30)) == at(10)
    nothing = AfterSchedule(jobs=("extract",), finishes=(), require_all=False)
    assert nothing.progress(at(0), now=at(5)).waiting_for == ("extract",)


def test_an_end_is_an_instant_of_whole_seconds_rounded_up() -> None:
    assert whole_second(at(1.2)) == at(2)
    assert whole_second(at(3)) == at(3)


@pytest.mark.parametrize(
    ("edges", "start", "cycle"),
    [
        ({"a": ("b",), "b": ("a",)}, "a", ["a", "b", "a"]),
        ({"a": ("a",)}, "a", ["a", "a"]),
        ({"a": ("b", "c"), "c": ("d",), "d": ("a",)}, "a", ["a", "c", "d", "a"]),
        ({"a": ("b",), "b": ("c",)}, "a", None),
        ({"a": ("b",), "b": ("c",), "c": ("b",)}, "a", None),  # a cycle a is not on
    ],
)
def test_a_cycle_is_found_through_the_job_it_passes(
    edges: dict[str, tuple[str, ...]], start: str, cycle: list[str] | None
) -> None:
    assert find_cycle(start, edges) == cycle


# -- the operator -----------------------------------------------------------------------


def upstream_status(uid: str, seconds: float, outcome: str = "Succeeded") -> dict[str, Any]:
    run_id = scheduled_run_id(uid, at(seconds - 5))
    return {
        "lastRun": {
            "id": run_id,
            "scheduledAt": at(seconds - 5).isoformat(),
            "outcome": outcome,
            "attempts": 1,
            "finishedAt": at(seconds).isoformat(),
        }
    }


ONE_SHOT = {"runAt": at(-60).isoformat()}


def after(*jobs: str, **more: Any) -> dict[str, Any]:
    return {"after": {"jobs": [{"job": j} for j in jobs], **more}}


@pytest.mark.asyncio
async def test_a_job_runs_after_its_upstream_succeeded_with_the_upstream_run_as_parameter() -> None:
    leader = Leader(at(-120))
    leader.observe(ONE_SHOT, name="extract", uid=EXTRACT)
    leader.observe(after("extract"), name="report", uid=REPORT)
    report = leader.state.jobs[("ns", "report")]
    assert report.pending is None
    assert report.wanted.after is not None
    assert report.wanted.after.waiting_for == ["extract"]
    # extract's run ends: report is planned again, due at that instant.
    leader.observe(ONE_SHOT, name="extract", uid=EXTRACT, status=upstream_status(EXTRACT, 10.3))
    report = leader.state.jobs[("ns", "report")]
    assert report.pending is not None
    assert report.pending.scheduled_at == at(11)
    await leader.tick_at(at(11.5))
    [message] = [m for m in await messages(leader) if m.name == "report"]
    assert message.run_id == scheduled_run_id(REPORT, at(11))
    assert message.params == {
        "upstreamRun": scheduled_run_id(EXTRACT, at(5.3)),
        "upstreamJob": "extract",
    }
    report = leader.state.jobs[("ns", "report")]
    assert report.wanted.queued_run is not None
    assert report.wanted.queued_run.params == message.params
    assert report.pending is None  # the upstream run counted once
    await leader.tick_at(at(30))
    assert [m for m in await messages(leader) if m.name == "report"] == [message]  # no other


@pytest.mark.asyncio
async def test_all_waits_for_every_upstream_and_shows_since_when() -> None:
    leader = Leader(at(-120))
    leader.observe(ONE_SHOT, name="extract", uid=EXTRACT)
    leader.observe(ONE_SHOT, name="load", uid=LOAD)
    leader.observe(after("extract", "load"), name="report", uid=REPORT)
    leader.observe(ONE_SHOT, name="extract", uid=EXTRACT, status=upstream_status(EXTRACT, 10))
    leader.t = at(12).timestamp()
    report = leader.state.jobs[("ns", "report")]
    assert report.pending is None
    assert report.wanted.after is not None
    assert report.wanted.after.waiting_for == ["load"]
    assert report.wanted.after.since == at(10)
    assert [r.job for r in report.wanted.after.counted] == ["extract"]
    leader.observe(ONE_SHOT, name="load", uid=LOAD, status=upstream_status(LOAD, 20))
    report = leader.state.jobs[("ns", "report")]
    assert report.pending is not None
    assert report.pending.scheduled_at == at(20)
    assert report.wanted.after is not None
    assert report.wanted.after.waiting_for == []
    await leader.tick_at(at(21))
    [message] = [m for m in await messages(leader) if m.name == "report"]
    assert message.params == {"upstreamRun": scheduled_run_id(LOAD, at(15)), "upstreamJob": "load"}


@pytest.mark.asyncio
async def test_a_run_that_ended_otherwise_than_asked_starts_nothing() -> None:
    leader = Leader(at(-120))
    leader.observe(after("extract"), name="report", uid=REPORT)
    leader.observe(
        ONE_SHOT, name="extract", uid=EXTRACT, status=upstream_status(EXTRACT, 10, "Failed")
    )
    assert leader.state.jobs[("ns", "report")].pending is None
    failed = {"after": {"jobs": [{"job": "extract", "outcome": "Failed"}]}}
    leader.t = at(20).timestamp()
    leader.observe(failed, name="report", uid=REPORT, generation=2)
    # An edit counts no run that ended before it.
    assert leader.state.jobs[("ns", "report")].pending is None


@pytest.mark.asyncio
async def test_runs_that_ended_before_the_job_was_created_start_nothing() -> None:
    leader = Leader(at(-120))
    leader.observe(ONE_SHOT, name="extract", uid=EXTRACT, status=upstream_status(EXTRACT, -100))
    leader.observe(after("extract"), name="report", uid=REPORT)  # created at T0
    assert leader.state.jobs[("ns", "report")].pending is None


@pytest.mark.asyncio
async def test_jobs_that_run_after_one_another_in_a_cycle_are_invalid_until_it_breaks() -> None:
    leader = Leader(at(-120))
    leader.observe(after("b"), name="a", uid=EXTRACT)
    assert leader.state.jobs[("ns", "a")].spec is not None
    leader.observe(after("a"), name="b", uid=LOAD)
    for name in ("a", "b"):
        entry = leader.state.jobs[("ns", name)]
        assert entry.spec is None
        assert entry.invalid_reason is not None
        assert "in a cycle" in entry.invalid_reason
    assert "a -> b -> a" in (leader.state.jobs[("ns", "a")].invalid_reason or "")
    leader.observe(ONE_SHOT, name="b", uid=LOAD, generation=2)  # b runs after none now
    assert leader.state.jobs[("ns", "a")].spec is not None
    leader.state.forget("ns", "b", now=at(1))
    assert leader.state.jobs[("ns", "a")].wanted.after is not None


@pytest.mark.asyncio
async def test_another_namespaces_job_of_the_same_name_counts_for_nothing() -> None:
    leader = Leader(at(-120))
    leader.observe(after("extract"), name="report", uid=REPORT)
    body = {
        "metadata": {
            "namespace": "other",
            "name": "extract",
            "uid": EXTRACT,
            "generation": 1,
            "creationTimestamp": T0.isoformat(),
        },
        "spec": {"task": {"http": {"url": "https://example.com/"}}, **ONE_SHOT},
        "status": upstream_status(EXTRACT, 10),
    }
    leader.state.observe(body, now=at(11))
    assert leader.state.jobs[("ns", "report")].pending is None
