"""Backfills: every run of the schedule in a past (or future) time range, on request.

A backfill is written in the job's spec (``spec.backfills[]``: name, from, to), so
it is visible in Git and survives a leader change; the operator records how far
it got in status (``status.backfills[]``) and publishes the next run after that,
one at a time, at the operator's catch-up pace. The runs are the schedule's own
(its time zone, daylight-saving rules and its notBefore/notAfter bounds) in
``[from, to]``, both ends included; each gets a run ID of its own
(:func:`tickwork.core.runs.backfill_run_id`), so a backfilled instant that
already ran as a scheduled run runs again, as in Temporal.
"""

from __future__ import annotations

import datetime as dt

from tickwork.core.schedule import Schedule

#: Backfills one job's spec may list at once.
MAX_BACKFILLS = 10
#: The most runs one backfill may cover (counted with the schedule's arithmetic).
MAX_BACKFILL_RUNS = 1000
#: The longest range one backfill may cover (what CEL can check without the schedule).
MAX_BACKFILL_DAYS = 366
_EPSILON = dt.timedelta(microseconds=1)


def backfill_runs(schedule: Schedule, start: dt.datetime, end: dt.datetime) -> int:
    """Runs of ``schedule`` in ``[start, end]``."""
    return schedule.count_runs_between(start - _EPSILON, end)


def refusal(schedule: Schedule, start: dt.datetime, end: dt.datetime) -> str | None:
    """Why a backfill of ``[start, end]`` is refused, or None."""
    if end <= start:
        return "a backfill's to must be later than its from"
    count = backfill_runs(schedule, start, end)
    if count > MAX_BACKFILL_RUNS:
        return (
            f"the range holds {count} runs, more than the {MAX_BACKFILL_RUNS} one backfill "
            "may publish: split it into shorter ranges"
        )
    return None


def next_backfill_run(
    schedule: Schedule, *, start: dt.datetime, end: dt.datetime, done_until: dt.datetime | None
) -> dt.datetime | None:
    """The backfill's next run: the first in ``[start, end]`` after ``done_until`` (the
    last one published or skipped); None when it is complete."""
    after = start - _EPSILON if done_until is None else max(done_until, start - _EPSILON)
    following = schedule.next_run_after(after)
    return following if following is not None and following <= end else None
