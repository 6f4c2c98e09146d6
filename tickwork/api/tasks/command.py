"""The ``command`` task kind: a process in the worker's container (off unless the
installer turns command tasks on)."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import (
    ConfigDict,
    Field,
    StrictStr,
    model_validator,
)

from tickwork.api import rules
from tickwork.api.base import _cel, _list_map, _Model, _within_budget
from tickwork.api.tasks.sources import _ValueOrSecret


class EnvVar(_ValueOrSecret):
    """An environment variable of the program: a value, or a Secret's key."""

    name: Annotated[StrictStr, Field(min_length=1, max_length=128, pattern=rules.ENV_NAME_PATTERN)]
    """Environment variable name."""


class CommandTask(_Model):
    """Run a program in the worker's container. Disabled unless the installer enables it."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.COMMAND_TEXT_BUDGET))

    args: Annotated[
        list[Annotated[StrictStr, Field(max_length=4096)]], Field(min_length=1, max_length=32)
    ]
    """The program and its arguments; no shell is involved."""
    env: Annotated[
        list[EnvVar],
        Field(
            max_length=32,
            json_schema_extra=_list_map("name"),
        ),
    ] = []
    """Extra environment variables; a value may come from a Secret."""

    @model_validator(mode="after")
    def _budget(self) -> Self:
        _within_budget(rules.COMMAND_TEXT_BUDGET, *self.args, *(v.value for v in self.env))
        return self
