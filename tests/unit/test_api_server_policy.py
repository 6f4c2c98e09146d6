"""The workers' NetworkPolicy for the API server: exactly the addresses and ports of
the ``kubernetes`` EndpointSlice, nothing when it names none."""

from __future__ import annotations

from typing import Any

import pytest

from tickwork_operator.api_server_policy import PolicyTarget, api_server_policy

pytestmark = pytest.mark.unit

TARGET = PolicyTarget(
    name="tw-worker-apiserver",
    namespace="tickwork",
    selector={"app.kubernetes.io/component": "worker"},
    owner="tw-worker-egress",
)


def _slice(addresses: list[list[str]], ports: list[int]) -> dict[str, Any]:
    return {
        "endpoints": [{"addresses": a} for a in addresses],
        "ports": [{"name": "https", "port": p, "protocol": "TCP"} for p in ports],
    }


@pytest.mark.parametrize(
    ("addresses", "ports", "egress"),
    [
        (
            [["10.0.0.5"]],
            [6443],
            [
                {
                    "to": [{"ipBlock": {"cidr": "10.0.0.5/32"}}],
                    "ports": [{"port": 6443, "protocol": "TCP"}],
                }
            ],
        ),
        (
            [["10.0.0.6"], ["10.0.0.5", "fd00::5"]],
            [443],
            [
                {
                    "to": [
                        {"ipBlock": {"cidr": "10.0.0.5/32"}},
                        {"ipBlock": {"cidr": "10.0.0.6/32"}},
                        {"ipBlock": {"cidr": "fd00::5/128"}},
                    ],
                    "ports": [{"port": 443, "protocol": "TCP"}],
                }
            ],
        ),
        ([], [443], []),  # no address known: nothing more admitted, never "anywhere"
        ([["10.0.0.5"]], [], []),
    ],
)
def test_the_policy_admits_the_api_servers_addresses_and_ports_only(
    addresses: list[list[str]], ports: list[int], egress: list[dict[str, Any]]
) -> None:
    policy = api_server_policy(TARGET, _slice(addresses, ports), owner_uid="u-1")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": dict(TARGET.selector)},
        "policyTypes": ["Egress"],
        "egress": egress,
    }
    [owner] = policy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("NetworkPolicy", TARGET.owner, "u-1")
