"""The Pod-template fields of the ``container`` task that CronJob users rely on:
volumes (ConfigMap, Secret, PersistentVolumeClaim, emptyDir) and their mounts,
environment from whole ConfigMaps and Secrets, image pull Secrets and affinity.

Each is Kubernetes' own shape, cut to what keeps a job inside its namespace: a volume
names only objects of the job's namespace (no hostPath, no projected tokens), and pod
affinity terms match Pods of that namespace only (no ``namespaces`` or
``namespaceSelector``). So a task reaches nothing a Job of its creator's own could not:
the chart's admission policy lets only whoever may create Jobs in the namespace create
a container task there (docs/security.md).
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Self

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic.functional_validators import AfterValidator

from tickwork.api import rules
from tickwork.api.base import _cel, _list_map, _Model

ObjectName = Annotated[
    StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_NAME_PATTERN)
]
"""The name of a Secret, ConfigMap or claim (a DNS subdomain), in the job's namespace."""
DnsLabel = Annotated[StrictStr, Field(min_length=1, max_length=63, pattern=rules.DNS_LABEL_PATTERN)]
_PARENT = re.compile(r"(^|/)\.\.(/|$)")


def _relative(value: str) -> str:
    if value.startswith("/") or _PARENT.search(value):
        raise ValueError(rules.RELATIVE_PATH.message)
    return value


RelativePath = Annotated[
    StrictStr,
    Field(min_length=1, max_length=253, json_schema_extra=_cel(rules.RELATIVE_PATH)),
    AfterValidator(_relative),
]
FileMode = Annotated[StrictInt, Field(ge=0, le=0o777)]
"""File permission bits, as a number (0644 octal is 420)."""


class KeyToPath(_Model):
    """One key of a ConfigMap or Secret, as a file of the volume."""

    key: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_KEY_PATTERN)]
    """The key in the object's data."""
    path: RelativePath
    """The file's path inside the volume (relative, no '..')."""
    mode: FileMode | None = None
    """The file's permission bits (default: the volume's defaultMode)."""


_Items = Annotated[list[KeyToPath], Field(max_length=8)]


class ConfigMapVolume(_Model):
    """A ConfigMap of the job's namespace as files."""

    name: ObjectName
    """The ConfigMap's name."""
    items: _Items = []
    """Only these keys, at these paths (default: every key, as a file of its name)."""
    default_mode: FileMode | None = None
    """Permission bits of the files (default 0644)."""
    optional: StrictBool = False
    """Start the Pod even if the ConfigMap does not exist."""


class SecretVolume(_Model):
    """A Secret of the job's namespace as files."""

    secret_name: ObjectName
    """The Secret's name."""
    items: _Items = []
    """Only these keys, at these paths (default: every key, as a file of its name)."""
    default_mode: FileMode | None = None
    """Permission bits of the files (default 0644)."""
    optional: StrictBool = False
    """Start the Pod even if the Secret does not exist."""


class ClaimVolume(_Model):
    """A PersistentVolumeClaim of the job's namespace."""

    claim_name: ObjectName
    """The claim's name."""
    read_only: StrictBool = False
    """Mount it read-only."""


class StorageMedium(enum.StrEnum):
    DEFAULT = ""
    MEMORY = "Memory"


class EmptyDirVolume(_Model):
    """A directory that lives as long as the attempt's Pod."""

    medium: StorageMedium = StorageMedium.DEFAULT
    """"" (the node's disk) or Memory (a tmpfs, counted against the memory limit)."""
    size_limit: (
        Annotated[StrictStr, Field(min_length=1, max_length=64, pattern=rules.QUANTITY_PATTERN)]
        | None
    ) = None
    """The most it may hold, as a quantity ("1Gi")."""


class Volume(_Model):
    """A volume of the attempt's Pod: exactly one source."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.ONE_VOLUME_SOURCE))

    name: DnsLabel
    """The name mounts refer to."""
    config_map: ConfigMapVolume | None = None
    """A ConfigMap of the job's namespace."""
    secret: SecretVolume | None = None
    """A Secret of the job's namespace."""
    persistent_volume_claim: ClaimVolume | None = None
    """A PersistentVolumeClaim of the job's namespace."""
    empty_dir: EmptyDirVolume | None = None
    """A scratch directory of the Pod."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        sources = (self.config_map, self.secret, self.persistent_volume_claim, self.empty_dir)
        if sum(source is not None for source in sources) != 1:
            raise ValueError(rules.ONE_VOLUME_SOURCE.message)
        return self


class VolumeMount(_Model):
    """Where a container sees a volume."""

    name: DnsLabel
    """The volume's name (one of the task's volumes)."""
    mount_path: Annotated[
        StrictStr, Field(min_length=2, max_length=256, pattern=rules.MOUNT_PATH_PATTERN)
    ]
    """Where in the container: an absolute path."""
    sub_path: RelativePath | None = None
    """Mount only this path of the volume (relative, no '..')."""
    read_only: StrictBool = False
    """Mount it read-only."""


VolumeMounts = Annotated[
    list[VolumeMount], Field(max_length=16, json_schema_extra=_list_map("mountPath"))
]
InitVolumeMounts = Annotated[
    list[VolumeMount], Field(max_length=8, json_schema_extra=_list_map("mountPath"))
]


class ObjectRef(_Model):
    """A ConfigMap or Secret of the job's namespace, whole."""

    name: ObjectName
    """Its name."""
    optional: StrictBool = False
    """Start the container even if it does not exist."""


class EnvFromSource(_Model):
    """Every key of a ConfigMap or Secret as an environment variable."""

    model_config = ConfigDict(json_schema_extra=_cel(rules.ONE_ENV_FROM_SOURCE))

    prefix: Annotated[StrictStr, Field(max_length=128, pattern=r"^[A-Za-z0-9_]*$")] = ""
    """Put before each key's name."""
    config_map_ref: ObjectRef | None = None
    """A ConfigMap of the job's namespace."""
    secret_ref: ObjectRef | None = None
    """A Secret of the job's namespace."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.config_map_ref is None) == (self.secret_ref is None):
            raise ValueError(rules.ONE_ENV_FROM_SOURCE.message)
        return self


EnvFrom = Annotated[list[EnvFromSource], Field(max_length=8)]
InitEnvFrom = Annotated[list[EnvFromSource], Field(max_length=4)]


class PullSecret(_Model):
    """A Secret of the job's namespace the kubelet pulls the images with."""

    name: ObjectName
    """The Secret's name (type kubernetes.io/dockerconfigjson)."""


# -- affinity --------------------------------------------------------------------

LabelKey = Annotated[
    StrictStr, Field(min_length=1, max_length=316, pattern=rules.LABEL_KEY_PATTERN)
]
_Values = Annotated[list[Annotated[StrictStr, Field(max_length=63)]], Field(max_length=8)]


class SelectorOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class NodeOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class NodeSelectorRequirement(_Model):
    """A node label (or field) and the values it may have."""

    key: LabelKey
    """The label's key."""
    operator: NodeOperator
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: _Values = []
    """The values (none with Exists and DoesNotExist; one number with Gt and Lt)."""


class NodeSelectorTerm(_Model):
    """Requirements a node meets all of."""

    match_expressions: Annotated[list[NodeSelectorRequirement], Field(max_length=4)] = []
    """On the node's labels."""
    match_fields: Annotated[list[NodeSelectorRequirement], Field(max_length=1)] = []
    """On the node's fields (metadata.name)."""


class NodeSelector(_Model):
    """Terms a node meets one of."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], Field(min_length=1, max_length=4)]
    """The terms, ORed."""


class PreferredNode(_Model):
    """A term the scheduler prefers nodes by, with its weight."""

    weight: Annotated[StrictInt, Field(ge=1, le=100)]
    """1 to 100."""
    preference: NodeSelectorTerm
    """The term."""


class NodeAffinity(_Model):
    """Which nodes the attempt's Pod runs on."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    """Nodes it must run on."""
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[PreferredNode], Field(max_length=4)
    ] = []
    """Nodes it prefers."""


class LabelSelectorRequirement(_Model):
    """A label and the values it may have."""

    key: LabelKey
    """The label's key."""
    operator: SelectorOperator
    """In, NotIn, Exists or DoesNotExist."""
    values: _Values = []
    """The values (none with Exists and DoesNotExist)."""


class LabelSelector(_Model):
    """Pods of the job's namespace by their labels."""

    match_labels: Annotated[
        dict[
            Annotated[StrictStr, Field(max_length=316)],
            Annotated[StrictStr, Field(max_length=63, pattern=rules.LABEL_VALUE_PATTERN)],
        ],
        Field(max_length=4),
    ] = {}
    """Labels with these values."""
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=4)] = []
    """Requirements, ANDed."""


class PodAffinityTerm(_Model):
    """Pods of the job's own namespace near (or away from) which the Pod runs."""

    label_selector: LabelSelector
    """Which Pods."""
    topology_key: LabelKey
    """The node label that says "near": kubernetes.io/hostname, topology.kubernetes.io/zone."""


class PreferredPodTerm(_Model):
    """A pod affinity term the scheduler prefers, with its weight."""

    weight: Annotated[StrictInt, Field(ge=1, le=100)]
    """1 to 100."""
    pod_affinity_term: PodAffinityTerm
    """The term."""


class PodAffinity(_Model):
    """Pod (anti-)affinity, within the job's namespace."""

    required_during_scheduling_ignored_during_execution: Annotated[
        list[PodAffinityTerm], Field(max_length=2)
    ] = []
    """Terms the Pod's node must meet."""
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[PreferredPodTerm], Field(max_length=2)
    ] = []
    """Terms the scheduler prefers."""


class Affinity(_Model):
    """Where the attempt's Pod runs, as a Pod's affinity (pod terms within the job's
    namespace only)."""

    node_affinity: NodeAffinity | None = None
    """By the nodes' labels."""
    pod_affinity: PodAffinity | None = None
    """Near Pods of the job's namespace."""
    pod_anti_affinity: PodAffinity | None = None
    """Away from Pods of the job's namespace."""
