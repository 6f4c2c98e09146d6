"""docs/architecture.md names every module of the product with what it is, made from
the code (tickwork_dev.moduledocs): a module added, moved or removed without the list
made anew fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tickwork_dev import moduledocs

pytestmark = pytest.mark.unit


def test_the_architecture_lists_every_module_as_the_code_says() -> None:
    doc = moduledocs.DOC.read_text()
    assert moduledocs.rewritten(doc) == doc, "python -m tickwork_dev.moduledocs --write"


def test_the_list_has_a_row_for_each_module_file() -> None:
    table = moduledocs.table()
    for package in moduledocs.PACKAGES:
        for path in package.rglob("*.py"):
            if "__pycache__" not in path.parts:
                assert f"| `{path.relative_to(package).as_posix()}` |" in table, path


def test_a_module_without_a_docstring_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.py"
    bare.write_text("x = 1\n")
    with pytest.raises(ValueError, match="has no docstring"):
        moduledocs.summary(bare)


#: A module longer than this says why at its top, in its docstring.
LONG = 400


def test_a_module_over_400_lines_says_why_at_its_top() -> None:
    unexplained = []
    for package in moduledocs.PACKAGES:
        for path in sorted(package.rglob("*.py")):
            text = path.read_text()
            if text.count("\n") <= LONG:
                continue
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if not any(line.startswith(f"Over {LONG} lines: ") for line in docstring.splitlines()):
                unexplained.append(f"{path.relative_to(moduledocs.ROOT)}: {text.count(chr(10))}")
    assert not unexplained, f'say why in the docstring ("Over {LONG} lines: ..."), or split'
