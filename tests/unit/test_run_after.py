"""Runs after other jobs' runs (``spec.after``, issue 50 item 3): the schedule their
runs make (tickwork.core.after), and the operator planning from it as upstream runs
end, refusing cycles, and handing the upstream run ID to the run it starts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_operator_decisions import T0, Leader, messages
from tickwork.core.after import AfterSchedule, Finish, WindowedAfter, find_cycle, whole_second
from tickwork.core.runs import scheduled_run_id
from tickwork.core.schedule import Schedule, cron_schedule
from tickwork.core.schedule_set import union

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


DAY = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def on_day(hours: float, day: int = 0) -> dt.datetime:
    return DAY + dt.timedelta(days=day, hours=hours)


def windowed(*ends: tuple[str, dt.datetime], window: float | None = 1.0) -> WindowedAfter:
    """A job at 02:00 every day (its window an hour long, or until the next 02:00)."""
    return WindowedAfter(
        own=cron_schedule("0 2 * * *", "UTC"),
        upstream=AfterSchedule(
            jobs=("extract",), finishes=tuple(Finish(j, f"{j}-{at:%H%M}", at) for j, at in ends)
        ),
        window=dt.timedelta(hours=window) if window is not None else None,
    )


@pytest.mark.parametrize(
    ("ended", "due"),
    [
        (on_day(1.5), on_day(2)),  # before the window opened, after the last one: at 02:00
        (on_day(2.25), on_day(2.25)),  # within the window: as it ends
        (on_day(3.5), on_day(2, day=1)),  # after the window closed: the next one's opening
        (on_day(1.5, day=-1), None),  # before yesterday's window: counted then, not now
    ],
    ids=["before", "within", "after-it-closed", "too-old"],
)
def test_with_a_schedule_a_run_starts_within_a_window_its_upstream_runs_made(
    ended: dt.datetime, due: dt.datetime | None
) -> None:
    schedule = windowed(("extract", ended))
    since = on_day(0)  # created at midnight
    assert schedule.next_run_after(since) == due
    if due is not None:  # the planner's view of the same run, when it decides it
        assert schedule.last_run_at_or_before(due) == due
        assert schedule.count_runs_between(due - dt.timedelta(microseconds=1), due) == 1
        assert schedule.next_run_after(due) is None  # its upstream run counted once
        found = schedule.trigger_of(since, due)
        assert found is not None
        assert found.at == ended


def test_without_a_window_length_a_window_lasts_until_the_next_instant() -> None:
    late = windowed(("extract", on_day(23)), window=None)
    assert late.next_run_after(on_day(0)) == on_day(23)
    assert windowed(("extract", on_day(23))).next_run_after(on_day(0)) == on_day(2, day=1)


def _brute_force(
    own: Schedule, ends: list[dt.datetime], since: dt.datetime, window: float | None
) -> dt.datetime | None:
    """The first run after ``since``, walking every window of ``own`` in turn: the
    window opening at T counts the runs that ended after max(since, the opening
    before T); all must have one (All), within a day of one another, and the run is
    due at max(T, the last end), before the window closes."""
    openings: list[dt.datetime] = []
    moment: dt.datetime | None = since - dt.timedelta(days=3)
    while moment is not None and moment < since + dt.timedelta(days=12):
        moment = own.next_run_after(moment)
        if moment is not None:
            openings.append(moment)
    for index in range(1, len(openings) - 1):
        before, opening, following = openings[index - 1 : index + 2]
        cursor = max(since, before)
        counted = [e for e in ends if e > cursor]
        closes = opening + dt.timedelta(hours=window) if window else following
        if len(counted) == len(ends) and max(counted) - min(counted) <= dt.timedelta(days=1):
            due = max(opening, *counted)
            if due > since and (closes is None or due < closes):
                return due
    return None


#: The job's own schedules: daily in UTC; in Berlin across the clock going forward
#: (29 March 2026: 02:30 does not occur); two schedules, one on weekdays only.
OWN = {
    "utc": lambda: cron_schedule("0 2 * * *", "UTC"),
    "berlin-dst": lambda: cron_schedule("30 2 * * *", "Europe/Berlin"),
    "several": lambda: union(
        [cron_schedule("0 2 * * *", "UTC"), cron_schedule("0 14 * * 1-5", "America/New_York")]
    ),
}
SPRING = dt.datetime(2026, 3, 27, tzinfo=dt.UTC)


@settings(max_examples=300, deadline=None)
@given(
    own=st.sampled_from(sorted(OWN)),
    first=st.integers(min_value=0, max_value=4 * 24 * 60),
    second=st.integers(min_value=0, max_value=4 * 24 * 60),
    since=st.integers(min_value=0, max_value=4 * 24 * 60),
    window=st.sampled_from([None, 0.5, 1.0, 6.0]),
)
def test_windows_agree_with_walking_every_window(
    own: str, first: int, second: int, since: int, window: float | None
) -> None:
    """Two upstream jobs, windows of a daily schedule (in a zone whose clock changes, or
    two schedules), ends and the job's last run anywhere in four days (minutes): the
    few windows looked at find what walking all of them finds."""
    schedule_of_job = OWN[own]()
    ends = [SPRING + dt.timedelta(minutes=first), SPRING + dt.timedelta(minutes=second)]
    schedule = WindowedAfter(
        own=schedule_of_job,
        upstream=AfterSchedule(
            jobs=("extract", "load"),
            finishes=(Finish("extract", "e", ends[0]), Finish("load", "l", ends[1])),
        ),
        window=dt.timedelta(hours=window) if window is not None else None,
    )
    moment = SPRING + dt.timedelta(minutes=since)
    expected = _brute_force(schedule_of_job, ends, moment, window)
    assert schedule.next_run_after(moment) == expected


def test_a_cycle_through_a_chain_of_ten_thousand_jobs_is_found() -> None:
    edges = {f"j{n}": (f"j{n + 1}",) for n in range(10_000)} | {"j10000": ("j0",)}
    cycle = find_cycle("j0", edges)
    assert cycle is not None
    assert (len(cycle), cycle[0], cycle[-2], cycle[-1]) == (10_002, "j0", "j10000", "j0")


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


@pytest.mark.asyncio
async def test_with_a_schedule_the_operator_starts_runs_only_within_its_windows() -> None:
    hour = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    leader = Leader(hour - dt.timedelta(minutes=30))
    leader.observe(ONE_SHOT, name="extract", uid=EXTRACT)
    spec = {"schedule": "0 * * * *", **after("extract", windowSeconds=600)}
    leader.observe(spec, name="report", uid=REPORT)
    assert leader.state.jobs[("ns", "report")].pending is None  # no upstream run yet

    def ends(minutes: float) -> None:
        leader.t = (hour + dt.timedelta(minutes=minutes)).timestamp()
        status = upstream_status(EXTRACT, (hour - T0).total_seconds() + minutes * 60)
        leader.observe(ONE_SHOT, name="extract", uid=EXTRACT, status=status)

    ends(5)  # within 09:00's window: due as it ends
    report = leader.state.jobs[("ns", "report")]
    assert report.pending is not None
    assert report.pending.scheduled_at == hour + dt.timedelta(minutes=5)
    await leader.tick_at(hour + dt.timedelta(minutes=5, seconds=1))
    [message] = [m for m in await messages(leader) if m.name == "report"]
    assert message.params is not None
    assert message.params["upstreamJob"] == "extract"
    ends(30)  # after 09:00's window closed: at 10:00's opening
    report = leader.state.jobs[("ns", "report")]
    assert report.pending is not None
    assert report.pending.scheduled_at == hour + dt.timedelta(hours=1)
