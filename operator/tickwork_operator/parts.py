"""What the leader's parts share, made once by the :class:`~tickwork_operator.ticker.Ticker`:
the watcher's state, the queue, the API server, Events, metrics, the clock, the
Lease and the namespaces' claims (:class:`Shared`). Each part (:class:`Part`) takes
it whole, reads it by name, and asks it whether it may act in a namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tickwork.kube.client import KubeClient
from tickwork.kube.events import EventRecorder
from tickwork.queue.protocol import RunQueue
from tickwork_operator.claims import NamespaceClaims, schedules
from tickwork_operator.clock import SYSTEM, Clock
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState


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

    def may_act(self, namespace: str) -> bool:
        """Whether a part may act in ``namespace`` now: the Lease is provably ours,
        and so is the namespace's claim."""
        return self.holds_lease() and schedules(self.claims, namespace)


class Part:
    """A part of the leader: reads what it shares with the others by name."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    @property
    def state(self) -> WatchState:
        return self.shared.state

    @property
    def queue(self) -> RunQueue:
        return self.shared.queue

    @property
    def kube(self) -> KubeClient:
        return self.shared.kube

    @property
    def events(self) -> EventRecorder:
        return self.shared.events

    @property
    def metrics(self) -> OperatorMetrics:
        return self.shared.metrics

    @property
    def clock(self) -> Clock:
        return self.shared.clock

    @property
    def claims(self) -> NamespaceClaims | None:
        return self.shared.claims

    def holds_lease(self) -> bool:
        return self.shared.holds_lease()

    def may_act(self, namespace: str) -> bool:
        return self.shared.may_act(namespace)
