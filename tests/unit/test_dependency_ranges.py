"""The versions CI tests (constraints.txt) are inside the ranges the wheel declares:
a range that excludes the tested version, or a pin that drifted out of its range,
fails here rather than on a user's install."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    pins = {}
    for raw in (ROOT / "constraints.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        wanted += extra
    return [Requirement(text) for text in wanted]


def test_every_declared_dependency_admits_the_version_ci_tests() -> None:
    pins = _pins()
    outside = [
        f"{requirement} (tested: {pins[canonicalize_name(requirement.name)]})"
        for requirement in _declared()
        if canonicalize_name(requirement.name) in pins
        and pins[canonicalize_name(requirement.name)] not in requirement.specifier
    ]
    assert outside == []


def test_kopf_is_bounded_above_while_the_operator_reads_its_private_modules() -> None:
    [kopf] = [r for r in _declared() if canonicalize_name(r.name) == "kopf"]
    assert any(spec.operator == "<" for spec in kopf.specifier), str(kopf)
