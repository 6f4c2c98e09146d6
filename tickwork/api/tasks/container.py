"""The ``container`` task kind: a Kubernetes Job per attempt, with its image,
environment, resources, tolerations, security settings, init containers and the
Pod-template fields of :mod:`tickwork.api.tasks.pod` (volumes, envFrom, pull Secrets,
affinity)."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Self

from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic.functional_validators import AfterValidator

from tickwork.api import rules
from tickwork.api.base import _cel, _list_map, _Model, _within_budget
from tickwork.api.tasks.pod import (
    Affinity,
    EnvFrom,
    InitEnvFrom,
    InitVolumeMounts,
    PullSecret,
    Volume,
    VolumeMounts,
)
from tickwork.api.tasks.podtext import POD_TEXT, POD_TEXT_BUDGET, pod_text
from tickwork.api.tasks.sources import SecretKeyRef


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
    fs_group: Annotated[StrictInt, Field(ge=0, le=2147483647)] | None = None
    """A group that owns the Pod's volumes (and that the containers belong to): what
    a claim written by a non-root container usually needs."""
    supplemental_groups: Annotated[
        list[Annotated[StrictInt, Field(ge=0, le=2147483647)]], Field(max_length=16)
    ] = []
    """More groups the containers' processes belong to."""


_Words = Annotated[list[Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=32)]
_Env = Annotated[list[ContainerEnvVar], Field(max_length=32, json_schema_extra=_list_map("name"))]


class InitContainer(_Model):
    """A container that runs to completion before the task's, in order: to fetch,
    prepare or wait. It has the task's resources, security settings and the run's
    variables; its text counts in the task's budgets."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.INIT_NAME_NOT_TASK))

    name: Annotated[StrictStr, Field(min_length=1, max_length=63, pattern=rules.DNS_LABEL_PATTERN)]
    """Its name in the Pod (not 'task')."""
    image: Annotated[StrictStr, Field(min_length=1, max_length=1024, pattern=rules.IMAGE_PATTERN)]
    """The image to run."""
    command: _Words = []
    """The entrypoint (default: the image's ENTRYPOINT)."""
    args: _Words = []
    """Its arguments (default: the image's CMD)."""
    env: Annotated[
        list[ContainerEnvVar], Field(max_length=8, json_schema_extra=_list_map("name"))
    ] = []
    """Environment variables, as the task's."""
    env_from: InitEnvFrom = []
    """Every key of ConfigMaps or Secrets of the job's namespace as variables."""
    volume_mounts: InitVolumeMounts = []
    """Where it sees the task's volumes."""
    image_pull_policy: PullPolicy | None = None
    """Always, IfNotPresent or Never."""

    @model_validator(mode="after")
    def _checked(self) -> Self:
        if self.name == "task":
            raise ValueError(rules.INIT_NAME_NOT_TASK.message)
        return self


class ContainerTask(_Model):
    """Run a container as a Kubernetes Job in the job's namespace, one Job per attempt.
    Creating a ScheduledJob with it needs the right to create Jobs there (an admission
    policy checks it). Off unless the installer turns the kind on."""

    model_config = ConfigDict(
        json_schema_extra=_cel(rules.CONTAINER_TEXT_BUDGET, POD_TEXT, rules.MOUNTS_NAME_VOLUMES)
    )

    image: Annotated[StrictStr, Field(min_length=1, max_length=1024, pattern=rules.IMAGE_PATTERN)]
    """The image to run, e.g. registry.example.com/reports:1.4 or ...@sha256:..."""
    command: _Words = []
    """The entrypoint (default: the image's ENTRYPOINT); no shell is involved."""
    args: _Words = []
    """Its arguments (default: the image's CMD)."""
    env: _Env = []
    """Environment variables; a value may come from a Secret or a ConfigMap. The run's
    TICKWORK_RUN_ID, TICKWORK_SCHEDULED_TIME, TICKWORK_ATTEMPT, TICKWORK_JOB,
    TICKWORK_NAMESPACE and a manual run's TICKWORK_PARAM_<NAME> come on top."""
    env_from: EnvFrom = []
    """Every key of ConfigMaps or Secrets of the job's namespace as variables (the
    ``env`` entries and the run's variables win over them)."""
    volumes: Annotated[list[Volume], Field(max_length=16, json_schema_extra=_list_map("name"))] = []
    """Volumes of the Pod: ConfigMaps, Secrets and PersistentVolumeClaims of the job's
    namespace, and emptyDirs."""
    volume_mounts: VolumeMounts = []
    """Where the task's container sees the volumes."""
    init_containers: Annotated[
        list[InitContainer], Field(max_length=4, json_schema_extra=_list_map("name"))
    ] = []
    """Containers that run to completion, in order, before the task's."""
    image_pull_secrets: Annotated[
        list[PullSecret], Field(max_length=4, json_schema_extra=_list_map("name"))
    ] = []
    """Secrets of the job's namespace the kubelet pulls the images with."""
    affinity: Affinity | None = None
    """Node affinity, and pod (anti-)affinity within the job's namespace."""
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
        texts = [*self.command, *self.args, *(v.value for v in self.env)]
        for init in self.init_containers:
            texts += [*init.command, *init.args, *(v.value for v in init.env)]
        _within_budget(rules.CONTAINER_TEXT_BUDGET, *texts)
        if pod_text(self) > POD_TEXT_BUDGET:
            raise ValueError(POD_TEXT.message)
        volumes = {volume.name for volume in self.volumes}
        mounts = [*self.volume_mounts, *(m for c in self.init_containers for m in c.volume_mounts)]
        if any(mount.name not in volumes for mount in mounts):
            raise ValueError(rules.MOUNTS_NAME_VOLUMES.message)
        return self
