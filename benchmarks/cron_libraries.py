"""Compare cron libraries with Vixie cron's daylight-saving behaviour.

For every zone, every transition of the year and every expression, each
library lists the runs in a two-day window around the transition; the list
must equal the one the minute-by-minute reference
(:func:`tickwork_dev.reference.vixie_fires`) produces. Prints JSON:

    python benchmarks/cron_libraries.py [--year 2026] [--out FILE]

Results are the basis of docs/scheduling.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import zoneinfo
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from crondst import CronDst
from croniter import croniter
from cronsim import CronSim

from tickwork.core import civil
from tickwork.core.schedule import cron_schedule
from tickwork_dev.devcluster.measure import save_report
from tickwork_dev.reference import vixie_fires

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/St_Johns",
    "Asia/Kolkata",
]
EXPRESSIONS = [
    "30 2 * * *",  # fixed time inside a one-hour gap or overlap
    "0 2 * * *",
    "15,45 1,2 * * *",
    "0 3 * * *",
    "45 1 * * *",
    "15 2 * * *",
    "0 0 * * *",
    "*/15 * * * *",  # wildcards
    "30 * * * *",
    "0 * * * *",
    "*/20 1 * * *",
    "* 2 * * *",
]
WINDOW_MINUTES = 2 * 24 * 60

Runner = Callable[[str, zoneinfo.ZoneInfo, dt.datetime], Iterator[dt.datetime]]


def _tickwork(
    expression: str, zone: zoneinfo.ZoneInfo, start: dt.datetime
) -> Iterator[dt.datetime]:
    schedule = cron_schedule(expression, zone.key)
    moment: dt.datetime | None = start
    while moment is not None:
        moment = schedule.next_run_after(moment)
        if moment is not None:
            yield moment


def _croniter(
    expression: str, zone: zoneinfo.ZoneInfo, start: dt.datetime
) -> Iterator[dt.datetime]:
    iterator = croniter(expression, start.astimezone(zone))
    while True:
        yield iterator.get_next(dt.datetime)


def _cronsim(expression: str, zone: zoneinfo.ZoneInfo, start: dt.datetime) -> Iterator[dt.datetime]:
    yield from CronSim(expression, start.astimezone(zone))


def _crondst(expression: str, zone: zoneinfo.ZoneInfo, start: dt.datetime) -> Iterator[dt.datetime]:
    yield from CronDst(expression).iter(start.astimezone(zone))


LIBRARIES: dict[str, Runner] = {
    "tickwork": _tickwork,
    "croniter": _croniter,
    "cronsim": _cronsim,
    "crondst": _crondst,
}


def _transitions(zone: zoneinfo.ZoneInfo, year: int) -> list[int]:
    schedule = cron_schedule("* * * * *", zone.key)
    start = civil.days_from_civil(year, 1, 1) * 1440
    end = civil.days_from_civil(year + 1, 1, 1) * 1440
    found, position = [], start
    while (transition := schedule.timeline.next_transition(position, end)) is not None:
        found.append(transition.at)
        position = transition.at
    return found or [start + 180 * 1440]  # a zone without DST: one quiet window


def _runs(
    runner: Runner, expression: str, zone: zoneinfo.ZoneInfo, first: int, last: int
) -> list[int] | str:
    runs: list[int] = []
    try:
        for moment in runner(expression, zone, civil.from_minute(first - 1)):
            minute = civil.to_minute(moment)
            if minute > last:
                break
            runs.append(minute)
            if len(runs) > WINDOW_MINUTES + 10:
                return "runaway"
    except Exception as exc:  # noqa: BLE001 - a library's failure is a result here
        return f"error: {type(exc).__name__}: {exc}"
    return runs


def _local(minute: int, zone: zoneinfo.ZoneInfo) -> str:
    return civil.from_minute(minute).astimezone(zone).strftime("%Y-%m-%d %H:%M%z")


def compare(year: int) -> dict[str, Any]:
    results: dict[str, Any] = {
        name: {"agree": 0, "disagree": 0, "by_zone": {}, "examples": []} for name in LIBRARIES
    }
    cases = 0
    for zone_name in ZONES:
        zone = zoneinfo.ZoneInfo(zone_name)
        for transition in _transitions(zone, year):
            first, last = transition - 24 * 60, transition + 24 * 60
            for expression in EXPRESSIONS:
                cases += 1
                parsed = cron_schedule(expression, zone_name).cron
                expected = vixie_fires(parsed, zone, first, last)
                for name, runner in LIBRARIES.items():
                    got = _runs(runner, expression, zone, first, last)
                    entry = results[name]
                    per_zone = entry["by_zone"].setdefault(zone_name, {"agree": 0, "disagree": 0})
                    if got == expected:
                        entry["agree"] += 1
                        per_zone["agree"] += 1
                        continue
                    entry["disagree"] += 1
                    per_zone["disagree"] += 1
                    if len(entry["examples"]) < 12:
                        extra = sorted(set(got) - set(expected)) if isinstance(got, list) else got
                        missing = sorted(set(expected) - set(got)) if isinstance(got, list) else []
                        entry["examples"].append(
                            {
                                "zone": zone_name,
                                "expression": expression,
                                "transition": _local(transition, zone),
                                "extra_runs": [_local(m, zone) for m in extra]
                                if isinstance(extra, list)
                                else extra,
                                "missing_runs": [_local(m, zone) for m in missing],
                            }
                        )
    return {
        "year": year,
        "cases": cases,
        "zones": ZONES,
        "expressions": EXPRESSIONS,
        "libraries": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--year", type=int, default=2026)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    report = compare(args.year)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        save_report(report, args.out, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
