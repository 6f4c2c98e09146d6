"""The ``http`` task kind: a request to a URL, its method, headers and body template."""

from __future__ import annotations

import enum
from typing import Annotated, Self

from pydantic import (
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    model_validator,
)

from tickwork.api import rules
from tickwork.api.base import BodyTemplate, HttpUrl, _cel, _list_map, _Model, _within_budget
from tickwork.api.tasks.sources import ValueSource, _one_source, _ValueOrSecret


class HttpMethod(enum.StrEnum):
    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"
    HEAD = "HEAD"


class HttpHeader(_ValueOrSecret):
    """A request header: a value, or a Secret's key (a token)."""

    name: Annotated[
        StrictStr, Field(min_length=1, max_length=256, pattern=rules.HEADER_NAME_PATTERN)
    ]
    """Header name, e.g. Authorization."""


class HttpTask(_Model):
    """Call a URL. The run ID is sent as the Idempotency-Key header."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            rules.HTTP_TEXT_BUDGET, rules.BODY_OR_BODY_FROM, rules.BODY_TEMPLATE_ALONE
        )
    )

    url: HttpUrl
    """http:// or https:// URL to call. Redirects are not followed; addresses the installer has
    not allowed (cluster-internal ones by default) are refused.
    """
    method: HttpMethod = HttpMethod.POST
    """HTTP method."""
    headers: Annotated[
        list[HttpHeader],
        Field(
            max_length=16,
            json_schema_extra=_list_map("name"),
        ),
    ] = []
    """Request headers; a value may come from a Secret."""
    body: Annotated[StrictStr, Field(max_length=rules.TASK_TEXT_BUDGET)] = ""
    """Request body (sent as is)."""
    body_from: ValueSource | None = Field(
        default=None, description="Take the body from a Secret instead."
    )
    body_template: BodyTemplate | None = Field(
        default=None,
        description="Instead of body: JSON whose strings may hold placeholders filled in for "
        "each run - {{runId}}, {{scheduledTime}}, {{attempt}}, {{job}}, {{namespace}}, "
        "{{params}}, {{params.NAME}} (a manual run's parameters). Values are JSON-escaped; "
        "sent as application/json unless headers set a Content-Type.",
    )
    success_codes: Annotated[
        list[Annotated[StrictInt, Field(ge=100, le=599)]],
        Field(max_length=16, description="Status codes that count as success; default: any 2xx."),
    ] = []

    @model_validator(mode="after")
    def _budget(self) -> Self:
        _within_budget(
            rules.HTTP_TEXT_BUDGET,
            self.body,
            self.body_template or "",
            *(h.value for h in self.headers),
        )
        _one_source(self.body, self.body_from, rules.BODY_OR_BODY_FROM)
        if self.body_template is not None and (self.body or self.body_from is not None):
            raise ValueError(rules.BODY_TEMPLATE_ALONE.message)
        return self
