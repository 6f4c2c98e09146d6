"""Setting types shared by the operator's and the worker's settings classes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator
from pydantic_settings import NoDecode


def _split(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


#: Namespaces, comma-separated in the environment; empty means all (cluster-wide).
Namespaces = Annotated[list[str], NoDecode, BeforeValidator(_split)]
