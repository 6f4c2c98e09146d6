"""What travels through the run queue: a run's identity, never its task or payload.

The worker re-reads the ScheduledJob from the API server (the source of
truth) before it executes anything, so a message only has to say *which* run
of *which* object it is — and, for a manual run, what its trigger asked: the
parameters (a few short strings, bounded by :mod:`tickwork.core.params`) belong
to that run alone, and the annotation they came from may have changed since.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Whose turn each claim is, in rounds of 8, while High or Low runs wait (with Normal
#: runs only, the queue is one FIFO as ever). A turn whose level has no run waiting
#: goes to the highest level that has one. So while every level has runs waiting, of
#: 8 runs claimed 5 are High, 2 Normal and 1 Low, and the oldest run of a level is
#: claimed within 4 claims (Normal) or 8 (Low): a High backlog starves neither.
PRIORITY_TURNS = "HHNHLHNH"
#: ``spec.priority`` values a message carries (Normal is the absence of one).
PRIORITIES = ("High", "Normal", "Low")


@dataclass(frozen=True)
class RunMessage:
    """The identity of one run: object (namespace, name, uid), run ID and attempt."""

    run_id: str
    namespace: str
    name: str
    uid: str
    attempt: int = 1
    scheduled_at: str | None = None  # RFC 3339; absent for manual runs
    enqueued_at: float | None = None  # set by the queue, seconds since the epoch
    redeliveries: int = 0  # how often a lease expired on this run
    requeued: bool = False  # taken out of the dead-letter queue by hand: run it again
    generation: int | None = None
    """The job's metadata.generation when the operator published the run: a worker
    never starts it from a copy of the job older than that."""
    triggered_at: str | None = None
    """RFC 3339; when the operator published a manual run: its nominal time, the same
    on every attempt (absent for scheduled runs, and in messages of older versions)."""
    params: dict[str, str] | None = None
    """A manual run's parameters (checked by the operator; see tickwork.core.params).
    Small, and no secret: they are in the job's annotations and status too."""
    priority: str | None = None
    """``High`` or ``Low`` (the job's ``spec.priority``); absent: ``Normal``. Which of
    the queue's three ready lists the run waits in (see :data:`PRIORITY_TURNS`)."""
    concurrency_key: str | None = None
    """``<namespace>/<key>`` of the job's ``spec.concurrency``: at most
    ``concurrency_limit`` runs naming it are in flight; the others wait, in order."""
    concurrency_limit: int | None = None
    waited: bool = False
    """It was claimed to wait for its concurrency key (and shown Waiting in status):
    its record takes its ``activeRuns`` entry out."""

    def log_fields(self) -> dict[str, Any]:
        """The fields every log line about this run carries (``extra=``), so that one
        run can be followed across the operator's and the workers' logs by ``run_id``."""
        return {
            "run_id": self.run_id,
            "namespace": self.namespace,
            "job": self.name,
            "attempt": self.attempt,
        }

    def to_json(self) -> str:
        return json.dumps(
            {k: v for k, v in self.__dict__.items() if v is not None and v is not False},
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RunMessage:
        data: dict[str, Any] = json.loads(text)
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        params = known.get("params")
        known["params"] = (
            {str(k): str(v) for k, v in params.items()}
            if isinstance(params, dict) and params
            else None
        )
        return cls(**known)


class EnqueueOutcome(enum.StrEnum):
    """What an enqueue did; only ``ENQUEUED`` added anything."""

    ENQUEUED = "enqueued"
    ALREADY_QUEUED = "already-queued"  # ready, in flight or waiting for a retry
    ALREADY_DONE = "already-done"  # acknowledged recently: the run happened
    DEAD = "dead"  # in the dead-letter queue


class RunLocation(enum.StrEnum):
    READY = "ready"
    IN_FLIGHT = "in-flight"
    DELAYED = "delayed"
    DEAD = "dead"
    DONE = "done"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Claim:
    """A run held under a lease by one consumer; ``token`` proves who holds it.

    ``sent_at`` is when (``time.monotonic()``) the claim was asked for: the lease
    cannot have begun earlier, so the holder can bound it without the queue's clock.
    ``waits_for_key``: the run's concurrency key has every place in flight. The run
    is not to start: its holder shows it Waiting, then hands it to the key's waiting
    list (:meth:`~tickwork.queue.protocol.RunQueue.wait_for_key`).
    """

    message: RunMessage
    token: str
    sent_at: float = field(default_factory=time.monotonic, compare=False)
    waits_for_key: bool = False

    @property
    def run_id(self) -> str:
        return self.message.run_id


@dataclass(frozen=True)
class FairShare:
    """Per-namespace limits a consumer claims under, so one tenant cannot take every slot.

    ``max_in_flight`` runs of one namespace may be in flight at once across all
    consumers; a claimable run over it is *parked* and returns to the front of the
    queue when one of its namespace's runs finishes. ``runs_per_minute`` runs of one
    namespace may start per minute (a minute's worth at once, then evenly); a run over
    it waits, delayed, for its reserved start. 0 means no limit; ``namespaces`` holds
    exceptions as ``{namespace: (max_in_flight, runs_per_minute)}``, None keeping the
    default. Runs over a limit wait: nothing is dropped.

    ``share`` bounds every namespace without an exception of its own to that fraction
    of the slots the consumers alive *now* have (at least one run), whatever the
    autoscaler adds later: :meth:`under` turns it into a number of runs for the
    queue, given those slots (see ``RunQueue.register_consumer``).
    """

    max_in_flight: int = 0
    runs_per_minute: float = 0.0
    namespaces: Mapping[str, tuple[int | None, float | None]] = field(default_factory=dict)
    share: float = 0.0

    def __post_init__(self) -> None:
        limits = [(self.max_in_flight, self.runs_per_minute), *self.namespaces.values()]
        if any((n is not None and n < 0) or (r is not None and r < 0) for n, r in limits):
            raise ValueError("fair-share limits must not be negative")
        if not 0 <= self.share <= 1:
            raise ValueError("a fair share of the slots is between 0 and 1")

    def under(self, live_slots: int) -> FairShare:
        """These limits with ``share`` of ``live_slots`` as the default in-flight limit
        (at least 1; ``max_in_flight`` where that is lower), ready for the queue."""
        if not self.share:
            return self
        runs = max(1, math.floor(self.share * live_slots))
        limit = min(runs, self.max_in_flight) if self.max_in_flight else runs
        return dataclasses.replace(self, max_in_flight=limit, share=0.0)

    def limit(self, namespace: str) -> int:
        """The most runs of ``namespace`` in flight at once; 0: no limit."""
        own = self.namespaces.get(namespace, (None, None))[0]
        return self.max_in_flight if own is None else own

    def rate(self, namespace: str) -> float:
        """The most runs of ``namespace`` started per minute; 0: no limit."""
        own = self.namespaces.get(namespace, (None, None))[1]
        return self.runs_per_minute if own is None else own

    def to_json(self) -> str:
        """The form the queue's scripts read (see :data:`tickwork.queue.keys.CLAIM`)."""
        if self.share:
            raise ValueError("a share of the slots goes to the queue as a number: under()")
        return json.dumps(
            {
                "d": self.max_in_flight,
                "r": self.runs_per_minute,
                "n": {ns: n for ns, (n, _) in self.namespaces.items() if n is not None},
                "rn": {ns: r for ns, (_, r) in self.namespaces.items() if r is not None},
            },
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class Depth:
    """How many runs are in each place; every figure is O(1) to read."""

    ready: int
    in_flight: int
    delayed: int
    dead: int
    remembered: int = 0
    """Acknowledged run IDs kept for dedup."""
    oldest_dead_seconds: float = 0.0
    """Age of the oldest dead letter (0 if there is none)."""
    oldest_waiting_seconds: float = 0.0
    """How long the run that waits longest has been queued (since its first enqueue;
    0 if none waits): the next one to be claimed, or the longest parked. It grows
    while nothing is claimed, which the depth alone does not show."""
    memory_used_bytes: int | None = None
    """The queue's store: memory in use and its limit (0: none); None if not known."""
    memory_max_bytes: int | None = None
    parked: int = 0
    """Runs waiting because their namespace is at its fair-share limit (not in ``ready``)."""
    ready_high: int = 0
    """Of ``ready``, runs of priority High (withdrawn ones count until a claim drops them)."""
    ready_low: int = 0
    """Of ``ready``, runs of priority Low (the same)."""
    waiting_for_key: int = 0
    """Runs waiting for a place of their concurrency key (not in ``ready``; not in the
    backlog either: more workers would not start them sooner)."""

    @property
    def backlog(self) -> int:
        """Ready, parked and in flight: the figure the autoscaler scales workers on.
        Parked runs count: a namespace's share grows with the slots that exist."""
        return self.ready + self.parked + self.in_flight


@dataclass(frozen=True)
class DeadLetter:
    message: RunMessage
    error: str
    failed_at: float
