"""Which namespaces a release's leader claims and what it makes of another release's
claim, over an in-memory store of Leases that answers as the API server does
(resourceVersions, 409 on a stale write). The claim's expiry and takeover on a real
API server: tests/integration/test_operator.py."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from tickwork.core.buckets import BucketIndex
from tickwork.kube.client import KubeApiError
from tickwork_operator.claims import CLAIM_NAME, RETRY_ELSEWHERE_SECONDS, NamespaceClaims
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.state import WatchState

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]


class Leases:
    """The Lease API: get, create (409 if it exists), replace (409 if stale)."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0

    def _stamp(self, lease: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(lease)

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        lease = self.stored.get((namespace, name))
        return copy.deepcopy(lease) if lease is not None else None

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        key = (namespace, lease["metadata"]["name"])
        if key in self.stored:
            raise KubeApiError(409, "AlreadyExists", "exists")
        self.stored[key] = copy.deepcopy(lease)
        return self._stamp(self.stored[key])

    async def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        key = (namespace, lease["metadata"]["name"])
        if self.stored[key]["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]:
            raise KubeApiError(409, "Conflict", "stale")
        self.stored[key] = copy.deepcopy(lease)
        return self._stamp(self.stored[key])


def _claims(
    leases: Leases, release: str, namespaces: list[str], state: WatchState | None = None
) -> NamespaceClaims:
    return NamespaceClaims(
        leases,  # type: ignore[arg-type]
        identity=release,
        namespaces=namespaces,
        state=state or WatchState(index=BucketIndex(start=0.0, width=1.0)),
        metrics=OperatorMetrics(),
        duration_seconds=60.0,
        renew_seconds=15.0,
    )


def _count(claims: NamespaceClaims, state: str) -> float:
    value: float = claims.metrics.namespace_claims.labels(state=state)._value.get()
    return value


async def test_the_first_release_holds_a_namespace_and_the_second_leaves_it_alone() -> None:
    leases = Leases()
    one = _claims(leases, "tw-one/one-operator", ["team-a", "team-b"])
    claimed: list[str] = []
    one.on_claimed = claimed.append
    await one.round()
    assert one.holds("team-a")
    assert one.holds("team-b")
    assert claimed == ["team-a", "team-b"]  # each once, as it was taken
    assert leases.stored[("team-b", CLAIM_NAME)]["spec"]["holderIdentity"] == "tw-one/one-operator"
    assert (_count(one, "held"), _count(one, "elsewhere")) == (2, 0)

    two = _claims(leases, "tw-two/two-operator", ["team-b", "team-c"])
    await two.round()
    assert not two.holds("team-b")
    assert two.why_not("team-b") == "claimed_elsewhere"
    assert two.retry_in("team-b") == RETRY_ELSEWHERE_SECONDS
    assert two.holds("team-c")  # disjoint: its own
    assert (_count(two, "held"), _count(two, "elsewhere")) == (1, 1)
    assert leases.stored[("team-b", CLAIM_NAME)]["spec"]["holderIdentity"] == "tw-one/one-operator"

    # Renewed, not taken again: on_claimed is not called for a claim already held.
    await one.round()
    assert claimed == ["team-a", "team-b"]
    assert one.holds("team-b")


async def test_a_new_leader_of_the_same_release_holds_its_claims_at_once() -> None:
    leases = Leases()
    await _claims(leases, "tw-one/one-operator", ["team-a"]).round()
    successor = _claims(leases, "tw-one/one-operator", ["team-a"])  # another replica
    await successor.round()
    assert successor.holds("team-a")


async def test_cluster_wide_it_claims_the_namespaces_where_it_sees_jobs() -> None:
    leases = Leases()
    state = WatchState(index=BucketIndex(start=0.0, width=1.0))
    claims = _claims(leases, "tw-one/one-operator", [], state)
    await claims.round()
    assert leases.stored == {}  # no job, no claim
    for namespace in ("team-a", "team-b"):
        state.observe(
            {
                "metadata": {
                    "namespace": namespace,
                    "name": "j",
                    "uid": f"u-{namespace}",
                    "generation": 1,
                    "resourceVersion": "1",
                    "creationTimestamp": "2026-12-01T09:00:00Z",
                },
                "spec": {"schedule": "* * * * *", "task": {"echo": {"message": "hi"}}},
            },
            now=dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC),
        )
    assert claims.retry_in("team-a") == 1.0  # not tried yet: the next round, now
    await claims.round()
    assert {ns for ns, _ in leases.stored} == {"team-a", "team-b"}
    assert claims.holds("team-a")
    assert claims.why_not("team-c") == "not_claimed"
