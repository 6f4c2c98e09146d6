"""What the leader's parts share, made once by the :class:`~tickwork_operator.ticker.Ticker`:
the watcher's state, the queue, the API server, Events, metrics, the clock, the
Lease and the namespaces' claims (:class:`Shared`). Each part (:class:`Part`) takes
it whole, reads it by name, and asks it whether it may act in a namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tickwork.kube.client import KubeClient
from tickwork.kube.events import EventRecorder
from tickwork.kube.status import run_manager
from tickwork.queue.protocol import RunQueue
from tickwork.tracing import Tracing
from tickwork_operator.claims import NamespaceClaims, schedules
from tickwork_operator.clock import SYSTEM, Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import JobEntry, WatchState

T = TypeVar("T")


def _always() -> bool:
    return True


@dataclass
class Shared:
    """One leader's resources. Mutable so that a test may swap one (a Redis that lost
    everything) for every part at once."""

    state: WatchState
    queue: RunQueue
    kube: KubeClient
    events: EventRecorder
    metrics: OperatorMetrics
    clock: Clock = SYSTEM
    holds_lease: Callable[[], bool] = field(default=_always)
    """Whether the Lease is provably still ours (renewed within its duration)."""
    claims: NamespaceClaims | None = None
    """Each namespace's claim (None: every namespace is ours)."""
    tracing: Tracing = field(default_factory=Tracing)
    """Where the publish spans go (tickwork.tracing; off by default)."""

    def may_act(self, namespace: str) -> bool:
        """Whether a part may act in ``namespace`` now: the Lease is provably ours,
        and so is the namespace's claim."""
        return self.holds_lease() and schedules(self.claims, namespace)


class _Read(Generic[T]):
    """A part's attribute that reads the :class:`Shared` field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, part: Part, owner: type | None = None) -> T:
        value: T = getattr(part.shared, self.name)
        return value


class Part:
    """A part of the leader: reads what it shares with the others by name."""

    state = _Read[WatchState]()
    queue = _Read[RunQueue]()
    kube = _Read[KubeClient]()
    events = _Read[EventRecorder]()
    metrics = _Read[OperatorMetrics]()
    clock = _Read[Clock]()
    claims = _Read["NamespaceClaims | None"]()
    tracing = _Read[Tracing]()

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def holds_lease(self) -> bool:
        return self.shared.holds_lease()

    def may_act(self, namespace: str) -> bool:
        return self.shared.may_act(namespace)

    async def apply_as_run(
        self, entry: JobEntry, run_id: str, body: dict[str, Any] | None, *, force: bool
    ) -> dict[str, Any]:
        """Server-side apply of ``body`` to the status of ``entry``'s job, as the field
        manager of the run ``run_id`` (the one writer of its record)."""
        return await self.kube.apply_job_status(
            entry.namespace,
            entry.name,
            entry.uid,
            body,
            field_manager=run_manager(run_id),
            force=force,
        )
