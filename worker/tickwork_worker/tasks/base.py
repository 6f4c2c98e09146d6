"""What every task kind shares: the run's context, the result, and failure kinds."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from tickwork.api.models import ScheduledJobSpec, SecretKeyRef, ValueSource
from tickwork.core.errors import PermanentTaskError, TaskTimeoutError


class SecretSource(Protocol):
    async def read(self, ref: SecretKeyRef) -> str:
        """The value of a key of a Secret in the job's namespace."""
        ...


@dataclass(frozen=True)
class RunContext:
    """What a task may know of the run executing it."""

    run_id: str
    attempt: int
    namespace: str
    name: str
    scheduled_at: dt.datetime | None
    secrets: SecretSource | None = None
    """Reads ``valueFrom.secretKeyRef`` (see tasks.secrets); None: none may be read."""

    async def value(self, value: str, source: ValueSource | None) -> str:
        """A value given in the spec, or read from where ``source`` says."""
        if source is None:
            return value
        if self.secrets is None:
            raise PermanentTaskError("values from Secrets are not available here")
        return await self.secrets.read(source.secret_key_ref)


@dataclass(frozen=True)
class TaskResult:
    """A successful execution; ``summary`` goes to ``status.lastRun.result`` (truncated)."""

    summary: str


class RetryableTaskError(Exception):
    """The attempt failed; another attempt may succeed (5xx, timeouts, exit codes).
    ``detail`` goes to the run's record in status only, never into Events."""

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class TaskKind(Protocol):
    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        """Run the task; raise PermanentTaskError or RetryableTaskError on failure."""
        ...


__all__ = [
    "PermanentTaskError",
    "RetryableTaskError",
    "RunContext",
    "TaskKind",
    "TaskResult",
    "TaskTimeoutError",
]
