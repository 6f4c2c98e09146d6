"""Parsing the per-namespace task rules: exceptions apply to their namespace only,
and a malformed rule is refused naming the namespace and the entry."""

from __future__ import annotations

import ipaddress
import re

import pytest

from tickwork_worker.tenants import TenantRules

pytestmark = pytest.mark.unit
LOOPBACK = ipaddress.ip_address("127.0.0.1")


def test_exceptions_apply_to_their_namespace_only() -> None:
    rules = TenantRules(
        egress_allow=["10.1.0.0/16"],
        python_tasks=["reports.*"],
        command_tasks=False,
        tenants='{"a": {"egressAllow": ["127.0.0.1/32"], "pythonTasks": ["etl.*"], '
        '"commandTasks": true}, "b": {"pythonTasks": []}}',
    )
    a, b, other = rules.of("a"), rules.of("b"), rules.of("c")
    assert a.egress.refusal("x", LOOPBACK) is None
    assert b.egress.refusal("x", LOOPBACK) == "127.0.0.1 is in 127.0.0.0/8"
    assert other.egress.refusal("x", ipaddress.ip_address("10.1.2.3")) is None  # the default
    assert a.egress.refusal("x", ipaddress.ip_address("10.1.2.3")) is None  # kept, added to
    assert (a.may_call("etl.load"), a.may_call("reports.x")) == (True, False)
    assert (b.may_call("reports.x"), other.may_call("reports.x")) == (False, True)
    assert (a.command_tasks, b.command_tasks, other.command_tasks) == (True, False, False)
    assert a.key != b.key
    assert b.key == other.key  # same egress rules: one HTTP client


def test_a_tenant_can_be_denied_more_than_the_installation_denies() -> None:
    public = ipaddress.ip_address("93.184.216.34")
    rules = TenantRules(
        egress_allow=["10.1.0.0/16"], tenants='{"a": {"egressDeny": ["93.184.216.0/24"]}}'
    )
    a, other = rules.of("a"), rules.of("b")
    assert a.egress.refusal("x", public) is not None
    assert other.egress.refusal("x", public) is None
    assert a.egress.refusal("x", ipaddress.ip_address("10.1.3.3")) is None  # still allowed
    assert a.key != other.key


def test_fair_shares_default_and_per_namespace() -> None:
    assert TenantRules().fair_share is None  # nothing limited: claims count nothing
    rules = TenantRules(
        max_runs=5,
        tenants=(
            '{"a": {"maxRuns": 1}, "b": {"runsPerMinute": 30},'
            ' "c": {"maxRuns": 0}, "d": {"pythonTasks": []}}'
        ),
    )
    fair = rules.fair_share
    assert fair is not None
    assert [fair.limit(ns) for ns in "abcde"] == [1, 5, 0, 5, 5]
    assert [fair.rate(ns) for ns in "abcde"] == [0, 30, 0, 0, 0]
    only_one = TenantRules(tenants='{"a": {"runsPerMinute": 6}}').fair_share
    assert only_one is not None
    assert (only_one.limit("a"), only_one.rate("a"), only_one.rate("b")) == (0, 6, 0)


@pytest.mark.parametrize(
    ("tenants", "says"),
    [
        ('{"a": {"egresAllow": []}}', "tenants['a']: egresAllow: Extra inputs are not permitted"),
        ('{"a": {"egressAllow": ["10.0.0.0/33"]}}', "tenants['a']: '10.0.0.0/33' is neither"),
        ('{"a": {"commandTasks": "yes"}}', "tenants['a']: commandTasks: Input should be"),
        ('{"a": {"maxRuns": -1}}', "tenants['a']: maxRuns: Input should be greater than"),
        ('{"a": {"maxRuns": 2.5}}', "tenants['a']: maxRuns: Input should be a valid integer"),
        ('{"a": {"runsPerMinute": -3}}', "tenants['a']: runsPerMinute: Input should be"),
        ("{not json", "tenants is not JSON"),
        ('["a"]', "tenants must be a JSON object"),
    ],
)
def test_a_malformed_rule_is_refused_naming_the_entry(tenants: str, says: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(says)):
        TenantRules(tenants=tenants)
