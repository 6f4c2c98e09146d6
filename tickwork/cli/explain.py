"""``tickwork explain -f job.yaml``: a job's next runs, worked out offline with no
cluster, in its time zone and in UTC, each run that a clock change moved or repeated
marked (the same code the operator schedules with: ``ScheduledJobSpec.schedule_of``).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from tickwork.api import models
from tickwork.api.calendar import CALENDAR_KIND, CalendarSpec
from tickwork.api.models import ScheduledJobSpec
from tickwork.core.bounds import BoundedSchedule
from tickwork.core.calendar import DaySet
from tickwork.core.civil import minute_from_naive
from tickwork.core.errors import InvalidSpecError
from tickwork.core.interval import is_interval
from tickwork.core.schedule import CronSchedule, Schedule
from tickwork.core.schedule_set import ScheduleSet

#: How many runs ``--count`` may ask for.
MOST = 1000


class ExplainError(Exception):
    """What is wrong with the file or a job in it, in words."""


@dataclass(frozen=True)
class Run:
    at: dt.datetime
    """The instant, in UTC."""
    local: dt.datetime
    """The same instant on the job's wall clock."""
    note: str = ""
    """What a clock change did to it, if anything."""


def _of_kind(text: str, kind: str) -> list[dict[str, Any]]:
    """The objects of ``kind`` with a spec in a YAML stream (other kinds are left out)."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ExplainError(f"not YAML: {exc}") from None
    found = [
        d
        for d in documents
        if isinstance(d, dict) and d.get("kind") == kind and isinstance(d.get("spec"), dict)
    ]
    if not found:
        raise ExplainError(f"no {kind} in the file")
    return found


def jobs_in(text: str) -> list[dict[str, Any]]:
    """The ScheduledJobs of a YAML stream."""
    return _of_kind(text, models.KIND)


def spec_of(job: dict[str, Any]) -> ScheduledJobSpec:
    try:
        return ScheduledJobSpec.model_validate(job["spec"])
    except (ValidationError, InvalidSpecError, ValueError) as exc:
        raise ExplainError(f"{_name(job)}: {_said(exc)}") from None


def _said(exc: Exception) -> str:
    """What a refused spec says, field by field (the first five)."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(
        f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()[:5]
    )


def calendars_in(text: str) -> list[DaySet]:
    """The days of every Calendar of a YAML stream."""
    found = []
    for calendar in _of_kind(text, CALENDAR_KIND):
        try:
            spec = CalendarSpec.model_validate(calendar["spec"])
        except (ValidationError, InvalidSpecError) as exc:
            raise ExplainError(f"calendar {_name(calendar)}: {_said(exc)}") from None
        found.append(spec.day_set(_name(calendar)))
    return found


def next_runs(
    spec: ScheduledJobSpec,
    *,
    after: dt.datetime,
    count: int,
    calendars: Sequence[DaySet] = (),
) -> list[Run]:
    """The first ``count`` runs after ``after`` (an aware instant), each one that
    ``calendars`` rule out marked so (it would not run): for a job that names Calendars
    (``spec.calendars``), those it names, as it names them (a run on a day of a
    ``notOn`` calendar, or off the days of an ``onlyOn`` one); for any other, a run
    on a day of any of them. An ``@every`` job with no notBefore counts from its
    creation: here, from ``after``."""
    schedule = spec.schedule_of(after)
    zone = _zone(spec)
    rules = _rules(spec, calendars)
    runs: list[Run] = []
    moment = after
    while len(runs) < count:
        following = schedule.next_run_after(moment)
        if following is None:
            break
        notes = [_note(c, following) for c in _crons(schedule)]
        notes += [
            f"excluded: {'not ' if only else ''}a day of calendar {c.name}"
            for c, only in rules
            if c.holds(c.day_of(following)) != only
        ]
        note = "; ".join(n for n in notes if n)
        runs.append(Run(at=following, local=following.astimezone(zone), note=note))
        moment = following
    return runs


def _rules(spec: ScheduledJobSpec, calendars: Sequence[DaySet]) -> list[tuple[DaySet, bool]]:
    """Each calendar that counts for ``spec``, and whether the job keeps to its days
    (onlyOn) rather than off them."""
    if spec.calendars is None:
        return [(c, False) for c in calendars]
    given = {c.name: c for c in calendars}
    rules = []
    for names, only in ((spec.calendars.not_on, False), (spec.calendars.only_on, True)):
        for name in names:
            if name not in given:
                raise ExplainError(
                    f"the job names Calendar {name!r}: give the file that holds it "
                    "with --calendar FILE"
                )
            rules.append((given[name], only))
    return rules


def _zone(spec: ScheduledJobSpec) -> dt.tzinfo:
    """The zone the runs are shown in: the job's, unless no entry is read in a zone."""
    if all(is_interval(text) for text in spec.schedule_texts):
        return dt.UTC  # an instant or intervals only: no zone plays a part
    return zoneinfo.ZoneInfo(spec.time_zone)


def _crons(schedule: Schedule) -> list[CronSchedule]:
    """The cron schedules ``schedule`` is made of."""
    inner = schedule.schedule if isinstance(schedule, BoundedSchedule) else schedule
    parts = inner.schedules if isinstance(inner, ScheduleSet) else (inner,)
    return [part for part in parts if isinstance(part, CronSchedule)]


def _note(cron: CronSchedule, at: dt.datetime) -> str:
    """What a clock change did to the run at ``at``, if ``cron`` names it: nothing, a
    repeated wall time (the clock went back; which pass), or a run moved past a skipped
    one, on that entry's wall clock."""
    if cron.next_run_after(at - dt.timedelta(microseconds=1)) != at:
        return ""  # another entry's run
    zone = cron.timeline.zone
    local = at.astimezone(zone)
    wall = local.replace(tzinfo=None)
    first, second = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() != second.utcoffset():
        which = "first" if local.fold == 0 else "second"
        return f"repeated wall time (the clock went back): the {which} {wall:%H:%M}"
    if not cron.cron.matches(minute_from_naive(wall)):
        return "moved: its wall time did not occur (the clock jumped forward)"
    return ""


def render(job: dict[str, Any], spec: ScheduledJobSpec, runs: Iterable[Run]) -> str:
    zone = "UTC" if isinstance(_zone(spec), dt.timezone) else spec.time_zone
    runs_at = f"runAt {spec.run_at.isoformat()}" if spec.run_at is not None else ""
    what = runs_at or "; ".join(spec.schedule_texts)
    lines = [f"{_name(job)}: {what} ({zone})"]
    if spec.after is not None:
        require = "all" if spec.after.require.value == "All" else "any"
        upstream = ", ".join(f"{u.job} ({u.outcome.value})" for u in spec.after.jobs)
        lines[0] = f"{_name(job)}: after {require} of {upstream}" + (
            f", within windows opening at: {what} ({zone})" if what else ""
        )
        if not what:
            lines.append("   (runs when those jobs' runs end: no instant of its own)")
            return "\n".join(lines)
    lines.append(f"{'#':>4}  {zone:<32}{'UTC':<22}NOTE")
    rows = list(runs)
    for number, run in enumerate(rows, 1):
        local = f"{run.local:%Y-%m-%d %a %H:%M:%S %Z}"
        at = run.at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{number:>4}  {local:<32}{at:<22}{run.note}".rstrip())
    if not rows:
        lines.append("   (no run after this moment)")
    return "\n".join(lines)


def _name(job: dict[str, Any]) -> str:
    metadata = job.get("metadata") or {}
    return str(metadata.get("name") or "(unnamed)")
