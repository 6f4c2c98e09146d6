"""Runs after other jobs' runs: ``spec.after`` (which jobs, what outcome, all or any,
the timeout) and ``status.after`` (what the job waits for, since when). Planned by
tickwork.core.after; followed by the operator's tickwork_operator.dependencies."""

from __future__ import annotations

import enum
from typing import Annotated, Self

from pydantic import Field, StrictInt, StrictStr, model_validator

from tickwork.api import rules
from tickwork.api.base import Instant, _list_map, _Model


class UpstreamOutcome(enum.StrEnum):
    """Which ends of an upstream job's run count (``spec.after.jobs[].outcome``)."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    FINISHED = "Finished"
    """Succeeded or Failed."""


class AfterRequire(enum.StrEnum):
    """Whether every job listed must have ended a run (All), or any one (Any)."""

    ALL = "All"
    ANY = "Any"


#: The most jobs ``spec.after`` names.
MAX_UPSTREAMS = 10


class Upstream(_Model):
    """A job of the same namespace whose runs this job runs after."""

    job: Annotated[
        StrictStr, Field(min_length=1, max_length=253, pattern=rules.SECRET_NAME_PATTERN)
    ]
    """The ScheduledJob's name (of this job's namespace)."""
    outcome: UpstreamOutcome = UpstreamOutcome.SUCCEEDED
    """How its run must end: Succeeded, Failed, or Finished (either)."""


class After(_Model):
    """Runs started by other jobs' runs ending (``spec.after``)."""

    jobs: Annotated[
        list[Upstream],
        Field(min_length=1, max_length=MAX_UPSTREAMS, json_schema_extra=_list_map("job")),
    ]
    """Up to 10 jobs of this namespace, each with the outcome that counts."""
    require: AfterRequire = AfterRequire.ALL
    """All: a run starts once every job listed has ended a run as named since this
    job's last run; Any: each run of a job listed that ends as named starts one."""
    window_seconds: Annotated[StrictInt, Field(ge=10, le=31622400)] | None = None
    """With schedule or schedules: each of their instants opens a window this long (unset:
    until the next instant). The window's run starts at its opening once the jobs
    listed ended runs as asked since the window before it opened, or as soon as they
    do within it; a window they miss has no run."""
    timeout_seconds: Annotated[StrictInt, Field(ge=10, le=604800)] = 86400
    """All: the runs that count must end within this many seconds of one another. A run
    that ended earlier no longer counts: the jobs listed must end again (status.after
    says since when this job waits, and for which)."""

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        """The API server's list-map refuses a job named twice; so do the models."""
        names = [u.job for u in self.jobs]
        if len(set(names)) != len(names):
            raise ValueError("Duplicate value: after.jobs names each job once")
        return self


class UpstreamRun(_Model):
    """An upstream job's run counted toward this job's next run (spec.after)."""

    job: Annotated[StrictStr, Field(max_length=253)]
    """The upstream job's name."""
    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    finished_at: Instant
    """When it ended (rounded up to the second)."""


class AfterStatus(_Model):
    """What a job that runs after others (spec.after) waits for, and since when."""

    waiting_for: Annotated[
        list[Annotated[StrictStr, Field(max_length=253)]], Field(max_length=10)
    ] = []
    """The jobs listed that have not ended a run as asked since this job's last run
    (empty: a run is due)."""
    since: Instant | None = None
    """When the first run counted ended (require All): the job has waited since."""
    counted: Annotated[list[UpstreamRun], Field(max_length=10)] = []
    """The upstream runs counted toward the next run."""
