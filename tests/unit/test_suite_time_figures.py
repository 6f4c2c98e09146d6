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
        f"inner loop is `make test-unit`: {counts['unit']:,} tests",
    ]
    cold = results["cold_go_build"]
    bundles = cold["bundles_seconds"]
    rest = cold["total_seconds"] - bundles["controlplane"] - bundles["keda"]
    expected += [
        (
            f"the Go components take {_minutes(cold['total_seconds'])} min to build (the "
            f"control plane {_minutes(bundles['controlplane'])} min, KEDA "
            f"{_minutes(bundles['keda'])} min, the rest of the node and the add-ons "
            f"{_minutes(rest)} min;"
        ),
        f"builds only the control plane ({_minutes(bundles['controlplane'])} min,",
    ]
    missing = [phrase for phrase in expected if phrase not in prose]
    assert missing == []
    assert re.fullmatch(r"[0-9a-f]{40}", cold["commit"])
