"""The ScheduledJob API (``tickwork.dev/v1alpha1``) as pydantic models.

These models are the single source of the CRD: ``python -m tickwork.api.crd``
turns them into ``manifests/crds/scheduledjobs.tickwork.dev.yaml``, and a
test fails when the committed file drifts. Field names are camelCase on the
wire (aliases) and snake_case in Python. Every string, list and map has an
upper bound, so an object stays far below etcd's 1.5 MiB limit.

Each CEL rule the API server enforces has a Python twin here, so the operator
and the CLI reach the same verdict; checks CEL cannot express (the cron
ranges' order, a schedule that never fires, an unknown zone) live only here
and surface as a status condition and an Event.

Why one long module (~490 lines): it is the whole v1alpha1 API — spec, task
kinds and status — and the single source the CRD and the docs' field tables
are generated from or checked against.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
import urllib.parse
from typing import Annotated, Any, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.functional_validators import AfterValidator

from tickwork.api import rules
from tickwork.core.backfill import MAX_BACKFILL_DAYS, MAX_BACKFILLS
from tickwork.core.bounds import bounded
from tickwork.core.catchup import CatchupPolicy, CatchupRule
from tickwork.core.cron import parse_cron
from tickwork.core.daylight import DaylightSavingChoice, RepeatedTime, SkippedTime
from tickwork.core.failures import STREAK_RUN_IDS
from tickwork.core.interval import interval_schedule, is_interval, parse_interval
from tickwork.core.params import MAX_PARAMS, PARAMS_TEXT_LIMIT
from tickwork.core.planning import BUFFER_LIMIT, NEXT_RUNS, ConcurrencyPolicy
from tickwork.core.schedule import OneShotSchedule, Schedule, cron_schedule
from tickwork.core.states import JobPhase, RunState
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


# -- spec ---------------------------------------------------------------------


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


class HttpMethod(enum.StrEnum):
    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"
    HEAD = "HEAD"


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


class HttpHeader(_ValueOrSecret):
    """A request header: a value, or a Secret's key (a token)."""

    name: Annotated[
        StrictStr, Field(min_length=1, max_length=256, pattern=rules.HEADER_NAME_PATTERN)
    ]
    """Header name, e.g. Authorization."""


def _within_budget(rule: rules.CelRule, *texts: str) -> None:
    """The task text budget (rules.TASK_TEXT_BUDGET), as the CEL ``rule`` counts it."""
    if sum(len(text) for text in texts) > rules.TASK_TEXT_BUDGET:
        raise ValueError(rule.message)


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
        _within_budget(rules.HTTP_TEXT_BUDGET, self.body, self.body_template or "",
                       *(h.value for h in self.headers))  # fmt: skip
        _one_source(self.body, self.body_from, rules.BODY_OR_BODY_FROM)
        if self.body_template is not None and (self.body or self.body_from is not None):
            raise ValueError(rules.BODY_TEMPLATE_ALONE.message)
        return self


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


class ConfigMapKeyRef(_Model):
    """A key of a ConfigMap in the job's own namespace."""

    name: Annotated[
        StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_NAME_PATTERN)
    ]
    """Name of the ConfigMap, in the job's namespace."""
    key: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_KEY_PATTERN)]
    """Key within the ConfigMap's data."""


class ContainerValueSource(_Model):
    """Where a container's variable comes from: a Secret's or a ConfigMap's key, both in
    the job's namespace. The kubelet reads it (the worker passes the reference on)."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.ONE_VALUE_SOURCE))

    secret_key_ref: SecretKeyRef | None = None
    """A key of a Secret in the job's own namespace."""
    config_map_key_ref: ConfigMapKeyRef | None = None
    """A key of a ConfigMap in the job's own namespace."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError(rules.ONE_VALUE_SOURCE.message)
        return self


class ContainerEnvVar(_Model):
    """An environment variable of the container: a value, or a Secret's or ConfigMap's key."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.VALUE_OR_VALUE_FROM))

    name: Annotated[StrictStr, Field(min_length=1, max_length=128, pattern=rules.ENV_NAME_PATTERN)]
    """Environment variable name."""
    value: Annotated[StrictStr, Field(max_length=4096)] = ""
    """The value itself (leave empty with valueFrom)."""
    value_from: ContainerValueSource | None = None
    """Take the value from a Secret or a ConfigMap of the job's namespace."""

    @model_validator(mode="after")
    def _source(self) -> Self:
        if self.value_from is not None and self.value:
            raise ValueError(rules.VALUE_OR_VALUE_FROM.message)
        return self


def _keys_match(rule: rules.CelRule, pattern: str) -> AfterValidator:
    """A map's keys checked against ``pattern`` (CEL ``rule`` on the API server: a
    structural schema has no pattern for keys)."""
    compiled = re.compile(pattern)

    def check(value: dict[str, str]) -> dict[str, str]:
        if not all(compiled.match(key) for key in value):
            raise ValueError(rule.message)
        return value

    return AfterValidator(check)


Quantity = Annotated[StrictStr, Field(min_length=1, max_length=64, pattern=rules.QUANTITY_PATTERN)]
ResourceList = Annotated[
    dict[Annotated[StrictStr, Field(max_length=253)], Quantity],
    Field(max_length=8, json_schema_extra=_cel(rules.RESOURCE_NAMES)),
    _keys_match(rules.RESOURCE_NAMES, rules.RESOURCE_NAME_PATTERN),
]


class ContainerResources(_Model):
    """Compute resources of the container, as a Pod's (quantities as strings: "500m", "1",
    "256Mi")."""

    requests: ResourceList = {}
    """What the scheduler reserves: cpu, memory, ephemeral-storage, ..."""
    limits: ResourceList = {}
    """The most the container may use."""


class TolerationOperator(enum.StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(_Model):
    """A Pod toleration: the Job's Pod may run on nodes with a matching taint."""

    model_config = ConfigDict(
        json_schema_extra=_cel(rules.TOLERATION_OPERATOR, rules.TOLERATION_SECONDS)
    )

    key: Annotated[StrictStr, Field(max_length=316, pattern=rules.LABEL_KEY_PATTERN)] | None = None
    """The taint key; empty with operator Exists: every taint."""
    operator: TolerationOperator = TolerationOperator.EQUAL
    """Exists (any value) or Equal (the value below)."""
    value: Annotated[StrictStr, Field(max_length=63, pattern=rules.LABEL_VALUE_PATTERN)] = ""
    """The taint value (operator Equal)."""
    effect: TaintEffect | None = None
    """NoSchedule, PreferNoSchedule or NoExecute; empty: every effect."""
    toleration_seconds: Annotated[StrictInt, Field(ge=0, le=86400)] | None = None
    """With NoExecute: how long the Pod stays once the taint appears."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.operator is TolerationOperator.EXISTS and self.value:
            raise ValueError(rules.TOLERATION_OPERATOR.message)
        if self.toleration_seconds is not None and self.effect is not TaintEffect.NO_EXECUTE:
            raise ValueError(rules.TOLERATION_SECONDS.message)
        return self


class PullPolicy(enum.StrEnum):
    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class ContainerSecurity(_Model):
    """Relaxations of the restrictive default (non-root, no privilege escalation, no
    capabilities, the runtime's seccomp profile). The namespace's Pod Security admission
    still judges the Pod: nothing here goes past what it allows."""

    run_as_user: Annotated[StrictInt, Field(ge=0, le=2147483647)] | None = None
    """The user ID the container runs as (default: the image's)."""
    run_as_group: Annotated[StrictInt, Field(ge=0, le=2147483647)] | None = None
    """The primary group ID (default: the image's)."""
    run_as_non_root: StrictBool = True
    """Refuse to start the container as root (UID 0); false lets an image that needs
    root run, where the namespace's Pod Security level allows it."""
    read_only_root_filesystem: StrictBool = False
    """Mount the container's root filesystem read-only."""


class ContainerTask(_Model):
    """Run a container as a Kubernetes Job in the job's namespace, one Job per attempt.
    Creating a ScheduledJob with it needs the right to create Jobs there (an admission
    policy checks it). Off unless the installer turns the kind on."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.CONTAINER_TEXT_BUDGET))

    image: Annotated[StrictStr, Field(min_length=1, max_length=1024, pattern=rules.IMAGE_PATTERN)]
    """The image to run, e.g. registry.example.com/reports:1.4 or ...@sha256:..."""
    command: Annotated[
        list[Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=32)
    ] = []
    """The entrypoint (default: the image's ENTRYPOINT); no shell is involved."""
    args: Annotated[list[Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=32)] = []
    """Its arguments (default: the image's CMD)."""
    env: Annotated[
        list[ContainerEnvVar],
        Field(max_length=32, json_schema_extra=_list_map("name")),
    ] = []
    """Environment variables; a value may come from a Secret or a ConfigMap. The run's
    TICKWORK_RUN_ID, TICKWORK_SCHEDULED_TIME, TICKWORK_ATTEMPT, TICKWORK_JOB,
    TICKWORK_NAMESPACE and a manual run's TICKWORK_PARAM_<NAME> come on top."""
    resources: ContainerResources | None = None
    """Requests and limits of the container."""
    image_pull_policy: PullPolicy | None = None
    """Always, IfNotPresent or Never (default: Kubernetes' rule for the tag)."""
    service_account_name: (
        Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_NAME_PATTERN)]
        | None
    ) = None
    """A ServiceAccount of the job's namespace for the Pod, whose token is then mounted;
    without it the Pod runs as the namespace's default account with no token mounted."""
    node_selector: Annotated[
        dict[
            Annotated[StrictStr, Field(max_length=316)],
            Annotated[StrictStr, Field(max_length=63, pattern=rules.LABEL_VALUE_PATTERN)],
        ],
        Field(max_length=16, json_schema_extra=_cel(rules.NODE_SELECTOR_KEYS)),
        _keys_match(rules.NODE_SELECTOR_KEYS, rules.LABEL_KEY_PATTERN),
    ] = {}
    """Node labels the Pod's node must have."""
    tolerations: Annotated[list[Toleration], Field(max_length=16)] = []
    """Taints the Pod tolerates."""
    security_context: ContainerSecurity | None = None
    """Relax the restrictive default security settings (the namespace's Pod Security
    admission still applies)."""

    @model_validator(mode="after")
    def _budget(self) -> Self:
        _within_budget(rules.CONTAINER_TEXT_BUDGET, *self.command, *self.args,
                       *(v.value for v in self.env))  # fmt: skip
        return self


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


class EchoTask(_Model):
    """Built in: records "Executed: <message>" as the result. For demos and benchmarks."""

    message: Annotated[StrictStr, Field(max_length=1024)] = ""
    """Text the result repeats."""


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


class RetryPolicy(_Model):
    """Attempts per run and the exponential backoff between them."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.BACKOFF_ORDER))

    max_attempts: Annotated[StrictInt, Field(ge=1, le=20)] = 3
    """Attempts per run, the first included; 1 means no retry."""
    backoff_seconds: Annotated[StrictInt, Field(ge=1, le=3600)] = 10
    """Wait before the second attempt; doubles with each further attempt."""
    max_backoff_seconds: Annotated[StrictInt, Field(ge=1, le=86400)] = 600
    """Longest wait between attempts."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError(rules.BACKOFF_ORDER.message)
        return self


class HistoryLimits(_Model):
    """How many finished runs status.runs keeps, by outcome."""

    successful_runs: Annotated[StrictInt, Field(ge=0, le=20)] = 3
    """Succeeded runs kept in status.runs."""
    failed_runs: Annotated[StrictInt, Field(ge=0, le=20)] = 3
    """Runs that did not succeed (Failed, Cancelled, Skipped) kept in status.runs."""


class DaylightSaving(_Model):
    """What the schedule does where the zone's clock changes (daylight saving or any other
    change of its UTC offset), whatever the size of the change. Unset: Debian cron's rules."""

    repeated: RepeatedTime
    """A wall-clock time that occurs twice, as the clock goes back: run at the First
    occurrence, the Last, or Both."""
    skipped: SkippedTime
    """A wall-clock time that does not occur, as the clock jumps forward: Shift the run to
    the first instant after the jump, or Skip it."""

    def choice(self) -> DaylightSavingChoice:
        return DaylightSavingChoice(repeated=self.repeated, skipped=self.skipped)


class FailurePolicy(_Model):
    """What runs that fail in a row do to a recurring job."""

    pause_after: Annotated[StrictInt, Field(ge=1, le=100)] | None = None
    """Pause the job after this many runs in a row failed for good (after their retries;
    Skipped and Cancelled runs do not count, a run that succeeds starts the count
    again): no run is published until the job is resumed (kubectl tickwork resume, the
    tickwork.dev/resume annotation) or its spec changes. Unset: never pause."""


class Catchup(_Model):
    """Which runs missed while no operator ran (a restart, an outage, a leader change) are
    started when it is back. A resume of a suspended or paused job is not a catch-up: it
    starts from now."""

    policy: CatchupPolicy
    """None starts none of them, Latest the latest one, All each one, oldest first (at
    most the newest 100). A run less than 10 s (plus jitterSeconds) late is not missed:
    every policy starts it."""
    window_seconds: Annotated[StrictInt, Field(ge=10, le=2592000)] | None = None
    """Only runs due at most this many seconds ago are started (startingDeadlineSeconds,
    when set too, applies as well: the shorter one counts); unset: no limit but the cap
    of 100 runs. The rest are counted in status.missedRuns."""

    def rule(self, starting_deadline_seconds: int | None) -> CatchupRule:
        return CatchupRule.of(self.policy, self.window_seconds, starting_deadline_seconds)


BackfillName = Annotated[
    StrictStr, Field(min_length=1, max_length=63, pattern=rules.BACKFILL_NAME_PATTERN)
]


class Backfill(_Model):
    """Run every run of the schedule in a time range (kubectl tickwork backfill)."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.BACKFILL_ORDER, rules.BACKFILL_SPAN))

    name: BackfillName
    """Names the backfill (a DNS label, unique in the list) and its runs' IDs; a new name
    is a new backfill."""
    from_: AwareDatetime = Field(alias="from")
    """The range's start (RFC 3339), included."""
    to: AwareDatetime
    """The range's end (RFC 3339), included; at most 366 days after from and 1000 runs."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.to <= self.from_:
            raise ValueError(rules.BACKFILL_ORDER.message)
        if self.to - self.from_ > dt.timedelta(days=MAX_BACKFILL_DAYS):
            raise ValueError(rules.BACKFILL_SPAN.message)
        return self


class ScheduledJobSpec(_Model):
    """The desired schedule and task."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            rules.SCHEDULE_XOR_RUN_AT, rules.TTL_NEEDS_RUN_AT,
            rules.DAYLIGHT_SAVING_NEEDS_SCHEDULE, rules.FAILURE_POLICY_NEEDS_SCHEDULE,
            rules.BOUNDS_NEED_SCHEDULE, rules.BOUNDS_ORDER, rules.JITTER_WITHIN_INTERVAL,
            rules.CATCHUP_NEEDS_SCHEDULE, rules.BACKFILLS_NEED_SCHEDULE,
        )
    )  # fmt: skip

    schedule: CronText | None = Field(
        default=None,
        description="Recurring runs: a cron expression (five fields or a macro like @daily), "
        "or an interval like '@every 90s' (10s .. 8784h; time zones play no part).",
    )
    run_at: AwareDatetime | None = Field(default=None, description="Instant of a one-shot run.")
    not_before: AwareDatetime | None = None
    """No run is due before this instant (RFC 3339; recurring jobs only). An @every interval
    counts from it (rounded up to the second); without it, from the object's creation."""
    not_after: AwareDatetime | None = None
    """No run is due after this instant (RFC 3339; recurring jobs only); once no run is left,
    the phase is Completed and nextRunAt is empty."""
    time_zone: ZoneName = Field(default="UTC", description="IANA zone the schedule is read in.")
    daylight_saving: DaylightSaving | None = None
    """Where the zone's clock changes, when a repeated time runs and whether a skipped one
    shifts or is skipped. Unset: Debian cron's rules (a fixed-time job runs a repeated time
    once and a skipped one right after the jump; a job whose minute or hour starts with *
    follows the clock)."""
    suspend: StrictBool = False
    """Stop starting runs (a run already started finishes; none starts once the suspend is
    visible).
    """
    description: ShortText = ""
    """Free text for people; Tickwork does not read it."""
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.SKIP
    """When a run falls due while another of this job is active (Temporal's overlap
    policies): Skip skips the new run; BufferOne keeps one new run waiting and starts it
    when the active one ends (more are skipped); BufferAll keeps up to 100 waiting and
    runs them one after another; CancelOther cancels the active run (a command gets
    SIGTERM, then SIGKILL after a grace) and starts the new one once it is Cancelled;
    TerminateOther kills the active run at once and starts the new one without waiting;
    AllowAll runs both. Forbid, Allow and Replace (CronJob's names) mean Skip, AllowAll
    and CancelOther."""
    starting_deadline_seconds: Annotated[StrictInt, Field(ge=10, le=2592000)] | None = Field(
        default=None,
        description="A run that could not start within this many seconds of its time is "
        "counted as missed instead.",
    )
    catchup: Catchup | None = None
    """Recurring jobs only: which runs missed while no operator ran are started. Unset: the
    latest one, if within startingDeadlineSeconds (CronJob's behaviour)."""
    backfills: Annotated[
        list[Backfill], Field(max_length=MAX_BACKFILLS, json_schema_extra=_list_map("name"))
    ] = []
    """Recurring jobs only: time ranges whose runs are run now (up to 10; progress in
    status.backfills). Each run follows concurrencyPolicy."""
    jitter_seconds: Annotated[StrictInt, Field(ge=0, le=3600)] = 0
    """Delay each run by a stable pseudo-random 0..jitterSeconds, to spread jobs due on the
    same minute.
    """
    timeout_seconds: Annotated[StrictInt, Field(ge=1, le=86400)] = 600
    """An attempt running longer is cancelled and fails ("timed out"), then is retried
    like any failure."""
    retry: RetryPolicy = RetryPolicy()
    """Attempts per run and the backoff between them."""
    history: HistoryLimits = HistoryLimits()
    """How many finished runs status.runs keeps."""
    failure_policy: FailurePolicy | None = None
    """Recurring jobs only: pause the job after runs failed in a row (pauseAfter)."""
    ttl_seconds_after_finished: Annotated[StrictInt, Field(ge=0, le=31536000)] | None = None
    """One-shot jobs only: delete the object this many seconds after its run finished."""
    task: Task
    """What each run does: exactly one of http, command, container, python, echo."""

    @model_validator(mode="after")
    def _schedule_xor_run_at(self) -> Self:
        if (self.schedule is None) == (self.run_at is None):
            raise ValueError(rules.SCHEDULE_XOR_RUN_AT.message)
        if self.ttl_seconds_after_finished is not None and self.run_at is None:
            raise ValueError(rules.TTL_NEEDS_RUN_AT.message)
        if self.daylight_saving is not None and self.schedule is None:
            raise ValueError(rules.DAYLIGHT_SAVING_NEEDS_SCHEDULE.message)
        if self.failure_policy is not None and self.schedule is None:
            raise ValueError(rules.FAILURE_POLICY_NEEDS_SCHEDULE.message)
        if (self.not_before or self.not_after) and self.schedule is None:
            raise ValueError(rules.BOUNDS_NEED_SCHEDULE.message)
        if self.not_before and self.not_after and self.not_after <= self.not_before:
            raise ValueError(rules.BOUNDS_ORDER.message)
        if (
            self.schedule
            and is_interval(self.schedule)
            and self.jitter_seconds >= parse_interval(self.schedule)
        ):
            raise ValueError(rules.JITTER_WITHIN_INTERVAL.message)
        return self

    @model_validator(mode="after")
    def _catchup_and_backfills(self) -> Self:
        if self.catchup is not None and self.schedule is None:
            raise ValueError(rules.CATCHUP_NEEDS_SCHEDULE.message)
        if self.backfills and self.schedule is None:
            raise ValueError(rules.BACKFILLS_NEED_SCHEDULE.message)
        if len({b.name for b in self.backfills}) != len(self.backfills):
            raise ValueError("each backfill needs a name of its own")
        return self

    @property
    def pause_after(self) -> int | None:
        """failurePolicy.pauseAfter, if set."""
        return self.failure_policy.pause_after if self.failure_policy else None

    @property
    def one_shot(self) -> bool:
        return self.run_at is not None

    def schedule_of(self, created: dt.datetime) -> Schedule:
        """The runs this spec asks for; ``created`` (the object's creationTimestamp)
        anchors an @every interval that has no notBefore, so every reader finds the
        same instants."""
        if self.run_at is not None:
            return OneShotSchedule(self.run_at)
        assert self.schedule is not None  # noqa: S101 - one of the two is required
        schedule: Schedule
        if is_interval(self.schedule):
            schedule = interval_schedule(self.schedule, anchor=self.not_before or created)
        else:
            schedule = cron_schedule(self.schedule, self.time_zone, self.daylight_saving_choice)
        return bounded(schedule, not_before=self.not_before, not_after=self.not_after)

    @property
    def catchup_rule(self) -> CatchupRule | None:
        return None if self.catchup is None else self.catchup.rule(self.starting_deadline_seconds)

    @property
    def daylight_saving_choice(self) -> DaylightSavingChoice | None:
        return None if self.daylight_saving is None else self.daylight_saving.choice()


# -- status -------------------------------------------------------------------


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC)


#: An instant in status: read in any offset, kept and written in UTC ("...Z").
Instant = Annotated[AwareDatetime, AfterValidator(_utc)]


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(_Model):
    """A ``metav1.Condition``: the standard shape, so tools understand it."""

    type: Annotated[StrictStr, Field(min_length=1, max_length=128)]
    """Ready, Suspended or Paused."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: Annotated[StrictStr, Field(min_length=1, max_length=128)]
    """One CamelCase word for programs (see docs/api.md for every reason)."""
    message: Annotated[StrictStr, Field(max_length=2048)] = ""
    """Details for people."""
    last_transition_time: Instant
    """When status last changed."""
    observed_generation: Annotated[StrictInt, Field(ge=0)] | None = None
    """The metadata.generation this condition describes."""


#: A manual run's parameters as status keeps them, within the schema's bounds (the
#: operator checks names and the total when it takes them from the annotation).
#: Atomic: one entry in a record's managedFields, not one per name.
RunParams = Annotated[
    dict[str, Annotated[StrictStr, Field(max_length=PARAMS_TEXT_LIMIT)]],
    Field(max_length=MAX_PARAMS, json_schema_extra={"x-kubernetes-map-type": "atomic"}),
]
_PARAMS_DOC = "Parameters of a manual run (kubectl tickwork trigger --param NAME=VALUE)."


class QueuedRun(_Model):
    """The run the operator published last (it stays after the run ended)."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID: <namespace>.<name>.<uid prefix>.<scheduled epoch>[.manual.<token>]."""
    scheduled_at: Instant
    """When the run was due."""
    queued_at: Instant
    """When the operator published it to the queue."""
    manual: StrictBool = False
    """Started by the run-now annotation or kubectl tickwork trigger."""
    params: RunParams | None = Field(default=None, description=_PARAMS_DOC)


class BufferedRun(_Model):
    """A run that fell due while another was active and waits for it to end
    (concurrencyPolicy BufferOne, BufferAll, CancelOther)."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    scheduled_at: Instant
    """When the run was due."""
    buffered_at: Instant
    """When the operator put it in the buffer."""


class CancelRequest(_Model):
    """A run the operator asks workers to stop: cancelled by kubectl tickwork cancel (the
    tickwork.dev/cancel annotation) or by concurrencyPolicy CancelOther or TerminateOther."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    requested_at: Instant
    """When the operator asked."""
    terminate: StrictBool = False
    """Kill it at once (TerminateOther): a command's process group gets SIGKILL, no grace."""
    reason: Annotated[StrictStr, Field(max_length=256)] = ""
    """Why, as the run's record will say."""


class ActiveRun(_Model):
    """A run a worker has started and not finished: running, or waiting for a retry.
    Each entry is owned by its run's own field manager; it goes when its record is
    written."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    scheduled_at: Instant
    """When the run was due."""
    state: RunState
    """Running, or Retrying between attempts."""
    attempt: Annotated[StrictInt, Field(ge=1)]
    """The attempt running or next (1-based)."""
    queued_at: Instant | None = None
    """When it was published to the queue."""
    started_at: Instant | None = None
    """When the current attempt started."""
    worker: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The worker Pod running it."""
    manual: StrictBool = False
    """Started by the run-now annotation or kubectl tickwork trigger."""
    params: RunParams | None = Field(default=None, description=_PARAMS_DOC)


class RunRecord(_Model):
    """A finished run, as kept in lastRun and runs."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    scheduled_at: Instant
    """When the run was due."""
    outcome: RunState
    """Succeeded, Failed (after its last attempt, or refused), Cancelled or Skipped."""
    attempts: Annotated[StrictInt, Field(ge=0)] = 1
    """Attempts made."""
    started_at: Instant | None = None
    """When its last attempt started."""
    finished_at: Instant | None = None
    """When the last attempt ended."""
    result: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """What the task returned, shortened to 1,024 characters (never a Secret's value)."""
    error: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """Why the last attempt failed, shortened to 1,024 characters."""
    params: RunParams | None = Field(default=None, description=_PARAMS_DOC)
    slot: Annotated[StrictStr, Field(max_length=4, pattern=r"^[sf][0-9]{1,2}$")] | None = None
    """The place of the history that holds this record: s0, s1, ... for runs that
    succeeded, f0, ... for the others. The field manager tickwork-runs-<slot> writes
    it, and the next record written there replaces it in the same write (no trim)."""


class DeadRun(_Model):
    """A run that failed for good and waits in the dead-letter queue: requeue or purge
    it with the tickwork.dev/requeue or tickwork.dev/purge annotation."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    scheduled_at: Instant
    """When the run was due."""
    failed_at: Instant
    """When its last attempt failed."""
    attempts: Annotated[StrictInt, Field(ge=1)] = 1
    """Attempts made."""
    error: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """Why the last attempt failed, shortened to 1,024 characters."""


#: Finished runs ``status.runs`` may hold: the two history limits (20 each) plus
#: room for records that runs ending together write before either trims.
RUNS_LIMIT = 48
#: Cancel requests status keeps at once (each leaves when its run has finished).
CANCEL_REQUESTS_LIMIT = 32
#: Runs of one job started and not finished at once (concurrencyPolicy Allow).
ACTIVE_RUNS_LIMIT = 16
#: Dead runs a worker lists in one job's status; more stay in the queue, unlisted.
DEAD_RUNS_LISTED = 20
#: What the schema allows: room for runs that die together past the listed number.
DEAD_RUNS_LIMIT = 64


class FailureStreak(_Model):
    """Runs in a row that failed for good, as the operator counts them for
    spec.failurePolicy, each run once, in the order they finished."""

    count: Annotated[StrictInt, Field(ge=0)] = 0
    """Consecutive runs that failed for good; a run that succeeds sets it back to 0
    (Skipped and Cancelled runs leave it)."""
    run_ids: Annotated[
        list[Annotated[StrictStr, Field(max_length=256)]], Field(max_length=STREAK_RUN_IDS)
    ] = []
    """The IDs of those runs (the newest 10), oldest first."""
    counted_until: Instant | None = None
    """Runs that finished at or before this instant are counted already."""
    paused_at: Instant | None = None
    """Set when the count reached pauseAfter (the finish of the run that did): the job is
    paused (phase Paused) and the streak stands still until the job is resumed or its
    spec changes, which start a new one."""


class BackfillProgress(_Model):
    """How far one backfill of spec.backfills got (written by the operator)."""

    name: BackfillName
    """The backfill's name in spec.backfills."""
    from_: Instant = Field(alias="from")
    """Its from, as acted on (a new from or to under the same name starts again)."""
    to: Instant
    """Its to, as acted on."""
    done_until: Instant | None = None
    """The last run published (or skipped by concurrencyPolicy): the next one follows it."""
    published: Annotated[StrictInt, Field(ge=0)] = 0
    """Runs published."""
    skipped: Annotated[StrictInt, Field(ge=0)] = 0
    """Runs skipped because another run was active (concurrencyPolicy Forbid)."""
    completed_at: Instant | None = None
    """When the last run was published, or the backfill was refused."""
    message: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """Why it was refused, if it was."""


class OperatorStatus(_Model):
    """The operator's share of status (field manager tickwork-operator): the job's
    lifecycle and its schedule. No worker writes any of these fields, except nextRunAt
    and nextRuns of a recurring job: each run's record carries them (one status write
    per run), and the operator writes them where no run's record is on its way."""

    model_config = ConfigDict(extra="ignore")

    phase: JobPhase | None = Field(
        default=None,
        description="Lifecycle: Scheduled, Suspended, Paused, Completed or Invalid.",
    )
    observed_generation: Annotated[StrictInt, Field(ge=0)] | None = None
    """The metadata.generation the operator last acted on."""
    next_run_at: Instant | None = None
    """When the next run is due (empty when none will be): written by the operator, and
    for a recurring job by each run as it ends (the runs after it)."""
    next_runs: Annotated[list[Instant], Field(max_length=NEXT_RUNS)] | None = None
    """The next few due times, nextRunAt first (up to 5; fewer when the schedule ends;
    jitterSeconds not included). Written with nextRunAt, never on its own."""
    last_schedule_time: Instant | None = None
    """When the last run published was due."""
    missed_runs: Annotated[StrictInt, Field(ge=0)] | None = None
    """Runs that did not start: past startingDeadlineSeconds or left out by spec.catchup
    (counted since creation)."""
    last_missed_time: Instant | None = None
    """When the last missed run was due."""
    last_trigger_token: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The last tickwork.dev/run-now token acted on (each token starts one run)."""
    queued_run: QueuedRun | None = None
    """The run the operator published last (it stays after the run ended)."""
    last_requeue_token: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The last tickwork.dev/requeue token acted on."""
    last_purge_token: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The last tickwork.dev/purge token acted on."""
    failure_streak: FailureStreak | None = None
    """Runs in a row that failed for good (only with spec.failurePolicy)."""
    buffered_runs: Annotated[
        list[BufferedRun], Field(max_length=BUFFER_LIMIT, json_schema_extra=_list_map("id"))
    ] = []
    """Runs waiting for the active run to end (concurrencyPolicy BufferOne, BufferAll,
    CancelOther), oldest first; the first is published when no run is active."""
    cancel_requests: Annotated[
        list[CancelRequest],
        Field(max_length=CANCEL_REQUESTS_LIMIT, json_schema_extra=_list_map("id")),
    ] = []
    """Runs the operator asks workers to stop (each leaves once its run has finished)."""
    last_resume_token: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The last tickwork.dev/resume token acted on (each token resumes a paused job once)."""
    backfills: Annotated[
        list[BackfillProgress],
        Field(max_length=MAX_BACKFILLS, json_schema_extra=_list_map("name")),
    ] = []
    """Progress of each backfill in spec.backfills."""
    conditions: Annotated[
        list[Condition],
        Field(
            max_length=16,
            json_schema_extra=_list_map("type"),
        ),
    ] = []
    """Ready (False when the spec is invalid, the job is paused, a run was missed or the last
    run did not succeed), Suspended and Paused.
    """


class RunStatus(_Model):
    """The workers' share of status: the run record. Every run writes under a field
    manager of its own (tickwork-run-...), so runs of one job that overlap add and
    remove only their own entries of activeRuns and runs; lastRun and
    lastSuccessfulTime go to the run that finished last."""

    model_config = ConfigDict(extra="ignore")

    active_runs: Annotated[
        list[ActiveRun],
        Field(max_length=ACTIVE_RUNS_LIMIT, json_schema_extra=_list_map("id")),
    ] = []
    """Runs started and not finished, one entry per run (each written by its own run)."""
    last_run: RunRecord | None = Field(
        default=None,
        description="The run that finished last (its run's field manager owns it whole).",
        # Atomic: a run that takes lastRun over takes every field of it, so the run
        # before keeps no share of equal values (outcome, attempts) and its field
        # manager goes once it owns nothing else.
        json_schema_extra={"x-kubernetes-map-type": "atomic"},
    )
    last_successful_time: Instant | None = None
    """When the last run that succeeded finished."""
    dead_runs: Annotated[
        list[DeadRun],
        Field(max_length=DEAD_RUNS_LIMIT, json_schema_extra=_list_map("id")),
    ] = []
    """Runs in the dead-letter queue (up to 20 listed per job), each written by its own
    run; it leaves when the run is requeued and starts again, or is purged."""
    runs: Annotated[
        list[RunRecord],
        Field(
            max_length=RUNS_LIMIT,
            json_schema_extra=_list_map("id"),
            description="Finished runs kept by spec.history, oldest first.",
        ),
    ] = []


class RunOutline(_Model):
    """A finished run of ``status.runs`` as the operator reads it: which run, how it
    ended and when. The rest of the record is the workers' and is not validated here."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr
    outcome: RunState
    scheduled_at: Instant
    started_at: Instant | None = None
    finished_at: Instant | None = None


class RunName(_Model):
    """A run listed in status (a dead letter) by its ID only."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr


class RunStatusOutline(_Model):
    """What the operator reads of the workers' share of status: the runs started and
    not finished, the last run whole, and of the history and the dead letters only
    which runs they are (and how and when the history's ended). Validating this instead
    of :class:`RunStatus` skips every record's result, error and parameters."""

    model_config = ConfigDict(extra="ignore")

    active_runs: list[ActiveRun] = []
    last_run: RunRecord | None = None
    runs: list[RunOutline] = []
    dead_runs: list[RunName] = []


class ScheduledJobStatus(RunStatus, OperatorStatus):
    """What the operator and the workers observed; written by server-side apply, each
    field by one writer: the operator's lifecycle and schedule, each run's record."""

    model_config = ConfigDict(extra="ignore")  # tolerate fields of newer versions

    def operator_share(self) -> OperatorStatus:
        own = set(OperatorStatus.model_fields)
        return OperatorStatus.model_validate(self.model_dump(include=own))


class ScheduledJob(_Model):
    """A whole ScheduledJob object, as read from the API server."""

    model_config = ConfigDict(extra="ignore")

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: dict[str, Any] = {}
    spec: ScheduledJobSpec
    status: ScheduledJobStatus = ScheduledJobStatus()
