"""The operator's settings: one pydantic-settings class, read once in ``main()``."""

from __future__ import annotations

import os
import socket

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tickwork.config import Namespaces


def _default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


class OperatorSettings(BaseSettings):
    """``TICKWORK_OPERATOR_*`` environment variables; Redis has its own (``TICKWORK_REDIS_*``)."""

    model_config = SettingsConfigDict(env_prefix="TICKWORK_OPERATOR_", extra="ignore")

    namespaces: Namespaces = Field(
        default_factory=list,
        description="Namespaces to watch; empty means all (cluster-wide). Comma-separated "
        "in the environment.",
    )
    queue: str = Field(
        default="redis",
        pattern="^(redis|memory)$",
        description="redis, or memory for the single-process local mode.",
    )
    kubeconfig: str | None = Field(
        default=None, description="Kubeconfig path; unset: in-cluster, else the default."
    )
    tick_seconds: float = Field(default=1.0, gt=0, le=60)
    stuck_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Liveness fails when the leader has not finished a tick this long.",
    )
    bucket_seconds: float = Field(default=1.0, gt=0, le=3600)
    reconcile_seconds: float = Field(
        default=30.0, gt=0, description="How often queued/running runs are checked in Redis."
    )
    catchup_runs_per_second: float = Field(
        default=10.0,
        gt=0,
        le=10000,
        description="Late runs published per second, operator-wide: runs caught up after an "
        "outage (spec.catchup) and backfilled runs (spec.backfills). Runs on time are never "
        "held back.",
    )
    list_page_size: int = Field(
        default=500,
        ge=1,
        le=10000,
        description="ScheduledJobs per page of the list at a start (and at every relist).",
    )
    lease_name: str = "tickwork-operator"
    lease_namespace: str = Field(default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"))
    lease_duration_seconds: float = Field(default=10.0, ge=2)
    lease_renew_seconds: float = Field(default=2.0, gt=0)
    identity: str = Field(default_factory=_default_identity)
    namespace_claims: bool = Field(
        default=True,
        description="Hold a tickwork-scheduler Lease in each namespace scheduled, and leave "
        "a namespace another Tickwork release holds alone (no run twice across releases).",
    )
    claim_duration_seconds: float = Field(
        default=60.0,
        ge=2,
        description="How long a namespace's claim outlives its release's last renewal: "
        "another release takes the namespace over after this.",
    )
    claim_renew_seconds: float = Field(default=15.0, gt=0)
    schedule_in_status: bool = Field(
        default=False,
        description="Also write each recurring job's schedule as each run is published: "
        "lastScheduleTime and queuedRun, a second status write per run. Off, a run costs one "
        "status write, its worker's record, which carries nextRunAt and nextRuns; the "
        "operator writes them itself only where no run's record is on its way (a new or "
        "edited job, a resume, a suspend). One-shot jobs keep their whole schedule.",
    )

    @property
    def release(self) -> str:
        """The release's identity in its claims: its leader Lease (one per release)."""
        return f"{self.lease_namespace}/{self.lease_name}"

    api_server_policy: str = Field(
        default="",
        description="Keep a NetworkPolicy of this name in lease_namespace admitting the "
        "worker Pods to the API server's current addresses (empty: none); see "
        "tickwork_operator.api_server_policy.",
    )
    api_server_policy_owner: str = Field(
        default="", description="The chart's worker egress NetworkPolicy, which owns it."
    )
    api_server_policy_selector: str = Field(
        default="{}", description="The worker Pods' labels, as a JSON object."
    )
    http_host: str = "0.0.0.0"  # noqa: S104 - a pod serves its probes and metrics on all interfaces
    http_port: int = Field(default=8080, ge=0, le=65535, description="/metrics, /healthz, /readyz")
    log_format: str = Field(default="text", pattern="^(text|json)$")
    log_level: str = "INFO"
