"""Every benchmark's results file says what it measured: the commit, the date and the
settings it ran with (issue 48: "every benchmark writes the commit and the settings
it ran with into its JSON")."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

from tickwork_dev.devcluster.measure import code_commit, save_report

pytestmark = pytest.mark.unit

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_report_carries_the_commit_the_date_and_the_arguments(tmp_path: Path) -> None:
    args = argparse.Namespace(
        sizes=[100, 1000],
        minutes=3,
        out=tmp_path / "r.json",
        plot=tmp_path / "r.png",
        tree=Path("/x"),
        dry=None,
    )
    save_report({"benchmark": "b", "results": [1]}, args.out, args)
    saved = json.loads(args.out.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", saved["commit"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", saved["date"])
    assert saved["settings"] == {"sizes": [100, 1000], "minutes": 3, "tree": "/x", "dry": None}
    assert saved["results"] == [1]


def test_a_reports_own_commit_and_settings_are_kept(tmp_path: Path) -> None:
    args = argparse.Namespace(minutes=3)
    report = {"commit": "abc", "settings": {"chosen": True}}
    save_report(report, tmp_path / "r.json", args)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert (saved["commit"], saved["settings"]) == ("abc", {"chosen": True})


def test_results_written_into_the_tree_do_not_make_its_code_dirty(tmp_path: Path) -> None:
    """A chain of benchmarks in one tree writes results there: the later ones still
    measured the clean commit."""

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "dev").mkdir()
    (tmp_path / "benchmarks" / "results" / "a.json").write_text("{}")
    (tmp_path / "dev" / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    (tmp_path / "benchmarks" / "results" / "a.json").write_text('{"new": 1}')
    (tmp_path / "benchmarks" / "results" / "b.json").write_text("{}")
    assert re.fullmatch(r"[0-9a-f]{40}", code_commit(tmp_path))
    (tmp_path / "dev" / "code.py").write_text("x = 2\n")
    assert code_commit(tmp_path).endswith("+dirty")


RUNNERS = {"run.py"}  # runs the others, writes no results of its own


@pytest.mark.parametrize(
    "path",
    sorted(p for p in BENCHMARKS.glob("*.py") if p.name not in RUNNERS),
    ids=lambda p: p.name,
)
def test_every_benchmark_writes_its_results_through_save_report(path: Path) -> None:
    """No benchmark writes its JSON by hand (it would leave the commit out)."""
    text = path.read_text()
    assert not re.search(r"\.out\.write_text\(", text), f"{path.name} writes args.out itself"
    if "--out" in text or "benchmark_parser(" in text:
        assert "save_report(" in text or "writes_benchmark(" in text, path.name
