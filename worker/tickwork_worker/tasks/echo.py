"""The built-in ``echo`` task: the prototype's "Executed: <description>"."""

from __future__ import annotations

from tickwork.api.models import ScheduledJobSpec
from tickwork_worker.tasks.base import RunContext, TaskResult


class EchoTask:
    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        echo = spec.task.echo
        said = (echo.message if echo else "") or spec.description or run.name
        return TaskResult(summary=f"Executed: {said}")
