"""Where a job's failures are told (``spec.notify``): an HTTP endpoint, its URL given or
read from a Secret of the job's namespace, the body shaped for Slack, Teams or as
plain JSON, and the events that count. Sent by the workers
(tickwork_worker.notify)."""

from __future__ import annotations

import enum
from typing import Annotated, Self

from pydantic import ConfigDict, Field, model_validator

from tickwork.api import rules
from tickwork.api.base import HttpUrl, _cel, _Model
from tickwork.api.tasks.sources import ValueSource

#: The most notifiers one job names.
MAX_NOTIFIERS = 3


class NotifyFormat(enum.StrEnum):
    """The body's shape."""

    JSON = "JSON"
    SLACK = "Slack"
    TEAMS = "Teams"


class NotifyEvent(enum.StrEnum):
    """What is told."""

    FAILED = "Failed"
    """A run failed for good (after its last attempt): it is in the dead letters."""


class Notifier(_Model):
    """An HTTP endpoint told of the job's failures (a POST of JSON)."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.NOTIFY_URL_ONE))

    url: HttpUrl | None = None
    """The endpoint (http or https), under the worker's egress rules like an http task."""
    url_from: ValueSource | None = None
    """The endpoint read from a Secret of the job's namespace (a webhook URL is a
    credential: it is never logged, and redacted wherever the run's texts go)."""
    format: NotifyFormat = NotifyFormat.JSON
    """JSON (every field), Slack (an incoming webhook's text) or Teams (a MessageCard)."""
    events: Annotated[
        list[NotifyEvent],
        Field(
            min_length=1,
            max_length=len(NotifyEvent),
            json_schema_extra=_cel(rules.NOTIFY_EVENTS_DISTINCT),
        ),
    ] = [NotifyEvent.FAILED]
    """The events told (Failed: a run failed for good). Not ``on``: YAML reads that
    key as true."""

    @model_validator(mode="after")
    def _one_url(self) -> Self:
        if (self.url is None) == (self.url_from is None):
            raise ValueError(rules.NOTIFY_URL_ONE.message)
        if len(set(self.events)) != len(self.events):
            raise ValueError(rules.NOTIFY_EVENTS_DISTINCT.message)
        return self


Notifiers = Annotated[list[Notifier], Field(max_length=MAX_NOTIFIERS)]
