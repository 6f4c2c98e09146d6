"""spec.daylightSaving through the real parts: the API server accepts and stores the
choice, and the ``tickwork-operator`` process writes the nextRunAt it implies.

The clock is the real one, so the jobs are aimed at New York's next real clock
changes: a yearly time on the next day 01:30 happens twice, and on the next day
02:30 does not happen. The expected instants come from zoneinfo here, not from
Tickwork's schedule code.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable, Iterator

import pytest

from tests.support import ECHO, Jobs, lead, rfc3339
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(180)

ZONE = zoneinfo.ZoneInfo("America/New_York")


def _days_from_tomorrow() -> Iterator[dt.date]:
    day = dt.datetime.now(ZONE).date()
    while True:
        day += dt.timedelta(days=1)
        yield day


def _utc(day: dt.date, hour: int, minute: int, *, fold: int = 0) -> dt.datetime:
    local = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZONE, fold=fold)
    return local.astimezone(dt.UTC)


def _exists(day: dt.date, hour: int, minute: int) -> bool:
    local = _utc(day, hour, minute).astimezone(ZONE)
    return (local.date(), local.hour, local.minute) == (day, hour, minute)


def _next_year_with(day: dt.date, hour: int, minute: int) -> dt.datetime:
    """The instant of the same date and time in the first later year it exists."""
    year = day.year + 1
    while not _exists(day.replace(year=year), hour, minute):
        year += 1
    return _utc(day.replace(year=year), hour, minute)


def _expectations() -> list[tuple[str, dict[str, object], str]]:
    fall = next(d for d in _days_from_tomorrow() if _utc(d, 1, 30) != _utc(d, 1, 30, fold=1))
    spring = next(d for d in _days_from_tomorrow() if not _exists(d, 2, 30))
    at_0130 = f"30 1 {fall.day} {fall.month} *"
    at_0230 = f"30 2 {spring.day} {spring.month} *"
    first, last = _utc(fall, 1, 30), _utc(fall, 1, 30, fold=1)
    after_jump = _utc(spring, 3, 0)  # the first instant after 02:00-02:59 is 03:00 EDT
    next_year = _next_year_with(spring, 2, 30)
    return [
        # name, spec, the nextRunAt the operator must write
        ("fall-default", {"schedule": at_0130}, rfc3339(first)),
        ("fall-first", _choosing(at_0130, "First", "Skip"), rfc3339(first)),
        ("fall-last", _choosing(at_0130, "Last", "Skip"), rfc3339(last)),
        ("fall-both", _choosing(at_0130, "Both", "Skip"), rfc3339(first)),
        ("spring-default", {"schedule": at_0230}, rfc3339(after_jump)),
        ("spring-shift", _choosing(at_0230, "Last", "Shift"), rfc3339(after_jump)),
        ("spring-skip", _choosing(at_0230, "Last", "Skip"), rfc3339(next_year)),
    ]


def _choosing(schedule: str, repeated: str, skipped: str) -> dict[str, object]:
    return {"schedule": schedule, "daylightSaving": {"repeated": repeated, "skipped": skipped}}


def test_the_operator_writes_the_next_run_the_daylight_saving_choice_implies(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs
) -> None:
    lead(start_operator())
    expected = _expectations()
    for name, spec, _ in expected:
        created = jobs.create(name, {**spec, "timeZone": "America/New_York", "task": ECHO})
        # Stored as written: the API server knows the field (no pruning).
        assert created["spec"].get("daylightSaving") == spec.get("daylightSaving")

    def all_written() -> bool:
        return all("nextRunAt" in jobs.status(name) for name, _, _ in expected)

    wait_for(all_written, timeout=60, what="nextRunAt on every job")
    written = {name: jobs.status(name)["nextRunAt"] for name, _, _ in expected}
    assert written == {name: next_run for name, _, next_run in expected}
    # The choice changes the answer where it should: not a constant of the test.
    assert written["fall-first"] != written["fall-last"]
    assert written["spring-shift"] != written["spring-skip"]
    for name, _, _ in expected:
        assert jobs.status(name)["phase"] == "Scheduled"


def test_a_changed_choice_moves_the_next_run(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs
) -> None:
    lead(start_operator())
    name, spec, first = _expectations()[1]  # fall-first
    _, _, last = _expectations()[2]  # fall-last
    jobs.create(name, {**spec, "timeZone": "America/New_York", "task": ECHO})
    wait_for(lambda: jobs.status(name).get("nextRunAt") == first, timeout=60, what="First")
    jobs.patch(name, {"spec": {"daylightSaving": {"repeated": "Last"}}})
    wait_for(lambda: jobs.status(name).get("nextRunAt") == last, timeout=60, what="Last")
    jobs.patch(name, {"spec": {"daylightSaving": None}})  # back to Debian cron's rules
    wait_for(lambda: jobs.status(name).get("nextRunAt") == first, timeout=60, what="default")
