"""The watcher's memory: every ScheduledJob it was told about, and the bucket index.

Fed by the watch stream (:meth:`WatchState.observe`, :meth:`WatchState.forget`),
read by the leader's tick. No I/O happens here; every decision is delegated
to :mod:`tickwork.core.planning`. Each replica keeps this state warm, so a
standby that becomes leader starts ticking at once.

The index holds one entry per job under the key ``("run", ns, name)`` (its
next publish time) and, for finished one-shot jobs with a TTL,
``("ttl", ns, name)`` (when to delete them).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from tickwork.api.models import ScheduledJobSpec, ScheduledJobStatus
from tickwork.core.buckets import BucketIndex
from tickwork.core.planning import JobFacts, PendingRun, pending_for, pending_run
from tickwork.core.runs import RUN_NOW_ANNOTATION, belongs_to, same_trigger, trigger_key
from tickwork.core.schedule import OneShotSchedule, Schedule, cron_schedule
from tickwork.core.states import ACTIVE_STATES, FINAL_STATES, JobPhase, RunState
from tickwork.kube.status import (
    CONDITION_READY,
    CONDITION_SUSPENDED,
    OperatorStatus,
)

JobKey = tuple[str, str]
IndexKey = tuple[str, str, str]


@dataclass
class JobEntry:
    """One ScheduledJob as the watcher sees it."""

    namespace: str
    name: str
    uid: str
    generation: int
    created_at: dt.datetime
    spec: ScheduledJobSpec | None
    invalid_reason: str | None
    observed: ScheduledJobStatus
    wanted: OperatorStatus
    """The operator's share of status as it should be (sent when it differs)."""
    written: OperatorStatus
    """The operator's share as last written or observed."""
    schedule: Schedule | None = None
    pending: PendingRun | None = None
    published_run_id: str | None = None
    """A run this replica published and has not yet seen finish."""
    run_now: str | None = None
    settled_run_ids: set[str] = field(default_factory=set)
    """Runs the queue reports done although status never said so (a lost status write)."""
    resource_version: str = ""
    """Of the newest version seen (watch event or our own write), for conditional writes."""

    @property
    def key(self) -> JobKey:
        return (self.namespace, self.name)

    @property
    def suspended(self) -> bool:
        return bool(self.spec and self.spec.suspend)

    def active_run_id(self) -> str | None:
        """The run that is queued, running or waiting for a retry, if any.

        Only run IDs of this very object count: status is writable by whoever may
        patch it, and a foreign run ID re-published from here would make another
        job's real run look done (the queue deduplicates by run ID).
        """
        current = self.observed.current_run
        if current is not None and current.state in ACTIVE_STATES:
            return current.id if belongs_to(current.id, self.uid) else None
        finished = {r.id for r in self.observed.runs} | self.settled_run_ids
        if self.observed.last_run is not None:
            finished.add(self.observed.last_run.id)
        queued = self.observed.queued_run
        candidates = [queued.id] if queued is not None else []
        if self.published_run_id is not None:
            candidates.append(self.published_run_id)
        for run_id in candidates:
            if run_id not in finished and belongs_to(run_id, self.uid):
                return run_id
        return None

    def facts(self) -> JobFacts:
        assert self.spec is not None  # noqa: S101 - only valid jobs are planned
        assert self.schedule is not None  # noqa: S101
        status = self.observed
        return JobFacts(
            uid=self.uid,
            schedule=self.schedule,
            one_shot=self.spec.one_shot,
            created_at=self.created_at,
            concurrency_policy=self.spec.concurrency_policy,
            starting_deadline_seconds=self.spec.starting_deadline_seconds,
            jitter_seconds=self.spec.jitter_seconds,
            next_run_at=self.written.next_run_at,
            last_schedule_time=self.written.last_schedule_time,
            status_is_current=status.observed_generation == self.generation,
            active_run_id=self.active_run_id(),
        )


def _explain(error: Exception) -> str:
    if isinstance(error, ValidationError):
        parts = []
        for item in error.errors()[:5]:
            where = ".".join(str(p) for p in item["loc"])
            message = item["msg"].removeprefix("Value error, ")
            message = message.removeprefix(f"{item['loc'][-1]}: ") if item["loc"] else message
            parts.append(f"{where}: {message}" if where else message)
        return "; ".join(parts)
    return str(error)


def _parse(body: dict[str, Any]) -> tuple[ScheduledJobSpec | None, Schedule | None, str | None]:
    try:
        spec = ScheduledJobSpec.model_validate(body.get("spec") or {})
    except (ValidationError, ValueError) as exc:
        return None, None, f"spec.{_explain(exc)}"
    schedule: Schedule
    if spec.run_at is not None:
        schedule = OneShotSchedule(spec.run_at)
    else:
        assert spec.schedule is not None  # noqa: S101 - the model requires one of the two
        schedule = cron_schedule(spec.schedule, spec.time_zone)
    return spec, schedule, None


def reported(status: ScheduledJobStatus, run_id: str) -> bool:
    """Has a worker already reported ``run_id`` (running, finished or in history)?"""
    if any(run is not None and run.id == run_id
           for run in (status.current_run, status.last_run)):  # fmt: skip
        return True
    return any(run.id == run_id for run in status.runs)


def status_of(body: dict[str, Any]) -> ScheduledJobStatus:
    try:
        return ScheduledJobStatus.model_validate(body.get("status") or {})
    except ValidationError:
        return ScheduledJobStatus()  # a mangled status must not stop scheduling


def _created(body: dict[str, Any], now: dt.datetime) -> dt.datetime:
    stamp = body.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return now
    return dt.datetime.fromisoformat(stamp)


@dataclass
class WatchState:
    """All jobs, the bucket index, and what the leader still owes the API server."""

    index: BucketIndex[IndexKey]
    jobs: dict[JobKey, JobEntry] = field(default_factory=dict)
    dirty: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    triggers: dict[JobKey, str] = field(default_factory=dict)
    withdrawn: dict[str, None] = field(default_factory=dict)  # ordered set
    """Queued runs of jobs just deleted: the leader takes them out of the queue, so
    that no worker (whatever its copy of the job says) starts them. (A suspended
    job's queued run stays: its worker records it Skipped.)"""
    busy: set[JobKey] = field(default_factory=set)
    """Jobs the leader is acting on right now; the watch must not re-index them."""
    active: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    """Jobs that may have a run queued, running or waiting for a retry: what the
    reconciler looks at, so that its cost follows the active runs, not all jobs."""

    # -- the watch stream -----------------------------------------------------

    def observe(self, body: dict[str, Any], *, now: dt.datetime) -> JobEntry:
        """An object was added or modified (or listed at start-up)."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        previous = self.jobs.get(key)
        if previous is not None and previous.uid != meta["uid"]:
            self.forget(*key)  # deleted and re-created under the same name
            previous = None
        generation = int(meta.get("generation") or 0)
        if previous is not None and previous.generation == generation:
            # Most events are status writes: the spec (and its parsed schedule) is unchanged.
            spec, schedule, invalid = previous.spec, previous.schedule, previous.invalid_reason
        else:
            spec, schedule, invalid = _parse(body)
        observed = status_of(body)
        written = OperatorStatus.observed(observed)
        entry = JobEntry(
            namespace=key[0],
            name=key[1],
            uid=meta["uid"],
            generation=generation,
            created_at=_created(body, now),
            spec=spec,
            invalid_reason=invalid,
            observed=observed,
            wanted=previous.wanted if previous else written,
            written=written,
            schedule=schedule,
            pending=previous.pending if previous else None,
            published_run_id=previous.published_run_id if previous else None,
            run_now=(meta.get("annotations") or {}).get(RUN_NOW_ANNOTATION),
            settled_run_ids=previous.settled_run_ids if previous else set(),
            resource_version=str(meta.get("resourceVersion") or ""),
        )
        if entry.published_run_id and entry.active_run_id() != entry.published_run_id:
            entry.published_run_id = None  # it finished
        self.track_active(entry)
        spec_changed = previous is None or previous.generation != generation
        self.jobs[key] = entry
        self._plan(entry, previous, spec_changed=spec_changed, now=now)
        self._track_trigger(entry)
        self._track_ttl(entry)
        return entry

    def forget(self, namespace: str, name: str) -> None:
        """The object was deleted: drop it everywhere, so it is never published."""
        key = (namespace, name)
        entry = self.jobs.pop(key, None)
        if entry is not None:
            self._withdraw(entry)
        self.dirty.pop(key, None)
        self.active.pop(key, None)
        self.triggers.pop(key, None)
        self.index.remove(("run", namespace, name))
        self.index.remove(("ttl", namespace, name))

    def _withdraw(self, entry: JobEntry) -> None:
        """Mark the job's run for withdrawal if it has not started (a running one is
        the worker's to finish; its record is written as usual)."""
        current = entry.observed.current_run
        if current is not None and current.state in (RunState.RUNNING, RunState.RETRYING):
            return
        run_id = entry.active_run_id()
        if run_id is not None:
            self.withdrawn[run_id] = None

    # -- planning ---------------------------------------------------------------

    def _plan(
        self, entry: JobEntry, previous: JobEntry | None, *, spec_changed: bool, now: dt.datetime
    ) -> None:
        run_key = ("run", entry.namespace, entry.name)
        if entry.spec is None or entry.suspended:
            entry.pending = None
        elif spec_changed:
            # New to us: an edit or a resume is a fresh start (no burst of missed
            # runs); first sight after a (re)start picks up where status left off.
            fresh = previous is not None or entry.observed.phase is JobPhase.SUSPENDED
            entry.pending = pending_run(entry.facts(), now=now, fresh_start=fresh)
        elif self._leader_moved_on(entry):
            following = entry.written.next_run_at
            entry.pending = (
                pending_for(entry.facts(), following)
                if following is not None
                else pending_run(entry.facts(), now=now, fresh_start=False)
            )
        elif entry.pending is None:
            entry.pending = pending_run(entry.facts(), now=now, fresh_start=False)
        if entry.key in self.busy:
            pass  # the leader re-indexes it when it is done
        elif entry.pending is None:
            self.index.remove(run_key)
        elif self.index.due_of(run_key) != entry.pending.due_at.timestamp():
            self.index.put(run_key, entry.pending.due_at.timestamp())
        self.refresh_wanted(entry, now=now)

    def _leader_moved_on(self, entry: JobEntry) -> bool:
        """Did the status show that the leader already published our pending run?"""
        last = entry.written.last_schedule_time
        return (
            entry.pending is not None
            and last is not None
            and last >= entry.pending.scheduled_at
            and entry.observed.observed_generation == entry.generation
        )

    def refresh_wanted(self, entry: JobEntry, *, now: dt.datetime) -> None:
        """Work out the operator's share of status; mark the job dirty if it must be sent."""
        wanted = replace(
            entry.wanted if entry.wanted.observed_generation == entry.generation else entry.written,
            observed_generation=entry.generation,
        )
        if entry.spec is None:
            wanted = replace(wanted, phase=JobPhase.INVALID, next_run_at=None).with_condition(
                CONDITION_READY, status=False, reason="InvalidSpec",
                message=entry.invalid_reason or "invalid spec", now=now,
            )  # fmt: skip
        elif entry.suspended:
            wanted = replace(wanted, phase=JobPhase.SUSPENDED, next_run_at=None).with_condition(
                CONDITION_SUSPENDED, status=True, reason="Suspended",
                message="spec.suspend is true: no run is published", now=now,
            )  # fmt: skip
            wanted = wanted.with_condition(
                CONDITION_READY, status=True, reason="Suspended", message="suspended", now=now
            )
        else:
            phase = entry.observed.phase
            if phase in (None, JobPhase.INVALID, JobPhase.SUSPENDED):
                phase = JobPhase.SCHEDULED
            pending = entry.pending
            wanted = replace(
                wanted, phase=phase, next_run_at=pending.scheduled_at if pending else None
            ).with_condition(
                CONDITION_READY, status=True, reason="Scheduled",
                message="the schedule is valid and indexed", now=now,
            )  # fmt: skip
            if any(c.type == CONDITION_SUSPENDED for c in wanted.conditions):
                wanted = wanted.with_condition(
                    CONDITION_SUSPENDED, status=False, reason="Resumed",
                    message="runs are published again, from the resume on", now=now,
                )  # fmt: skip
        entry.wanted = wanted
        if _differs(wanted, entry.written):
            self.dirty[entry.key] = None
        else:
            self.dirty.pop(entry.key, None)

    def _track_trigger(self, entry: JobEntry) -> None:
        token = entry.run_now
        if (
            token
            and trigger_key(token) is not None  # a blank token asks for nothing
            and not same_trigger(token, entry.wanted.last_trigger_token)
            and entry.spec is not None
        ):
            self.triggers[entry.key] = token
        else:
            self.triggers.pop(entry.key, None)

    def _track_ttl(self, entry: JobEntry) -> None:
        ttl_key = ("ttl", entry.namespace, entry.name)
        spec, last = entry.spec, entry.observed.last_run
        if (
            spec is not None
            and spec.one_shot
            and spec.ttl_seconds_after_finished is not None
            and last is not None
            and last.outcome in FINAL_STATES
            and last.finished_at is not None
            and entry.active_run_id() is None
        ):
            when = last.finished_at + dt.timedelta(seconds=spec.ttl_seconds_after_finished)
            self.index.put(ttl_key, when.timestamp())
        else:
            self.index.remove(ttl_key)

    def track_active(self, entry: JobEntry) -> None:
        """Call after anything that may start or end a run of ``entry``."""
        if entry.active_run_id() is not None:
            self.active[entry.key] = None
        else:
            self.active.pop(entry.key, None)

    def active_jobs(self) -> list[JobEntry]:
        """Jobs with a run queued, running or waiting for a retry (O(active), not O(jobs))."""
        found = []
        for key in list(self.active):
            entry = self.jobs.get(key)
            if entry is None or entry.active_run_id() is None:
                self.active.pop(key, None)
            else:
                found.append(entry)
        return found


def _differs(wanted: OperatorStatus, written: OperatorStatus) -> bool:
    return wanted.apply_body() != written.apply_body()


__all__ = ["RUN_NOW_ANNOTATION", "JobEntry", "WatchState"]
