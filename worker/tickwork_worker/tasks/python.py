"""The ``python`` task: call a function registered by name.

Tasks are registered through the entry-point group ``tickwork.tasks`` of any
installed package::

    [project.entry-points."tickwork.tasks"]
    "reports.build" = "acme.reports:build"

A task is called as ``task(*args, **kwargs)`` plus what it asks for of the run, by
naming the keyword (or taking ``**kwargs``): ``run_id``, ``scheduled_time`` (an
aware datetime: when the run was due, or triggered), ``attempt``, ``params`` (a
manual run's parameters, a dict of strings) and, with traces on, ``traceparent`` (the
W3C trace context of the attempt's span); the spec's ``kwargs`` win over them,
so tasks written before a keyword existed keep working. It may be
``async`` (cancelled cleanly at the soft timeout) or plain (run in a thread;
a thread cannot be interrupted, so the attempt ends at the hard timeout, and the
run waits for the thread before it is retried — see the runner).
Raise :class:`tickwork.core.errors.PermanentTaskError` when retrying cannot
help; any other exception is retried.

Plain functions run in a thread pool of their own, as large as the worker's
concurrency: a stuck task holds one of its threads, never the threads that
resolve names or reconnect to Redis. Tickwork's own demo and test tasks
(``tickwork.sleep``, ``tickwork.record``, ``tickwork.hold``, ``tickwork.fail``,
``tickwork.refuse``) are in the group ``tickwork.demo_tasks``, registered only
when the installer turns them on — and installed only in the demo image (``dev/demo-tasks``).
How to ship your own: docs/tasks.md.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import inspect
import reprlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tickwork.api.models import PythonTask as PythonTaskSpec
from tickwork.api.models import ScheduledJobSpec
from tickwork.core.text import TEXT_LIMIT
from tickwork_worker.tasks.base import (
    PermanentTaskError,
    RetryableTaskError,
    RunContext,
    TaskResult,
)
from tickwork_worker.tenants import TenantRules

ENTRY_POINT_GROUP = "tickwork.tasks"
DEMO_ENTRY_POINT_GROUP = "tickwork.demo_tasks"
#: The keywords a task may ask for of its run.
RUN_KEYWORDS = ("run_id", "scheduled_time", "attempt", "params", "traceparent")


def discover(*, demo: bool = False) -> dict[str, Callable[..., Any]]:
    """Every registered task, by name (loaded lazily, at first use); Tickwork's demo
    and test tasks only with ``demo``."""
    groups = [ENTRY_POINT_GROUP, *([DEMO_ENTRY_POINT_GROUP] if demo else [])]
    return {
        ep.name: ep  # type: ignore[misc]
        for group in groups
        for ep in importlib.metadata.entry_points(group=group)
    }


class PythonTask:
    def __init__(
        self,
        registry: dict[str, Any] | None = None,
        *,
        threads: int = 4,
        rules: TenantRules | None = None,
    ) -> None:
        """``rules``: which tasks each namespace's jobs may call (default: any)."""
        self._entry_points = registry if registry is not None else discover()
        self._rules = rules
        self._loaded: dict[str, Callable[..., Any]] = {}
        self._wanted: dict[str, frozenset[str]] = {}
        """The run keywords each loaded task takes."""
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="task")

    def _function(self, name: str) -> Callable[..., Any]:
        if name not in self._loaded:
            entry = self._entry_points.get(name)
            if entry is None:
                known = ", ".join(sorted(self._entry_points)) or "none"
                raise PermanentTaskError(
                    f"no task named {name!r} is registered (entry-point group "
                    f"{ENTRY_POINT_GROUP!r}; registered: {known})"
                )
            function = entry.load() if hasattr(entry, "load") else entry
            self._loaded[name] = function
            self._wanted[name] = run_keywords(function)
        return self._loaded[name]

    def _call_kwargs(self, task: PythonTaskSpec, run: RunContext) -> dict[str, Any]:
        offered = {
            "run_id": run.run_id,
            "scheduled_time": run.scheduled_at,
            "attempt": run.attempt,
            "params": dict(run.params),
        }
        if run.traceparent is not None:  # traces on; off, a task taking **kwargs sees no new key
            offered["traceparent"] = run.traceparent
        wanted = self._wanted[task.name]
        return {**{k: v for k, v in offered.items() if k in wanted}, **task.kwargs}

    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        task = spec.task.python
        assert task is not None  # noqa: S101 - dispatched by kind
        if self._rules is not None and not self._rules.of(run.namespace).may_call(task.name):
            raise PermanentTaskError(
                f"python task {task.name!r} is not allowed for jobs in namespace "
                f"{run.namespace!r}; the installer decides which are (chart values "
                "worker.pythonTasks.allow and worker.tenants)"
            )
        function = self._function(task.name)
        kwargs = self._call_kwargs(task, run)
        try:
            if inspect.iscoroutinefunction(function):
                value = await function(*task.args, **kwargs)
            else:
                thread = self._threads.submit(functools.partial(function, *task.args, **kwargs))
                run.threads.append(thread)  # the runner waits for it past a timeout
                value = await asyncio.wrap_future(thread)
        except PermanentTaskError:
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a task's failure is data here
            raise RetryableTaskError(f"{type(exc).__name__}: {str(exc)[:RESULT_CHARS]}") from None
        return TaskResult(summary=result_text(value))


RESULT_CHARS = 4 * TEXT_LIMIT
"""The most of a return value or an exception's message turned into text: status
keeps TEXT_LIMIT, and a value of any size costs no more than this to pass on."""
_SHORT_REPR = reprlib.Repr()
for _name in ("maxdict", "maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdeque", "maxarray"):
    setattr(_SHORT_REPR, _name, 50)
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxstring = _SHORT_REPR.maxlong = _SHORT_REPR.maxother = RESULT_CHARS


def result_text(value: object) -> str:
    """A task's return value as status shows it, at most RESULT_CHARS long, made
    without turning a large container into text whole."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:RESULT_CHARS]
    if isinstance(value, bytes | bytearray):
        return bytes(value[:RESULT_CHARS]).decode(errors="replace")
    if isinstance(value, list | tuple | dict | set | frozenset):
        return _SHORT_REPR.repr(value)[:RESULT_CHARS]
    return str(value)[:RESULT_CHARS]


def run_keywords(function: Callable[..., Any]) -> frozenset[str]:
    """The run keywords ``function`` takes: those it names, or all with ``**kwargs``;
    ``run_id`` alone (what every task was given before the others existed) when its
    signature cannot be read."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return frozenset({"run_id"})
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return frozenset(RUN_KEYWORDS)
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in by_name and p.name in RUN_KEYWORDS)
