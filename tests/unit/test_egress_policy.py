"""Where HTTP tasks may connect: the default policy refuses every range that is not
the public internet (loopback, link-local and cloud metadata, private ranges where
the API server, Redis, Pods and Services live); the installer's allow and deny
lists of CIDRs and host patterns adjust it."""

from __future__ import annotations

import ipaddress

import pytest

from tickwork_worker.tasks.egress import EgressPolicy

pytestmark = pytest.mark.unit


def refused(policy: EgressPolicy, host: str, address: str) -> bool:
    return policy.refusal(host, ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.8.9.10",
        "169.254.169.254",
        "10.96.0.1",
        "172.20.0.5",
        "192.168.1.1",
        "100.64.0.1",
        "0.0.0.0",  # noqa: S104 - an address to refuse, not to bind
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
    ],
)
def test_the_defaults_refuse_what_only_the_cluster_can_reach(address: str) -> None:
    assert refused(EgressPolicy.build(), "somewhere.example", address)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_the_defaults_let_the_public_internet_through(address: str) -> None:
    assert not refused(EgressPolicy.build(), "hooks.example.com", address)


def test_the_installer_allows_ranges_and_host_patterns_and_denies_more() -> None:
    policy = EgressPolicy.build(
        allow=["10.96.0.0/12", "*.svc.cluster.local"], deny=["203.1.0.0/16", "*.evil.example"]
    )
    assert not refused(policy, "api.internal", "10.96.0.10")
    assert refused(policy, "api.internal", "10.1.0.10")  # the rest of 10/8 stays denied
    assert not refused(policy, "recorder.ns.svc.cluster.local", "10.1.0.10")
    assert not refused(policy, "RECORDER.ns.svc.cluster.local.", "10.1.0.10")
    assert refused(policy, "hooks.example.com", "203.1.2.3")
    assert refused(policy, "x.evil.example", "93.184.216.34")
    assert policy.refusal("x.evil.example", ipaddress.ip_address("93.184.216.34")) == (
        "x.evil.example matches *.evil.example"
    )
    assert policy.refusal("m", ipaddress.ip_address("169.254.169.254")) == (
        "169.254.169.254 is in 169.254.0.0/16"
    )


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "300.1.1.1", "10.0.0.1/8/9", "a b"])
def test_an_entry_that_is_neither_a_cidr_nor_a_host_pattern_is_an_error(entry: str) -> None:
    with pytest.raises(ValueError, match="neither a CIDR nor a host pattern"):
        EgressPolicy.build(allow=[entry])


@pytest.mark.parametrize(
    ("address", "refusal"),
    [
        ("10.1.0.10", None),  # what the pattern is for: a private address
        ("127.0.0.1", "127.0.0.1 is in 127.0.0.0/8"),
        ("169.254.169.254", "169.254.169.254 is in 169.254.0.0/16"),  # cloud metadata
        ("fd00:ec2::254", "fd00:ec2::254 is in fd00:ec2::254/128"),
        ("::ffff:127.0.0.1", "127.0.0.1 is in 127.0.0.0/8"),
        ("10.9.0.1", "10.9.0.1 is in 10.9.0.0/16"),  # the installer denied it
    ],
)
def test_an_allowed_host_pattern_opens_private_ranges_but_not_loopback_metadata_or_denials(
    address: str, refusal: str | None
) -> None:
    # A tenant may make a name in the pattern resolve anywhere (an ExternalName
    # Service in their namespace): the pattern alone must not open the metadata address.
    policy = EgressPolicy.build(allow=["*.svc.cluster.local"], deny=["10.9.0.0/16"])
    host = "evil.tenant.svc.cluster.local"
    assert policy.refusal(host, ipaddress.ip_address(address)) == refusal
    # An allowed CIDR is the installer naming the addresses themselves: it opens them.
    assert not refused(EgressPolicy.build(allow=["169.254.169.254/32"]), host, "169.254.169.254")
