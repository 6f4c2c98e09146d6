"""The ``echo`` task kind: a message, for trying Tickwork out."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    StrictStr,
)

from tickwork.api.base import _Model


class EchoTask(_Model):
    """Built in: records "Executed: <message>" as the result. For demos and benchmarks."""

    message: Annotated[StrictStr, Field(max_length=1024)] = ""
    """Text the result repeats."""
