"""Values given inline or read from a Secret at run time: what HTTP headers and
command environment variables share."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import (
    ConfigDict,
    Field,
    StrictStr,
    model_validator,
)

from tickwork.api import rules
from tickwork.api.base import _cel, _Model


class SecretKeyRef(_Model):
    """A key of a Secret in the job's own namespace (a job can name no other)."""

    name: Annotated[
        StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_NAME_PATTERN)
    ]
    """Name of the Secret, in the job's namespace."""
    key: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_KEY_PATTERN)]
    """Key within the Secret's data."""


class ValueSource(_Model):
    """Where a value comes from instead of the spec."""

    secret_key_ref: SecretKeyRef
    """A key of a Secret in the job's own namespace."""


def _one_source(value: str, source: ValueSource | None, rule: rules.CelRule) -> None:
    if source is not None and value:
        raise ValueError(rule.message)


class _ValueOrSecret(_Model):
    """A value given in the spec, or taken from a Secret (not both)."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.VALUE_OR_VALUE_FROM))

    value: Annotated[StrictStr, Field(max_length=4096)] = ""
    """The value itself (leave empty with valueFrom)."""
    value_from: ValueSource | None = Field(
        default=None, description="Take the value from a Secret (a token, a password)."
    )

    @model_validator(mode="after")
    def _source(self) -> Self:
        _one_source(self.value, self.value_from, rules.VALUE_OR_VALUE_FROM)
        return self
