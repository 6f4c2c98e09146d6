"""`kubectl explain` is useful: every field of the generated CRD says what it is."""

from __future__ import annotations

from typing import Any

import pytest

from tickwork.api.crd import build_crd

pytestmark = pytest.mark.unit


def _undescribed(schema: dict[str, Any], path: str) -> list[str]:
    missing = [] if schema.get("description", "").strip() else [path]
    for name, child in (schema.get("properties") or {}).items():
        if path == "scheduledjob" and name == "metadata":
            continue  # the API server's own, and it refuses a description there
        missing += _undescribed(child, f"{path}.{name}")
    items = schema.get("items")
    # A list of objects (headers, env, runs) explains its entries; a list of strings
    # is explained by the field itself.
    if isinstance(items, dict) and items.get("type") == "object":
        missing += _undescribed(items, f"{path}[]")
    return missing


def test_every_field_of_the_crd_has_a_description() -> None:
    [version] = build_crd()["spec"]["versions"]
    assert _undescribed(version["schema"]["openAPIV3Schema"], "scheduledjob") == []


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (("spec", "retry", "backoffSeconds"), "doubles"),
        (("spec", "concurrencyPolicy"), "CancelOther cancels"),
        (("status", "activeRuns", "items", "state"), "Retrying"),
        (("spec", "task", "http", "url"), "Redirects"),
    ],
)
def test_descriptions_come_from_the_models_docstrings(path: tuple[str, ...], words: str) -> None:
    [version] = build_crd()["spec"]["versions"]
    node = version["schema"]["openAPIV3Schema"]
    for step in path:
        node = node["items"] if step == "items" else node["properties"][step]
    assert words in node["description"]
