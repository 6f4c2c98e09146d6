"""Jobs that run after other jobs (``spec.after``): which job names which, the cycles
they make, and each such job's runs planned from its upstream jobs' runs
(:class:`~tickwork.core.after.AfterSchedule`).

Only names of the job's own namespace count: one tenant's job never runs after
another's. A job on a cycle (a after b, b after a) is Invalid, with the cycle named;
it runs again once an edit breaks the cycle. When an upstream job's runs end (its
``lastRun`` or history changes), is created or goes, the watch state plans every job
that names it again (:meth:`~tickwork_operator.state.WatchState.replan`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from tickwork.api.after import AfterStatus, UpstreamOutcome, UpstreamRun
from tickwork.api.models import ScheduledJobSpec
from tickwork.core.after import AfterSchedule, Finish, WindowedAfter, find_cycle, whole_second
from tickwork.core.params import PARAMS_TEXT_LIMIT
from tickwork.core.runs import belongs_to
from tickwork.core.schedule import Schedule
from tickwork.core.states import RunState
from tickwork_operator.entry import JobEntry, JobKey

#: The outcomes each ``outcome`` of ``spec.after.jobs`` counts.
_COUNTS = {
    UpstreamOutcome.SUCCEEDED: frozenset({RunState.SUCCEEDED}),
    UpstreamOutcome.FAILED: frozenset({RunState.FAILED}),
    UpstreamOutcome.FINISHED: frozenset({RunState.SUCCEEDED, RunState.FAILED}),
}


class DependencyBook:
    """Which jobs each job runs after, and the reverse, per namespace."""

    def __init__(self) -> None:
        self._upstreams: dict[JobKey, tuple[str, ...]] = {}
        self._dependents: dict[JobKey, set[JobKey]] = {}

    def use(self, key: JobKey, spec: ScheduledJobSpec | None) -> bool:
        """Note the jobs ``key``'s spec runs after (none: forget them); True if that
        changed which jobs it names."""
        names = tuple(u.job for u in spec.after.jobs) if spec and spec.after else ()
        if self._upstreams.get(key, ()) == names:
            return False
        self.forget_job(key)
        if names:
            self._upstreams[key] = names
            for name in names:
                self._dependents.setdefault((key[0], name), set()).add(key)
        return True

    def forget_job(self, key: JobKey) -> None:
        for name in self._upstreams.pop(key, ()):
            dependents = self._dependents.get((key[0], name))
            if dependents is not None:
                dependents.discard(key)
                if not dependents:
                    del self._dependents[(key[0], name)]

    def dependents(self, key: JobKey) -> set[JobKey]:
        """The jobs that run after ``key`` (a set of this book: copy it to keep it)."""
        return self._dependents.get(key, _NONE)

    def namespace_users(self, namespace: str) -> list[JobKey]:
        """Every job of ``namespace`` that runs after others (a cycle may pass them)."""
        return [key for key in self._upstreams if key[0] == namespace]

    def cycle(self, key: JobKey) -> list[str] | None:
        """The cycle through ``key``, as job names from it back to it; None if none."""
        namespace = key[0]
        edges = {k[1]: names for k, names in self._upstreams.items() if k[0] == namespace}
        return find_cycle(key[1], edges)


_NONE: set[JobKey] = set()


def plan(
    key: JobKey,
    spec: ScheduledJobSpec,
    book: DependencyBook,
    jobs: Mapping[JobKey, JobEntry],
    *,
    created: dt.datetime,
) -> tuple[ScheduledJobSpec | None, Schedule | None, str | None]:
    """The spec and schedule of a job that runs after others, from their runs as
    ``jobs`` holds them (within the windows of its own schedule, if it has one;
    ``created`` anchors an @every one); Invalid (no spec, the reason) while it is on a
    cycle."""
    assert spec.after is not None  # noqa: S101 - only jobs that run after others
    cycle = book.cycle(key)
    if cycle is not None:
        return (
            None,
            None,
            (
                f"spec.after: the jobs {' -> '.join(cycle)} run after one another in a cycle, "
                "so none would ever run: remove one of them from spec.after"
            ),
        )
    finishes: dict[str, Finish] = {}
    for upstream in spec.after.jobs:
        entry = jobs.get((key[0], upstream.job))
        if entry is not None and (found := latest_finish(entry, _COUNTS[upstream.outcome])):
            finishes[upstream.job] = found
    ends = AfterSchedule(
        jobs=tuple(u.job for u in spec.after.jobs),
        finishes=tuple(finishes.values()),
        require_all=spec.after.require.value == "All",
        timeout=dt.timedelta(seconds=spec.after.timeout_seconds),
    )
    if not spec.recurring:
        return spec, ends, None
    window = spec.after.window_seconds
    windowed = WindowedAfter(
        own=spec.schedule_of(created),
        upstream=ends,
        window=dt.timedelta(seconds=window) if window is not None else None,
    )
    return spec, windowed, None


def latest_finish(entry: JobEntry, outcomes: frozenset[RunState]) -> Finish | None:
    """``entry``'s latest run (its own, of this object) that ended in ``outcomes``."""
    best: Finish | None = None
    candidates: list[tuple[str, RunState, dt.datetime | None]] = [
        (r.run_id, r.outcome, r.finished_at) for r in entry.observed.runs
    ]
    last = entry.observed.last_run
    if last is not None:
        candidates.append((last.id, last.outcome, last.finished_at))
    for run_id, outcome, finished_at in candidates:
        if outcome not in outcomes or finished_at is None or not belongs_to(run_id, entry.uid):
            continue
        at = whole_second(finished_at)
        if best is None or at > best.at:
            best = Finish(job=entry.name, run_id=run_id, at=at)
    return best


def ends_of(entry: JobEntry | None) -> tuple[str, ...]:
    """What of ``entry`` its dependents read: its runs that ended (their IDs)."""
    if entry is None:
        return ()
    ids = tuple(r.run_id for r in entry.observed.runs)
    last = entry.observed.last_run
    return (*ids, last.id) if last is not None else ids


def counted_since(entry: JobEntry) -> dt.datetime:
    """The moment after which upstream runs count for a job that runs after others:
    its last run (its ID names the instant), or its creation."""
    return entry.last_schedule_time() or entry.created_at


def after_status(entry: JobEntry, *, now: dt.datetime) -> AfterStatus | None:
    """``status.after`` of a job that runs after others: what it waits for, since when."""
    if not isinstance(entry.schedule, AfterSchedule | WindowedAfter):
        return None
    progress = entry.schedule.progress(counted_since(entry), now)
    return AfterStatus(
        waiting_for=list(progress.waiting_for),
        since=progress.since if progress.waiting_for else None,
        counted=[UpstreamRun(job=f.job, id=f.run_id, finished_at=f.at) for f in progress.counted],
    )


def trigger_params(entry: JobEntry, scheduled_at: dt.datetime) -> dict[str, str] | None:
    """The parameters of the run due at ``scheduled_at`` of a job that runs after others:
    the upstream run that made it due (``upstreamRun``, the last of them to end) and its
    job (``upstreamJob``, left out where both would pass the parameters' limit)."""
    if not isinstance(entry.schedule, AfterSchedule | WindowedAfter):
        return None
    found = entry.schedule.trigger_of(counted_since(entry), scheduled_at)
    if found is None:
        return None
    params = {"upstreamRun": found.run_id, "upstreamJob": found.job}
    if sum(len(k) + len(v) for k, v in params.items()) > PARAMS_TEXT_LIMIT:
        del params["upstreamJob"]
    return params
