"""The ``python`` task kind: a callable registered in the worker's image."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import (
    ConfigDict,
    Field,
    StrictStr,
    model_validator,
)

from tickwork.api import rules
from tickwork.api.base import _cel, _Model, _within_budget


class PythonTask(_Model):
    """Call a Python task registered by name (entry-point group tickwork.tasks)."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.PYTHON_TEXT_BUDGET))

    name: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=rules.TASK_NAME_PATTERN)]
    """Registered task name, e.g. mypackage.cleanup."""
    args: Annotated[list[Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=32)] = []
    """Positional string arguments."""
    kwargs: Annotated[
        dict[str, Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=32)
    ] = {}
    """Keyword string arguments."""

    @model_validator(mode="after")
    def _budget(self) -> Self:
        _within_budget(rules.PYTHON_TEXT_BUDGET, *self.args, *self.kwargs, *self.kwargs.values())
        return self
