"""Validation rules shared by the CRD (as OpenAPI patterns and CEL) and the models.

Each rule is written once here; :mod:`.models` attaches it to a field or a
model both as a CEL ``x-kubernetes-validations`` entry (enforced by the API
server at ``kubectl apply``) and as the equivalent Python check (used by the
operator, the CLI and the tests). The messages are the user's instructions.
"""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.core import interval, templates
from tickwork.core.zones import ZONE_NAME_PATTERN

_MINUTE = r"(?:[0-5]?[0-9])"
_HOUR = r"(?:[01]?[0-9]|2[0-3])"
_DAY = r"(?:0?[1-9]|[12][0-9]|3[01])"
_MONTH = r"(?:0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
_WEEKDAY = r"(?:0?[0-7]|sun|mon|tue|wed|thu|fri|sat)"
_STEP = r"(?:/[1-9][0-9]?)"


def _field(value: str) -> str:
    item = rf"(?:\*|{value}(?:-{value})?){_STEP}?"
    return rf"{item}(?:,{item})*"


#: An interval, ``@every 90s`` (lower case, unlike the macros).
INTERVAL_PATTERN = f"^@every {interval.INTERVAL_TEXT_PATTERN}$"
#: Five cron fields with in-range values, a macro, or an interval. RE2 and Python agree on it.
CRON_PATTERN = (
    r"(?i)^(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|"
    + r"[ \t]+".join(_field(v) for v in (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY))
    + f"|(?-i:@every {interval.INTERVAL_TEXT_PATTERN})"
    + r")$"
)

CRON_MESSAGE = (
    "schedule must be five cron fields separated by spaces - minute (0-59), hour (0-23), "
    "day of month (1-31), month (1-12 or jan-dec), day of week (0-7 or sun-sat) - each "
    "'*', a value, a range 'a-b', a list 'a,b' or a step '*/n'; or a macro: @yearly, "
    "@annually, @monthly, @weekly, @daily, @midnight, @hourly; or an interval like "
    "'@every 90s', '@every 15m' or '@every 1h30m'"
)

ZONE_PATTERN = ZONE_NAME_PATTERN
ZONE_MESSAGE = "timeZone must be an IANA time zone name like 'Europe/Berlin' or 'UTC'"

URL_MESSAGE = "url must be an absolute http:// or https:// URL with a host"

HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
TASK_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(?:[.:][A-Za-z_][A-Za-z0-9_]*)*$"
#: A Secret's name (a DNS subdomain) and a key in its data, as Kubernetes has them.
SECRET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"  # noqa: S105 - a pattern
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"  # noqa: S105 - a pattern
#: A container image reference: [registry/]repository[:tag][@digest], no spaces.
IMAGE_PATTERN = r"^[a-z0-9]+([._/:@-][A-Za-z0-9_]+)*$"
#: A resource quantity as Kubernetes writes it ("500m", "1", "256Mi", "1.5G").
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
#: A resource name: cpu, memory, ephemeral-storage, hugepages-2Mi, example.com/gpu.
RESOURCE_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$"
)
#: A label key (optional DNS prefix, then a name of up to 63 characters).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
#: A label value (empty, or up to 63 characters).
LABEL_VALUE_PATTERN = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"


@dataclass(frozen=True)
class CelRule:
    """One ``x-kubernetes-validations`` entry."""

    rule: str
    message: str
    field_path: str | None = None
    reason: str | None = None

    def to_schema(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        return out


#: CEL: the spec is recurring (one schedule, or several).
_RECURRING = "has(self.schedule) || has(self.schedules)"
SCHEDULE_XOR_RUN_AT = CelRule(
    rule="[has(self.schedule), has(self.schedules), has(self.runAt)].filter(x, x).size() == "
    "(has(self.after) && !has(self.schedule) && !has(self.schedules) ? 0 : 1)",
    message="set exactly one of spec.schedule (a cron expression, for recurring runs), "
    "spec.schedules (several of them), spec.runAt (an RFC 3339 time, for a single run) "
    "or spec.after (runs after other jobs' runs; with a schedule, within its windows)",
)
AFTER_ALONE_OR_RECURRING = CelRule(
    rule="!has(self.after) || !has(self.runAt) && !has(self.calendars) && !has(self.catchup) "
    "&& (!has(self.backfills) || size(self.backfills) == 0)",
    message="spec.after goes alone or with schedule or schedules (its windows): not with "
    "runAt, calendars, catchup or backfills",
)
AFTER_WINDOW_NEEDS_SCHEDULE = CelRule(
    rule=f"!has(self.after) || !has(self.after.windowSeconds) || {_RECURRING}",
    message="after.windowSeconds is the length of a window of the job's own schedule: set "
    "schedule or schedules, or remove it",
)

BOUNDS_NEED_SCHEDULE = CelRule(
    rule=f"!has(self.notBefore) && !has(self.notAfter) || {_RECURRING}",
    message="notBefore and notAfter bound a recurring schedule: remove them, or use "
    "schedule instead of runAt",
)
BOUNDS_ORDER = CelRule(
    rule="!has(self.notBefore) || !has(self.notAfter) "
    "|| timestamp(self.notAfter) > timestamp(self.notBefore)",
    message="notAfter must be later than notBefore",
    field_path=".notAfter",
)
TTL_NEEDS_RUN_AT = CelRule(
    rule="!has(self.ttlSecondsAfterFinished) || has(self.runAt)",
    message="ttlSecondsAfterFinished applies to one-shot jobs only: remove it or use runAt",
    field_path=".ttlSecondsAfterFinished",
)
DAYLIGHT_SAVING_NEEDS_SCHEDULE = CelRule(
    rule=f"!has(self.daylightSaving) || {_RECURRING}",
    message="daylightSaving applies to cron schedules only: remove it or use schedule",
    field_path=".daylightSaving",
)
FAILURE_POLICY_NEEDS_SCHEDULE = CelRule(
    rule=f"!has(self.failurePolicy) || {_RECURRING}",
    message="failurePolicy applies to recurring jobs only (a runAt job runs once): "
    "remove it or use schedule",
    field_path=".failurePolicy",
)
ONE_TASK_KIND = CelRule(
    rule="[has(self.http), has(self.command), has(self.container), has(self.python), "
    "has(self.echo)].filter(x, x).size() == 1",
    message="task must set exactly one of http, command, container, python or echo",
)
BACKOFF_ORDER = CelRule(
    rule="self.maxBackoffSeconds >= self.backoffSeconds",
    message="retry.maxBackoffSeconds must be at least retry.backoffSeconds",
    field_path=".maxBackoffSeconds",
)
CRON_SHAPE = CelRule(rule=f"self.matches(r'{CRON_PATTERN}')", message=CRON_MESSAGE)
_INTERVAL_TEXT = "duration(self.substring(7))"  # after "@every "
INTERVAL_RANGE = CelRule(
    rule=f"!self.matches(r'{INTERVAL_PATTERN}') || "
    f"{_INTERVAL_TEXT} >= duration('{interval.MIN_INTERVAL_SECONDS}s') && "
    f"{_INTERVAL_TEXT} <= duration('{interval.MAX_INTERVAL_SECONDS}s')",
    message=interval.RANGE_MESSAGE,
)
JITTER_WITHIN_INTERVAL = CelRule(
    rule=f"!has(self.schedule) || !self.schedule.matches(r'{INTERVAL_PATTERN}') "
    "|| !has(self.jitterSeconds) "
    "|| duration(self.schedule.substring(7)).getSeconds() > self.jitterSeconds",
    message="jitterSeconds must be shorter than the @every interval",
    field_path=".jitterSeconds",
)
JITTER_WITHIN_INTERVALS = CelRule(
    rule="!has(self.schedules) || !has(self.jitterSeconds) || self.schedules.all(e, "
    f"!e.schedule.matches(r'{INTERVAL_PATTERN}') "
    "|| duration(e.schedule.substring(7)).getSeconds() > self.jitterSeconds)",
    message="jitterSeconds must be shorter than every @every interval of schedules",
    field_path=".jitterSeconds",
)
HTTP_URL = CelRule(
    rule="isURL(self) && url(self).getScheme() in ['http', 'https'] "
    "&& url(self).getHostname() != ''",
    message=URL_MESSAGE,
)

#: The most text one task may carry (body, header values, args, env values,
#: kwargs): every operator and worker keeps each job in memory, so a few thousand
#: maximal jobs must not exhaust them (see docs/operations.md, "Sizing").
TASK_TEXT_BUDGET = 16384
_BUDGET_MESSAGE = (
    "{what} may hold at most 16 KiB of text in all; keep large payloads and scripts "
    "in the target service or the image"
)
HTTP_TEXT_BUDGET = CelRule(
    rule="(has(self.body) ? size(self.body) : 0) + "
    "(has(self.bodyTemplate) ? size(self.bodyTemplate) : 0) + (has(self.headers) ? "
    "self.headers.map(h, has(h.value) ? size(h.value) : 0).sum() : 0) <= " + str(TASK_TEXT_BUDGET),
    message=_BUDGET_MESSAGE.format(what="the http body and header values"),
)
COMMAND_TEXT_BUDGET = CelRule(
    rule="self.args.map(a, size(a)).sum() + (has(self.env) ? "
    "self.env.map(e, has(e.value) ? size(e.value) : 0).sum() : 0) <= " + str(TASK_TEXT_BUDGET),
    message=_BUDGET_MESSAGE.format(what="the command's args and env values"),
)
PYTHON_TEXT_BUDGET = CelRule(
    rule="(has(self.args) ? self.args.map(a, size(a)).sum() : 0) + (has(self.kwargs) ? "
    "self.kwargs.map(k, size(k) + size(self.kwargs[k])).sum() : 0) <= " + str(TASK_TEXT_BUDGET),
    message=_BUDGET_MESSAGE.format(what="the python task's args and kwargs"),
)
_CONTAINER_TEXT = (
    "(has({c}.command) ? {c}.command.map(a, size(a)).sum() : 0) + "
    "(has({c}.args) ? {c}.args.map(a, size(a)).sum() : 0) + (has({c}.env) ? "
    "{c}.env.map(e, has(e.value) ? size(e.value) : 0).sum() : 0)"
)
#: The task's container and its init containers share one budget.
CONTAINER_TEXT_BUDGET = CelRule(
    rule=_CONTAINER_TEXT.format(c="self")
    + " + (has(self.initContainers) ? self.initContainers.map(i, "
    + _CONTAINER_TEXT.format(c="i")
    + ").sum() : 0) <= "
    + str(TASK_TEXT_BUDGET),
    message=_BUDGET_MESSAGE.format(
        what="the container's and its init containers' command, args and env values"
    ),
)
VALUE_OR_VALUE_FROM = CelRule(
    rule="!has(self.valueFrom) || !has(self.value) || size(self.value) == 0",
    message="set value or valueFrom, not both",
)
ONE_VALUE_SOURCE = CelRule(
    rule="has(self.secretKeyRef) != has(self.configMapKeyRef)",
    message="valueFrom must set exactly one of secretKeyRef or configMapKeyRef",
)
RESOURCE_NAMES = CelRule(
    rule=f"self.all(k, k.matches(r'{RESOURCE_NAME_PATTERN}'))",
    message="resources name cpu, memory, ephemeral-storage or another resource "
    "(hugepages-2Mi, example.com/gpu)",
)
NODE_SELECTOR_KEYS = CelRule(
    rule=f"self.all(k, k.matches(r'{LABEL_KEY_PATTERN}'))",
    message="nodeSelector keys must be label keys like kubernetes.io/arch or disktype",
)
TOLERATION_OPERATOR = CelRule(
    rule="!has(self.operator) || self.operator != 'Exists' "
    "|| !has(self.value) || size(self.value) == 0",
    message="a toleration with operator Exists takes no value",
)
TOLERATION_SECONDS = CelRule(
    rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
    message="tolerationSeconds applies to effect NoExecute only",
)
BODY_OR_BODY_FROM = CelRule(
    rule="!has(self.bodyFrom) || !has(self.body) || size(self.body) == 0",
    message="set body or bodyFrom, not both",
)
BODY_TEMPLATE_ALONE = CelRule(
    rule="!has(self.bodyTemplate) || "
    "(!has(self.bodyFrom) && (!has(self.body) || size(self.body) == 0))",
    message="set one of body, bodyFrom or bodyTemplate",
)
#: Every placeholder is a known one: as many of them as of placeholders at all (a
#: known placeholder is one; checking each found would cost more than CEL allows).
BODY_TEMPLATE_NAMES = CelRule(
    rule=f"self.findAll(r'{templates.PLACEHOLDER_PATTERN}', {templates.MAX_PLACEHOLDERS + 1})"
    f".size() == self.findAll(r'{templates.KNOWN_PLACEHOLDER_PATTERN}', "
    f"{templates.MAX_PLACEHOLDERS + 1}).size()",
    message=templates.NAMES_MESSAGE,
)
BODY_TEMPLATE_COUNT = CelRule(
    rule=f"self.findAll(r'{templates.PLACEHOLDER_PATTERN}', {templates.MAX_PLACEHOLDERS + 1})"
    f".size() <= {templates.MAX_PLACEHOLDERS}",
    message=templates.COUNT_MESSAGE,
)
CATCHUP_NEEDS_SCHEDULE = CelRule(
    rule=f"!has(self.catchup) || {_RECURRING}",
    message="catchup applies to recurring jobs only (a runAt job has one run): remove it "
    "or use schedule",
    field_path=".catchup",
)
BACKFILLS_NEED_SCHEDULE = CelRule(
    rule=f"!has(self.backfills) || size(self.backfills) == 0 || {_RECURRING}",
    message="backfills apply to recurring jobs only: remove them or use schedule",
    field_path=".backfills",
)
BACKFILL_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: spec.concurrency.key: a DNS label too.
CONCURRENCY_KEY_PATTERN = BACKFILL_NAME_PATTERN
BACKFILL_ORDER = CelRule(
    rule="timestamp(self.to) > timestamp(self.from)",
    message="a backfill's to must be later than its from",
    field_path=".to",
)
BACKFILL_SPAN = CelRule(
    rule="timestamp(self.to) - timestamp(self.from) <= duration('8784h')",
    message="a backfill may cover at most 366 days (and 1000 runs): split it into shorter ranges",
    field_path=".to",
)
CALENDARS_NEED_SCHEDULE = CelRule(
    rule=f"!has(self.calendars) || {_RECURRING}",
    message="calendars apply to recurring jobs only (a runAt job names its one instant): "
    "remove them or use schedule",
    field_path=".calendars",
)
CALENDAR_NAMES = CelRule(
    rule="(has(self.notOn) ? size(self.notOn) : 0) + (has(self.onlyOn) ? size(self.onlyOn) : 0) "
    "> 0",
    message="name at least one Calendar, in notOn or onlyOn",
)
#: A volume's, or an init container's, name: a DNS label.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: Where a volume is mounted: an absolute path.
MOUNT_PATH_PATTERN = r"^/.*$"
RELATIVE_PATH = CelRule(
    rule="!self.startsWith('/') && !self.matches(r'(^|/)\\.\\.(/|$)')",
    message="a path inside a volume is relative and has no '..' in it",
)
ONE_VOLUME_SOURCE = CelRule(
    rule="[has(self.configMap), has(self.secret), has(self.persistentVolumeClaim), "
    "has(self.emptyDir)].filter(x, x).size() == 1",
    message="a volume sets exactly one of configMap, secret, persistentVolumeClaim or emptyDir",
)
ONE_ENV_FROM_SOURCE = CelRule(
    rule="has(self.configMapRef) != has(self.secretRef)",
    message="envFrom sets exactly one of configMapRef or secretRef",
)
#: Every mount, the container's and each init container's, names a volume of the task.
MOUNTS_NAME_VOLUMES = CelRule(
    rule="(!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && "
    "self.volumes.exists(v, v.name == m.name))) && (!has(self.initContainers) || "
    "self.initContainers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, "
    "has(self.volumes) && self.volumes.exists(v, v.name == m.name))))",
    message="every volumeMounts entry names a volume of the task's volumes",
    field_path=".volumeMounts",
)
INIT_NAME_NOT_TASK = CelRule(
    rule="self.name != 'task'",
    message="an init container cannot be named 'task' (the task's own container is)",
    field_path=".name",
)

NOTIFY_URL_ONE = CelRule(
    rule="has(self.url) != has(self.urlFrom)",
    message="a notifier sets exactly one of url or urlFrom (a Secret's key holding the URL)",
)
NOTIFY_EVENTS_DISTINCT = CelRule(
    rule="self.all(e, self.exists_one(f, f == e))",
    message="notify[].events names each event once",
)
AFTER_NOT_ITSELF = CelRule(
    rule="!has(self.spec.after) || !self.spec.after.jobs.exists(j, j.job == self.metadata.name)",
    message="spec.after names the job itself: a job cannot run after its own runs",
    field_path=".spec.after.jobs",
)
