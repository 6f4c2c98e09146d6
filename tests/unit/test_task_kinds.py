"""A worker's task kinds are found by the model class of the task's spec: a new kind
is its model in tickwork.api.models and one registration, not a name in a dict. A spec
no kind is registered for is a permanent failure, said in words."""

from __future__ import annotations

import pytest

from tickwork.api import models
from tickwork.core.errors import PermanentTaskError
from tickwork_worker.tasks.base import RunContext, TaskKinds, TaskResult

pytestmark = pytest.mark.unit


class Example:
    """A stand-in kind."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def execute(self, spec: models.ScheduledJobSpec, run: RunContext) -> TaskResult:
        del spec, run
        return TaskResult(summary=self.name)


def test_a_task_is_executed_by_the_kind_registered_for_its_model() -> None:
    kinds = TaskKinds()
    echo, http = Example("echo"), Example("http")
    kinds.register(models.EchoTask, echo)
    kinds.register(models.HttpTask, http)
    assert kinds.of(models.Task(echo=models.EchoTask(message="hi"))) is echo
    assert kinds.of(models.Task(http=models.HttpTask(url="https://example.com/x"))) is http
    assert models.EchoTask in kinds
    assert models.PythonTask not in kinds


def test_a_task_of_a_kind_not_registered_fails_for_good() -> None:
    kinds = TaskKinds()
    kinds.register(models.EchoTask, Example("echo"))
    with pytest.raises(PermanentTaskError, match="this worker has no python tasks"):
        kinds.of(models.Task(python=models.PythonTask(name="demo.hello")))


def test_a_model_is_registered_once() -> None:
    kinds = TaskKinds()
    kinds.register(models.EchoTask, Example("echo"))
    with pytest.raises(ValueError, match="EchoTask already"):
        kinds.register(models.EchoTask, Example("again"))


def test_every_field_of_task_is_a_model_class_and_chosen_returns_it() -> None:
    given = {
        "echo": models.EchoTask(message="x"),
        "http": models.HttpTask(url="https://example.com/x"),
        "python": models.PythonTask(name="demo.hello"),
    }
    for name, spec in given.items():
        task = models.Task(**{name: spec})
        assert task.kind == name
        assert task.chosen() is getattr(task, name)
        assert type(task.chosen()) is type(spec)
