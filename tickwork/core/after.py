"""Runs after other jobs' runs (``spec.after``), as a schedule the planner reads like any
other: its instants are the moments the upstream jobs ended runs as the job asks.

Each upstream job is known by its latest run that ended as asked (a :class:`Finish`).
With ``require: All`` the job's next run after a moment is due when the last of them
ended, provided every one ended after that moment and all within ``timeoutSeconds`` of
one another; with ``Any``, when the first of them to end after that moment ended. The
moment asked about is the job's last run (its ID names the instant), so each upstream
run counts once. Instants are whole seconds (run IDs name seconds): an end is rounded up.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tickwork.core.schedule import Schedule


@dataclass(frozen=True, slots=True)
class Finish:
    """An upstream job's latest run that ended as the job asks."""

    job: str
    run_id: str
    at: dt.datetime
    """When it ended, rounded up to the second."""


def whole_second(moment: dt.datetime) -> dt.datetime:
    """``moment`` rounded up to the second."""
    if moment.microsecond == 0:
        return moment
    return moment.replace(microsecond=0) + dt.timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Progress:
    """What the job waits for after a moment (``status.after``)."""

    waiting_for: tuple[str, ...]
    counted: tuple[Finish, ...]

    @property
    def since(self) -> dt.datetime | None:
        """When the first run counted ended: the job has waited since."""
        return min((f.at for f in self.counted), default=None)


@dataclass(frozen=True)
class AfterSchedule:
    """The instants at which ``jobs`` (names, in the spec's order) have ended runs as
    asked, from their latest such runs (``finishes``, at most one per job; a job
    without one has none yet). Hashable, as every schedule is."""

    jobs: tuple[str, ...]
    finishes: tuple[Finish, ...]
    require_all: bool = True
    timeout: dt.timedelta = dt.timedelta(days=1)

    def _after(self, moment: dt.datetime) -> list[Finish]:
        return [f for f in self.finishes if f.at > moment]

    def trigger(self, moment: dt.datetime) -> Finish | None:
        """The upstream run that makes the first run after ``moment`` due, if any."""
        later = self._after(moment)
        if not later:
            return None
        if not self.require_all:
            return min(later, key=lambda f: f.at)
        if len(later) < len(self.jobs):
            return None
        first, last = min(f.at for f in later), max(later, key=lambda f: f.at)
        return last if last.at - first <= self.timeout else None

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        found = self.trigger(moment)
        return found.at if found is not None else None

    def trigger_of(self, since: dt.datetime, due: dt.datetime) -> Finish | None:
        """The upstream run that made the run due at ``due`` due (the last of the set
        to end); ``since``, the job's run before it, plays no part here."""
        del since
        return next((f for f in self.finishes if f.at == due), None)

    def first(self) -> dt.datetime | None:
        """The instant the upstream runs known make, whenever they ended."""
        return self.next_run_after(dt.datetime.min.replace(tzinfo=dt.UTC))

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        """The latest instant at or before ``moment``: known only from each job's latest
        run, so with All the instant their latest runs make, if it is one."""
        ends = [f for f in self.finishes if f.at <= moment]
        if not ends:
            return None
        if not self.require_all:
            return max(f.at for f in ends)
        if len(ends) < len(self.jobs):
            return None
        first, last = min(f.at for f in ends), max(f.at for f in ends)
        return last if last - first <= self.timeout else None

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        if self.require_all:
            found = self.last_run_at_or_before(until)
            return int(found is not None and found > after)
        return len({f.at for f in self._after(after) if f.at <= until})

    def progress(self, moment: dt.datetime, now: dt.datetime) -> Progress:
        """Which jobs the job still waits for after ``moment`` (its last run), and the
        runs counted so far; with All, a run that ended more than the timeout before
        ``now`` no longer counts."""
        later = self._after(moment)
        if self.require_all:
            later = [f for f in later if f.at >= now - self.timeout]
            if len(later) == len(self.jobs):  # due now: nothing left to wait for
                return Progress(waiting_for=(), counted=tuple(later))
        elif later:
            return Progress(waiting_for=(), counted=tuple(later))
        counted = {f.job for f in later}
        waiting = tuple(name for name in self.jobs if name not in counted)
        return Progress(waiting_for=waiting, counted=tuple(later))


def find_cycle(start: str, edges: Mapping[str, tuple[str, ...]]) -> list[str] | None:
    """The cycle of ``edges`` (job -> the jobs it runs after) through ``start``, as the
    path from ``start`` back to it; None if ``start`` is on none. Depth first, with a
    stack of its own: a chain of thousands of jobs is no deeper for Python's stack."""
    path: list[str] = [start]
    pending: list[Iterator[str]] = [iter(edges.get(start, ()))]
    seen: set[str] = {start}
    while pending:
        upstream = next(pending[-1], None)
        if upstream is None:  # every job after this one looked at: back up
            pending.pop()
            path.pop()
        elif upstream == start:
            return [*path, start]
        elif upstream not in seen:
            seen.add(upstream)
            path.append(upstream)
            pending.append(iter(edges.get(upstream, ())))
    return None


_EPSILON = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class WindowedAfter:
    """``spec.after`` with a schedule: each instant of the job's own schedule (``own``)
    opens a window, until ``window`` later (None: until the next instant). The
    window's run is due at its opening once the upstream runs it counts have ended
    (those that ended after the window before it opened, and after the job's last
    run), or at the moment they end, if that is before the window closes. A window
    whose upstream runs did not end in time has no run.

    Only the windows around the upstream runs' ends can have one (the window an end
    falls in, and the next), so each question looks at a handful of windows."""

    own: Schedule
    upstream: AfterSchedule
    window: dt.timedelta | None = None

    def _due(self, opens: dt.datetime, since: dt.datetime | None) -> dt.datetime | None:
        before = self.own.last_run_at_or_before(opens - _EPSILON)
        cursor = max(c for c in (since, before) if c is not None) if since or before else None
        found = self.upstream.next_run_after(cursor) if cursor else self.upstream.first()
        if found is None:
            return None
        due = max(found, opens)
        closes = opens + self.window if self.window else self.own.next_run_after(opens)
        return None if closes is not None and due >= closes else due

    def _windows(self) -> set[dt.datetime]:
        opened: set[dt.datetime] = set()
        for finish in self.upstream.finishes:
            for moment in (
                self.own.last_run_at_or_before(finish.at),
                self.own.next_run_after(finish.at),
            ):
                if moment is not None:
                    opened.add(moment)
        return opened

    def _runs(self, since: dt.datetime | None) -> list[dt.datetime]:
        return sorted({d for w in self._windows() if (d := self._due(w, since)) is not None})

    def next_run_after(self, moment: dt.datetime) -> dt.datetime | None:
        return next((d for d in self._runs(moment) if d > moment), None)

    def last_run_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        return max((d for d in self._runs(None) if d <= moment), default=None)

    def count_runs_between(self, after: dt.datetime, until: dt.datetime) -> int:
        return sum(1 for d in self._runs(None) if after < d <= until)

    def trigger_of(self, since: dt.datetime, due: dt.datetime) -> Finish | None:
        """The upstream run that completed the set the run due at ``due`` counts
        (``since``: the job's run before it)."""
        opens = self.own.last_run_at_or_before(due)
        before = self.own.last_run_at_or_before(opens - _EPSILON) if opens else None
        return self.upstream.trigger(max(since, before) if before else since)

    def progress(self, moment: dt.datetime, now: dt.datetime) -> Progress:
        """As :meth:`AfterSchedule.progress`, counting from the current window's
        opening at the earliest."""
        opened = self.own.last_run_at_or_before(now)
        before = self.own.last_run_at_or_before(opened - _EPSILON) if opened else None
        return self.upstream.progress(max(moment, before) if before else moment, now)
