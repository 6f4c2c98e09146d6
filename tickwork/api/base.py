"""What every part of the ScheduledJob API shares: the group, version and kind, the
model base class (camelCase on the wire, frozen, docstrings as CRD descriptions), the
CEL and list-map markers, and the checked field types (cron text, zone names, URLs,
body templates) with their Python twins of the CEL rules."""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
)
from pydantic.alias_generators import to_camel
from pydantic.functional_validators import AfterValidator

from tickwork.api import rules
from tickwork.core.cron import parse_cron
from tickwork.core.interval import is_interval, parse_interval
from tickwork.core.templates import check_template
from tickwork.core.zones import load_zone

GROUP = "tickwork.dev"
VERSION = "v1alpha1"
KIND = "ScheduledJob"
PLURAL = "scheduledjobs"
SINGULAR = "scheduledjob"
SHORT_NAMES = ("sj",)
API_VERSION = f"{GROUP}/{VERSION}"

_CRON = re.compile(rules.CRON_PATTERN)
_ZONE = re.compile(rules.ZONE_PATTERN)


def _list_map(*keys: str) -> dict[str, Any]:
    """Mark a list as a map keyed by ``keys``, so server-side apply merges it by key."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def _cel(*cel_rules: rules.CelRule) -> dict[str, Any]:
    return {"x-kubernetes-validations": [rule.to_schema() for rule in cel_rules]}


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
        # A field's docstring is its description in the CRD (kubectl explain).
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON form, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def _check_cron(value: str) -> str:
    if not _CRON.match(value):
        raise ValueError(rules.CRON_MESSAGE)
    if is_interval(value):
        parse_interval(value)  # at least 10s, at most 366 days (rules.INTERVAL_RANGE)
    else:
        parse_cron(value)  # ranges in order, a day that exists: what CEL cannot check
    return value


def _check_zone(value: str) -> str:
    if not _ZONE.match(value):
        raise ValueError(rules.ZONE_MESSAGE)
    load_zone(value)
    return value


def _check_url(value: str) -> str:
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(rules.URL_MESSAGE)
    return value


CronText = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=256,
        json_schema_extra=_cel(rules.CRON_SHAPE, rules.INTERVAL_RANGE),
    ),
    AfterValidator(_check_cron),
]


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC)


#: An instant in status: read in any offset, kept and written in UTC ("...Z").
Instant = Annotated[AwareDatetime, AfterValidator(_utc)]
ZoneName = Annotated[
    StrictStr,
    Field(min_length=1, max_length=64, pattern=rules.ZONE_PATTERN),
    AfterValidator(_check_zone),
]
HttpUrl = Annotated[
    StrictStr,
    Field(min_length=1, max_length=2048, json_schema_extra=_cel(rules.HTTP_URL)),
    AfterValidator(_check_url),
]
ShortText = Annotated[StrictStr, Field(max_length=1024)]


def _check_template(value: str) -> str:
    check_template(value)  # JSON with its placeholders in strings: what CEL cannot check
    return value


BodyTemplate = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=rules.TASK_TEXT_BUDGET,
        json_schema_extra=_cel(rules.BODY_TEMPLATE_NAMES, rules.BODY_TEMPLATE_COUNT),
    ),
    AfterValidator(_check_template),
]


def _within_budget(rule: rules.CelRule, *texts: str) -> None:
    """The task text budget (rules.TASK_TEXT_BUDGET), as the CEL ``rule`` counts it."""
    if sum(len(text) for text in texts) > rules.TASK_TEXT_BUDGET:
        raise ValueError(rule.message)
