"""Jobs that name Calendars, as the operator plans them (issue 50, item 2): runs on a
calendar's days are not due at all; a missing or unreadable calendar makes the job
Invalid, saying which; a calendar that comes, changes or goes re-plans every job that
names it from now, with no burst and no restart. The clock is the test's.

(Against the real API server, Redis, operator and worker: tests/integration/
test_calendars.py.)"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import scheduled_message
from tests.unit.test_operator_decisions import UID, Leader
from tickwork.api.models import ScheduledJob
from tickwork.core.runs import scheduled_run_id
from tickwork_operator.calendars import CalendarFeed, Unreadable, read
from tickwork_operator.main import _follow
from tickwork_worker.decisions import next_runs_shown

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]

#: Tuesday 1 December 2026, 09:00 UTC.
TUESDAY = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
DAILY_AT_TEN = {"schedule": "0 10 * * *", "calendars": {"notOn": ["holidays"]}}


def day(offset: int, hour: int = 10) -> dt.datetime:
    return TUESDAY.replace(hour=hour) + dt.timedelta(days=offset)


def calendar(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name}, "spec": spec}


def feed(leader: Leader) -> CalendarFeed:
    """The operator's Calendar feed into ``leader``'s state, at ``leader``'s clock."""

    def replan(keys: list[tuple[str, str]]) -> None:
        leader.state.replan(keys, now=dt.datetime.fromtimestamp(leader.t, dt.UTC))

    return CalendarFeed(leader.state.calendars, replan, [None])


def leader_with(*calendars: dict[str, Any]) -> tuple[Leader, CalendarFeed]:
    leader = Leader(TUESDAY, schedule_in_status=False)
    calendar_feed = feed(leader)
    listed = calendar_feed.listing(None)
    for body in calendars:
        listed.add(body)
    listed.end()
    assert calendar_feed.listed.is_set()
    return leader, calendar_feed


def due(leader: Leader) -> dt.datetime | None:
    entry = leader.state.jobs[("ns", "j")]
    return entry.pending.scheduled_at if entry.pending else None


async def test_a_run_on_a_calendar_day_is_not_due_and_status_shows_the_next_kept_one() -> None:
    holidays = calendar("holidays", dates=["2026-12-01", "2026-12-02"])
    leader, _ = leader_with(holidays)
    leader.observe(DAILY_AT_TEN)
    assert due(leader) == day(2)  # Tuesday and Wednesday are holidays
    await leader.tick_at(day(0, 9) + dt.timedelta(seconds=1))
    status = leader.sink.status
    assert status["phase"] == "Scheduled"
    # The operator shows a calendar job's next runs itself (no worker follows calendars).
    assert status["nextRunAt"] == "2026-12-03T10:00:00Z"
    assert status["nextRuns"][:2] == ["2026-12-03T10:00:00Z", "2026-12-04T10:00:00Z"]
    await leader.tick_at(day(0) + dt.timedelta(seconds=1))
    await leader.tick_at(day(1) + dt.timedelta(seconds=1))
    assert await leader.queued() == []  # not due, and not missed either
    assert "missedRuns" not in status or status["missedRuns"] == 0


async def test_only_on_keeps_runs_to_the_days_of_every_calendar_named() -> None:
    weekdays = calendar("weekdays", days=["* * mon-fri"])
    december = calendar("late-december", ranges=[{"from": "2026-12-20", "to": "2026-12-31"}])
    leader, _ = leader_with(weekdays, december)
    leader.observe(
        {"schedule": "0 10 * * *", "calendars": {"onlyOn": ["weekdays", "late-december"]}}
    )
    assert due(leader) == day(20)  # Monday 21 December: the first weekday from the 20th


async def test_a_missing_calendar_makes_the_job_invalid_until_it_comes() -> None:
    leader, calendar_feed = leader_with()
    leader.observe(DAILY_AT_TEN)
    await leader.tick_at(day(0, 9) + dt.timedelta(seconds=1))
    status = leader.sink.status
    assert status["phase"] == "Invalid"
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert "Calendar 'holidays' not found in 'ns'" in ready["message"]
    assert "InvalidSpec" in leader.sink.reasons()
    assert due(leader) is None
    # It comes: planned from now, the job valid again, with no restart.
    calendar_feed.event(None, "ADDED", calendar("holidays", dates=["2026-12-01"]))
    assert due(leader) == day(1)
    await leader.tick_at(day(0, 9) + dt.timedelta(seconds=2))
    assert leader.sink.status["phase"] == "Scheduled"
    assert leader.sink.status["nextRunAt"] == "2026-12-02T10:00:00Z"


async def test_a_calendar_that_cannot_be_read_says_why() -> None:
    broken = calendar("holidays", days=["1 12 * *"])  # four fields, not three
    assert isinstance(read(("ns", "holidays"), broken), Unreadable)
    leader, _ = leader_with(broken)
    leader.observe(DAILY_AT_TEN)
    await leader.tick_at(day(0, 9) + dt.timedelta(seconds=1))
    ready = {c["type"]: c for c in leader.sink.status["conditions"]}["Ready"]
    assert "Calendar 'holidays': spec.days.0:" in ready["message"]
    assert "day-of-month month day-of-week" in ready["message"]


async def test_a_calendar_change_replans_from_now_with_no_burst() -> None:
    """The calendar ruled out the runs of Tuesday to Thursday; on Thursday at 09:00 it
    no longer does. The runs it had ruled out are not run now (none was missed): the
    next is Thursday's own, as an edit of the job would plan it."""
    leader, calendar_feed = leader_with(
        calendar("holidays", ranges=[{"from": "2026-12-01", "to": "2026-12-03"}])
    )
    leader.observe(DAILY_AT_TEN)
    assert due(leader) == day(3)
    leader.t = day(2, 9).timestamp()
    calendar_feed.event(None, "MODIFIED", calendar("holidays", dates=["2026-12-25"]))
    assert due(leader) == day(2)  # Thursday 10:00: not Tuesday's or Wednesday's
    calendar_feed.event(None, "MODIFIED", calendar("holidays", dates=["2026-12-03"]))
    assert due(leader) == day(3)  # Thursday ruled out again: Friday
    await leader.tick_at(day(2, 10) + dt.timedelta(seconds=1))
    assert await leader.queued() == []
    assert leader.sink.status["nextRunAt"] == "2026-12-04T10:00:00Z"


async def test_an_unchanged_calendar_replans_nothing_and_a_deleted_one_invalidates() -> None:
    holidays = calendar("holidays", dates=["2026-12-01"], description="v1")
    leader, calendar_feed = leader_with(holidays)
    leader.observe(DAILY_AT_TEN)
    entry = leader.state.jobs[("ns", "j")]
    pending = entry.pending
    # The description is for people: the days are the same, the plan is left alone.
    calendar_feed.event(
        None, "MODIFIED", calendar("holidays", dates=["2026-12-01"], description="v2")
    )
    assert entry.pending is pending
    calendar_feed.event(None, "DELETED", holidays)
    assert leader.state.jobs[("ns", "j")].spec is None
    assert due(leader) is None


async def test_a_relist_without_a_calendar_takes_it_for_deleted() -> None:
    leader, calendar_feed = leader_with(calendar("holidays", dates=["2026-12-01"]))
    leader.observe(DAILY_AT_TEN)
    assert due(leader) == day(1)
    relisted = calendar_feed.listing(None)
    relisted.end()  # deleted while the watch was down: in no event
    assert leader.state.jobs[("ns", "j")].spec is None


async def test_a_run_on_a_kept_day_is_published_and_other_namespaces_calendars_do_not_count() -> (
    None
):
    leader, _ = leader_with(
        calendar("holidays", dates=["2026-12-01"]),
        {"metadata": {"namespace": "other", "name": "holidays"}, "spec": {"dates": ["2026-12-02"]}},
    )
    leader.observe(DAILY_AT_TEN)
    assert due(leader) == day(1)  # the other namespace's calendar rules out nothing here
    await leader.tick_at(day(1) + dt.timedelta(seconds=0.005))
    assert await leader.queued() == [scheduled_run_id(UID, day(1))]


async def test_a_job_that_stops_naming_a_calendar_is_no_longer_replanned_by_it() -> None:
    leader, calendar_feed = leader_with(calendar("holidays", dates=["2026-12-01"]))
    leader.observe(DAILY_AT_TEN)
    leader.observe({"schedule": "0 10 * * *"}, generation=2)
    assert leader.state.calendars.users == {}
    assert leader.state.calendars.named == {}
    entry = leader.state.jobs[("ns", "j")]
    assert entry.calendar_spec is None
    assert due(leader) == day(0)
    calendar_feed.event(None, "DELETED", calendar("holidays"))
    assert leader.state.jobs[("ns", "j")].spec is not None


async def test_a_worker_leaves_a_calendar_jobs_next_runs_to_the_operator() -> None:
    """A worker's record shows the runs after its own, from the spec; it does not follow
    Calendars, so for a job that names some it shows none (the operator does)."""

    def job(spec: dict[str, Any]) -> ScheduledJob:
        return ScheduledJob.model_validate(
            {
                "metadata": {"uid": UID, "creationTimestamp": "2026-11-01T00:00:00Z"},
                "spec": {**spec, "task": {"echo": {"message": "hi"}}},
            }
        )

    message = scheduled_message(UID, day(0))
    assert next_runs_shown(job({"schedule": "0 10 * * *"}), message)[0] == day(1)
    assert next_runs_shown(job(DAILY_AT_TEN), message) == []


class _Following:
    """An informer that records when it started following, and then follows forever."""

    def __init__(self, on_start: Callable[[], None] = lambda: None) -> None:
        self.started = asyncio.Event()
        self.on_start = on_start

    async def run(self) -> None:
        self.started.set()
        self.on_start()
        await asyncio.Event().wait()


async def test_jobs_are_followed_once_the_calendars_are_listed() -> None:
    leader = Leader(TUESDAY, schedule_in_status=False)
    calendar_feed = feed(leader)
    jobs = _Following()
    calendars = _Following(on_start=lambda: calendar_feed.listing(None).end())
    following = asyncio.create_task(_follow(calendars, calendar_feed, jobs))  # type: ignore[arg-type]
    await asyncio.wait_for(jobs.started.wait(), 1)
    assert calendar_feed.listed.is_set()
    following.cancel()


async def test_jobs_are_followed_anyway_when_the_calendars_cannot_be_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No Calendar CRD (or no right to list it): the jobs run after the wait, and the
    log says why the calendars are missing."""
    leader = Leader(TUESDAY, schedule_in_status=False)
    calendar_feed = feed(leader)
    jobs, calendars = _Following(), _Following()  # the calendars' list never ends
    following = asyncio.create_task(
        _follow(calendars, calendar_feed, jobs, wait_seconds=0.05)  # type: ignore[arg-type]
    )
    await asyncio.wait_for(jobs.started.wait(), 1)
    assert not calendar_feed.listed.is_set()
    assert "is the calendars.tickwork.dev CRD installed" in caplog.text
    following.cancel()
