"""``tickwork`` (also ``kubectl tickwork``): everyday operations on ScheduledJobs.

    tickwork trigger NAME [--token T]     run now (the tickwork.dev/run-now annotation)
    tickwork suspend NAME / resume NAME   stop / restart publishing runs
    tickwork runs NAME [-o json|yaml]     the run history as a table (or for scripts)
    tickwork dlq list                     dead-lettered runs
    tickwork dlq requeue RUN_ID | --all   give them another go, as attempt 1
    tickwork dlq purge RUN_ID | --all     forget them
    tickwork version                      this client's version

Kubernetes access follows kubectl (``$KUBECONFIG``, ``--context``,
``-n/--namespace``), and as with kubectl these flags go anywhere on the line
(``kubectl tickwork runs nightly -n prod``); Redis comes from
``TICKWORK_REDIS_*`` or ``--redis-url``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from tickwork.api import models
from tickwork.core.errors import QueueUnavailableError
from tickwork.core.runs import RUN_NOW_ANNOTATION
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import DeadLetter


class CliError(Exception):
    """A message for the user; printed without a traceback, exit status 1."""


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
    if not stamp:
        return "-"
    seconds = int((now - dt.datetime.fromisoformat(stamp)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


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


class Jobs:
    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.api = k8s.CustomObjectsApi(api)
        self.namespace = namespace

    def _call(self, method: str, name: str, *args: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(self.api, method)(
                models.GROUP, models.VERSION, self.namespace, models.PLURAL, name, *args
            )
        except k8s.ApiException as exc:
            if exc.status == 404:  # noqa: PLR2004 - HTTP not found
                raise CliError(
                    f'scheduledjob "{name}" not found in namespace "{self.namespace}"'
                ) from None
            if exc.status == 403:  # noqa: PLR2004 - HTTP forbidden
                raise CliError(f"not allowed: {exc.reason}") from None
            raise CliError(f"the API server said {exc.status} {exc.reason}") from None
        return result

    def get(self, name: str) -> dict[str, Any]:
        return self._call("get_namespaced_custom_object", name)

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("patch_namespaced_custom_object", name, body)


def _connect(args: argparse.Namespace) -> Jobs:
    try:
        k8s_config.load_kube_config(config_file=args.kubeconfig, context=args.context)  # type: ignore[no-untyped-call]
        _, active = k8s_config.list_kube_config_contexts(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    except (ConfigException, FileNotFoundError) as exc:
        raise CliError(f"no usable kubeconfig: {exc}") from None
    namespace = args.namespace or (active or {}).get("context", {}).get("namespace") or "default"
    return Jobs(k8s.ApiClient(), namespace)


def cmd_trigger(args: argparse.Namespace) -> str:
    jobs = _connect(args)
    token = args.token or dt.datetime.now(dt.UTC).strftime("cli-%Y%m%d-%H%M%S-%f")
    jobs.patch(args.name, {"metadata": {"annotations": {RUN_NOW_ANNOTATION: token}}})
    return f'scheduledjob "{args.name}" triggered (token {token})'


def cmd_suspend(args: argparse.Namespace, *, suspend: bool) -> str:
    jobs = _connect(args)
    jobs.patch(args.name, {"spec": {"suspend": suspend}})
    return f'scheduledjob "{args.name}" {"suspended" if suspend else "resumed"}'


def cmd_runs(args: argparse.Namespace) -> str:
    jobs = _connect(args)
    status = jobs.get(args.name).get("status") or {}
    return render_runs(args.name, status, output=args.output, now=dt.datetime.now(dt.UTC))


def render_runs(name: str, status: dict[str, Any], *, output: str, now: dt.datetime) -> str:
    """The job's runs: started ones first, then the history newest first; as a table,
    or as JSON or YAML (``{"activeRuns": [...], "runs": [...]}``, for scripts)."""
    history = sorted(  # kept oldest first; shown newest first
        status.get("runs") or [],
        key=lambda run: run.get("finishedAt") or run.get("startedAt") or run.get("scheduledAt"),
        reverse=True,
    )
    if output in ("json", "yaml"):
        document = {"activeRuns": status.get("activeRuns") or [], "runs": history}
        if output == "json":
            return json.dumps(document, indent=2)
        return yaml.safe_dump(document, sort_keys=False).rstrip()
    rows = [
        [
            current["id"].split(".", 1)[-1], ago(current.get("scheduledAt"), now),
            current.get("state", ""), str(current.get("attempt", "")),
            ago(current.get("startedAt"), now), "-", f"on {current.get('worker', '?')}",
        ]
        for current in status.get("activeRuns") or []
    ]  # fmt: skip
    rows.extend(
        [
            run["id"].split(".", 1)[-1], ago(run.get("scheduledAt"), now), run.get("outcome", ""),
            str(run.get("attempts", "")), ago(run.get("startedAt"), now),
            duration(run.get("startedAt"), run.get("finishedAt")),
            one_line(run.get("error") or run.get("result")),
        ]
        for run in history
    )  # fmt: skip
    if not rows:
        return f'no runs of scheduledjob "{name}" yet'
    headers = ["RUN", "SCHEDULED", "OUTCOME", "ATTEMPTS", "STARTED", "DURATION", "RESULT"]
    return table(headers, rows)


async def _dlq(args: argparse.Namespace) -> str:
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
    now = dt.datetime.now(dt.UTC)
    rows = [
        [
            letter.message.run_id, f"{letter.message.namespace}/{letter.message.name}",
            str(letter.message.attempt),
            ago(dt.datetime.fromtimestamp(letter.failed_at, dt.UTC).isoformat(), now),
            one_line(letter.error, 70),
        ]
        for letter in letters
    ]  # fmt: skip
    return table(["RUN ID", "JOB", "ATTEMPTS", "FAILED", "ERROR"], rows)


def _global_flags(*, nested: bool) -> argparse.ArgumentParser:
    """The flags kubectl users put anywhere: on the root parser with their defaults,
    on every subcommand without (SUPPRESS), so a flag given before the subcommand is
    not reset by it and one given after it still counts."""
    flags = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if nested else None
    flags.add_argument("-n", "--namespace", default=default)
    flags.add_argument("--kubeconfig", default=default)
    flags.add_argument("--context", default=default)
    flags.add_argument("--redis-url", default=default,
                       help="overrides TICKWORK_REDIS_URL (dlq commands)")  # fmt: skip
    return flags


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="tickwork", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_global_flags(nested=False)],
    )  # fmt: skip
    nested = [_global_flags(nested=True)]
    sub = root.add_subparsers(dest="command", required=True)
    for name, text in (("trigger", "run a job now"), ("suspend", "stop publishing runs"),
                       ("resume", "publish runs again, from now on"),
                       ("runs", "show the run history")):  # fmt: skip
        cmd = sub.add_parser(name, help=text, parents=nested)
        cmd.add_argument("name")
        if name == "runs":
            cmd.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
        if name == "trigger":
            cmd.add_argument("--token", help="a distinct token runs once (default: a timestamp)")
    sub.add_parser("version", help="this client's version", parents=nested)
    dlq = sub.add_parser("dlq", help="the dead-letter queue", parents=nested).add_subparsers(
        dest="dlq_command", required=True
    )
    listing = dlq.add_parser("list", help="dead-lettered runs, newest first", parents=nested)
    listing.add_argument("--limit", type=int, default=50)
    for name in ("requeue", "purge"):
        cmd = dlq.add_parser(name, parents=nested)
        cmd.add_argument("run_id", nargs="?")
        cmd.add_argument("--all", action="store_true")
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "trigger":
            output = cmd_trigger(args)
        elif args.command in ("suspend", "resume"):
            output = cmd_suspend(args, suspend=args.command == "suspend")
        elif args.command == "runs":
            output = cmd_runs(args)
        elif args.command == "version":
            output = f"tickwork {importlib.metadata.version('tickwork')}"
        else:
            output = asyncio.run(_dlq(args))
    except (CliError, QueueUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    print(output)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
