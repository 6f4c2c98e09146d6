"""The annotations users make requests with live in one module
(tickwork/core/annotations.py): no other module of the product spells one out, and
the docs name each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tickwork.core import annotations

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("tickwork", "operator", "worker")


def test_no_other_module_spells_out_a_request_annotation() -> None:
    names = set(annotations.REQUEST_ANNOTATIONS)
    assert len(names) == 6
    home = ROOT / "tickwork" / "core" / "annotations.py"
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value}"
        for folder in PRODUCT
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != home
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert found == [], "import the name from tickwork.core.annotations instead"


def test_the_guard_finds_a_request_annotation_spelled_out() -> None:
    source = 'ANNOTATION = "tickwork.dev/cancel"\n'
    constants = [
        node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)
    ]
    assert set(constants) & set(annotations.REQUEST_ANNOTATIONS)


def test_the_docs_name_every_request_annotation() -> None:
    docs = (ROOT / "docs" / "api.md").read_text() + (ROOT / "docs" / "operations.md").read_text()
    missing = [name for name in annotations.REQUEST_ANNOTATIONS if name not in docs]
    assert missing == []
