"""What every task kind shares: the run's context, the result, and failure kinds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from tickwork.api.models import ScheduledJobSpec, SecretKeyRef, Task, ValueSource
from tickwork.core.errors import PermanentTaskError, TaskTimeoutError
from tickwork.core.templates import RunValues
from tickwork.kube.status import timestamp


class SecretSource(Protocol):
    async def read(self, ref: SecretKeyRef) -> str:
        """The value of a key of a Secret in the job's namespace."""
        ...

    async def read_whole(self, name: str) -> bool:
        """Every value of a Secret in the job's namespace, taken in for redaction;
        False if one cannot be looked for (binary)."""
        ...

    def redact_edges(self, text: str, *, start: bool = False, end: bool = False) -> str:
        """``text`` without a piece of a value read that a cut left at its edges."""
        ...


@dataclass
class Stop:
    """How the worker stops a task it cancels, set before it cancels it: cooperatively
    (a command's process group gets SIGTERM, then SIGKILL after a grace), or
    ``at_once`` (concurrencyPolicy TerminateOther: SIGKILL, no grace). Kinds that
    only need the cancellation itself ignore it."""

    at_once: bool = False


@dataclass(frozen=True)
class RunContext:
    """What a task may know of the run executing it."""

    run_id: str
    attempt: int
    namespace: str
    name: str
    scheduled_at: dt.datetime
    """The run's nominal time: when it was due, or when a manual run was triggered."""
    params: Mapping[str, str] = field(default_factory=dict)
    """A manual run's parameters (none for a scheduled run)."""
    secrets: SecretSource | None = None
    """Reads ``valueFrom.secretKeyRef`` (see tasks.secrets); None: none may be read."""
    job_uid: str | None = None
    """The ScheduledJob's uid (a container task's Job names it as its owner)."""
    traceparent: str | None = None
    """The W3C traceparent of the attempt's ``execute`` span, with traces on
    (tickwork.tracing); the task hands it on."""
    stop: Stop = field(default_factory=Stop)
    """How a cancellation of the task is meant (see :class:`Stop`)."""
    threads: list[Future[Any]] = field(default_factory=list)
    """Threads the task runs in, which a cancellation does not stop (a plain Python
    function's): the run does not go on while one of them still runs."""

    @property
    def scheduled_time(self) -> str:
        """The nominal time in RFC 3339, UTC, as status shows it."""
        return timestamp(self.scheduled_at) or ""

    def values(self) -> RunValues:
        """What a body template's placeholders stand for in this run."""
        return RunValues(
            run_id=self.run_id,
            scheduled_time=self.scheduled_time,
            attempt=self.attempt,
            job=self.name,
            namespace=self.namespace,
            params=self.params,
        )

    def cut(self, text: str, *, start: bool = False, end: bool = False) -> str:
        """``text``, cut by the task at its ``start`` or ``end`` from something longer,
        without a piece of a Secret value left at the cut (whole values are taken out
        of every outcome later, wherever they are)."""
        if self.secrets is None:
            return text
        return self.secrets.redact_edges(text, start=start, end=end)

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


class TaskKinds:
    """The worker's task kinds, each under the model class of its spec in
    :class:`~tickwork.api.models.Task` (``EchoTask`` → the echo kind): a run's kind is
    found by the type of the spec it was given, not by a name."""

    def __init__(self) -> None:
        self._by_model: dict[type[BaseModel], TaskKind] = {}

    def register(self, model: type[BaseModel], kind: TaskKind) -> None:
        if model in self._by_model:
            raise ValueError(f"a task kind is registered for {model.__name__} already")
        self._by_model[model] = kind

    def of(self, task: Task) -> TaskKind:
        """The kind that executes ``task``; a spec no kind is registered for is a
        permanent failure of the run (retrying cannot help)."""
        chosen = task.chosen()
        kind = self._by_model.get(type(chosen))
        if kind is None:
            raise PermanentTaskError(f"this worker has no {task.kind} tasks")
        return kind

    def __contains__(self, model: object) -> bool:
        return model in self._by_model


__all__ = [
    "PermanentTaskError",
    "RetryableTaskError",
    "RunContext",
    "TaskKind",
    "TaskKinds",
    "TaskResult",
    "TaskTimeoutError",
]
