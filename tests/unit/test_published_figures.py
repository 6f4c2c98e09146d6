"""The figures README.md and docs/ publish are the figures their results files hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tickwork_dev import figures

ROOT = Path(__file__).resolve().parents[2]
PERFORMANCE = ROOT / "docs" / "performance.md"


@pytest.mark.parametrize("doc", figures.published_docs(), ids=lambda p: p.name)
def test_every_cited_figure_is_the_value_of_its_results_file(doc: Path) -> None:
    problems = [figures.problem(f) for f in figures.figures(doc)]
    assert [p for p in problems if p] == []


@pytest.mark.parametrize("doc", figures.published_docs(), ids=lambda p: p.name)
def test_a_figure_beside_the_name_of_its_results_file_is_a_checked_link(doc: Path) -> None:
    """A paragraph or table row that names a results file holds its figures as links
    the first test checks, not as text beside the name."""
    assert figures.cited_unchecked(doc.read_text(), figures.results_names()) == []


def test_the_readme_measured_section_holds_only_checked_figures() -> None:
    text = figures.section((ROOT / "README.md").read_text(), "Measured, not claimed")
    assert figures.figures(ROOT / "README.md", text), "the section cites no results file"
    assert figures.unchecked(text) == []


def test_the_performance_page_is_the_current_state_in_300_lines_of_checked_figures() -> None:
    text = PERFORMANCE.read_text()
    assert len(text.splitlines()) <= 300
    assert figures.unchecked(text) == []
    cited = {f.file for f in figures.figures(PERFORMANCE)}
    # Each headline names its file, and the file the commit and date it was measured at
    # (a comparison of two trees: each side's commit).
    assert [p.name for p in cited if not _records_its_commit(json.loads(p.read_text()))] == []


def _records_its_commit(report: dict[str, Any]) -> bool:
    if report.get("benchmark") == "compare_cpu":
        sides = [row[side] for row in report["results"] for side in ("before", "after")]
        return all(side.get("commit") for side in sides)
    return bool(report.get("commit")) and bool(report.get("date"))


# -- the checker itself -----------------------------------------------------------------


def _doc(tmp_path: Path, text: str, data: object) -> Path:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps(data))
    doc = tmp_path / "doc.md"
    doc.write_text(text)
    return doc


DATA = {
    "commit": "d501be8e0c1f",
    "ceiling": {"per_second": 273.84},
    "rows": [{"n": 100, "p99": 0.125}, {"n": 1000, "p99": 10.44}],
    "runs": 1682,
}


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('p99 [**0.125 s**](results/x.json "rows[n=100].p99")', True),
        ('p99 [0.13 s](results/x.json "rows[n=100].p99")', True),  # rounded as shown
        ('p99 [0.12 s](results/x.json "rows[n=100].p99")', True),  # half a unit either way
        ('p99 [0.11 s](results/x.json "rows[n=100].p99")', False),
        ('p99 [10.4 s](results/x.json "rows[1].p99")', True),
        ('p99 [10.5 s](results/x.json "rows[1].p99")', False),
        ('[1,682](results/x.json "runs") tests', True),
        ('[1,683](results/x.json "runs") tests', False),
        ('[84\u00d7](results/x.json "rows[n=1000].p99 / rows[n=100].p99")', True),
        ('[80\u00d7](results/x.json "rows[n=1000].p99 / rows[n=100].p99")', False),
        ('[125 ms](results/x.json "rows[0].p99 * 1000")', True),
        ('commit [`d501be8`](results/x.json "commit")', True),
        ('commit [`d501be9`](results/x.json "commit")', False),
        ('[0.125 s](results/x.json "rows[n=5000].p99")', False),  # no such row
        ('[0.125 s](results/x.json "rows[0].lag")', False),  # no such key
        ('[0.125 s](results/y.json "rows[0].p99")', False),  # no such file
        ('[0.125 s, 10.44 s](results/x.json "rows[0].p99")', False),  # two numbers
        ('[274](results/x.json "ceiling")', False),  # not a number
    ],
)
def test_the_checker_fails_a_figure_that_is_not_its_files_value(
    tmp_path: Path, text: str, ok: bool
) -> None:
    doc = _doc(tmp_path, text, DATA)
    found = figures.figures(doc)
    assert len(found) == 1
    assert (figures.problem(found[0]) is None) is ok, figures.problem(found[0])


def test_a_figure_outside_a_checked_link_is_found() -> None:
    text = (
        'lag 0.57 s (18\u00d7), [0.13 s](r.json "a"), 12 % of 9.4 ms, 300 MiB, 6,900 runs/s; '
        "settings are code: `60 s`; counts are not figures: N = 1,000, 2 cores"
    )
    assert figures.unchecked(text) == [
        "0.57 s",
        "18\u00d7",
        "12 %",
        "9.4 ms",
        "300 MiB",
        "6,900 runs/s",
    ]


def test_a_paragraph_naming_a_results_file_may_hold_only_checked_figures() -> None:
    names = {"worker.json"}
    text = (
        'Runs: [0.62](r/worker.json "a") of the bound.\n\n'
        "| 2 workers | 165 runs/s | `worker.json` |\n"
        "| other | 3 s | no file named |\n\n"
        "About 2 KB a job (`worker.json`).\n\nA setting of 30 s, no file named."
    )
    assert figures.cited_unchecked(text, names) == ["165 runs/s", "2 KB"]


def test_a_section_ends_at_the_next_heading_of_its_level() -> None:
    text = "# A\nx\n## B\ny\n### C\nz\n## D\nw\n"
    assert figures.section(text, "B") == "y\n### C\nz"
