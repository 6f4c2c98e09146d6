"""spec.daylightSaving end to end: the real control plane and Redis, the operator and
the worker as users run them. Each job backfills the days around one of New York's
2025 clock changes (its runs are the schedule's own, daylight-saving choice
included: tickwork/core/backfill.py), and the runs a worker records are exactly the
instants the choice names. The expected instants come from zoneinfo here, not from
Tickwork's schedule code. (The choices against the brute-force reference in every
zone: tests/unit/test_schedule_properties.py; the operator's nextRunAt for the next
real clock change: tests/integration/test_daylight_saving.py.)"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable

import pytest

from tests.support import ECHO, Jobs, lead, rfc3339
from tickwork.core.runs import backfill_run_id
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(300)

ZONE = zoneinfo.ZoneInfo("America/New_York")


def _at(year: int, month: int, day: int, hour: int, minute: int, fold: int = 0) -> dt.datetime:
    local = dt.datetime(year, month, day, hour, minute, tzinfo=ZONE, fold=fold)
    return local.astimezone(dt.UTC)


# 2025-11-02: 01:00-01:59 happens twice (EDT, then EST). 01:30 daily over Nov 1-3.
FALL = {
    "schedule": "30 1 * * *",
    "range": (dt.datetime(2025, 11, 1, tzinfo=dt.UTC), dt.datetime(2025, 11, 4, tzinfo=dt.UTC)),
}
NOV1, NOV3 = _at(2025, 11, 1, 1, 30), _at(2025, 11, 3, 1, 30)
NOV2_FIRST, NOV2_LAST = _at(2025, 11, 2, 1, 30), _at(2025, 11, 2, 1, 30, fold=1)
# 2025-03-09: 02:00-02:59 does not happen (02:00 EST is followed by 03:00 EDT).
SPRING = {
    "schedule": "30 2 * * *",
    "range": (dt.datetime(2025, 3, 8, tzinfo=dt.UTC), dt.datetime(2025, 3, 11, tzinfo=dt.UTC)),
}
MAR8, MAR10 = _at(2025, 3, 8, 2, 30), _at(2025, 3, 10, 2, 30)
MAR9_SHIFTED = _at(2025, 3, 9, 3, 0)  # the first instant after the jump

BOTH = {"repeated": "Both", "skipped": "Skip"}
SHIFT = {"repeated": "First", "skipped": "Shift"}
CASES: list[tuple[str, dict[str, object], dict[str, str] | None, list[dt.datetime]]] = [
    # name, schedule and range, spec.daylightSaving (None: Debian cron's rules), runs
    ("fall-default", FALL, None, [NOV1, NOV2_FIRST, NOV3]),
    ("fall-first", FALL, {"repeated": "First", "skipped": "Skip"}, [NOV1, NOV2_FIRST, NOV3]),
    ("fall-last", FALL, {"repeated": "Last", "skipped": "Skip"}, [NOV1, NOV2_LAST, NOV3]),
    ("fall-both", FALL, BOTH, [NOV1, NOV2_FIRST, NOV2_LAST, NOV3]),
    ("spring-default", SPRING, None, [MAR8, MAR9_SHIFTED, MAR10]),
    ("spring-shift", SPRING, SHIFT, [MAR8, MAR9_SHIFTED, MAR10]),
    ("spring-skip", SPRING, {"repeated": "First", "skipped": "Skip"}, [MAR8, MAR10]),
]


def test_each_daylight_saving_choice_runs_the_instants_it_names(
    start_operator: Start, start_worker: Start, jobs: Jobs
) -> None:
    lead(start_operator())
    start_worker()
    uids = {}
    for name, base, choice, _ in CASES:
        start, end = base["range"]  # type: ignore[misc]
        spec: dict[str, object] = {
            "schedule": base["schedule"],
            "timeZone": "America/New_York",
            "task": ECHO,
            "concurrencyPolicy": "AllowAll",
            "history": {"successfulRuns": 10},
            "backfills": [{"name": "dst", "from": rfc3339(start), "to": rfc3339(end)}],
        }
        if choice is not None:
            spec["daylightSaving"] = choice
        uids[name] = jobs.create(name, spec)["metadata"]["uid"]

    def recorded(name: str) -> dict[str, str]:
        """Backfill run ID -> scheduledAt of each run a worker recorded Succeeded."""
        runs = jobs.status(name).get("runs") or []
        return {
            r["id"]: r["scheduledAt"]
            for r in runs
            if r["outcome"] == "Succeeded" and ".dst." in r["id"]
        }

    def done(name: str) -> bool:
        progress = jobs.status(name).get("backfills") or [{}]
        return bool(progress[0].get("completedAt"))

    wait_for(
        lambda: all(done(name) for name, *_ in CASES),
        timeout=120,
        interval=0.5,
        what="every backfill published",
    )
    for name, _, _, instants in CASES:
        expected = {backfill_run_id(uids[name], "dst", m): rfc3339(m) for m in instants}
        wait_for(
            lambda name=name, expected=expected: recorded(name).keys() >= expected.keys(),
            timeout=60,
            interval=0.5,
            what=f"the runs of {name} recorded",
        )
        assert recorded(name) == expected, name
        [progress] = jobs.status(name)["backfills"]
        assert progress["published"] == len(instants), name
    # The choices change the runs where they should: not a constant of the test.
    assert NOV2_FIRST != NOV2_LAST
    assert MAR9_SHIFTED not in (MAR8, MAR10)
