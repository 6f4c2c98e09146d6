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
from collections.abc import Mapping
from dataclasses import dataclass


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
    path from ``start`` back to it; None if ``start`` is on none."""
    path: list[str] = [start]
    seen: set[str] = set()

    def walk(node: str) -> bool:
        for upstream in edges.get(node, ()):
            if upstream == start:
                path.append(start)
                return True
            if upstream in seen:
                continue
            seen.add(upstream)
            path.append(upstream)
            if walk(upstream):
                return True
            path.pop()
        return False

    return path if walk(start) else None
