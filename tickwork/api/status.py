"""A ScheduledJob's status, as the operator and the workers write it (each field by
one writer: ``tickwork/kube/status.py``), with the bounds that keep it small."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
)

from tickwork.api.after import AfterStatus
from tickwork.api.base import Instant, _list_map, _Model
from tickwork.api.spec import BackfillName
from tickwork.core.backfill import MAX_BACKFILLS
from tickwork.core.failures import STREAK_RUN_IDS
from tickwork.core.params import MAX_PARAMS, PARAMS_TEXT_LIMIT
from tickwork.core.planning import BUFFER_LIMIT, NEXT_RUNS
from tickwork.core.states import JobPhase, RunState


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
    """A run a worker has started and not finished: running, or waiting for a retry or
    for a place of its concurrency key.
    Each entry is owned by its run's own field manager; it goes when its record is
    written."""

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    scheduled_at: Instant
    """When the run was due."""
    state: RunState
    """Running, Retrying between attempts, or Waiting for a place of its concurrency key."""
    attempt: Annotated[StrictInt, Field(ge=1)]
    """The attempt running or next (1-based)."""
    waiting_for: Annotated[StrictStr, Field(max_length=63)] | None = None
    """Waiting: the concurrency key (spec.concurrency.key) whose places are all taken."""
    queued_at: Instant | None = None
    """When it was published to the queue."""
    started_at: Instant | None = None
    """When the current attempt started."""
    worker: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The worker Pod running it."""
    manual: StrictBool = False
    """Started by the run-now annotation or kubectl tickwork trigger."""
    params: RunParams | None = Field(default=None, description=_PARAMS_DOC)


class RunOutline(_Model):
    """Which finished run, how it ended and when: the part of a record that the
    operator reads. :class:`RunRecord` is this plus what the workers alone read."""

    model_config = ConfigDict(extra="ignore")  # the rest of the record is not read

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""
    scheduled_at: Instant
    """When the run was due."""
    outcome: RunState
    """Succeeded, Failed (after its last attempt, or refused), Cancelled or Skipped."""
    started_at: Instant | None = None
    """When its last attempt started."""
    finished_at: Instant | None = None
    """When the last attempt ended."""


class RunRecord(RunOutline):
    """A finished run, as kept in lastRun and runs."""

    model_config = ConfigDict(extra="forbid")

    attempts: Annotated[StrictInt, Field(ge=0)] = 1
    """Attempts made."""
    result: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """What the task returned, shortened to 1,024 characters (never a Secret's value)."""
    error: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """Why the last attempt failed, shortened to 1,024 characters."""
    params: RunParams | None = Field(default=None, description=_PARAMS_DOC)
    slot: Annotated[StrictStr, Field(max_length=4, pattern=r"^[sf][0-9]{1,2}$")] | None = None
    """The place of the history that holds this record: s0, s1, ... for runs that
    succeeded, f0, ... for the others. The field manager tickwork-runs-<slot> writes
    it, and the next record written there replaces it in the same write (no trim)."""


class RunName(_Model):
    """A run listed in status (a dead letter) by its ID: what the operator reads of it."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[StrictStr, Field(max_length=256)]
    """Run ID."""


class DeadRun(RunName):
    """A run that failed for good and waits in the dead-letter queue: requeue or purge
    it with the tickwork.dev/requeue or tickwork.dev/purge annotation."""

    model_config = ConfigDict(extra="forbid")

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
    after: AfterStatus | None = None
    """spec.after: which jobs this job waits for, since when (written by the operator
    as the upstream jobs' runs end)."""
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


def _dead_runs() -> Any:
    return Field(
        max_length=DEAD_RUNS_LIMIT,
        json_schema_extra=_list_map("id"),
        description="Runs in the dead-letter queue (up to 20 listed per job), each written "
        "by its own run; it leaves when the run is requeued and starts again, or is purged.",
    )


def _runs() -> Any:
    return Field(
        max_length=RUNS_LIMIT,
        json_schema_extra=_list_map("id"),
        description="Finished runs kept by spec.history, oldest first.",
    )


class RunStatusOutline(_Model):
    """What the operator reads of the workers' share of status: the runs started and
    not finished, the last run whole, and of the history and the dead letters only
    which runs they are (and how and when the history's ended). :class:`RunStatus`
    is this with whole records: validating the outline skips every record's result,
    error and parameters."""

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
    dead_runs: Annotated[Sequence[RunName], _dead_runs()] = []
    runs: Annotated[Sequence[RunOutline], _runs()] = []


class RunStatus(RunStatusOutline):
    """The workers' share of status: the run record. Every run writes under a field
    manager of its own (tickwork-run-...), so runs of one job that overlap add and
    remove only their own entries of activeRuns and runs; lastRun and
    lastSuccessfulTime go to the run that finished last."""

    last_successful_time: Instant | None = None
    """When the last run that succeeded finished."""
    dead_runs: Annotated[list[DeadRun], _dead_runs()] = []
    runs: Annotated[list[RunRecord], _runs()] = []


class ScheduledJobStatus(RunStatus, OperatorStatus):
    """What the operator and the workers observed; written by server-side apply, each
    field by one writer: the operator's lifecycle and schedule, each run's record."""

    model_config = ConfigDict(extra="ignore")  # tolerate fields of newer versions

    def operator_share(self) -> OperatorStatus:
        own = set(OperatorStatus.model_fields)
        return OperatorStatus.model_validate(self.model_dump(include=own))
