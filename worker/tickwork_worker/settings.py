"""The worker's settings: one pydantic-settings class, read once in ``main()``."""

from __future__ import annotations

import os
import socket

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tickwork.config import Namespaces


def _default_name() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


class WorkerSettings(BaseSettings):
    """``TICKWORK_WORKER_*`` environment variables; Redis has its own (``TICKWORK_REDIS_*``)."""

    model_config = SettingsConfigDict(env_prefix="TICKWORK_WORKER_", extra="ignore")

    name: str = Field(default_factory=_default_name, description="Shown in status.currentRun.")
    concurrency: int = Field(default=4, ge=1, le=256, description="Runs executed at once.")
    lease_seconds: float = Field(
        default=30.0, ge=3, description="A run's lease; heartbeats renew it every third."
    )
    claim_wait_seconds: float = Field(default=1.0, gt=0, le=30)
    stuck_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Liveness fails when the claim loop has not gone round this long, or "
        "a task's thread still runs this long after its timeout.",
    )
    maintain_seconds: float = Field(
        default=1.0, gt=0, description="How often expired leases and due retries are moved."
    )
    grace_seconds: float = Field(
        default=25.0, ge=0, description="On SIGTERM, how long in-flight runs may finish."
    )
    soft_timeout_ratio: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="A run is cancelled at this share of timeoutSeconds, abandoned at all of it.",
    )
    running_after_seconds: float = Field(
        default=0.5,
        ge=0,
        description="Mark a run Running in status only once it has run this long (0: at "
        "once); shorter runs go straight to their outcome, one API write fewer.",
    )
    finishing_per_slot: int = Field(
        default=16,
        ge=0,
        le=64,
        description="A run frees its slot when its task ends; up to this many such runs "
        "per slot wait for their record's write without one (0: a run holds its slot "
        "until its outcome is written).",
    )
    start_check_watch_seconds: float = Field(
        default=0.25,
        ge=0,
        description="How long the runs of a batch wait for the worker's watch to pass the "
        "version of their shared check before each reads its own job (0: at once).",
    )
    egress_allow: str = Field(
        default="",
        description="Comma-separated CIDRs and host patterns HTTP tasks may reach although "
        "the defaults deny them (loopback, link-local, private and other special ranges).",
    )
    egress_deny: str = Field(
        default="", description="Comma-separated CIDRs and host patterns denied on top."
    )
    python_tasks: str = Field(
        default="*",
        description="Comma-separated patterns (fnmatch) of the registered Python tasks jobs "
        "may call; per namespace in `tenants`.",
    )
    max_runs_per_namespace: int = Field(
        default=0,
        ge=0,
        description="Fair share: the most runs of one namespace in flight at once across "
        "all workers (0: no limit); runs over it wait in the queue. Per namespace in "
        "`tenants` (maxRuns).",
    )
    share_per_namespace: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Fair share: the most runs of one namespace in flight at once, as a "
        "fraction of the slots of every worker alive now (at least 1; 0: none), whatever "
        "the autoscaler adds later; with max_runs_per_namespace too, the lower wins. "
        "Namespaces with maxRuns in `tenants` have that instead.",
    )
    runs_per_minute_per_namespace: float = Field(
        default=0.0,
        ge=0,
        description="Fair share: the most runs of one namespace started per minute (a "
        "minute's worth at once, then evenly; 0: no limit); runs over it wait. Per "
        "namespace in `tenants` (runsPerMinute).",
    )
    tenants: str = Field(
        default="",
        description="Per-namespace exceptions, as JSON: {namespace: {egressAllow: [...], "
        "pythonTasks: [...], commandTasks: bool, maxRuns: int, runsPerMinute: float}} "
        "(see tickwork_worker.tenants).",
    )
    demo_tasks: bool = Field(
        default=False,
        description="Register Tickwork's demo and test tasks (tickwork.sleep, .record, .fail, "
        ".refuse); off in production.",
    )
    command_tasks: bool = Field(
        default=False,
        description="Allow `command` tasks (in the command runner's container if "
        "`command_runner` is set, else in the worker's).",
    )
    command_runner: str = Field(
        default="",
        description="Unix socket of the command runner (tickwork-command-runner), which "
        "runs commands in a container of its own without the worker's credentials; "
        "empty: commands run in the worker's container.",
    )
    notices_per_minute: int = Field(
        default=30,
        ge=1,
        le=10000,
        description="Notices of spec.notify told per namespace and minute, across workers; "
        "past it, a notice is dropped and counted (tickwork_notices_total{outcome=limited}).",
    )
    previews: bool = Field(
        default=False,
        description="Keep what tasks bring back in status, with Secret values redacted: "
        "the first 512 bytes of an HTTP answer, the tail of a command's output or of a "
        "container's log. Off: status says the status or exit code only (whoever may "
        "read a ScheduledJob reads its status).",
    )
    container_tasks: bool = Field(
        default=False,
        description="Run `container` tasks as Jobs in the jobs' namespaces (the chart's "
        "admission policy makes sure whoever creates one may create Jobs there).",
    )
    container_ttl_seconds: int = Field(
        default=3600,
        ge=0,
        le=31536000,
        description="ttlSecondsAfterFinished of the Jobs of container tasks: finished Jobs "
        "and their Pods (and logs) are deleted this long after they end.",
    )
    container_log_bytes: int = Field(
        default=16384,
        ge=1024,
        le=1048576,
        description="The most of a container's log read for the run's result (its tail).",
    )
    queue: str = Field(default="redis", pattern="^(redis|memory)$")
    job_cache: bool = Field(
        default=True,
        description="Keep a watched copy of the ScheduledJobs and start runs from it, instead "
        "of reading each run's job from the API server (needs list and watch).",
    )
    namespaces: Namespaces = Field(
        default_factory=list,
        description="Namespaces whose jobs the copy holds (the operator's); empty: all. "
        "Comma-separated in the environment.",
    )
    metrics_namespaces: int = Field(
        default=100,
        ge=0,
        le=10000,
        description="Namespaces counted under their own job_namespace label in the per-team "
        'metrics (the first this many a worker sees); later ones count as "_other".',
    )
    metrics_jobs: int = Field(
        default=200,
        ge=0,
        le=10000,
        description="Jobs annotated tickwork.dev/metrics: job counted on their own "
        "(tickwork_job_runs_total), the first this many a worker sees.",
    )
    kubeconfig: str | None = None
    http_host: str = "0.0.0.0"  # noqa: S104 - a pod serves its probes and metrics on all interfaces
    http_port: int = Field(default=8081, ge=0, le=65535)
    log_format: str = Field(default="text", pattern="^(text|json)$")
    log_level: str = "INFO"
