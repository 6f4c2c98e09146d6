"""What the CLI prints: kubectl-style tables for people, JSON and YAML for scripts.

Pure functions of the objects read and the time now, so every format is unit-tested
without an API server.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import yaml

from tickwork.api.models import DEAD_RUNS_LISTED, ScheduledJobSpec

#: Output formats: what `-o` accepts, as kubectl spells them.
FORMATS = ("table", "wide", "json", "yaml", "name")


#: Upcoming runs ``get -o wide`` lists (status.nextRuns keeps a few more).
NEXT_RUNS_SHOWN = 3


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A kubectl-style table: upper-case headers, columns padded by three spaces."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *rows]
    ]
    return "\n".join(lines)


def ago(stamp: str | None, now: dt.datetime) -> str:
    """kubectl's short age ("5m", "3d"); "-" for nothing, "in 5m" for the future."""
    if not stamp:
        return "-"
    seconds = int((now - dt.datetime.fromisoformat(stamp)).total_seconds())
    ahead = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            text = f"{seconds // size}{unit}"
            break
    else:
        text = f"{seconds}s"
    return f"in {text}" if ahead else text


def duration(started: str | None, finished: str | None) -> str:
    if not started or not finished:
        return "-"
    seconds = dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)
    return f"{seconds.total_seconds():.1f}s"


def one_line(text: str | None, limit: int = 60) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def document(value: Any, output: str) -> str:
    if output == "json":
        return json.dumps(value, indent=2)
    return yaml.safe_dump(value, sort_keys=False).rstrip()


# -- get ----------------------------------------------------------------------


def _ready(status: dict[str, Any]) -> tuple[str, str]:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status", ""), condition.get("reason", "")
    return "", ""


def next_runs(job: dict[str, Any], now: dt.datetime) -> list[str]:
    """``status.nextRuns`` of a job, or (a recurring job whose status keeps no schedule:
    the operator's ``scheduleInStatus`` off) the runs its spec asks for after ``now``,
    worked out here; none for a suspended, one-shot or invalid job."""
    status, spec = job.get("status") or {}, job.get("spec") or {}
    if status.get("nextRunAt"):
        return list(status.get("nextRuns") or [status["nextRunAt"]])
    recurring = spec.get("schedule") or spec.get("schedules")
    if not recurring or spec.get("suspend") or status.get("phase") != "Scheduled":
        return []
    try:
        parsed = ScheduledJobSpec.model_validate(spec)
        created = dt.datetime.fromisoformat(job["metadata"]["creationTimestamp"])
        schedule = parsed.schedule_of(created)
    except (ValueError, KeyError, TypeError):
        return []
    runs: list[str] = []
    moment: dt.datetime | None = now
    while len(runs) < NEXT_RUNS_SHOWN and moment is not None:
        moment = schedule.next_run_after(moment)
        if moment is not None:
            runs.append(moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"))
    return runs


def _schedule_text(spec: dict[str, Any]) -> str:
    """The SCHEDULE column: the cron or interval, several joined by "; ", the run's time,
    or the jobs it runs after ("after a,b" for All, "after a|b" for Any)."""
    entries = spec.get("schedules")
    if isinstance(entries, list):
        return "; ".join(str(e.get("schedule", "?")) for e in entries if isinstance(e, dict))
    after = spec.get("after")
    if isinstance(after, dict):
        jobs = [str(u.get("job", "?")) for u in after.get("jobs") or [] if isinstance(u, dict)]
        return "after " + ("|" if after.get("require") == "Any" else ",").join(jobs)
    return str(spec.get("schedule") or f"at {spec.get('runAt', '?')}")


def render_jobs(
    jobs: list[dict[str, Any]], *, output: str, all_namespaces: bool, now: dt.datetime
) -> str:
    """``get``: the jobs as kubectl prints them (``-o wide`` adds the zone, readiness
    reason, missed runs and the last run's ID); ``name`` gives ``scheduledjob/x``."""
    if output in ("json", "yaml"):
        body = (
            jobs[0]
            if len(jobs) == 1 and not all_namespaces
            else {"apiVersion": "v1", "kind": "List", "items": jobs}
        )
        return document(body, output)
    if output == "name":
        return "\n".join(f"scheduledjob.tickwork.dev/{j['metadata']['name']}" for j in jobs)
    if not jobs:
        return "No resources found."
    headers = ["NAME", "SCHEDULE", "SUSPEND", "PHASE", "READY", "ACTIVE", "LAST"]
    headers += ["LAST RUN", "NEXT RUN", "AGE"]
    wide = output == "wide"
    if wide:
        headers += ["PRIORITY", "ZONE", "REASON", "MISSED", "LAST RUN ID", "NEXT RUNS"]
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    rows = []
    for job in jobs:
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        last = status.get("lastRun") or {}
        ready, reason = _ready(status)
        upcoming = next_runs(job, now)
        row = [
            meta["name"],
            _schedule_text(spec),
            str(bool(spec.get("suspend"))).lower(),
            status.get("phase", ""),
            ready,
            ",".join(run.get("state", "") for run in status.get("activeRuns") or []),
            last.get("outcome", ""),
            ago(last.get("scheduledAt"), now),
            ago(upcoming[0] if upcoming else None, now),
            ago(meta.get("creationTimestamp"), now),
        ]
        if wide:
            row += [
                spec.get("priority", "Normal"),
                spec.get("timeZone", "UTC"),
                reason,
                str(status.get("missedRuns", 0)),
                last.get("id", ""),
                ", ".join(ago(at, now) for at in upcoming[:NEXT_RUNS_SHOWN]) or "-",
            ]
        if all_namespaces:
            row.insert(0, meta.get("namespace", ""))
        rows.append(row)
    return table(headers, rows)


# -- runs ---------------------------------------------------------------------


def render_runs(name: str, status: dict[str, Any], *, output: str, now: dt.datetime) -> str:
    """The job's runs: started ones first, then the history newest first; as a table
    (``wide`` adds the whole run ID, when it finished and the worker), or as JSON or
    YAML (``{"activeRuns": [...], "runs": [...]}``, for scripts)."""
    history = sorted(  # kept oldest first; shown newest first
        status.get("runs") or [],
        key=lambda run: run.get("finishedAt") or run.get("startedAt") or run.get("scheduledAt"),
        reverse=True,
    )
    if output in ("json", "yaml"):
        return document({"activeRuns": status.get("activeRuns") or [], "runs": history}, output)
    active = status.get("activeRuns") or []
    if output == "name":
        return "\n".join(run["id"] for run in [*active, *history])
    wide = output == "wide"
    rows = []
    for current in active:
        key = current.get("waitingFor")
        row = [
            current["id"].split(".", 1)[-1],
            ago(current.get("scheduledAt"), now),
            current.get("state", ""),
            str(current.get("attempt", "")),
            ago(current.get("startedAt"), now),
            "-",
            f"for concurrency key {key}" if key else f"on {current.get('worker', '?')}",
        ]
        rows.append([*row, "-", current.get("worker", ""), current["id"]] if wide else row)
    for run in history:
        row = [
            run["id"].split(".", 1)[-1],
            ago(run.get("scheduledAt"), now),
            run.get("outcome", ""),
            str(run.get("attempts", "")),
            ago(run.get("startedAt"), now),
            duration(run.get("startedAt"), run.get("finishedAt")),
            one_line(run.get("error") or run.get("result"), 200 if wide else 60),
        ]
        rows.append([*row, ago(run.get("finishedAt"), now), "", run["id"]] if wide else row)
    if not rows:
        return f'no runs of scheduledjob "{name}" yet'
    headers = ["RUN", "SCHEDULED", "OUTCOME", "ATTEMPTS", "STARTED", "DURATION", "RESULT"]
    if wide:
        headers += ["FINISHED", "WORKER", "RUN ID"]
    return table(headers, rows)


# -- describe -----------------------------------------------------------------


def find_run(job: dict[str, Any], run_id: str) -> tuple[str, dict[str, Any]] | None:
    """Where the job's status holds ``run_id`` (active, kept, last, or only queued)."""
    status = job.get("status") or {}
    for where, runs in (
        ("active", status.get("activeRuns") or []),
        ("history", status.get("runs") or []),
    ):
        for run in runs:
            if run.get("id") == run_id:
                return where, run
    if (status.get("lastRun") or {}).get("id") == run_id:
        return "last", status["lastRun"]
    if (status.get("queuedRun") or {}).get("id") == run_id:
        return "queued", status["queuedRun"]
    return None


def describe_run(job: dict[str, Any], where: str, run: dict[str, Any], *, now: dt.datetime) -> str:
    """``describe RUN``: one run, as ``kubectl describe`` lays an object out."""
    meta, spec = job["metadata"], job.get("spec") or {}
    task = spec.get("task") or {}
    state = {"active": run.get("state"), "queued": "Queued"}.get(where) or run.get("outcome")

    def stamp(key: str) -> str:
        value = run.get(key)
        return f"{value} ({ago(value, now)})" if value else "-"

    attempts = run.get("attempt") if where == "active" else run.get("attempts")
    lines = [
        ("Run ID", run["id"]),
        ("Job", f"{meta.get('namespace')}/{meta['name']}"),
        ("Task", next(iter(task), "?")),
        (
            "Trigger",
            "manual (run-now)"
            if run.get("manual") or ".manual." in run["id"]
            else ("backfill" if ".backfill." in run["id"] else "schedule"),
        ),
        ("Parameters", ", ".join(f"{k}={v}" for k, v in (run.get("params") or {}).items()) or "-"),
        ("State", state or "?"),
        (
            "Attempts",
            f"{attempts} of {(spec.get('retry') or {}).get('maxAttempts', 3)}" if attempts else "-",
        ),
        ("Scheduled", stamp("scheduledAt")),
        ("Queued", stamp("queuedAt")),
        ("Started", stamp("startedAt")),
        ("Finished", stamp("finishedAt")),
        ("Duration", duration(run.get("startedAt"), run.get("finishedAt"))),
        ("Worker", run.get("worker") or "-"),
        ("Result", run.get("result") or "-"),
        ("Error", run.get("error") or "-"),
    ]
    width = max(len(key) for key, _ in lines) + 2
    return "\n".join(f"{key + ':':<{width}}{value}" for key, value in lines)


def describe_job(job: dict[str, Any], *, now: dt.datetime) -> str:
    """``describe JOB``: the job as ``kubectl describe`` lays an object out: what it
    runs and when, where it stands, its conditions, and its runs."""
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    last = status.get("lastRun") or {}
    created = meta.get("creationTimestamp")
    fields = [
        ("Name", meta["name"]),
        ("Namespace", meta.get("namespace", "")),
        ("Description", spec.get("description") or "-"),
        ("Schedule", _schedule_text(spec)),
        ("Time Zone", spec.get("timeZone", "UTC")),
        ("Suspend", str(bool(spec.get("suspend"))).lower()),
        ("Task", next(iter(spec.get("task") or {}), "?")),
        ("Concurrency", spec.get("concurrencyPolicy", "Allow")),
        ("Phase", status.get("phase") or "-"),
        (
            "Last Run",
            f"{last['id']} {last.get('outcome', '?')} ({ago(last.get('scheduledAt'), now)} ago)"
            if last.get("id")
            else "-",
        ),
        ("Next Runs", ", ".join(next_runs(job, now)) or "-"),
        ("Missed Runs", str(status.get("missedRuns", 0))),
        ("Created", f"{created} ({ago(created, now)} ago)" if created else "-"),
    ]
    width = max(len(key) for key, _ in fields) + 2
    lines = [f"{key + ':':<{width}}{value}" for key, value in fields]
    conditions = [
        [
            c.get("type", ""),
            c.get("status", ""),
            c.get("reason", ""),
            ago(c.get("lastTransitionTime"), now),
            one_line(c.get("message"), 80),
        ]
        for c in status.get("conditions") or []
    ]
    lines.append("Conditions:")
    lines += (
        _indented(table(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], conditions))
        if conditions
        else ["  <none>"]
    )
    lines.append("Runs:")
    lines += _indented(render_runs(meta["name"], status, output="table", now=now))
    return "\n".join(lines)


def _indented(text: str) -> list[str]:
    return [f"  {line}" for line in text.splitlines()]


# -- dlq ----------------------------------------------------------------------


def render_dead_runs(jobs: list[dict[str, Any]], *, now: dt.datetime) -> str:
    """``dlq list``: the dead runs the jobs' status lists, newest first."""
    rows = []
    full = []
    for job in jobs:
        meta = job["metadata"]
        dead = (job.get("status") or {}).get("deadRuns") or []
        if len(dead) >= DEAD_RUNS_LISTED:
            full.append(f"{meta.get('namespace')}/{meta['name']}")
        rows += [
            (
                run.get("failedAt") or "",
                [
                    run["id"],
                    f"{meta.get('namespace')}/{meta['name']}",
                    str(run.get("attempts", "")),
                    ago(run.get("failedAt"), now),
                    one_line(run.get("error"), 70),
                ],
            )
            for run in dead
        ]
    if not rows:
        return "no dead runs"
    rows.sort(key=lambda row: row[0], reverse=True)
    text = table(["RUN ID", "JOB", "ATTEMPTS", "FAILED", "ERROR"], [row for _, row in rows])
    if full:
        text += (
            f"\n{', '.join(full)}: status lists {DEAD_RUNS_LISTED} dead runs at most; "
            "requeue or purge them to see more (or dlq list --redis)"
        )
    return text
