"""Every status write of Tickwork, in one module: who owns which field, and the bodies.

Status is written by server-side apply, and every field has exactly one writer,
so no write reads, merges and re-sends another writer's field:

=====================================  ===========================================
operator (``tickwork-operator``)        each run (``tickwork-run-<hash of run ID>``)
=====================================  ===========================================
phase (the lifecycle),                  its entry of ``activeRuns`` while it runs or
observedGeneration, lastScheduleTime,   waits for a retry; its record in ``runs``;
queuedRun, missedRuns, lastMissedTime,  ``lastRun`` and (on success)
lastTriggerToken, lastRequeueToken,     ``lastSuccessfulTime``, taken over (forced)
lastPurgeToken, lastResumeToken,        by whichever run finishes last; its
failureStreak, conditions               ``deadRuns`` entry while it is dead-lettered
=====================================  ===========================================

``nextRunAt`` and ``nextRuns`` go to whoever wrote them last (forced): a recurring
job's runs carry them in their one write (the runs after their own,
:func:`shown_fields`), and the operator writes them where no run's record is on its
way to (a new or edited job, a resume); where none is next (a suspend) and a run's
manager holds them, a merge patch of the operator's takes them out. One-shot jobs (and
every job with the operator's ``scheduleInStatus`` on) keep them in the operator's
share.

With server-side apply an apply states *all* of a manager's intent: a field it
owned and leaves out is removed. A run's own manager therefore moves it from
``activeRuns`` to ``runs`` in one apply (its record, without its active entry),
and runs of one job that overlap never touch each other's entries:
``activeRuns`` and ``runs`` are list-maps keyed by ``id``. Records fall out of
the history in batches, by the one write that is not an apply: a JSON patch
(:func:`trim_patch`) that removes them, each ``test``-ed at its index; a
removal takes the field from every manager, so a run's manager that owned only
its record leaves ``managedFields``. A dead run's entry leaves when the run is
requeued (its first apply as it starts again names only ``activeRuns``) or
purged (the operator applies as that run's manager without it).

The bodies are the API models (:mod:`tickwork.api.models`) dumped in their wire
form; :class:`~tickwork.kube.client.KubeClient` sends them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from tickwork.api.models import (
    DEAD_RUNS_LISTED,
    RUNS_LIMIT,
    ActiveRun,
    Condition,
    ConditionStatus,
    DeadRun,
    OperatorStatus,
    RunRecord,
    RunStatus,
    ScheduledJobStatus,
)
from tickwork.api.sharing import compact
from tickwork.core.planning import NEXT_RUNS
from tickwork.core.states import RunState
from tickwork.core.text import HISTORY_TEXT_LIMIT, TEXT_LIMIT, cap_optional

OPERATOR_MANAGER = "tickwork-operator"
RUN_MANAGER_PREFIX = "tickwork-run-"
#: The one field manager of every worker before each run had its own: what it
#: still owns after an upgrade (old records, the old lastRun) is let go by the
#: first run of the job that ends after it.
LEGACY_WORKER_MANAGER = "tickwork-worker"
#: The manager of the JSON patches that trim histories: it owns nothing after one (a
#: removal gives up every manager's ownership of it), so never stays in managedFields.
TRIM_MANAGER = "tickwork-history"
#: Records past a history limit leave in batches: once this many are over (or
#: ``status.runs`` nears its schema bound), one patch removes them all, instead
#: of a write per record as each falls out. Until then a history shows up to
#: ``TRIM_BATCH - 1`` records more than its limits.
TRIM_BATCH = 4

CONDITION_READY = "Ready"
CONDITION_SUSPENDED = "Suspended"
CONDITION_PAUSED = "Paused"
CONDITION_STALLED = "Stalled"  # kstatus' (Flux, kpt): True while Ready is False
CONDITION_ON_TIME = "OnTime"  # spec.slo: did the last run start within maxLagSeconds?


def timestamp(moment: dt.datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z, as Kubernetes writes it."""
    if moment is None:
        return None
    utc = moment.astimezone(dt.UTC)
    text = utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def _wire(share: OperatorStatus | RunStatus) -> dict[str, Any]:
    """Only the fields set on ``share`` (each whole): the whole intent of its manager."""
    full = share.model_dump(mode="json", by_alias=True, exclude_none=True)
    named = {type(share).model_fields[name].alias or name for name in share.model_fields_set}
    return {key: value for key, value in full.items() if key in named}


# -- the operator's share -----------------------------------------------------


def updated(share: OperatorStatus, *, lean: bool = True, **changes: Any) -> OperatorStatus:
    """``share`` with ``changes``, validated (instants kept in UTC, bounds checked);
    ``share`` itself when nothing changes (most watch events change nothing of it).
    With ``lean`` false a new share is not compacted (:func:`compact`): for a share
    changed again at once, compacted only when all changes are made."""
    if all(getattr(share, name) == value for name, value in changes.items()):
        return share
    changed = OperatorStatus.model_validate({**share.model_dump(), **changes})
    return compact(changed) if lean else changed


def with_condition(
    share: OperatorStatus,
    type_: str,
    *,
    status: bool,
    reason: str,
    message: str,
    now: dt.datetime,
    lean: bool = True,
) -> OperatorStatus:
    """Replace the condition of ``type_``; its transition time moves only if status flips.
    ``lean`` as in :func:`updated`."""
    wanted = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    previous = next((c for c in share.conditions if c.type == type_), None)
    text = cap_optional(message, 2048) or ""
    if previous is not None and (
        previous.status,
        previous.reason,
        previous.message,
        previous.observed_generation,
    ) == (wanted, reason, text, share.observed_generation):
        return share  # unchanged: no new object, no validation
    since = previous.last_transition_time if previous and previous.status is wanted else now
    condition = Condition(
        type=type_,
        status=wanted,
        reason=reason,
        message=text,
        last_transition_time=since,
        observed_generation=share.observed_generation,
    )
    kept = [c for c in share.conditions if c.type != type_]
    return updated(
        share, lean=lean, conditions=[*(c.model_dump() for c in kept), condition.model_dump()]
    )


def operator_body(share: OperatorStatus) -> dict[str, Any]:
    """The operator's apply: all its fields (a missing one would be removed), each
    condition stamped with the generation the share describes."""
    body = share.model_dump(mode="json", by_alias=True, exclude_none=True)
    for key in ("bufferedRuns", "cancelRequests"):
        if not body.get(key):
            body.pop(key, None)  # shown only when there is something to show
    for condition in body["conditions"]:
        condition.pop("observedGeneration", None)
        if share.observed_generation is not None:
            condition["observedGeneration"] = share.observed_generation
    return body


# -- each run's share ---------------------------------------------------------


def run_manager(run_id: str) -> str:
    """The field manager of one run's entries (run IDs are too long for the name)."""
    return RUN_MANAGER_PREFIX + hashlib.sha256(run_id.encode()).hexdigest()[:24]


def shown_fields(shown: list[dt.datetime]) -> dict[str, Any]:
    """``nextRunAt`` and ``nextRuns`` as a run's apply carries them (taken over from
    whoever wrote them last, the operator or another run); nothing when no next run is
    shown: the fields then leave if this apply's manager held them."""
    if not shown:
        return {}
    return {
        "nextRunAt": timestamp(shown[0]),
        "nextRuns": [timestamp(moment) for moment in shown[:NEXT_RUNS]],
    }


def active_body(run: ActiveRun, shown: list[dt.datetime] | None = None) -> dict[str, Any]:
    """The run's apply while it runs or waits for a retry: its ``activeRuns`` entry
    (and the next runs :func:`shown_fields`)."""
    return {**_wire(RunStatus(active_runs=[run])), **shown_fields(shown or [])}


def keeps(record: RunRecord, *, successful: int, failed: int) -> bool:
    """Does the history keep records like ``record`` at all?"""
    return (successful if record.outcome is RunState.SUCCEEDED else failed) > 0


def record_body(
    record: RunRecord,
    *,
    successful: int,
    failed: int,
    dead_listed: int | None = None,
    shown: list[dt.datetime] | None = None,
) -> dict[str, Any]:
    """The run's apply when it ended: its record (without its ``activeRuns`` entry,
    which this removes), ``lastRun``, and ``lastSuccessfulTime`` if it succeeded. A
    run that goes to the dead-letter queue also lists itself in ``deadRuns`` (given
    ``dead_listed``, the other runs listed there), up to :data:`DEAD_RUNS_LISTED`."""
    fields: dict[str, Any] = {"last_run": cap_record(record, TEXT_LIMIT)}
    if dead_listed is not None and dead_listed < DEAD_RUNS_LISTED:
        fields["dead_runs"] = [
            DeadRun(
                id=record.id,
                scheduled_at=record.scheduled_at,
                failed_at=record.finished_at or record.scheduled_at,
                attempts=max(1, record.attempts),
                error=cap_optional(record.error, TEXT_LIMIT),
            )
        ]
    if keeps(record, successful=successful, failed=failed):
        fields["runs"] = [cap_record(record, HISTORY_TEXT_LIMIT)]
    if record.outcome is RunState.SUCCEEDED and record.finished_at is not None:
        fields["last_successful_time"] = record.finished_at
    return {**_wire(RunStatus(**fields)), **shown_fields(shown or [])}


HISTORY_MANAGER_PREFIX = "tickwork-runs-"


def history_manager(slot: str) -> str:
    """The field manager of the history's place ``slot`` (:func:`history_slot`)."""
    return HISTORY_MANAGER_PREFIX + slot


def history_slot(
    history: list[RunRecord], outcome: RunState, *, successful: int, failed: int
) -> str | None:
    """Where the record of a run that ended ``outcome`` goes in ``history``: the first
    free place of its kind (``s<i>`` for a success, ``f<i>`` for the rest, i below its
    limit), else the place of the oldest record of its kind. Written there by that
    place's own field manager, the record replaces the one before it in the same write:
    the history never grows past its limits and needs no trim (DESIGN.md invariant 10).
    None when the history keeps no record of that kind."""
    prefix, limit = ("s", successful) if outcome is RunState.SUCCEEDED else ("f", failed)
    if limit <= 0:
        return None
    places = {f"{prefix}{i}" for i in range(limit)}
    held = [record for record in history if record.slot in places]
    free = sorted(places - {record.slot for record in held}, key=lambda slot: int(slot[1:]))
    if free:
        return free[0]
    oldest = min(held, key=lambda record: (record.scheduled_at, record.id))
    return oldest.slot


def to_drop(
    history: list[RunRecord], record: RunRecord, *, successful: int, failed: int
) -> list[str]:
    """IDs of the records in ``history`` that fall out now that ``record`` is in: the
    newest (by finish) first, at most ``successful`` successes and ``failed`` others."""
    ordered = sorted(
        [record, *(r for r in history if r.id != record.id)],
        key=lambda r: r.finished_at or r.started_at or r.scheduled_at,
        reverse=True,
    )
    drop: list[str] = []
    wins = losses = 0
    for item in ordered:
        if item.outcome is RunState.SUCCEEDED:
            wins += 1
            over = wins > successful
        else:
            losses += 1
            over = losses > failed
        if over and item.id != record.id:
            drop.append(item.id)
    return drop


def owned_fields(metadata: dict[str, Any], manager: str) -> set[str]:
    """The top-level status fields ``manager`` owns (from ``managedFields``)."""
    for entry in metadata.get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("subresource") == "status":
            status = (entry.get("fieldsV1") or {}).get("f:status") or {}
            return {key.removeprefix("f:") for key in status if key.startswith("f:")}
    return set()


def withdrawal_body(
    metadata: dict[str, Any], status: ScheduledJobStatus, run_id: str, *, keep_dead: bool = True
) -> dict[str, Any] | None:
    """What the manager of ``run_id`` applies so that its record leaves the history:
    nothing (None: no status at all), except the ``lastRun`` or
    ``lastSuccessfulTime`` it may still own, re-sent unchanged, and (``keep_dead``)
    its ``deadRuns`` entry: a dead run stays listed until it is requeued or purged."""
    owned = owned_fields(metadata, run_manager(run_id))
    fields: dict[str, Any] = {}
    if keep_dead and "deadRuns" in owned:
        mine = [dead for dead in status.dead_runs if dead.id == run_id]
        if mine:
            fields["dead_runs"] = mine
    if "lastRun" in owned and status.last_run is not None:
        fields["last_run"] = status.last_run
    if "lastSuccessfulTime" in owned and status.last_successful_time is not None:
        fields["last_successful_time"] = status.last_successful_time
    return _wire(RunStatus(**fields)) if fields else None


def cap_record(record: RunRecord, limit: int) -> RunRecord:
    return record.model_copy(
        update={
            "result": cap_optional(record.result, limit),
            "error": cap_optional(record.error, limit),
        }
    )


def trim_due(drop: list[str], held: int, *, placed: bool) -> bool:
    """Is it time to let the records ``drop`` go? Once :data:`TRIM_BATCH` of them are
    past the limits, or ``status.runs`` (``held`` records) nears its schema bound, or
    at once after a record ``placed`` in a place of the history (:func:`history_slot`).

    A placed record takes the place of the one before it, so it never adds one: the
    records over the limits then are ones outside the places (an older version's,
    a manual or retried run's), and no later placed record would ever make them a
    batch. A history of runs that all succeed at once would keep them for good."""
    if not drop:
        return False
    return placed or len(drop) >= TRIM_BATCH or held > RUNS_LIMIT - TRIM_BATCH


def trim_patch(written: dict[str, Any], drop: list[str]) -> list[dict[str, Any]]:
    """The JSON patch that removes the records ``drop`` from the history of
    ``written`` (the object as the API server last returned it): a ``test`` of the
    object's uid and of each record's ``id`` at its index, so that a job replaced or
    a history changed meanwhile refuses the whole patch (422); the removals from the
    last index down. Empty when none of them is there."""
    runs = (written.get("status") or {}).get("runs") or []
    gone = set(drop)
    found = [
        (index, entry["id"])
        for index, entry in enumerate(runs)
        if isinstance(entry, dict) and entry.get("id") in gone
    ]
    if not found:
        return []
    uid = (written.get("metadata") or {}).get("uid")
    operations: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    for index, run_id in reversed(found):
        operations += [
            {"op": "test", "path": f"/status/runs/{index}/id", "value": run_id},
            {"op": "remove", "path": f"/status/runs/{index}"},
        ]
    return operations


def within_limits(runs: Any, record: RunRecord, *, successful: int, failed: int) -> bool:
    """Is the raw history ``runs`` within the limits, ``record`` counted in (then
    :func:`to_drop` finds nothing)? False for anything else: the caller validates."""
    if not isinstance(runs, list):
        return False
    wins = int(record.outcome is RunState.SUCCEEDED)
    losses = 1 - wins
    for entry in runs:
        if not isinstance(entry, dict):
            return False
        if entry.get("id") == record.id:
            continue  # ``record`` itself, counted above
        if entry.get("outcome") == RunState.SUCCEEDED.value:
            wins += 1
        else:
            losses += 1
    return wins <= successful and losses <= failed


def trim_plan(
    written: dict[str, Any], record: RunRecord, *, successful: int, failed: int, placed: bool
) -> list[dict[str, Any]]:
    """The trim after ``record`` was written (``placed`` in a place of the history, or
    not), as a decision: the JSON patch to send (:func:`trim_patch`) if records past
    the limits are due to leave (:func:`to_drop`, :func:`trim_due`), else none. The
    history is read from ``written``, the object as the API server returned it."""
    runs = (written.get("status") or {}).get("runs") or []
    if within_limits(runs, record, successful=successful, failed=failed):
        return []  # nearly every run: nothing past the limits, no history validated
    try:
        status = ScheduledJobStatus.model_validate(written.get("status") or {})
    except ValueError:
        return []  # a history this version cannot read: left as it is
    drop = to_drop(status.runs, record, successful=successful, failed=failed)
    return trim_patch(written, drop) if trim_due(drop, len(status.runs), placed=placed) else []


def holds_legacy_share(metadata: dict[str, Any]) -> bool:
    """Does the workers' single manager of older versions still own fields here?"""
    return any(
        entry.get("manager") == LEGACY_WORKER_MANAGER
        for entry in metadata.get("managedFields") or []
    )
