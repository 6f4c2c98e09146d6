"""The task kinds of a ScheduledJob, one module each, and :class:`Task`, which holds
exactly one of them. A new kind: its module here, its field on :class:`Task`, then
``make crd manifests`` (and its executor in ``tickwork_worker.tasks``)."""

from __future__ import annotations

from typing import Self

from pydantic import ConfigDict, model_validator

from tickwork.api import rules
from tickwork.api.base import _cel, _Model
from tickwork.api.tasks.command import CommandTask
from tickwork.api.tasks.container import ContainerTask
from tickwork.api.tasks.echo import EchoTask
from tickwork.api.tasks.http import HttpTask
from tickwork.api.tasks.python import PythonTask


class Task(_Model):
    """What a run does; exactly one kind."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.ONE_TASK_KIND))

    http: HttpTask | None = None
    """Call a URL."""
    command: CommandTask | None = None
    """Run a program in the worker's container (only when the installer enabled command tasks)."""
    container: ContainerTask | None = None
    """Run a container as a Kubernetes Job in the job's namespace (needs the right to
    create Jobs there; off unless the installer turned it on)."""
    python: PythonTask | None = None
    """Call a registered Python task."""
    echo: EchoTask | None = None
    """Record a message as the result (built in)."""

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        kinds = [self.http, self.command, self.container, self.python, self.echo]
        if sum(kind is not None for kind in kinds) != 1:
            raise ValueError(rules.ONE_TASK_KIND.message)
        return self

    @property
    def kind(self) -> str:
        """The name of the kind given (its field)."""
        for name in type(self).model_fields:
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated to have one kind")  # pragma: no cover

    def chosen(self) -> _Model:
        """The spec of the kind given (an :class:`EchoTask`, an :class:`HttpTask`, ...)."""
        found: _Model = getattr(self, self.kind)
        return found
