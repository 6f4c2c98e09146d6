"""The ``command`` task: run a program in the worker's container. Off by default.

The program gets a clean environment (PATH, HOME, LANG, the spec's ``env``
and ``TICKWORK_RUN_ID``), never the worker's own (which holds the Redis
password). It runs in its own process group, so a timeout kills it and
everything it started. Exit 0 succeeds; 126/127 (cannot execute, not found)
are permanent; any other exit code is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from tickwork.api.models import ScheduledJobSpec
from tickwork_worker.tasks.base import (
    PermanentTaskError,
    RetryableTaskError,
    RunContext,
    TaskResult,
)
from tickwork_worker.tenants import TenantRules

_OUTPUT_LIMIT = 64 * 1024
_KILL_GRACE_SECONDS = 5.0
_PERMANENT_EXITS = frozenset({126, 127})


class CommandDisabledError(PermanentTaskError):
    pass


class CommandTask:
    def __init__(self, *, enabled: bool, rules: TenantRules | None = None) -> None:
        """``rules``: per-namespace exceptions to ``enabled`` (see tenants)."""
        self.enabled = enabled
        self._rules = rules

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
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),  # noqa: S108 - a default, not a file we write
            "LANG": "C.UTF-8",
            **{var.name: await run.value(var.value, var.value_from) for var in task.env},
            "TICKWORK_RUN_ID": run.run_id,
            "TICKWORK_ATTEMPT": str(run.attempt),
        }
        try:
            process = await asyncio.create_subprocess_exec(
                *task.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise PermanentTaskError(f"cannot start {task.args[0]!r}: {exc}") from None
        try:
            output = await _read_limited(process)
            code = await process.wait()
        except asyncio.CancelledError:
            await _kill_group(process)
            raise
        tail = output.decode(errors="replace").strip()[-1000:]
        summary = f"exit {code}" + (f": {tail}" if tail else "")
        if code == 0:
            return TaskResult(summary=summary)
        if code in _PERMANENT_EXITS:
            raise PermanentTaskError(summary)
        raise RetryableTaskError(summary)


async def _read_limited(process: asyncio.subprocess.Process) -> bytes:
    """Everything the program printed, keeping only the last 64 KiB."""
    assert process.stdout is not None  # noqa: S101 - created with a pipe
    kept = b""
    while chunk := await process.stdout.read(65536):
        kept = (kept + chunk)[-_OUTPUT_LIMIT:]
    return kept


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the whole process group, SIGKILL it if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), timeout=_KILL_GRACE_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
