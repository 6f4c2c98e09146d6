"""The watcher's memory: every ScheduledJob it was told about, and the bucket index.

Over 400 lines: each watch event updates the index and every set the tick takes its
work from (triggers, waiting and active jobs, dead-letter asks, withdrawals) together,
in one place.

Fed by the watch stream (:meth:`WatchState.observe`, :meth:`WatchState.forget`),
read by the leader's tick. No I/O happens here; every decision is delegated
to :mod:`tickwork.core.planning`. Each replica keeps this state warm, so a
standby that becomes leader starts ticking at once.

The index holds one entry per job under the key ``("run", ns, name)`` (its
next publish time) and, for finished one-shot jobs with a TTL,
``("ttl", ns, name)`` (when to delete them).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tickwork.api.models import ConditionStatus, OperatorStatus, ScheduledJobSpec
from tickwork.core.annotations import (
    CANCEL_ANNOTATION,
    DEAD_LETTER_ANNOTATIONS,
    RESUME_ANNOTATION,
    RUN_NOW_ANNOTATION,
    RUN_PARAMS_ANNOTATION,
    DeadLetterRequest,
    cancel_ids,
    dead_letter_request,
    same_trigger,
    trigger_key,
)
from tickwork.core.buckets import BucketIndex
from tickwork.core.planning import pending_for, pending_run
from tickwork.core.schedule import Schedule
from tickwork.core.states import FINAL_STATES, JobPhase
from tickwork.kube.status import CONDITION_ON_TIME, operator_body
from tickwork_operator.calendars import CalendarBook
from tickwork_operator.dependencies import DependencyBook, counted_since, ends_of, plan
from tickwork_operator.entry import NO_ASKS, NO_IDS, IndexKey, JobEntry, JobKey
from tickwork_operator.reading import (
    created_at,
    parse,
    shared_status,
    shown_in,
    status_of,
    still_unheard,
)
from tickwork_operator.wanted import wanted_share


@dataclass(frozen=True)
class Trigger:
    """A run-now token with the run-params annotation of the same version of the job:
    taken together, so that parameters written later never join an earlier token."""

    token: str
    params: str | None = None


#: A list is taken as over once no listed object has arrived for this long.
LIST_QUIET_SECONDS = 2.0


@dataclass
class WatchState:
    """All jobs, the bucket index, and what the leader still owes the API server."""

    index: BucketIndex[IndexKey]
    jobs: dict[JobKey, JobEntry] = field(default_factory=dict)
    dirty: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    owed_news: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    """Jobs that may have become owed a status write since the reporter last looked
    at them (``Reporter._owed_keys``): a job newly dirty, or one owed again after a
    write. Every job enters ``dirty`` through here, so the reporter finds what is owed
    among these, never by a pass over ``dirty``."""
    triggers: dict[JobKey, Trigger] = field(default_factory=dict)
    dead_letter_asks: dict[tuple[JobKey, str], DeadLetterRequest] = field(default_factory=dict)
    """Requeue or purge requests (by job and verb) not acted on yet."""
    withdrawn: dict[str, None] = field(default_factory=dict)  # ordered set
    """Queued runs of jobs just deleted: the leader takes them out of the queue, so
    that no worker (whatever its copy of the job says) starts them. (A suspended
    job's queued run stays: its worker records it Skipped.)"""
    busy: set[JobKey] = field(default_factory=set)
    """Jobs the leader is acting on right now; the watch must not re-index them."""
    listed_at: float | None = None
    """When (the ticker's monotonic clock) a list last brought an object: kopf's first
    list, or a relist after the watch failed. See :meth:`listing`."""
    schedule_in_status: bool = False
    """Write recurring jobs' schedule to status (``OperatorSettings.schedule_in_status``)."""
    calendars: CalendarBook = field(default_factory=CalendarBook)
    """The Calendars followed, and the jobs that name each (:mod:`.calendars`)."""
    dependencies: DependencyBook = field(default_factory=DependencyBook)
    """Which jobs run after which (spec.after; :mod:`.dependencies`)."""
    late: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    """Jobs whose last run started later than their spec.slo allows (``tickwork_job_late``)."""
    replan_after: set[JobKey] = field(default_factory=set)
    """Jobs whose calendars or upstream jobs' runs changed while the leader acted on
    them: planned again once it is done (:meth:`acting_on`)."""
    backfilling: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    """Jobs with a backfill not complete yet: what the leader publishes backfilled
    runs for, each tick (O(backfilling), not O(jobs))."""
    active: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    """Jobs that may have a run queued, running or waiting for a retry: what the
    reconciler looks at, so that its cost follows the active runs, not all jobs."""
    waiting: dict[JobKey, None] = field(default_factory=dict)  # ordered set
    """Jobs with runs in ``status.bufferedRuns`` or cancels to act on: what the leader
    looks at every tick (O(jobs waiting), not O(jobs))."""
    phase_counts: collections.Counter[JobPhase] = field(default_factory=collections.Counter)
    """How many of ``jobs`` show each phase in the operator's share as written or
    observed (``written.phase``): kept as entries come, change and go, so that a
    scrape of ``tickwork_jobs{phase}`` reads it instead of passing over every job
    with the event loop held (benchmarks/rounds.md). Change ``jobs[key]`` and an
    entry's ``written`` only through :meth:`_hold` and :meth:`_set_written`."""

    # -- what the leader acts on (the publisher, reporter and reconciler) ----------

    @contextlib.contextmanager
    def acting_on(self, entry: JobEntry, *, now: Callable[[], dt.datetime]) -> Iterator[None]:
        """While the leader decides about a job, the watch leaves its index entry alone
        (the leader re-indexes it when it is done). The watch may still replace the
        entry meanwhile (a status write of a worker, or of the operator itself): the
        leader changed the one it started with, so the new one takes over its changes."""
        self.busy.add(entry.key)
        try:
            yield
        finally:
            self.busy.discard(entry.key)
            self._hand_over(entry, now=now())
            if entry.key in self.replan_after:
                self.replan([entry.key], now=now())
            live = self.jobs.get(entry.key)
            if live is not None:
                self.track_waiting(live)

    def _hand_over(self, acted: JobEntry, *, now: dt.datetime) -> None:
        live = self.jobs.get(acted.key)
        if live is None or live is acted or live.uid != acted.uid:
            return
        live.wanted = acted.wanted
        if live.published_run_id is None:
            live.published_run_id = acted.published_run_id
        if live.published_run_id and live.active_run_id() != live.published_run_id:
            live.published_run_id = None  # it finished
        run_key = ("run", live.namespace, live.name)
        if live.generation == acted.generation:
            live.pending = acted.pending  # the leader already indexed it
        elif live.pending is None:
            self.index.remove(run_key)
        else:
            self.index.put(run_key, live.pending.due_at.timestamp())
        self.track_active(live)
        self.refresh_wanted(live, now=now)

    def owe_status(self, key: JobKey) -> None:
        """The operator's share of ``key``'s status must be written (again)."""
        self.dirty[key] = None
        self.owed_news[key] = None

    def status_written(self, key: JobKey) -> None:
        self.dirty.pop(key, None)

    def wrote(self, entry: JobEntry, share: OperatorStatus) -> None:
        """``share`` of ``entry`` was written. The watch may have brought a newer
        version of the job while the write was on its way, and with it a newer wanted
        share: then the job stays owed (clearing it would lose that change)."""
        self._set_written(entry, share)
        latest = self.jobs.get(entry.key)
        if latest is None or latest.uid != entry.uid:
            return
        self._set_written(latest, share)
        if _differs(latest.wanted, share):
            self.owe_status(entry.key)
        else:
            self.dirty.pop(entry.key, None)

    def take_triggers(self) -> list[tuple[JobKey, Trigger]]:
        """The run-now tokens to act on; each is taken, so a failure must give it back
        (:meth:`retry_trigger`)."""
        taken = list(self.triggers.items())
        self.triggers.clear()
        return taken

    def retry_trigger(self, key: JobKey, trigger: Trigger, *, newer_wins: bool = True) -> None:
        """Act on ``trigger`` again next tick; with ``newer_wins`` a token the watch
        delivered meanwhile takes its place."""
        if newer_wins:
            self.triggers.setdefault(key, trigger)
        else:
            self.triggers[key] = trigger

    def withdrawn_runs(self) -> list[str]:
        return list(self.withdrawn)

    def withdrawal_done(self, run_id: str) -> None:
        self.withdrawn.pop(run_id, None)

    # -- the watch stream -----------------------------------------------------

    def observe(self, body: dict[str, Any], *, now: dt.datetime) -> JobEntry:
        """An object was added or modified (or listed at start-up)."""
        meta = body["metadata"]
        # One string per namespace, not one per job (each event's body is parsed anew).
        key = (sys.intern(meta["namespace"]), meta["name"])
        previous = self.jobs.get(key)
        if previous is not None and previous.uid != meta["uid"]:
            self.forget(*key, now=now)  # deleted and re-created under the same name
            previous = None
        uid = meta["uid"]
        if previous is not None:
            # The strings the job already holds (its key's, its pending run's), not this
            # event's equal copies: ~200 bytes a job for as long as it is watched.
            key, uid = (previous.namespace, previous.name), previous.uid
        generation = int(meta.get("generation") or 0)
        same_spec = previous is not None and previous.generation == generation
        if previous is not None and same_spec:
            # Most events are status writes: the spec (and its parsed schedule) is unchanged.
            spec, schedule, invalid = previous.spec, previous.schedule, previous.invalid_reason
            named, after = previous.calendar_spec, previous.after_spec
            edges_changed = False
        else:
            spec, schedule, invalid = parse(body, created_at(body, now))
            named = spec if spec is not None and spec.calendars is not None else None
            if named is not None:
                spec, schedule, invalid = self._on_calendars(key, named, schedule)
            self.calendars.use(key, named.calendars if named is not None else None)
            after = spec if spec is not None and spec.after is not None else None
            edges_changed = self.dependencies.use(key, after)
            if after is not None:
                spec, schedule, invalid = plan(
                    key, after, self.dependencies, self.jobs, created=created_at(body, now)
                )
        held = (previous.wanted, previous.written) if previous else ()
        apart = not self.schedule_in_status and spec is not None and not spec.one_shot
        # The operator shows the next runs of a job that names calendars or runs after others.
        apart = apart and named is None and after is None
        observed, written = shared_status(
            status_of(body, previous=held, apart=apart), shown_in(body) if apart else ()
        )
        entry = JobEntry(
            namespace=key[0],
            name=key[1],
            uid=uid,
            generation=generation,
            created_at=previous.created_at if previous else created_at(body, now),
            spec=spec,
            invalid_reason=invalid,
            observed=observed,
            wanted=previous.wanted if previous else written,
            written=written,
            schedule=schedule,
            pending=previous.pending if previous else None,
            published_run_id=previous.published_run_id if previous else None,
            run_now=(meta.get("annotations") or {}).get(RUN_NOW_ANNOTATION),
            run_params=(meta.get("annotations") or {}).get(RUN_PARAMS_ANNOTATION),
            dead_letter_asks={
                verb: value
                for verb, annotation in DEAD_LETTER_ANNOTATIONS.items()
                if (value := (meta.get("annotations") or {}).get(annotation))
            }
            or NO_ASKS,
            settled_run_ids=(
                still_unheard(previous.settled_run_ids, observed) if previous else NO_IDS
            ),
            resume=(meta.get("annotations") or {}).get(RESUME_ANNOTATION),
            upcoming_runs=previous.upcoming_runs if previous and same_spec else (),
            cancel_asks=tuple(cancel_ids((meta.get("annotations") or {}).get(CANCEL_ANNOTATION))),
            calendar_spec=named,
            after_spec=after,
        )
        if entry.published_run_id and entry.active_run_id() != entry.published_run_id:
            entry.published_run_id = None  # it finished
        self.track_active(entry)
        spec_changed = previous is None or previous.generation != generation
        self._hold(entry)
        resumed = entry.follow_failures()
        self._plan(entry, previous, spec_changed=spec_changed or resumed, now=now)
        self._track_trigger(entry)
        self._track_dead_letter_asks(entry)
        self._track_ttl(entry)
        self.track_waiting(entry)
        self._tell_dependents(key, previous, entry, edges_changed=edges_changed, now=now)
        return entry

    def _tell_dependents(
        self,
        key: JobKey,
        previous: JobEntry | None,
        entry: JobEntry | None,
        *,
        edges_changed: bool,
        now: dt.datetime,
    ) -> None:
        """Plan again the jobs that run after ``key`` if its ended runs changed (or it
        came or went), and every job of the namespace that runs after others if which
        jobs ``key`` runs after changed (a cycle may have formed or broken)."""
        dependents = self.dependencies.dependents(key)
        if dependents and (
            previous is None or entry is None or ends_of(previous) != ends_of(entry)
        ):
            self.replan(sorted(dependents), now=now)
        if edges_changed:
            self.replan([k for k in self.dependencies.namespace_users(key[0]) if k != key], now=now)

    def listing(self, now: float) -> bool:
        """Is a list still coming in (an object listed less than ``LIST_QUIET_SECONDS``
        ago)? Status writes meanwhile would come back as watch events that the API
        server's watch cache must hold until the list ends and the watch resumes from
        the list's resourceVersion; at 100,000 jobs a list takes minutes, the events of
        thousands of writes push that version out of the cache, the watch gets 410 Gone
        and the operator lists everything again (docs/performance.md)."""
        return self.listed_at is not None and now - self.listed_at < LIST_QUIET_SECONDS

    def phases(self) -> collections.Counter[JobPhase]:
        """How many jobs' status shows each phase (jobs without one yet are left out);
        O(phases), not O(jobs)."""
        return +self.phase_counts  # a copy, without the phases counted down to 0

    def _hold(self, entry: JobEntry) -> None:
        """``entry`` takes the place of its key's entry in ``jobs``."""
        previous = self.jobs.get(entry.key)
        if previous is not None:
            self._count(previous.written.phase, -1)
        self.jobs[entry.key] = entry
        self._count(entry.written.phase, 1)

    def _set_written(self, entry: JobEntry, share: OperatorStatus) -> None:
        if self.jobs.get(entry.key) is entry:
            self._count(entry.written.phase, -1)
            self._count(share.phase, 1)
        entry.written = share

    def _count(self, phase: JobPhase | None, change: int) -> None:
        if phase is not None:
            self.phase_counts[phase] += change

    def forget(self, namespace: str, name: str, *, now: dt.datetime | None = None) -> None:
        """The object was deleted: drop it everywhere, so it is never published."""
        key = (namespace, name)
        entry = self.jobs.pop(key, None)
        if entry is not None:
            self._count(entry.written.phase, -1)
            self._withdraw(entry)
        self.calendars.forget_job(key)
        had_edges = self.dependencies.use(key, None)  # it ran after others
        when = now or dt.datetime.now(dt.UTC)
        self._tell_dependents(key, entry, None, edges_changed=had_edges, now=when)
        self.replan_after.discard(key)
        self.late.pop(key, None)
        self.dirty.pop(key, None)
        self.active.pop(key, None)
        self.backfilling.pop(key, None)
        self.waiting.pop(key, None)
        self.triggers.pop(key, None)
        for verb in DEAD_LETTER_ANNOTATIONS:
            self.dead_letter_asks.pop((key, verb), None)
        self.index.remove(("run", namespace, name))
        self.index.remove(("ttl", namespace, name))

    def forget_unlisted(self, namespace: str | None, listed: set[JobKey]) -> list[JobKey]:
        """A whole list of ``namespace`` (None: every namespace) came in: the jobs it
        did not bring were deleted while the watch was down (a relist follows a watch
        that failed, and a watch resumed from a newer list never tells of them).
        Forget them; return which."""
        gone = [
            key
            for key in self.jobs
            if (namespace is None or key[0] == namespace) and key not in listed
        ]
        for key in gone:
            self.forget(*key)
        return gone

    def _withdraw(self, entry: JobEntry) -> None:
        """Mark the job's run for withdrawal if it has not started (a running one is
        the worker's to finish; its record is written as usual)."""
        if entry.observed.active_runs:
            return
        run_id = entry.active_run_id()
        if run_id is not None:
            self.withdrawn[run_id] = None

    # -- planning ---------------------------------------------------------------

    def _on_calendars(
        self, key: JobKey, spec: ScheduledJobSpec, schedule: Schedule | None
    ) -> tuple[ScheduledJobSpec | None, Schedule | None, str | None]:
        """The spec and schedule of a job that names Calendars, kept by them; Invalid
        (no spec, the reason) while one is missing or unreadable."""
        assert spec.calendars is not None  # noqa: S101 - only jobs that name some
        if schedule is None:
            return None, None, "spec: no schedule"
        kept, reason = self.calendars.keep(key, spec.calendars, schedule)
        return (None, None, reason) if reason else (spec, kept, None)

    def replan(self, keys: list[JobKey], *, now: dt.datetime) -> None:
        """The Calendars of the jobs ``keys`` changed: each planned again from now, as
        an edit would be (no burst of the runs they had ruled out). A job the leader is
        acting on is planned once it is done."""
        for key in keys:
            entry = self.jobs.get(key)
            if entry is None or (entry.calendar_spec is None and entry.after_spec is None):
                continue
            if key in self.busy:
                self.replan_after.add(key)
                continue
            self.replan_after.discard(key)
            if entry.after_spec is not None:
                # Planned from its last run: the upstream runs that ended since count.
                entry.spec, entry.schedule, entry.invalid_reason = plan(
                    key, entry.after_spec, self.dependencies, self.jobs, created=entry.created_at
                )
                entry.upcoming_runs = ()
                self._plan(entry, entry, spec_changed=False, now=now)
                continue
            assert entry.calendar_spec is not None  # noqa: S101 - one of the two
            base = entry.calendar_spec.schedule_of(entry.created_at)
            entry.spec, entry.schedule, entry.invalid_reason = self._on_calendars(
                key, entry.calendar_spec, base
            )
            entry.upcoming_runs = ()
            self._plan(entry, entry, spec_changed=True, now=now)

    def _plan(
        self, entry: JobEntry, previous: JobEntry | None, *, spec_changed: bool, now: dt.datetime
    ) -> None:
        run_key = ("run", entry.namespace, entry.name)
        if entry.spec is None or entry.suspended or entry.paused:
            entry.pending = None
        elif entry.after_spec is not None and entry.schedule is not None:
            # Runs after others: the first instant their runs make after its own last
            # run; an edit or a resume counts no run that ended before it.
            since = counted_since(entry)
            if spec_changed and previous is not None:
                since = max(since, now)
            entry.pending = pending_for(entry.facts(), entry.schedule.next_run_after(since))
        elif spec_changed:
            # New to us: an edit or a resume is a fresh start (no burst of missed
            # runs); first sight after a (re)start picks up where status left off.
            held = (JobPhase.SUSPENDED, JobPhase.PAUSED)
            fresh = previous is not None or entry.observed.phase in held
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

    def keeps_schedule(self, entry: JobEntry) -> bool:
        """Is ``entry``'s schedule (nextRunAt, nextRuns, lastScheduleTime, queuedRun)
        kept in status, written as each run is published? Always for a one-shot job (it
        has one run) and a job that names Calendars (only the operator follows them);
        for another recurring one unless ``schedule_in_status`` is off."""
        return (
            self.schedule_in_status
            or entry.spec is None
            or entry.spec.one_shot
            or entry.calendar_spec is not None
            or entry.after_spec is not None
        )

    def shows(self, entry: JobEntry) -> tuple[dt.datetime, ...]:
        """The next runs status should show of a job whose runs' records show them
        (``keeps_schedule`` false): the run it waits for and those after it, none when
        it waits for none (suspended, paused, completed, invalid)."""
        if entry.spec is None or entry.suspended or entry.pending is None:
            return ()
        return tuple(entry.next_runs(entry.pending.scheduled_at) or ())

    def shows_owed(self, entry: JobEntry) -> bool:
        """Must the operator write the next runs itself? Only where no run's record is
        on its way to show them (each run's write carries the runs after it: DESIGN.md
        invariant 10) and status shows others: a new or edited job, a resume, a run
        left out by the clock, a suspend (the runs leave)."""
        if self.keeps_schedule(entry) or entry.active_run_id() is not None:
            return False
        return entry.observed.shown != self.shows(entry)

    def _leader_moved_on(self, entry: JobEntry) -> bool:
        """Did the status show that the leader already published our pending run?"""
        last = entry.written.last_schedule_time
        if not self.keeps_schedule(entry) and entry.pending is not None:
            # No schedule in status: the runs the leader published show in their
            # records (a standby follows these; the leader's own are older than its
            # pending run).
            recorded = entry.recorded_schedule()
            if recorded is not None and (last is None or recorded > last):
                last = recorded
        return (
            entry.pending is not None
            and last is not None
            and last >= entry.pending.scheduled_at
            and entry.observed.observed_generation == entry.generation
        )

    def refresh_wanted(self, entry: JobEntry, *, now: dt.datetime) -> None:
        """Work out the operator's share of status (:func:`wanted_share`, no effect);
        keep it, and mark the job dirty if it must be sent."""
        entry.wanted = wanted_share(entry, now=now, keeps_schedule=self.keeps_schedule(entry))
        slo = entry.spec.slo if entry.spec is not None else None
        if slo is not None and _late(entry.wanted):  # only jobs with an objective look
            self.late[entry.key] = None
        else:
            self.late.pop(entry.key, None)
        if _differs(entry.wanted, entry.written) or self.shows_owed(entry):
            if entry.key not in self.dirty:
                # Already dirty: whatever was making it wait (a report on its way, a
                # write in flight) still does, and owes it again (its news) when it ends.
                self.owe_status(entry.key)
        else:
            self.dirty.pop(entry.key, None)
        self.track_backfills(entry)

    def track_backfills(self, entry: JobEntry) -> None:
        """Call after anything that may start or finish a backfill of ``entry``."""
        if any(p.completed_at is None for p in entry.wanted.backfills):
            self.backfilling[entry.key] = None
        else:
            self.backfilling.pop(entry.key, None)

    def _track_dead_letter_asks(self, entry: JobEntry) -> None:
        done = {"requeue": entry.wanted.last_requeue_token, "purge": entry.wanted.last_purge_token}
        for verb in DEAD_LETTER_ANNOTATIONS:
            ask = dead_letter_request(verb, entry.dead_letter_asks.get(verb))
            if ask is not None and ask.token != done[verb]:
                self.dead_letter_asks[(entry.key, verb)] = ask
            else:
                self.dead_letter_asks.pop((entry.key, verb), None)

    def take_dead_letter_asks(self) -> list[tuple[JobKey, DeadLetterRequest]]:
        """The requests to act on; each is taken, so a failure must give it back."""
        taken = [(key, ask) for (key, _verb), ask in self.dead_letter_asks.items()]
        self.dead_letter_asks.clear()
        return taken

    def retry_dead_letter_ask(self, key: JobKey, ask: DeadLetterRequest) -> None:
        """Act on ``ask`` next tick, unless the watch brought a newer one meanwhile."""
        self.dead_letter_asks.setdefault((key, ask.verb), ask)

    def _track_trigger(self, entry: JobEntry) -> None:
        token = entry.run_now
        if (
            token
            and trigger_key(token) is not None  # a blank token asks for nothing
            and not same_trigger(token, entry.wanted.last_trigger_token)
            and entry.spec is not None
        ):
            self.triggers[entry.key] = Trigger(token, entry.run_params)
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

    def track_waiting(self, entry: JobEntry) -> None:
        """Call after anything that may buffer a run of ``entry`` or ask to cancel one."""
        if entry.wanted.buffered_runs or entry.cancels_to_act_on():
            self.waiting[entry.key] = None
        else:
            self.waiting.pop(entry.key, None)

    def waiting_jobs(self) -> list[JobEntry]:
        """Jobs with buffered runs or cancels to act on."""
        found = []
        for key in list(self.waiting):
            entry = self.jobs.get(key)
            if entry is None:
                self.waiting.pop(key, None)
            else:
                found.append(entry)
        return found

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
    # Equal models send equal bodies: the common case needs no dump at all.
    return wanted != written and operator_body(wanted) != operator_body(written)


__all__ = [
    "IndexKey",
    "JobEntry",
    "JobKey",
    "Trigger",
    "WatchState",
    "status_of",
]


def _late(share: OperatorStatus) -> bool:
    """Does ``share`` say the job's last run broke its lag objective?"""
    return any(
        c.type == CONDITION_ON_TIME and c.status is ConditionStatus.FALSE for c in share.conditions
    )
