"""One ScheduledJob as the watcher holds it (:class:`JobEntry`): what it observed of
the job's status (:class:`Observed`) and the facts scheduling reads of it. How a
watched object becomes one: :mod:`tickwork_operator.reading`.

Over 400 lines: a JobEntry's facts (finished, active and due runs, backfills, the
failure streak, the next runs) read the same fields, and change together.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tickwork.api.models import (
    ActiveRun,
    BackfillProgress,
    FailureStreak,
    OperatorStatus,
    QueuedRun,
    RunOutline,
    RunRecord,
    ScheduledJobSpec,
)
from tickwork.api.sharing import shared_instants
from tickwork.api.spec import Priority
from tickwork.core.after import WindowedAfter
from tickwork.core.annotations import same_trigger, trigger_key
from tickwork.core.failures import FinishedRun, Streak, follow, restart
from tickwork.core.planning import JobFacts, PendingRun, upcoming
from tickwork.core.runs import belongs_to, parse_run_id
from tickwork.core.schedule import Schedule
from tickwork.core.states import JobPhase, RunState

JobKey = tuple[str, str]
IndexKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Observed:
    """What the operator keeps of a job's status as last watched: its own share (the
    very object it holds as written, when equal) and, of the runs' share, only what
    scheduling reads: the runs started and not finished, the last run whole, and of
    the history and the dead-letter list just which runs they are and how they ended.

    The full status model was several KB per job even with no run history, and a
    history of ten records is ten models more (benchmarks/rounds.md)."""

    share: OperatorStatus
    active_runs: tuple[ActiveRun, ...] = ()
    last_run: LastRun | None = None
    runs: tuple[FinishedRun, ...] = ()
    """``status.runs`` (oldest first), as finished runs."""
    dead_run_ids: tuple[str, ...] = ()
    shown: tuple[dt.datetime, ...] = ()
    """``status.nextRuns`` (or ``nextRunAt`` alone) of a job whose next runs are not
    the operator's share but shown by whoever wrote last (:func:`status_of` with
    ``apart``): the record of each run carries them."""

    @property
    def phase(self) -> JobPhase | None:
        return self.share.phase

    @property
    def observed_generation(self) -> int | None:
        return self.share.observed_generation

    @property
    def queued_run(self) -> QueuedRun | None:
        return self.share.queued_run


def as_finished(record: RunOutline) -> FinishedRun:
    """A run record as a finished run: when it ended, or as near as the record says."""
    ended = record.finished_at or record.started_at or record.scheduled_at
    return FinishedRun(run_id=record.id, outcome=record.outcome, finished_at=ended)


@dataclass(frozen=True, slots=True)
class LastRun:
    """What the operator reads of ``status.lastRun``: the run as a finished run (the
    very record of the history when that holds it too, as it mostly does), whether
    the record says when it finished (a one-shot's TTL counts from then), and its
    error (the Ready condition quotes it), and how late its first attempt started, in
    whole seconds (condition OnTime; None: a retried run, or no start recorded). The
    whole record as a model took ~600 bytes per job; this takes ~70 beside the
    history's (a lag below 257 s is one of Python's shared small ints)."""

    run: FinishedRun
    recorded_finish: bool = True
    error: str | None = None
    lag: int | None = None

    @property
    def id(self) -> str:
        return self.run.run_id

    @property
    def outcome(self) -> RunState:
        return self.run.outcome

    @property
    def finished_at(self) -> dt.datetime | None:
        return self.run.finished_at if self.recorded_finish else None


def last_run_of(record: RunRecord, history: tuple[FinishedRun, ...]) -> LastRun:
    """``record`` (``status.lastRun``) as the operator keeps it, sharing the history's
    equal record."""
    run = as_finished(record)
    run = next((known for known in reversed(history) if known == run), run)
    lag = None
    if record.attempts == 1 and record.started_at is not None:
        lag = max(0, round((record.started_at - record.scheduled_at).total_seconds()))
    return LastRun(
        run=run, recorded_finish=record.finished_at is not None, error=record.error, lag=lag
    )


#: What most jobs hold in their collections: nothing, one shared empty object for all
#: of them (an empty set alone is 216 bytes, and an index holds 100,000 entries).
NO_IDS: frozenset[str] = frozenset()
NO_ASKS: Mapping[str, str] = MappingProxyType({})


@dataclass(slots=True)
class JobEntry:
    """One ScheduledJob as the watcher sees it (slotted: smaller per job than an
    instance dict, benchmarks/rounds.md)."""

    namespace: str
    name: str
    uid: str
    generation: int
    created_at: dt.datetime
    spec: ScheduledJobSpec | None
    invalid_reason: str | None
    observed: Observed
    wanted: OperatorStatus
    """The operator's share of status as it should be (sent when it differs)."""
    written: OperatorStatus
    """The operator's share as last written or observed."""
    schedule: Schedule | None = None
    pending: PendingRun | None = None
    published_run_id: str | None = None
    """A run this replica published and has not yet seen finish."""
    run_now: str | None = None
    run_params: str | None = None
    """The tickwork.dev/run-params annotation: the parameters of the run-now token."""
    dead_letter_asks: Mapping[str, str] = field(default_factory=lambda: NO_ASKS)
    """The tickwork.dev/requeue and /purge annotation values, by verb."""
    settled_run_ids: frozenset[str] = NO_IDS
    """Runs the queue reports done although status never said so (a lost status write)."""
    resume: str | None = None
    """The tickwork.dev/resume annotation's value."""
    streak: Streak | None = None
    """Runs in a row that failed (only with spec.failurePolicy): what status should say."""
    resumed_token: str | None = None
    """The last resume token acted on, as status should record it."""
    upcoming_runs: tuple[dt.datetime, ...] = ()
    """The last list :meth:`next_runs` worked out (for this generation's schedule)."""
    cancel_asks: tuple[str, ...] = ()
    """The run IDs of the tickwork.dev/cancel annotation."""
    calendar_spec: ScheduledJobSpec | None = None
    """The spec of a job that names Calendars (``spec`` is None while one is missing):
    what it is planned from again when they change."""
    after_spec: ScheduledJobSpec | None = None
    """The spec of a job that runs after others (``spec`` is None while they make a
    cycle): what it is planned from again when their runs end."""

    @property
    def key(self) -> JobKey:
        return (self.namespace, self.name)

    def routing(self) -> dict[str, Any]:
        """Its runs' message fields that route them in the queue: the priority (absent
        for Normal: such a message is as before) and the concurrency key, qualified by
        the namespace, with its limit. A run published again keeps them."""
        spec = self.spec
        if spec is None:
            return {}
        fields: dict[str, Any] = {}
        if spec.priority is not Priority.NORMAL:
            fields["priority"] = spec.priority.value
        if spec.concurrency is not None:
            fields["concurrency_key"] = f"{self.namespace}/{spec.concurrency.key}"
            fields["concurrency_limit"] = spec.concurrency.limit
        return fields

    @property
    def suspended(self) -> bool:
        return bool(self.spec and self.spec.suspend)

    @property
    def paused(self) -> bool:
        """Paused by runs that failed in a row (and not resumed since)."""
        return self.spec is not None and self.streak is not None and self.streak.paused

    def follow_failures(self) -> bool:
        """Count the runs that failed in a row (spec.failurePolicy), from the share of
        status for this generation, and act on a new resume token; a new spec starts a
        new count too. True if a pause just ended (the job then starts from now, as
        after a suspend)."""
        current = self.wanted.observed_generation == self.generation
        base = self.wanted if current else self.written
        was = streak_of(base.failure_streak)
        token = self.resume or ""
        key = trigger_key(token)  # None for a blank token: it asks for nothing
        resume = key is not None and not same_trigger(token, base.last_resume_token)
        self.resumed_token = key if resume else base.last_resume_token
        pause_after = self.spec.pause_after if self.spec else None
        if pause_after is None:
            self.streak = None
        elif was is None or resume or base.observed_generation != self.generation:
            self.streak = restart(self.finished_runs())
        else:
            self.streak = follow(was, self.finished_runs(), pause_after=pause_after)
        return was is not None and was.paused and not self.paused

    def finished_runs(self) -> list[FinishedRun]:
        """This object's runs that status shows finished: the last one and the history."""
        status = self.observed
        records = [status.last_run.run, *status.runs] if status.last_run else status.runs
        return [r for r in records if belongs_to(r.run_id, self.uid)]

    def finished_run_ids(self) -> set[str]:
        """Runs whose record status shows (or that the queue reports done)."""
        done = {r.run_id for r in self.observed.runs} | self.settled_run_ids
        if self.observed.last_run is not None:
            done.add(self.observed.last_run.id)
        return done

    def running_run_ids(self) -> list[str]:
        """This object's runs that are queued, running or waiting for a retry."""
        ids = [a.id for a in self.observed.active_runs if belongs_to(a.id, self.uid)]
        finished = self.finished_run_ids()
        queued = self.observed.queued_run
        for run_id in [queued.id if queued else None, self.published_run_id]:
            if (
                run_id
                and run_id not in finished
                and run_id not in ids
                and belongs_to(run_id, self.uid)
            ):
                ids.append(run_id)
        return ids

    def cancels_to_act_on(self) -> list[str]:
        """IDs of the cancel annotation the operator has still to act on: runs buffered,
        or pending and not yet named in ``cancelRequests``."""
        buffered = {b.id for b in self.wanted.buffered_runs}
        requested = {r.id for r in self.wanted.cancel_requests}
        running = set(self.running_run_ids())
        return [
            i for i in self.cancel_asks if i in buffered or (i in running and i not in requested)
        ]

    def recorded_schedule(self) -> dt.datetime | None:
        """The latest instant of a scheduled run of this job that status shows, queued
        (``queuedRun``), running or ended, or that this replica published: where a job
        whose status keeps no schedule (``scheduleInStatus`` off: no ``nextRunAt`` nor
        ``lastScheduleTime``) picks up after a restart or a leader change. Manual and
        backfilled runs do not count; run IDs name their instant."""
        ids = [a.id for a in self.observed.active_runs]
        ids += [r.run_id for r in self.observed.runs]
        if self.observed.last_run is not None:
            ids.append(self.observed.last_run.run.run_id)
        for queued in (self.observed.queued_run, self.wanted.queued_run):
            if queued is not None and not queued.manual:
                ids.append(queued.id)
        if self.published_run_id is not None:
            ids.append(self.published_run_id)
        latest: dt.datetime | None = None
        for run_id in ids:
            try:
                parts = parse_run_id(run_id)
            except ValueError:
                continue
            moment = parts.scheduled_at
            if parts.uid != self.uid or moment is None or parts.backfill is not None:
                continue
            if latest is None or moment > latest:
                latest = moment
        return latest

    def active_run_id(self) -> str | None:
        """The run that is queued, running or waiting for a retry, if any.

        Only run IDs of this very object count: status is writable by whoever may
        patch it, and a foreign run ID re-published from here would make another
        job's real run look done (the queue deduplicates by run ID).
        """
        for active in self.observed.active_runs:
            if belongs_to(active.id, self.uid):
                return active.id
        done = self.finished_run_ids()
        queued = self.observed.queued_run
        candidates = [queued.id] if queued is not None else []
        if self.published_run_id is not None:
            candidates.append(self.published_run_id)
        for run_id in candidates:
            if run_id not in done and belongs_to(run_id, self.uid):
                return run_id
        return None

    def next_runs(self, first: dt.datetime | None) -> list[dt.datetime] | None:
        """``status.nextRuns`` when the next run is ``first``, None when there is none.
        Worked out once per ``nextRunAt`` (most watch events change neither), and then
        from the list before: one more run per run published."""
        if first is None or self.schedule is None:
            return None
        if not self.upcoming_runs or self.upcoming_runs[0] != first:
            self.upcoming_runs = upcoming_of(self.schedule, first, known=self.upcoming_runs)
        return list(self.upcoming_runs)

    def finished(self, *, now: dt.datetime, last_schedule_time: dt.datetime | None) -> bool:
        """Is no run left to publish? A one-shot job once its run was published; a
        recurring one once its ``notAfter`` leaves no run after ``now``."""
        if self.spec is None or self.schedule is None or self.pending is not None:
            return False
        if self.spec.one_shot:
            return last_schedule_time is not None
        own = self.schedule.own if isinstance(self.schedule, WindowedAfter) else self.schedule
        return self.spec.not_after is not None and own.next_run_after(now) is None

    def last_schedule_time(self) -> dt.datetime | None:
        """The latest run published: as status shows it, or as this replica published
        it and has not seen written yet (a worker's write can be watched before the
        leader's report of the publish: a one-shot run must not be planned again)."""
        shown = self.written.last_schedule_time
        if self.wanted.observed_generation != self.generation:
            return shown
        published = self.wanted.last_schedule_time
        if shown is None or (published is not None and published > shown):
            return published
        return shown

    def backfill_progress(self) -> list[BackfillProgress]:
        """``status.backfills`` for the spec's backfills: of each, the furthest progress
        written or wanted (a new leader goes on from what the last one wrote; a publish
        repeated from an older record is deduplicated), or none yet. A backfill whose
        from or to changed under the same name starts again."""
        if self.spec is None:
            return []
        recorded: dict[str, BackfillProgress] = {}
        for record in [*self.written.backfills, *self.wanted.backfills]:
            known = recorded.get(record.name)
            if known is None or _further(record, known):
                recorded[record.name] = record
        progress = []
        for backfill in self.spec.backfills:
            known = recorded.get(backfill.name)
            same = known is not None and (known.from_, known.to) == (backfill.from_, backfill.to)
            fresh = {"name": backfill.name, "from": backfill.from_, "to": backfill.to}
            progress.append(
                known if known is not None and same else BackfillProgress.model_validate(fresh)
            )
        return progress

    def facts(self) -> JobFacts:
        assert self.spec is not None  # noqa: S101 - only valid jobs are planned
        assert self.schedule is not None  # noqa: S101
        status = self.observed
        next_run_at, last_schedule_time = self.written.next_run_at, self.last_schedule_time()
        if next_run_at is None and not self.spec.one_shot:
            # No nextRunAt in status (scheduleInStatus off, or none written yet): the run
            # after the latest one status shows (a run's, or a decision written, such as a
            # skip) is next, as nextRunAt would have said.
            recorded = self.recorded_schedule()
            if recorded is not None and (
                last_schedule_time is None or recorded > last_schedule_time
            ):
                last_schedule_time = recorded
            if last_schedule_time is not None:
                next_run_at = self.schedule.next_run_after(last_schedule_time)
        return JobFacts(
            uid=self.uid,
            schedule=self.schedule,
            one_shot=self.spec.one_shot,
            created_at=self.created_at,
            concurrency_policy=self.spec.concurrency_policy,
            starting_deadline_seconds=self.spec.starting_deadline_seconds,
            catchup=self.spec.catchup_rule,
            jitter_seconds=self.spec.jitter_seconds,
            next_run_at=next_run_at,
            last_schedule_time=last_schedule_time,
            status_is_current=status.observed_generation == self.generation,
            active_run_id=self.active_run_id(),
            buffered=len(self.wanted.buffered_runs),
        )


def _further(record: BackfillProgress, than: BackfillProgress) -> bool:
    if (record.from_, record.to) != (than.from_, than.to):
        return True  # the later of the two lists (wanted) knows the current range
    if (record.completed_at is None) != (than.completed_at is None):
        return record.completed_at is not None
    return (record.published + record.skipped) > (than.published + than.skipped)


def streak_of(recorded: FailureStreak | None) -> Streak | None:
    if recorded is None:
        return None
    return Streak(
        count=recorded.count,
        run_ids=tuple(recorded.run_ids),
        counted_until=recorded.counted_until,
        paused_at=recorded.paused_at,
    )


def recorded_streak(streak: Streak | None) -> FailureStreak | None:
    if streak is None:
        return None
    return FailureStreak(
        count=streak.count,
        run_ids=list(streak.run_ids),
        counted_until=streak.counted_until,
        paused_at=streak.paused_at,
    )


#: The upcoming runs (``status.nextRuns``) by schedule and first run, worked out once
#: for every job on that schedule whose next run is that one (see :func:`upcoming_of`).
_UPCOMING: dict[tuple[Schedule, dt.datetime], tuple[dt.datetime, ...]] = {}
_UPCOMING_KEPT = 16384


def upcoming_of(
    schedule: Schedule, first: dt.datetime, *, known: tuple[dt.datetime, ...] = ()
) -> tuple[dt.datetime, ...]:
    """``first`` and the runs of ``schedule`` that follow it (``upcoming``), held once.
    Jobs on one schedule share their next runs (at a start, 100,000 jobs on a few
    thousand schedules would each work out five runs: a third of indexing a job), and
    a fleet moves on from one run to the next together. The runs follow from the
    schedule and ``first`` alone (``known``, a list worked out before for the same
    schedule, only saves work), so an equal schedule finds the same runs. The
    16,384 latest are kept."""
    key = (schedule, first)
    runs = _UPCOMING.get(key)
    if runs is None:
        runs = shared_instants(tuple(upcoming(schedule, first, known=known)))
        if len(_UPCOMING) >= _UPCOMING_KEPT:
            del _UPCOMING[next(iter(_UPCOMING))]  # the longest kept
        _UPCOMING[key] = runs
    return runs
