"""docs/security.md names the tests that hold each promise: every file and test it
names exists, so a promise cannot point at a test that was renamed or deleted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
# `tests/x/test_y.py`, `tests/x/test_y.py::test_z`, and `::test_z` or `..._suffix`
# for a further test of the file named last.
_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`|`(?:::|\.\.\.)(\w+)`")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _references() -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    last: str | None = None
    for match in _REFERENCE.finditer(DOC.read_text()):
        path, name, later = match.groups()
        if path:
            last = path
            found.append((path, name))
        elif later and last:
            found.append((last, later))
    return found


def test_every_test_the_security_page_names_exists() -> None:
    references = _references()
    assert len(references) > 20, references  # the page was read, not skipped
    missing = []
    for path, name in references:
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif name is not None and not any(
            test == name or test.endswith(name) for test in _tests_in(file)
        ):
            missing.append(f"{path}::{name}")
    assert missing == []
