"""The commands, their flags, and ``main``: each command reads or patches
ScheduledJobs with the user's own kubeconfig and prints what :mod:`render` makes
of them.

Over 400 lines: one short function per ``kubectl tickwork`` command, which read best
side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.metadata
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tickwork.api.models import Backfill, ScheduledJobSpec
from tickwork.cli import completion, explain, importing, render
from tickwork.cli.access import CliError, ConflictError, Jobs, connect
from tickwork.core.annotations import (
    CANCEL_ANNOTATION,
    DEAD_LETTER_ANNOTATIONS,
    RESUME_ANNOTATION,
    RUN_NOW_ANNOTATION,
    RUN_PARAMS_ANNOTATION,
    with_cancel,
)
from tickwork.core.backfill import MAX_BACKFILLS, backfill_runs, refusal
from tickwork.core.errors import InvalidParamsError, InvalidSpecError, QueueUnavailableError
from tickwork.core.params import check_params, encode_params, parse_assignment
from tickwork.core.runs import parse_run_id
from tickwork.core.schedule import Schedule
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import DeadLetter


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _token() -> str:
    """A fresh token for an annotation the operator acts on once per token."""
    return _now().strftime("cli-%Y%m%d-%H%M%S-%f")


def trigger_params(assignments: Sequence[str]) -> dict[str, str]:
    """The ``--param NAME=VALUE`` flags as parameters, checked as the operator checks
    them; a name given twice keeps its last value."""
    params: dict[str, str] = {}
    try:
        for assignment in assignments:
            name, value = parse_assignment(assignment)
            params.pop(name, None)
            params[name] = value
        return check_params(params)
    except InvalidParamsError as exc:
        raise CliError(str(exc)) from None


def cmd_trigger(args: argparse.Namespace) -> str:
    params = trigger_params(args.param or [])
    jobs = connect(args)
    token = args.token or _token()
    # One patch sets the token and its parameters together (none: the annotation goes,
    # so no earlier trigger's parameters join this run).
    annotations = {
        RUN_NOW_ANNOTATION: token,
        RUN_PARAMS_ANNOTATION: encode_params(params) if params else None,
    }
    jobs.patch(args.name, {"metadata": {"annotations": annotations}})
    named = f", parameters {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""
    return f'scheduledjob "{args.name}" triggered (token {token}{named})'


def cmd_suspend(args: argparse.Namespace) -> str:
    jobs = connect(args)
    jobs.patch(args.name, {"spec": {"suspend": True}})
    return f'scheduledjob "{args.name}" suspended'


def cmd_resume(args: argparse.Namespace) -> str:
    """Undo a suspend, and end a pause after failed runs (a resume token: no spec
    change needed); either way runs start again from now."""
    jobs = connect(args)
    token = args.token or _token()
    jobs.patch(
        args.name,
        {"spec": {"suspend": False}, "metadata": {"annotations": {RESUME_ANNOTATION: token}}},
    )
    return f'scheduledjob "{args.name}" resumed (token {token})'


def _instant(text: str, flag: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise CliError(
            f"{flag} must be an RFC 3339 time with an offset, like "
            f"2026-11-01T00:00:00Z, not {text!r}"
        )
    return moment


def cmd_backfill(args: argparse.Namespace) -> str:
    """Add a backfill to the job's spec (spec.backfills), checked first as the API server
    and the operator check it; one patch, conditional on the version read (read again
    and checked again if a status write came between: runs write status every minute)."""
    start, end = _instant(args.start, "--from"), _instant(args.end, "--to")
    name = args.backfill_name or _now().strftime("bf-%Y%m%d-%H%M%S")
    jobs = connect(args)
    for _ in range(_CONDITIONAL_TRIES):
        job = jobs.get(args.name)
        patch, schedule = _backfill_patch(job, name, start, end)
        try:
            jobs.patch(args.name, patch)
        except ConflictError:
            continue
        count = backfill_runs(schedule, start, end)
        return (
            f'scheduledjob "{args.name}" backfill {name}: {count} run(s) from '
            f"{start.isoformat()} to {end.isoformat()}"
        )
    raise CliError(f'scheduledjob "{args.name}" kept changing: try again')


def _backfill_patch(
    job: dict[str, Any], name: str, start: dt.datetime, end: dt.datetime
) -> tuple[dict[str, Any], Schedule]:
    """The patch that adds backfill ``name`` to ``job`` as read, and the job's schedule."""
    try:
        spec = ScheduledJobSpec.model_validate(job.get("spec") or {})
        backfill = Backfill.model_validate({"name": name, "from": start, "to": end})
    except ValueError as exc:
        raise CliError(f"backfill refused: {exc}") from None
    if spec.one_shot:
        raise CliError("backfills apply to recurring jobs only: this one has runAt")
    # The schedule as the operator reads it (zone, daylight saving, @every grid, bounds).
    created = job["metadata"].get("creationTimestamp")
    try:
        schedule = spec.schedule_of(dt.datetime.fromisoformat(created) if created else _now())
    except InvalidSpecError as exc:
        raise CliError(f"backfill refused: the job's spec is invalid: {exc}") from None
    why = refusal(schedule, start, end)
    if why is not None:
        raise CliError(f"backfill refused: {why}")
    kept = [b for b in spec.backfills if b.name != name]
    if len(kept) >= MAX_BACKFILLS:
        raise CliError(
            f"the job lists {len(kept)} backfills already, the most it may: "
            "remove finished ones from spec.backfills first"
        )
    wire = [b.model_dump(mode="json", by_alias=True) for b in [*kept, backfill]]
    patch = {
        "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]},
        "spec": {"backfills": wire},
    }
    return patch, schedule


def cmd_get(args: argparse.Namespace) -> str:
    """The jobs (one by name, or those ``-l`` selects); with ``-w``, then every change
    to them as it comes, a row (or a document) each, until interrupted."""
    jobs = connect(args)
    if args.name:
        if args.all_namespaces:
            raise CliError("a name and -A do not go together: name the namespace with -n")
        if args.selector:
            raise CliError("a name and -l do not go together")
        found, version = [jobs.get(args.name)], ""
    else:
        found, version = jobs.listed(all_namespaces=args.all_namespaces, selector=args.selector)
    if not found and args.output == "table" and not args.all_namespaces:
        shown = f"No resources found in {jobs.namespace} namespace."
    else:
        shown = render.render_jobs(
            found, output=args.output, all_namespaces=args.all_namespaces, now=_now()
        )
    if not args.watch:
        return shown
    print(shown, flush=True)  # noqa: T201 - the changes follow as they come
    _follow(jobs, args, version or str(found[0]["metadata"].get("resourceVersion") or ""))
    return ""


def _follow(jobs: Jobs, args: argparse.Namespace, version: str) -> None:
    """``get -w``: each change to the jobs listed, as a row of the table (or a document,
    or a name), until interrupted; a deleted job's row is its last. With a name, that
    job's changes only."""
    changes = jobs.watch(version, all_namespaces=args.all_namespaces, selector=args.selector)
    try:
        for _, job in changes:
            if args.name and job["metadata"]["name"] != args.name:
                continue
            row = render.render_jobs(
                [job], output=args.output, all_namespaces=args.all_namespaces, now=_now()
            )
            if args.output in ("table", "wide"):
                row = row.split("\n", 1)[1]  # the header came with the list
            print(row, flush=True)  # noqa: T201
    except KeyboardInterrupt:
        return


def cmd_runs(args: argparse.Namespace) -> str:
    jobs = connect(args)
    status = jobs.get(args.name).get("status") or {}
    return render.render_runs(args.name, status, output=args.output, now=_now())


def cmd_describe(args: argparse.Namespace) -> str:
    """A job by its name, or a run by its ID (the job is found by the uid the ID
    starts with). What reads as a run ID but names no job's run is tried as a name
    (a job's name may hold dots)."""
    jobs = connect(args)
    try:
        parse_run_id(args.target)
        job = _job_of_run(jobs, args.target, all_namespaces=args.all_namespaces)
    except ValueError:
        return _describe_job(jobs, args)
    except CliError as no_such_run:
        if args.all_namespaces:
            raise
        with contextlib.suppress(CliError):
            return _describe_job(jobs, args)
        raise no_such_run from None
    found = render.find_run(job, args.target)
    if found is None:
        name = job["metadata"]["name"]
        raise CliError(
            f'run "{args.target}" is not in the status of scheduledjob '
            f'"{name}" (it may have left the history)'
        )
    return render.describe_run(job, *found, now=_now())


def _describe_job(jobs: Jobs, args: argparse.Namespace) -> str:
    if args.all_namespaces:
        raise CliError("a job's name and -A do not go together: name the namespace with -n")
    return render.describe_job(jobs.get(args.target), now=_now())


def cmd_dlq(args: argparse.Namespace) -> str:
    """Dead runs as the jobs' status lists them, requeued or purged through an
    annotation the operator acts on: the user's RBAC on the jobs decides, not the
    Redis password. ``--redis`` goes to Redis itself (every dead letter, also of jobs
    deleted since; for whoever holds the password)."""
    if args.redis:
        return asyncio.run(_dlq_redis(args))
    jobs = connect(args)
    if args.dlq_command == "list":
        found = jobs.list(all_namespaces=args.all_namespaces)
        return render.render_dead_runs(found, now=_now())
    if args.run_id is None and not args.all:
        raise CliError("name a run ID, or --all")
    token = _token()
    annotation = DEAD_LETTER_ANNOTATIONS[args.dlq_command]
    if args.run_id is not None:
        job = _job_of_run(jobs, args.run_id, all_namespaces=args.all_namespaces)
        asks = [(job, f"{token}:{args.run_id}", 1)]
    else:
        asks = [
            (job, token, len(job["status"]["deadRuns"]))
            for job in jobs.list(all_namespaces=args.all_namespaces)
            if (job.get("status") or {}).get("deadRuns")
        ]
    for job, value, _count in asks:
        meta = job["metadata"]
        Jobs(jobs.api.api_client, meta["namespace"]).patch(
            meta["name"], {"metadata": {"annotations": {annotation: value}}}
        )
    runs = sum(count for _job, _value, count in asks)
    return (
        f"asked the operator to {args.dlq_command} {runs} dead run(s) of "
        f"{len(asks)} job(s) (token {token})"
    )


#: Tries of the cancel annotation's conditional write when other writes win the race.
_CONDITIONAL_TRIES = 5


def pending_runs(status: dict[str, Any]) -> list[str]:
    """Runs of a job's status that a cancel can still stop: running or retrying,
    queued (published, not finished), or buffered."""
    finished = {r.get("id") for r in status.get("runs") or []}
    finished.add((status.get("lastRun") or {}).get("id"))
    ids = [r["id"] for r in status.get("activeRuns") or []]
    queued = (status.get("queuedRun") or {}).get("id")
    if queued and queued not in finished and queued not in ids:
        ids.append(queued)
    return ids + [r["id"] for r in status.get("bufferedRuns") or [] if r["id"] not in ids]


def cmd_cancel(args: argparse.Namespace) -> str:
    """Add the run to the job's tickwork.dev/cancel annotation, conditionally on the
    object's resourceVersion: a cancel written meanwhile is read again and kept."""
    jobs = connect(args)
    job = _job_of_run(jobs, args.run_id, all_namespaces=args.all_namespaces)
    meta = job["metadata"]
    own = Jobs(jobs.api.api_client, meta["namespace"])
    for _ in range(_CONDITIONAL_TRIES):
        status = job.get("status") or {}
        pending = pending_runs(status)
        if args.run_id not in pending:
            found = render.find_run(job, args.run_id)
            if found is not None and found[0] in ("history", "last"):
                raise CliError(
                    f'run "{args.run_id}" already finished '
                    f"({found[1].get('outcome')}): nothing to cancel"
                )
            raise CliError(
                f'run "{args.run_id}" is not queued, running or buffered in '
                f'scheduledjob "{meta["name"]}"'
            )
        value = with_cancel(
            (meta.get("annotations") or {}).get(CANCEL_ANNOTATION), args.run_id, pending=pending
        )
        try:
            own.patch(
                meta["name"],
                {
                    "metadata": {
                        "resourceVersion": meta["resourceVersion"],
                        "annotations": {CANCEL_ANNOTATION: value},
                    }
                },
            )
        except ConflictError:
            job = own.get(meta["name"])
            meta = job["metadata"]
            continue
        return f'run "{args.run_id}" of scheduledjob "{meta["name"]}" is being cancelled'
    raise CliError(f'scheduledjob "{meta["name"]}" kept changing: try again')


def _job_of_run(jobs: Jobs, run_id: str, *, all_namespaces: bool) -> dict[str, Any]:
    """The job ``run_id`` is of (its ID starts with the job's uid)."""
    try:
        uid = parse_run_id(run_id).uid
    except ValueError as exc:
        raise CliError(str(exc)) from None
    for job in jobs.list(all_namespaces=all_namespaces):
        if job["metadata"].get("uid") == uid:
            return job
    where = (
        "any namespace you may list"
        if all_namespaces
        else f'namespace "{jobs.namespace}" (-A looks everywhere)'
    )
    raise CliError(f'no scheduledjob of run "{run_id}" in {where}')


async def _dlq_redis(args: argparse.Namespace) -> str:
    settings = RedisSettings(**({"url": args.redis_url} if args.redis_url else {}))
    queue = RedisRunQueue(create_client(settings), settings)
    try:
        if args.dlq_command == "list":
            return _dead_table(await queue.dead_letters(limit=args.limit))
        target = None if args.all else args.run_id
        if target is None and not args.all:
            raise CliError("name a run ID, or --all")
        if args.dlq_command == "requeue":
            moved = await queue.requeue_dead(target)
            return f"requeued {moved} run(s)" if moved else "no such dead run"
        removed = await queue.purge_dead(target)
        return f"purged {removed} run(s)" if removed else "no such dead run"
    finally:
        await queue.close()


def _dead_table(letters: list[DeadLetter]) -> str:
    if not letters:
        return "the dead-letter queue is empty"
    now = _now()
    rows = [
        [
            letter.message.run_id,
            f"{letter.message.namespace}/{letter.message.name}",
            str(letter.message.attempt),
            render.ago(dt.datetime.fromtimestamp(letter.failed_at, dt.UTC).isoformat(), now),
            render.one_line(letter.error, 70),
        ]
        for letter in letters
    ]
    return render.table(["RUN ID", "JOB", "ATTEMPTS", "FAILED", "ERROR"], rows)


def _global_flags(*, nested: bool) -> argparse.ArgumentParser:
    """The flags kubectl users put anywhere: on the root parser with their defaults,
    on every subcommand without (SUPPRESS), so a flag given before the subcommand is
    not reset by it and one given after it still counts."""
    flags = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if nested else None
    flags.add_argument("-n", "--namespace", default=default)
    flags.add_argument("--kubeconfig", default=default)
    flags.add_argument("--context", default=default)
    flags.add_argument(
        "--redis-url", default=default, help="overrides TICKWORK_REDIS_URL (dlq commands)"
    )
    return flags


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="tickwork",
        description=sys.modules["tickwork.cli"].__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_global_flags(nested=False)],
    )
    nested = [_global_flags(nested=True)]
    sub = root.add_subparsers(dest="command", required=True)
    get = sub.add_parser("get", help="list jobs, or show one", parents=nested)
    get.add_argument("name", nargs="?")
    get.add_argument("-A", "--all-namespaces", action="store_true")
    get.add_argument("-o", "--output", choices=render.FORMATS, default="table")
    get.add_argument(
        "-l", "--selector", default="", help="a label selector, as kubectl takes it (app=x)"
    )
    get.add_argument("-w", "--watch", action="store_true", help="then show each change as it comes")
    for name, text in (
        ("trigger", "run a job now"),
        ("suspend", "stop publishing runs"),
        ("resume", "publish runs again, from now on (also after a pause)"),
        ("runs", "show the run history"),
    ):
        cmd = sub.add_parser(name, help=text, parents=nested)
        cmd.add_argument("name")
        if name == "runs":
            cmd.add_argument("-o", "--output", choices=render.FORMATS, default="table")
        if name in ("trigger", "resume"):
            cmd.add_argument("--token", help="a distinct token acts once (default: a timestamp)")
        if name == "trigger":
            cmd.add_argument(
                "--param",
                action="append",
                metavar="NAME=VALUE",
                help="a parameter of this run (repeatable)",
            )
    backfill = sub.add_parser(
        "backfill", parents=nested, help="run every run of the schedule in a time range"
    )
    backfill.add_argument("name")
    backfill.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="TIME",
        help="RFC 3339, included (2026-11-01T00:00:00Z)",
    )
    backfill.add_argument("--to", dest="end", required=True, metavar="TIME", help="included")
    backfill.add_argument(
        "--name", dest="backfill_name", metavar="NAME", help="a DNS label (default: from the time)"
    )
    describe = sub.add_parser(
        "describe", help="a job, by its name, or one run, by its ID", parents=nested
    )
    describe.add_argument("target", metavar="JOB|RUN_ID")
    describe.add_argument("-A", "--all-namespaces", action="store_true")
    cancel = sub.add_parser("cancel", help="stop a queued, running or buffered run", parents=nested)
    cancel.add_argument("run_id")
    cancel.add_argument("-A", "--all-namespaces", action="store_true")
    explained = sub.add_parser(
        "explain", parents=nested, help="a job file's next runs, offline (no cluster)"
    )
    explained.add_argument("-f", "--filename", required=True, metavar="FILE", help="- for stdin")
    explained.add_argument("--count", type=int, default=10, help="how many runs (default 10)")
    explained.add_argument("--from", dest="start", metavar="TIME", help="RFC 3339 (default: now)")
    explained.add_argument(
        "--calendar",
        action="append",
        default=[],
        metavar="FILE",
        help="mark the runs on the days of the Calendars in FILE (repeatable)",
    )
    imported = sub.add_parser(
        "import", parents=nested, help="CronJobs as ScheduledJobs with a container task"
    )
    imported.add_argument("targets", nargs="*", metavar="cronjob/NAME")
    imported.add_argument("--all", action="store_true", help="every CronJob of the namespace")
    imported.add_argument("-A", "--all-namespaces", action="store_true", help="with --all")
    imported.add_argument("--apply", action="store_true", help="create them (default: print)")
    imported.add_argument(
        "--suspend-source", action="store_true", help="then suspend each CronJob (with --apply)"
    )
    sub.add_parser("version", help="this client's version", parents=nested)
    shells = sub.add_parser("completion", help="a shell completion script", parents=nested)
    shells.add_argument("shell", choices=sorted(completion.SCRIPTS))
    dlq = sub.add_parser("dlq", help="the dead-letter queue", parents=nested).add_subparsers(
        dest="dlq_command", required=True
    )
    listing = dlq.add_parser("list", help="dead-lettered runs, newest first", parents=nested)
    listing.add_argument("--limit", type=int, default=50, help="with --redis")
    for name in ("requeue", "purge"):
        cmd = dlq.add_parser(name, parents=nested)
        cmd.add_argument("run_id", nargs="?")
        cmd.add_argument("--all", action="store_true")
    for cmd in dlq.choices.values():
        cmd.add_argument("-A", "--all-namespaces", action="store_true")
        cmd.add_argument(
            "--redis", action="store_true", help="Redis itself (its password), not the jobs' status"
        )
    return root


def _complete(words: list[str]) -> str:
    """``tickwork __complete WORDS... CURRENT``: candidates, then cobra's directive."""
    *before, current = words or [""]
    namespace = argparse.Namespace(namespace=None, kubeconfig=None, context=None)
    known, _ = _global_flags(nested=False).parse_known_args(before)
    namespace.__dict__.update({k: v for k, v in vars(known).items() if v is not None})

    def job_names() -> list[str]:
        try:
            return [job["metadata"]["name"] for job in connect(namespace).list()]
        except CliError:
            return []

    def run_ids() -> list[str]:
        try:
            jobs = connect(namespace).list()
        except CliError:
            return []
        ids = []
        for job in jobs:
            status = job.get("status") or {}
            ids += [
                run["id"]
                for run in [
                    *(status.get("activeRuns") or []),
                    *(status.get("bufferedRuns") or []),
                    *(status.get("runs") or []),
                ]
            ]
        return ids

    offered = completion.candidates(parser(), before, current, names=job_names, run_ids=run_ids)
    return "\n".join([*offered, completion.NO_FILES])


def cmd_explain(args: argparse.Namespace) -> str:
    """Offline: the file's jobs and their next runs (no cluster is asked)."""
    text = sys.stdin.read() if args.filename == "-" else _read(args.filename)
    after = _instant(args.start, "--from") if args.start else _now()
    if not 1 <= args.count <= explain.MOST:
        raise CliError(f"--count must be 1 to {explain.MOST}")
    try:
        calendars = [c for name in args.calendar for c in explain.calendars_in(_read(name))]
        shown = []
        for job in explain.jobs_in(text):
            spec = explain.spec_of(job)
            runs = explain.next_runs(spec, after=after, count=args.count, calendars=calendars)
            shown.append(explain.render(job, spec, runs))
    except explain.ExplainError as exc:
        raise CliError(str(exc)) from None
    return "\n\n".join(shown)


def _read(name: str) -> str:
    try:
        return Path(name).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror}") from None


def _version(_args: argparse.Namespace) -> str:
    return f"tickwork {importlib.metadata.version('tickwork')}"


def _completion(args: argparse.Namespace) -> str:
    return completion.SCRIPTS[args.shell].rstrip()


COMMANDS: dict[str, Callable[[argparse.Namespace], str]] = {
    "get": cmd_get,
    "runs": cmd_runs,
    "describe": cmd_describe,
    "cancel": cmd_cancel,
    "trigger": cmd_trigger,
    "suspend": cmd_suspend,
    "resume": cmd_resume,
    "backfill": cmd_backfill,
    "explain": cmd_explain,
    "version": _version,
    "completion": _completion,
    "dlq": cmd_dlq,
    "import": importing.cmd_import,
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["__complete"]:
        print(_complete(words[1:]))  # noqa: T201
        return 0
    args = parser().parse_args(words)
    try:
        output = COMMANDS[args.command](args)
    except (CliError, QueueUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    if output:
        print(output)  # noqa: T201
    return 0


def complete_main() -> int:
    """``kubectl_complete-tickwork``: kubectl's plugin completion calls it with the words."""
    return main(["__complete", *sys.argv[1:]])
