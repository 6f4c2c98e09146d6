"""A ScheduledJob's spec: the schedule (cron, ``@every``, several of them, or ``runAt``),
its zone and daylight-saving choices, bounds, retries, history limits, overlap, failure
and catch-up policies, backfills, and the task."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Annotated, Self

from pydantic import (
    AwareDatetime,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from tickwork.api import rules
from tickwork.api.after import After
from tickwork.api.base import CronText, ShortText, ZoneName, _cel, _list_map, _Model
from tickwork.api.calendar import JobCalendars
from tickwork.api.notify import Notifiers
from tickwork.api.tasks import Task
from tickwork.core.backfill import MAX_BACKFILL_DAYS, MAX_BACKFILLS
from tickwork.core.bounds import bounded
from tickwork.core.catchup import CatchupPolicy, CatchupRule
from tickwork.core.daylight import DaylightSavingChoice, RepeatedTime, SkippedTime
from tickwork.core.interval import interval_schedule, is_interval, parse_interval
from tickwork.core.planning import ConcurrencyPolicy
from tickwork.core.schedule import NO_RUNS, OneShotSchedule, Schedule, cron_schedule
from tickwork.core.schedule_set import union


class Priority(enum.StrEnum):
    """A job's runs' place in the queue (``spec.priority``)."""

    HIGH = "High"
    NORMAL = "Normal"
    LOW = "Low"


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


class ConcurrencyKey(_Model):
    """A limit on runs in flight shared by every job of the namespace naming the key."""

    key: Annotated[
        StrictStr, Field(min_length=1, max_length=63, pattern=rules.CONCURRENCY_KEY_PATTERN)
    ]
    """The key (a DNS label): jobs of one namespace naming it share its places; the same
    key in another namespace is another key."""
    limit: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    """How many runs naming the key may be in flight at once (this job's own runs
    included); a run over it waits in the queue, in order, and is not counted missed.
    Jobs naming one key should name one limit: each run is held to its own job's."""


class LagObjective(_Model):
    """How late a run may start (spec.slo)."""

    max_lag_seconds: Annotated[StrictInt, Field(ge=1, le=86400)]
    """A run whose first attempt starts more than this many seconds after it was due
    (its jitter counted in) breaks the objective: condition OnTime False, the
    TickworkJobLate alert."""


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


#: The most entries of ``spec.schedules``.
MAX_SCHEDULES = 10


class ScheduleEntry(_Model):
    """One of a job's several schedules (``spec.schedules``)."""

    schedule: CronText = Field(
        description="A cron expression (five fields or a macro like @daily), or an interval "
        "like '@every 90s'.",
    )
    time_zone: ZoneName | None = None
    """IANA zone this entry is read in. Unset: spec.timeZone."""


class ScheduledJobSpec(_Model):
    """The desired schedule and task."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            rules.SCHEDULE_XOR_RUN_AT,
            rules.AFTER_ALONE_OR_RECURRING,
            rules.AFTER_WINDOW_NEEDS_SCHEDULE,
            rules.TTL_NEEDS_RUN_AT,
            rules.DAYLIGHT_SAVING_NEEDS_SCHEDULE,
            rules.FAILURE_POLICY_NEEDS_SCHEDULE,
            rules.BOUNDS_NEED_SCHEDULE,
            rules.BOUNDS_ORDER,
            rules.JITTER_WITHIN_INTERVAL,
            rules.JITTER_WITHIN_INTERVALS,
            rules.CATCHUP_NEEDS_SCHEDULE,
            rules.BACKFILLS_NEED_SCHEDULE,
            rules.CALENDARS_NEED_SCHEDULE,
        )
    )

    schedule: CronText | None = Field(
        default=None,
        description="Recurring runs: a cron expression (five fields or a macro like @daily), "
        "or an interval like '@every 90s' (10s .. 8784h; time zones play no part).",
    )
    schedules: (
        Annotated[list[ScheduleEntry], Field(min_length=1, max_length=MAX_SCHEDULES)] | None
    ) = None
    """Recurring runs on several schedules (up to 10), each in its own zone if it names one:
    one job, one history, one concurrencyPolicy. An instant that two entries name is one
    run (run IDs name the job and the instant)."""
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
    after: After | None = None
    """Run after other jobs of the namespace: once all (or any) of them ended a run as
    named; each run gets the upstream run's ID as parameter upstreamRun. Alone, or with
    schedule or schedules: then within the windows their instants open (docs/scheduling.md,
    "Run after other jobs")."""
    calendars: JobCalendars | None = None
    """Recurring jobs only: Calendars of the job's namespace whose days the runs keep off
    (notOn) or keep to (onlyOn). A run on a day they rule out is not due at all (not
    missed); a change to a calendar re-plans every job that names it."""
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
    concurrency: ConcurrencyKey | None = None
    """A concurrency key: at most ``limit`` runs of all the jobs of the namespace that
    name ``key`` are in flight at once; the others wait for a place, in order
    (docs/scheduling.md, "Concurrency keys")."""
    priority: Priority = Priority.NORMAL
    """Which runs workers take first when runs wait for one: High, Normal or Low. While
    runs of several priorities wait, of every 8 runs taken 5 are High, 2 Normal and 1
    Low (a turn with none of its priority waiting goes to the highest that has one), so
    a waiting Normal run starts within 4 runs taken and a Low one within 8, whatever
    waits above it (docs/scheduling.md, "Priorities")."""
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
    slo: LagObjective | None = None
    """A service-level objective for this job's start lag: condition OnTime says whether
    its last run kept it, and tickwork_job_late and the TickworkJobLate alert name the
    job while it did not."""
    failure_policy: FailurePolicy | None = None
    """Recurring jobs only: pause the job after runs failed in a row (pauseAfter)."""
    ttl_seconds_after_finished: Annotated[StrictInt, Field(ge=0, le=31536000)] | None = None
    """One-shot jobs only: delete the object this many seconds after its run finished."""
    notify: Notifiers = []
    """Up to 3 HTTP endpoints told when a run fails for good (docs/operations.md,
    "Notifications"): retried, told once per run, at most a set number a minute per
    namespace; a notifier that fails never holds up or fails a run."""
    task: Task
    """What each run does: exactly one of http, command, container, python, echo."""

    @model_validator(mode="after")
    def _schedule_xor_run_at(self) -> Self:
        given = (self.schedule is not None, self.schedules is not None, self.run_at is not None)
        if sum(given) != (0 if self.after is not None and not self.recurring else 1):
            raise ValueError(rules.SCHEDULE_XOR_RUN_AT.message)
        if self.ttl_seconds_after_finished is not None and self.run_at is None:
            raise ValueError(rules.TTL_NEEDS_RUN_AT.message)
        if self.daylight_saving is not None and not self.recurring:
            raise ValueError(rules.DAYLIGHT_SAVING_NEEDS_SCHEDULE.message)
        if self.failure_policy is not None and not self.recurring:
            raise ValueError(rules.FAILURE_POLICY_NEEDS_SCHEDULE.message)
        if (self.not_before or self.not_after) and not self.recurring:
            raise ValueError(rules.BOUNDS_NEED_SCHEDULE.message)
        if self.not_before and self.not_after and self.not_after <= self.not_before:
            raise ValueError(rules.BOUNDS_ORDER.message)
        if self.schedule is not None and self._jitter_reaches(self.schedule):
            raise ValueError(rules.JITTER_WITHIN_INTERVAL.message)
        if any(self._jitter_reaches(e.schedule) for e in self.schedules or ()):
            raise ValueError(rules.JITTER_WITHIN_INTERVALS.message)
        return self

    def _jitter_reaches(self, text: str) -> bool:
        """Is ``text`` an interval no longer than the jitter?"""
        return is_interval(text) and self.jitter_seconds >= parse_interval(text)

    @model_validator(mode="after")
    def _after_alone_or_recurring(self) -> Self:
        after = self.after
        if after is None:
            return self
        if self.run_at or self.calendars or self.catchup or self.backfills:
            raise ValueError(rules.AFTER_ALONE_OR_RECURRING.message)
        if after.window_seconds is not None and not self.recurring:
            raise ValueError(rules.AFTER_WINDOW_NEEDS_SCHEDULE.message)
        return self

    @model_validator(mode="after")
    def _catchup_and_backfills(self) -> Self:
        if self.catchup is not None and not self.recurring:
            raise ValueError(rules.CATCHUP_NEEDS_SCHEDULE.message)
        if self.backfills and not self.recurring:
            raise ValueError(rules.BACKFILLS_NEED_SCHEDULE.message)
        if self.calendars is not None and not self.recurring:
            raise ValueError(rules.CALENDARS_NEED_SCHEDULE.message)
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

    @property
    def recurring(self) -> bool:
        """On a schedule, or several (not ``runAt``)."""
        return self.schedule is not None or self.schedules is not None

    @property
    def schedule_texts(self) -> tuple[str, ...]:
        """The schedules as written (several joined by the reader as it likes); none for a
        one-shot job."""
        if self.schedule is not None:
            return (self.schedule,)
        return tuple(e.schedule for e in self.schedules or ())

    def schedule_of(self, created: dt.datetime) -> Schedule:
        """The runs this spec asks for; ``created`` (the object's creationTimestamp)
        anchors an @every interval that has no notBefore, so every reader finds the
        same instants."""
        if self.run_at is not None:
            return OneShotSchedule(self.run_at)
        if self.after is not None and not self.recurring:
            return NO_RUNS  # the operator plans its runs from the upstream jobs' runs
        entries = (
            [(self.schedule, self.time_zone)]
            if self.schedule is not None
            else [(e.schedule, e.time_zone or self.time_zone) for e in self.schedules or ()]
        )
        anchor = self.not_before or created
        schedule = union(
            [
                interval_schedule(text, anchor=anchor)
                if is_interval(text)
                else cron_schedule(text, zone, self.daylight_saving_choice)
                for text, zone in entries
            ]
        )
        return bounded(schedule, not_before=self.not_before, not_after=self.not_after)

    @property
    def catchup_rule(self) -> CatchupRule | None:
        return None if self.catchup is None else self.catchup.rule(self.starting_deadline_seconds)

    @property
    def daylight_saving_choice(self) -> DaylightSavingChoice | None:
        return None if self.daylight_saving is None else self.daylight_saving.choice()
