"""The ScheduledJob API (``tickwork.dev/v1alpha1``) as pydantic models.

These models are the single source of the CRD: ``python -m tickwork.api.crd``
turns them into ``manifests/crds/scheduledjobs.tickwork.dev.yaml``, and a
test fails when the committed file drifts. Field names are camelCase on the
wire (aliases) and snake_case in Python. Every string, list and map has an
upper bound, so an object stays far below etcd's 1.5 MiB limit.

Each CEL rule the API server enforces has a Python twin, so the operator and the
CLI reach the same verdict; checks CEL cannot express (the cron ranges' order, a
schedule that never fires, an unknown zone) live only in Python and surface as a
status condition and an Event.

The API lives in one module per concept; this one holds the whole object and
names every model, so ``models.X`` reaches any of them:

* :mod:`tickwork.api.base`: group, version, kind, the model base, checked field types;
* :mod:`tickwork.api.tasks`: :class:`Task` and one module per task kind;
* :mod:`tickwork.api.spec`: the spec and its policies;
* :mod:`tickwork.api.status`: the status and its bounds.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from tickwork.api.base import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    BodyTemplate,
    CronText,
    HttpUrl,
    Instant,
    ShortText,
    ZoneName,
    _Model,
)
from tickwork.api.spec import (
    Backfill,
    BackfillName,
    Catchup,
    DaylightSaving,
    FailurePolicy,
    HistoryLimits,
    RetryPolicy,
    ScheduledJobSpec,
)
from tickwork.api.status import (
    ACTIVE_RUNS_LIMIT,
    CANCEL_REQUESTS_LIMIT,
    DEAD_RUNS_LIMIT,
    DEAD_RUNS_LISTED,
    RUNS_LIMIT,
    ActiveRun,
    BackfillProgress,
    BufferedRun,
    CancelRequest,
    Condition,
    ConditionStatus,
    DeadRun,
    FailureStreak,
    OperatorStatus,
    QueuedRun,
    RunName,
    RunOutline,
    RunParams,
    RunRecord,
    RunStatus,
    RunStatusOutline,
    ScheduledJobStatus,
)
from tickwork.api.tasks import Task
from tickwork.api.tasks.command import CommandTask, EnvVar
from tickwork.api.tasks.container import (
    ConfigMapKeyRef,
    ContainerEnvVar,
    ContainerResources,
    ContainerSecurity,
    ContainerTask,
    ContainerValueSource,
    PullPolicy,
    Quantity,
    ResourceList,
    TaintEffect,
    Toleration,
    TolerationOperator,
)
from tickwork.api.tasks.echo import EchoTask
from tickwork.api.tasks.http import HttpHeader, HttpMethod, HttpTask
from tickwork.api.tasks.python import PythonTask
from tickwork.api.tasks.sources import SecretKeyRef, ValueSource


class ScheduledJob(_Model):
    """A whole ScheduledJob object, as read from the API server."""

    model_config = ConfigDict(extra="ignore")

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: dict[str, Any] = {}
    spec: ScheduledJobSpec
    status: ScheduledJobStatus = ScheduledJobStatus()


__all__ = [
    "ACTIVE_RUNS_LIMIT",
    "API_VERSION",
    "CANCEL_REQUESTS_LIMIT",
    "DEAD_RUNS_LIMIT",
    "DEAD_RUNS_LISTED",
    "GROUP",
    "KIND",
    "PLURAL",
    "RUNS_LIMIT",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "ActiveRun",
    "Backfill",
    "BackfillName",
    "BackfillProgress",
    "BodyTemplate",
    "BufferedRun",
    "CancelRequest",
    "Catchup",
    "CommandTask",
    "Condition",
    "ConditionStatus",
    "ConfigMapKeyRef",
    "ContainerEnvVar",
    "ContainerResources",
    "ContainerSecurity",
    "ContainerTask",
    "ContainerValueSource",
    "CronText",
    "DaylightSaving",
    "DeadRun",
    "EchoTask",
    "EnvVar",
    "FailurePolicy",
    "FailureStreak",
    "HistoryLimits",
    "HttpHeader",
    "HttpMethod",
    "HttpTask",
    "HttpUrl",
    "Instant",
    "OperatorStatus",
    "PullPolicy",
    "PythonTask",
    "Quantity",
    "QueuedRun",
    "ResourceList",
    "RetryPolicy",
    "RunName",
    "RunOutline",
    "RunParams",
    "RunRecord",
    "RunStatus",
    "RunStatusOutline",
    "ScheduledJob",
    "ScheduledJobSpec",
    "ScheduledJobStatus",
    "SecretKeyRef",
    "ShortText",
    "TaintEffect",
    "Task",
    "Toleration",
    "TolerationOperator",
    "ValueSource",
    "ZoneName",
]
