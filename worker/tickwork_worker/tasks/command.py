"""The ``command`` task: run a program. Off by default.

The program gets a clean environment, never the worker's own: PATH, HOME, LANG,
the spec's ``env``, the run's ``TICKWORK_RUN_ID``, ``TICKWORK_SCHEDULED_TIME``,
``TICKWORK_ATTEMPT``, ``TICKWORK_JOB`` and ``TICKWORK_NAMESPACE``, and a manual
run's parameters as ``TICKWORK_PARAM_<NAME>`` (over a default the spec's ``env``
may give). It runs in its own process
group under a supervisor of its own (:mod:`tickwork_worker.command_supervisor`), so
a timeout kills it and everything it started, and nothing it started outlives it
(``setsid`` or not). Exit 0 succeeds;
126/127 (cannot execute, not found) are permanent; any other exit code is
retried. With a command runner (``runner_socket``; the chart's default when
command tasks are on) the program runs in the runner's container, as another
user, without the Redis password file or the worker's ServiceAccount token
(:mod:`tickwork_worker.command_runner`), in a sandbox that keeps it off the runner
and other commands; without one, in the worker's, unconfined.
"""

from __future__ import annotations

import asyncio
import json
import os

from tickwork.api.models import ScheduledJobSpec
from tickwork.core.params import env_name
from tickwork_worker.command_runner import (
    KILL_NOW,
    REQUEST_LIMIT,
    kill_group,
    read_limited,
    start,
)
from tickwork_worker.tasks.base import (
    PermanentTaskError,
    RetryableTaskError,
    RunContext,
    Stop,
    TaskResult,
)
from tickwork_worker.tenants import TenantRules

_PERMANENT_EXITS = frozenset({126, 127})


class CommandDisabledError(PermanentTaskError):
    pass


class CommandTask:
    def __init__(
        self,
        *,
        enabled: bool,
        rules: TenantRules | None = None,
        runner_socket: str = "",
        previews: bool = False,
    ) -> None:
        """``rules``: per-namespace exceptions to ``enabled`` (see tenants);
        ``runner_socket``: run programs through the command runner listening there;
        ``previews``: keep the output's tail in the result (off: the exit code only)."""
        self.enabled = enabled
        self._rules = rules
        self._runner = runner_socket
        self._previews = previews

    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        task = spec.task.command
        assert task is not None  # noqa: S101 - dispatched by kind
        enabled = self._rules.of(run.namespace).command_tasks if self._rules else self.enabled
        if not enabled:
            raise CommandDisabledError(
                f"command tasks are disabled for jobs in namespace {run.namespace!r}; an "
                "administrator can enable them with the Helm value "
                "worker.commandTasks.enabled=true (TICKWORK_WORKER_COMMAND_TASKS=true) or "
                "for one namespace in worker.tenants"
            )
        # Through the runner, HOME is the command's own directory (unless the job sets it).
        home = {} if self._runner else {"HOME": os.environ.get("HOME", "/tmp")}  # noqa: S108
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            **home,
            "LANG": "C.UTF-8",
            **{var.name: await run.value(var.value, var.value_from) for var in task.env},
            **run_environment(run),
        }
        if self._runner:
            code, output = await self._remote(task.args, env, run.stop)
        else:
            code, output = await _local(task.args, env, run.stop)
        tail = run.cut(output.strip()[-1000:], start=True) if self._previews else ""
        summary = f"exit {code}" + (f": {tail}" if tail else "")
        if code == 0:
            return TaskResult(summary=summary)
        if code in _PERMANENT_EXITS:
            raise PermanentTaskError(summary)
        raise RetryableTaskError(summary)

    async def _remote(self, args: list[str], env: dict[str, str], stop: Stop) -> tuple[int, str]:
        """Run the program through the command runner; hanging up (on cancellation)
        makes the runner kill its process group (at once after ``kill``)."""
        try:
            reader, writer = await asyncio.open_unix_connection(self._runner, limit=REQUEST_LIMIT)
        except OSError as exc:
            raise RetryableTaskError(f"the command runner is not reachable: {exc}") from None
        try:
            writer.write(json.dumps({"args": args, "env": env}).encode() + b"\n")
            await writer.drain()
            line = await reader.readline()
        except asyncio.CancelledError:
            if stop.at_once:
                writer.write(KILL_NOW)  # closing the transport sends it first
            raise
        finally:
            writer.close()
        if not line:
            raise RetryableTaskError("the command runner hung up before the program ended")
        answer = json.loads(line)
        if "error" in answer:
            raise PermanentTaskError(str(answer["error"]))
        return int(answer["code"]), str(answer["output"])


def run_environment(run: RunContext) -> dict[str, str]:
    """The variables that tell a program which run it is, and its parameters (and,
    with traces on, ``TRACEPARENT``: the span it joins)."""
    env = {
        "TICKWORK_RUN_ID": run.run_id,
        "TICKWORK_SCHEDULED_TIME": run.scheduled_time,
        "TICKWORK_ATTEMPT": str(run.attempt),
        "TICKWORK_JOB": run.name,
        "TICKWORK_NAMESPACE": run.namespace,
        **{env_name(name): value for name, value in run.params.items()},
    }
    if run.traceparent:
        env["TRACEPARENT"] = run.traceparent
    return env


async def _local(args: list[str], env: dict[str, str], stop: Stop) -> tuple[int, str]:
    """Run the program in this container: its exit code and the tail of its output."""
    try:
        process = await start(args, env)
    except (FileNotFoundError, PermissionError) as exc:
        raise PermanentTaskError(f"cannot start {args[0]!r}: {exc}") from None
    assert process.stdout is not None  # noqa: S101 - created with a pipe
    try:
        output = await read_limited(process.stdout)
        code = await process.wait()
    except asyncio.CancelledError:
        await kill_group(process, at_once=stop.at_once)
        raise
    return code, output.decode(errors="replace")
