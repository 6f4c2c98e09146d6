"""The chart's alerts, evaluated by promtool (built from the Go module proxy) against
recorded series: tests/data/alerts.promtest.yaml holds, for every alert, series on which
it must fire and series on which it must stay quiet.

The rules are rendered by `helm template` as a user's install would render them
(release ``tw`` in namespace ``tickwork``). Their annotations are prose for people:
`promtool check rules` checks them, and the unit tests leave them out, since promtool
compares annotations word for word and the tests are about when alerts fire.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tickwork_dev.devcluster import build, manifests

CASES = Path(__file__).parents[1] / "data" / "alerts.promtest.yaml"
#: An expression that fires at once for this release, and one that never does.
ALWAYS = 'label_replace(vector(1), "namespace", "tickwork", "", "")'
NEVER = "vector(0) > 1"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def promtool() -> str:
    return str(build.ensure_built(build.prometheus_bundle(), log=False) / "promtool")


@pytest.fixture(scope="module")
def groups() -> list[dict[str, Any]]:
    """The rule groups of the rendered PrometheusRule."""
    result = subprocess.run(
        [
            manifests.helm(),
            "template",
            "tw",
            str(manifests.CHART),
            "--namespace",
            "tickwork",
            "--set",
            "metrics.prometheusRule.enabled=true",
            "--show-only",
            "templates/prometheusrule.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rule: dict[str, Any] = yaml.safe_load(result.stdout)
    assert rule["kind"] == "PrometheusRule"
    found: list[dict[str, Any]] = rule["spec"]["groups"]
    return found


def alerts(groups: list[dict[str, Any]]) -> list[str]:
    return [rule["alert"] for group in groups for rule in group["rules"]]


def run_cases(
    promtool: str, groups: list[dict[str, Any]], folder: Path, exprs: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the recorded cases against ``groups`` (annotations left out), with the
    expressions of the alerts named in ``exprs`` replaced."""
    bare = [
        {
            **group,
            "rules": [
                {
                    **{k: v for k, v in rule.items() if k != "annotations"},
                    "expr": (exprs or {}).get(rule["alert"], rule["expr"]),
                }
                for rule in group["rules"]
            ],
        }
        for group in groups
    ]
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": bare}))
    cases = {**yaml.safe_load(CASES.read_text()), "rule_files": ["rules.yaml"]}
    (folder / "cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
    return subprocess.run(
        [promtool, "test", "rules", str(folder / "cases.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_rendered_rules_pass_promtool_check(
    promtool: str, groups: list[dict[str, Any]], tmp_path: Path
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}))
    result = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts(groups))} rules found" in result.stdout


def test_every_alert_fires_and_stays_quiet_as_the_recorded_series_expect(
    promtool: str, groups: list[dict[str, Any]], tmp_path: Path
) -> None:
    assert alerts(groups) == [
        "TickworkNoLeader",
        "TickworkMissedRuns",
        "TickworkRunsFailing",
        "TickworkRedisDown",
        "TickworkRedisMemoryNearLimit",
        "TickworkQueueStuck",
        "TickworkDeadLetterGrowing",
        "TickworkJobsPaused",
        "TickworkNamespaceClaimedElsewhere",
        "TickworkNamespaceRunsFailing",
        "TickworkNamespaceLagHigh",
        "TickworkJobLate",
    ]
    result = run_cases(promtool, groups, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("broken", "expr"), [("never fires", NEVER), ("always fires", ALWAYS)])
def test_an_alert_that_never_or_always_fires_fails_the_recorded_cases(
    promtool: str, groups: list[dict[str, Any]], tmp_path: Path, broken: str, expr: str
) -> None:
    """Each alert has a case where it must fire and one where it must not: an expression
    broken either way is caught, for every alert."""
    for alert in alerts(groups):
        folder = tmp_path / alert
        folder.mkdir()
        result = run_cases(promtool, groups, folder, {alert: expr})
        assert result.returncode != 0, f"{alert} {broken}, and no case noticed"
        assert f"alertname: {alert}" in result.stdout + result.stderr
