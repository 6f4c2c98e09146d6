"""The autoscaling figures in docs/performance.md are those of
benchmarks/results/autoscaling.json, and that file says which commit and which
settings (the fair share among them) it measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\| `(hpa|keda)` [^|]*\| ([\d.]+) s \| (\d+) \| ([\d.]+) s \| ([\d.]+) s \| "
                  r"(\d+) \| (\d+) \|$", re.MULTILINE)  # fmt: skip


def test_the_autoscaling_table_is_the_results_file() -> None:
    results = json.loads((ROOT / "benchmarks/results/autoscaling.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", results["commit"])
    assert "fair_share_per_namespace" in results["settings"]
    rows = _ROW.findall((ROOT / "docs/performance.md").read_text())
    assert sorted(mode for mode, *_ in rows) == sorted(results["modes"])
    for mode, first, peak, drained, back, lost, twice in rows:
        measured = results["modes"][mode]
        assert float(first) == round(measured["first_extra_worker_ready_s"], 1), mode
        assert int(peak) == measured["peak_replicas"], mode
        assert float(drained) == round(measured["drained_s"], 1), mode
        assert float(back) == round(measured["back_to_min_s"], 1), mode
        assert (int(lost), int(twice)) == (
            measured["lost"],
            measured["executed_more_than_attempts"],
        )
