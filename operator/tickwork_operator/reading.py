"""How a watched object becomes what the watcher holds of it: its spec parsed once
per generation, its status read leniently (a mangled status must not stop
scheduling), and the shares of status that many jobs hold alike kept once.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from typing import Any

from pydantic import ValidationError

from tickwork.api.models import OperatorStatus, RunStatusOutline, ScheduledJobSpec
from tickwork.api.sharing import compact, shared_instants
from tickwork.core.schedule import Schedule
from tickwork_operator.entry import NO_IDS, Observed, as_finished, last_run_of


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


def parse(
    body: dict[str, Any], created: dt.datetime
) -> tuple[ScheduledJobSpec | None, Schedule | None, str | None]:
    """The spec and its schedule; ``created`` (the object's creationTimestamp) anchors an
    @every interval that has no notBefore, so every watcher finds the same instants."""
    try:
        spec = spec_model(json.dumps(body.get("spec") or {}, sort_keys=True))
    except (ValidationError, ValueError) as exc:
        return None, None, f"spec.{_explain(exc)}"
    return spec, spec.schedule_of(created), None


@functools.lru_cache(maxsize=8192)
def spec_model(text: str) -> ScheduledJobSpec:
    """The spec model of a spec as canonical JSON. Models are immutable and shared: a
    thousand jobs with the same spec (most fleets are a few templates) hold one model,
    and a job seen again after a restart or a relist is not validated again."""
    return ScheduledJobSpec.model_validate(json.loads(text))


def status_of(
    body: dict[str, Any], *, previous: tuple[OperatorStatus, ...] = (), apart: bool = False
) -> tuple[OperatorStatus, RunStatusOutline]:
    """The operator's share of the object's status, and what it reads of the runs'
    share; each as empty if mangled (a mangled status must not stop scheduling).

    The share has every field set, as the operator holds the shares it writes: what it
    sends is the share's fields (``operator_body``). A share equal to one of
    ``previous`` is that one (most watch events leave it as it was: the echo of the
    operator's own write, a worker's write), and is not compacted again. Models are
    immutable, so sharing changes nothing but memory.

    ``apart``: ``nextRunAt`` and ``nextRuns`` are not the operator's share (a recurring
    job whose runs' records show them, :func:`shown_in`), so the share leaves them out."""
    raw = body.get("status")
    if not raw:
        return _no_status()  # a new job: one pair for all of them
    try:
        parsed = OperatorStatus.model_validate(raw)
        fields = parsed.__dict__
        if apart:
            fields = {**fields, "next_run_at": None, "next_runs": None}
        share = OperatorStatus.model_construct(set(OperatorStatus.model_fields), **fields)
        share = next((known for known in previous if _same(known, share)), None) or compact(share)
    except ValidationError:
        share = compact(OperatorStatus())
    try:
        runs = compact(RunStatusOutline.model_validate(raw))
    except ValidationError:
        runs = RunStatusOutline()
    return share, runs


def shown_in(body: dict[str, Any]) -> tuple[dt.datetime, ...]:
    """The next runs the object's status shows (``nextRuns``, else ``nextRunAt``), held
    once for every job that shows the same (:func:`shared_instants`); none if mangled."""
    raw = body.get("status") or {}
    texts = raw.get("nextRuns") or ([raw["nextRunAt"]] if raw.get("nextRunAt") else [])
    try:
        return shared_instants(tuple(dt.datetime.fromisoformat(text) for text in texts))
    except (TypeError, ValueError):
        return ()


@functools.cache
def _no_status() -> tuple[OperatorStatus, RunStatusOutline]:
    """The shares of an object without status (immutable models: held by every job
    that has none yet, as equal ones would be)."""
    return status_of({"status": {"phase": None}})


def shared_status(
    observed: tuple[OperatorStatus, RunStatusOutline], shown: tuple[dt.datetime, ...] = ()
) -> tuple[Observed, OperatorStatus]:
    """What the operator keeps of ``observed`` (:class:`Observed`), and the operator's
    share of it (held once: :func:`status_of` gave the share the job already held when
    equal). Models are immutable, so sharing changes nothing but memory."""
    share, runs = observed
    history = tuple(as_finished(r) for r in runs.runs)
    kept = Observed(
        share=share,
        active_runs=tuple(runs.active_runs),
        last_run=last_run_of(runs.last_run, history) if runs.last_run else None,
        runs=history,
        dead_run_ids=tuple(d.id for d in runs.dead_runs),
        shown=shown,
    )
    return kept, share


def _same(known: OperatorStatus, share: OperatorStatus) -> bool:
    return known == share and known.model_fields_set == share.model_fields_set


def still_unheard(settled: frozenset[str], observed: Observed) -> frozenset[str]:
    """The runs of ``settled`` (done in the queue, unheard of in status) that status
    still does not show finished: once a run's record has arrived and status no longer
    lists it active, status says all there is, and the ID is let go (else the set
    would only grow, one ID per lost write, for as long as the job lives)."""
    if not settled:
        return settled
    shown = {r.run_id for r in observed.runs}
    if observed.last_run is not None:
        shown.add(observed.last_run.id)
    shown.difference_update(a.id for a in observed.active_runs)
    return frozenset(settled - shown) or NO_IDS


def created_at(body: dict[str, Any], now: dt.datetime) -> dt.datetime:
    stamp = body.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return now
    return dt.datetime.fromisoformat(stamp)
