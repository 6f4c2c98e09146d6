"""The suite's times in the README ("Where the time goes") are those of
benchmarks/results/suite_time.json, which says which commit and settings it measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _minutes(seconds: float) -> int:
    return round(seconds / 60)


def test_the_readme_quotes_the_suite_time_file() -> None:
    results = json.loads((ROOT / "benchmarks/results/suite_time.json").read_text())
    text = (ROOT / "README.md").read_text()
    section = text.split("### Where the time goes", 1)[1].split("\n### ", 1)[0]
    prose = re.sub(r"\s+", " ", section)
    assert re.fullmatch(r"[0-9a-f]{40}", results["commit"])
    assert f"commit {results['commit'][:7]}, {results['date']}" in prose
    phases, folders, counts = (results["phases_seconds"], results["folders_seconds"],
                               results["folder_tests"])  # fmt: skip
    expected = [
        f"**{_minutes(phases['total'])} min** in all",
        f"{phases['python environment']} s for `.venv`",
        f"{phases['Go components and image']} s to find the Go components and Tickwork's image",
        f"{phases['lint and type check']} s for lint and type check",
        f"{_minutes(phases['test suite'])} min for `make test`'s {results['tests']:,} tests",
        f"(`tests/pods`, {counts['pods']} tests, {_minutes(folders['pods'])} min,",
        (
            f"integration {_minutes(folders['integration'])} min, e2e "
            f"{_minutes(folders['e2e'])} min, faults {_minutes(folders['faults'])} min, unit "
            f"{folders['unit'] / 60:.1f} min, attacks {_minutes(folders['attacks'])} min of work"
        ),
    ]
    inner = results["inner_loop"]
    runs = inner["runs_seconds"]
    expected += [
        (
            f"inner loop is `make test-unit`: {inner['tests']:,} tests in "
            f"{min(runs):.0f}\N{EN DASH}{max(runs):.0f} s on two workers, the idle machine "
            f"(commit {inner['commit'][:7]}; "
            f"{inner['serial_seconds']:.0f} s with `TEST_WORKERS=0`, "
            f"{inner['earlier']['serial_seconds']:.0f} s before"
        ),
    ]
    cold = results["cold_ci"]
    cold_phases, bundles = cold["phases_seconds"], cold["bundles_seconds"]
    expected += [
        (
            f"clone; commit {cold['commit'][:7]}, {cold['date']}) `.ci/run` took "
            f"**{_minutes(cold_phases['total'])} min** in all:"
        ),
        (
            f"{cold_phases['system packages']} s for Debian's packages, "
            f"{cold_phases['python environment']} s for `.venv`, "
            f"{_minutes(cold_phases['Go components and image'])} min for the Go components"
        ),
        (
            f"(the control plane {_minutes(bundles['controlplane'])} min, KEDA "
            f"{_minutes(bundles['keda'])} min), {_minutes(cold_phases['test suite'])} min for "
            f"`make test`'s {cold['tests']:,} tests"
        ),
    ]
    demo = results["demo"]
    expected += [
        (f"**{demo['cold_seconds']} s** to its first table (commit {demo['commit'][:7]};"),
        f"{demo['earlier'][0]['cold_seconds']} s with DWARF); run again, {demo['warm_seconds']} s.",
    ]
    missing = [phrase for phrase in expected if phrase not in prose]
    assert missing == []
    assert re.fullmatch(r"[0-9a-f]{40}", cold["commit"])
    assert re.fullmatch(r"[0-9a-f]{40}", demo["commit"])
    assert re.fullmatch(r"[0-9a-f]{40}", inner["commit"])
    assert max(runs) <= 60  # issue 47's bound on the inner loop
    assert cold["skipped"] == 0
