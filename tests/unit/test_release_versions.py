"""One version names a release: the package, the image, the chart and the CHANGELOG
agree, and scripts/release_check.py (the release workflow's first job) refuses a
tag that any of them disagrees with."""

from __future__ import annotations

import importlib.util
import shutil
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import tickwork

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _release_check() -> ModuleType:
    path = ROOT / "scripts" / "release_check.py"
    spec = importlib.util.spec_from_file_location("release_check", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release_check = _release_check()
VERSION_FILES: tuple[str, ...] = release_check.FILES


def test_the_package_image_and_chart_carry_the_projects_version() -> None:
    assert tickwork.__version__ == VERSION
    found = release_check.versions(ROOT)
    assert set(found) == {
        "pyproject.toml project.version",
        "tickwork/__init__.py __version__",
        "Dockerfile TICKWORK_VERSION",
        "Chart.yaml version",
        "Chart.yaml appVersion",
        "README.md helm install --version",
    }
    assert found == dict.fromkeys(found, VERSION)


def test_the_changelog_has_a_section_for_the_version_or_unreleased() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = [release_check.changelog_section(changelog, h) for h in (VERSION, "Unreleased")]
    assert any(sections), f"CHANGELOG.md needs '## {VERSION}' or '## Unreleased'"


def _checkout(tmp_path: Path, version: str = VERSION) -> Path:
    """The files that carry the version, as at a release of ``version``."""
    for name in VERSION_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    for name in VERSION_FILES[:-1]:
        path = tmp_path / name
        path.write_text(path.read_text().replace(VERSION, version))
    changelog = tmp_path / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace("## Unreleased", f"## {version}", 1))
    return tmp_path


#: Where a version is written, what the check calls it, and its form there.
_VERSION_FORMS = (
    ("charts/tickwork/Chart.yaml", "Chart.yaml appVersion", 'appVersion: "{}"'),
    ("charts/tickwork/Chart.yaml", "Chart.yaml version", "version: {}"),
    ("tickwork/__init__.py", "tickwork/__init__.py __version__", '"{}"'),
    ("Dockerfile", "Dockerfile TICKWORK_VERSION", "TICKWORK_VERSION={}"),
    ("README.md", "README.md helm install --version", "--version {}"),
)


@pytest.mark.parametrize(
    ("tag", "edit", "problem"),
    [
        ("v1.2.3", None, None),
        ("v1.2.3-rc.1", None, "pyproject.toml project.version is 1.2.3, the tag says 1.2.3-rc.1"),
        ("v1.2.4", None, "Chart.yaml appVersion is 1.2.3, the tag says 1.2.4"),
        ("1.2.3", None, "tag '1.2.3' is not v<major>.<minor>.<patch>"),
        ("v1.2", None, "not v<major>.<minor>.<patch>"),
        *(
            ("v1.2.3", (path, form.format("1.2.3"), form.format("1.2.0")), f"{what} is 1.2.0")
            for path, what, form in _VERSION_FORMS
        ),
        (
            "v1.2.3",
            ("CHANGELOG.md", "## 1.2.3", "## Unreleased"),
            "CHANGELOG.md has no '## 1.2.3' section",
        ),
    ],
)
def test_a_tag_is_released_only_when_every_version_agrees_with_it(
    tmp_path: Path, tag: str, edit: tuple[str, str, str] | None, problem: str | None
) -> None:
    root = _checkout(tmp_path, "1.2.3")
    if edit is not None:
        name, old, new = edit
        text = (root / name).read_text()
        assert old in text
        (root / name).write_text(text.replace(old, new, 1))
    problems = release_check.problems(tag, root)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems
        if edit is not None and problem.endswith(" is 1.2.0"):
            assert f"{problem}, the tag says 1.2.3" in problems


def test_the_release_notes_are_the_versions_changelog_section() -> None:
    changelog = "# Changelog\n\n## Unreleased\n\n- soon\n\n## 1.0.0 (2025-01-02)\n\n- a\n- b\n\n## 0.9.0\n\n- old\n"  # noqa: E501 - one changelog on one line reads best
    assert release_check.changelog_section(changelog, "1.0.0") == "- a\n- b"
    assert release_check.changelog_section(changelog, "0.9.0") == "- old"
    assert release_check.changelog_section(changelog, "Unreleased") == "- soon"
    assert release_check.changelog_section(changelog, "1.0") is None
