"""One scheduler per namespace: the claim each Tickwork release holds on the
namespaces it schedules.

Two releases whose namespaces overlap would each publish every job in the overlap to
their own Redis, and each one's workers would run it: every run twice. ``helm
install`` refuses such a release, but only where Helm can look (not ``helm
template``, so not Argo CD; not the plain manifests). So the leader of a release
also holds a Lease named ``tickwork-scheduler`` in every namespace it schedules
(each listed namespace; cluster-wide, each namespace where it sees a job), under
the release's identity — its leader Lease, ``namespace/name`` — not the pod's: a
new leader of the same release renews the claims at once, another release waits
until they have not been renewed for their whole duration. Nothing of a namespace
is published, reported or acted on (runs, triggers, backfills, buffered runs,
dead letters, finished jobs' deletion, status writes) unless its claim is provably
held, checked before each act like the leader Lease; a release that finds a
namespace claimed by another leaves it alone, says so in its log and in
``tickwork_namespace_claims{state="elsewhere"}``, and takes it over only once the
other's claim has expired (its operator uninstalled, or gone for the duration).

Claims are never given up on a shutdown: a restart, a rollout or a leader change
keeps them within the release.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection

from tickwork.kube.client import KubeClient
from tickwork_operator.clock import wait_any
from tickwork_operator.leader import LeaderElector
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState

logger = logging.getLogger(__name__)

#: The Lease a release holds in each namespace it schedules.
CLAIM_NAME = "tickwork-scheduler"
#: Claims renewed at once.
CONCURRENCY = 16
#: How soon a due run of a namespace not claimed yet is looked at again (its claim is
#: being taken), and one of a namespace another release holds (until that one expires).
RETRY_UNCLAIMED_SECONDS = 1.0
RETRY_ELSEWHERE_SECONDS = 5.0


def schedules(claims: NamespaceClaims | None, namespace: str) -> bool:
    """May this release act in ``namespace``: its claim held, or no claims kept at all?
    (The leader Lease is checked beside it.)"""
    return claims is None or claims.holds(namespace)


class NamespaceClaims:
    def __init__(
        self,
        kube: KubeClient,
        *,
        identity: str,
        namespaces: Collection[str],
        state: WatchState,
        metrics: OperatorMetrics,
        duration_seconds: float,
        renew_seconds: float,
        on_claimed: Callable[[str], None] = lambda _namespace: None,
    ) -> None:
        """``namespaces``: those to claim; empty, every namespace with a job in
        ``state``. ``on_claimed(namespace)`` is called when a claim is taken or
        taken back."""
        self.kube = kube
        self.identity = identity
        self.fixed = sorted(namespaces)
        self.state = state
        self.metrics = metrics
        self.duration = duration_seconds
        self.renew = renew_seconds
        self.on_claimed = on_claimed
        self._claims: dict[str, LeaderElector] = {}
        self._elsewhere: dict[str, str | None] = {}
        """Namespaces found claimed by another release, and by whom."""
        self._wanted = asyncio.Event()
        self._leadership = asyncio.Event()
        self.ready = asyncio.Event()
        """Set while the leader has done a round of claims (what the ticker waits for)."""

    # -- what the publisher asks ----------------------------------------------------

    def holds(self, namespace: str) -> bool:
        """Is the claim on ``namespace`` ours, renewed within its duration?"""
        claim = self._claims.get(namespace)
        return claim is not None and claim.leading

    def retry_in(self, namespace: str) -> float:
        """When to look again at a due run of ``namespace``, which :meth:`holds` refused;
        a namespace never tried is claimed in the next round, at once."""
        if namespace in self._elsewhere:
            return RETRY_ELSEWHERE_SECONDS
        if namespace not in self._claims:
            self._wanted.set()
        return RETRY_UNCLAIMED_SECONDS

    def why_not(self, namespace: str) -> str:
        """Why :meth:`holds` refused ``namespace``: ``claimed_elsewhere`` (another
        release holds it) or ``not_claimed`` (not taken yet, or a renewal overdue)."""
        return "claimed_elsewhere" if namespace in self._elsewhere else "not_claimed"

    def leadership_changed(self, leading: bool) -> None:  # noqa: FBT001 - a callback
        del leading
        self._leadership.set()

    # -- the loop --------------------------------------------------------------------

    async def run(self, leading: asyncio.Event, stop: asyncio.Event) -> None:
        """While ``leading`` is set, take and renew the claims (``ready`` after each
        round); once it is not, stop counting any as held, until ``stop``."""
        while not stop.is_set():
            if not leading.is_set():
                self.ready.clear()
                for claim in self._claims.values():
                    claim.give_up()
                self._elsewhere.clear()  # a standby reports no claims: the leader does
                self._count()
                await wait_any(leading, stop)
                continue
            self._wanted.clear()
            self._leadership.clear()
            await self.round()
            if leading.is_set():
                self.ready.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.renew):
                    await wait_any(stop, self._wanted, self._leadership)

    async def round(self) -> None:
        """Take or renew the claim on every namespace to claim; drop those of namespaces
        no longer scheduled here (left to expire)."""
        namespaces = self.fixed or sorted({namespace for namespace, _ in self.state.jobs})
        for gone in set(self._claims) - set(namespaces):
            self._claims.pop(gone).give_up()
            self._elsewhere.pop(gone, None)
        room = asyncio.Semaphore(CONCURRENCY)

        async def one(namespace: str) -> None:
            async with room:
                await self._renew(namespace)

        await asyncio.gather(*(one(namespace) for namespace in namespaces))
        self._count()

    async def _renew(self, namespace: str) -> None:
        claim = self._claims.get(namespace)
        if claim is None:
            claim = self._claims[namespace] = LeaderElector(
                self.kube,
                namespace=namespace,
                name=CLAIM_NAME,
                identity=self.identity,
                duration_seconds=self.duration,
                renew_seconds=self.renew,
            )
        held_before = claim.leading
        if await claim.campaign():
            self._elsewhere.pop(namespace, None)
            if not held_before:
                logger.info(
                    "scheduling namespace %s (claim %s/%s held as %s)",
                    namespace,
                    namespace,
                    CLAIM_NAME,
                    self.identity,
                )
                self.on_claimed(namespace)
            return
        holder = claim.holder
        if holder is not None and holder != self.identity:
            if self._elsewhere.get(namespace, "") != holder:
                logger.warning(
                    "not scheduling namespace %s: another Tickwork release, %s, schedules "
                    "it (Lease %s/%s); two would run every job there twice. This release "
                    "takes it over only once that claim expires (%.0fs without renewal)",
                    namespace,
                    holder,
                    namespace,
                    CLAIM_NAME,
                    self.duration,
                )
            self._elsewhere[namespace] = holder

    def _count(self) -> None:
        held = sum(1 for claim in self._claims.values() if claim.leading)
        self.metrics.namespace_claims.labels(state="held").set(held)
        self.metrics.namespace_claims.labels(state="elsewhere").set(len(self._elsewhere))
