"""Checks that a release tag names the version every part of Tickwork carries, and
writes that version's CHANGELOG section as the release notes.

    python3 scripts/release_check.py v0.2.0 [--notes notes.md] [--root DIR]

The release workflow runs it before it builds anything, and the suite runs it
too (tests/unit/test_release_versions.py, tests/integration/test_release.py).
One version names the Python package, the image (its tag and the Dockerfile's
TICKWORK_VERSION), the chart (its version and the appVersion its default image
tag comes from) and the README's install line, so that `helm install --version
X` runs image X and `pip install tickwork==X` is the CLI of the same release.
Only the standard library: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEMVER = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
#: Every file the check reads, relative to the checkout.
FILES = (
    "pyproject.toml",
    "tickwork/__init__.py",
    "Dockerfile",
    "charts/tickwork/Chart.yaml",
    "README.md",
    "CHANGELOG.md",
)


def _match(pattern: str, text: str) -> str:
    found = re.search(pattern, text, re.MULTILINE)
    return found.group(1).strip().strip("\"'") if found else "(missing)"


def versions(root: Path) -> dict[str, str]:
    """Every place the version is written, and the version found there."""
    chart = (root / "charts" / "tickwork" / "Chart.yaml").read_text()
    return {
        "pyproject.toml project.version": tomllib.loads((root / "pyproject.toml").read_text())[
            "project"
        ]["version"],
        "tickwork/__init__.py __version__": _match(
            r"^__version__ = (\S+)", (root / "tickwork" / "__init__.py").read_text()
        ),
        "Dockerfile TICKWORK_VERSION": _match(
            r"^ARG TICKWORK_VERSION=(\S+)", (root / "Dockerfile").read_text()
        ),
        "Chart.yaml version": _match(r"^version:(.+)$", chart),
        "Chart.yaml appVersion": _match(r"^appVersion:(.+)$", chart),
        "README.md helm install --version": _match(
            r"^helm install tickwork oci://\S+ --version (\S+)", (root / "README.md").read_text()
        ),
    }


def changelog_section(changelog: str, heading: str) -> str | None:
    """The text under ``## <heading>`` (perhaps followed by a date) up to the next
    ``## ``, or None without one."""
    found = re.search(
        rf"^## {re.escape(heading)}(?:[ \t][^\n]*)?\n(.*?)(?=^## |\Z)",
        changelog,
        re.MULTILINE | re.DOTALL,
    )
    return found.group(1).strip() if found else None


def problems(tag: str, root: Path) -> list[str]:
    """What stops ``tag`` from being released: each place that disagrees with it."""
    if not tag.startswith("v") or not SEMVER.fullmatch(tag[1:]):
        return [f"tag {tag!r} is not v<major>.<minor>.<patch>"]
    version = tag[1:]
    found = [
        f"{place} is {value}, the tag says {version}"
        for place, value in versions(root).items()
        if value != version
    ]
    if not changelog_section((root / "CHANGELOG.md").read_text(), version):
        found.append(f"CHANGELOG.md has no '## {version}' section: rename '## Unreleased'")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tag", help="the release tag, v<version>")
    parser.add_argument("--notes", type=Path, help="write the CHANGELOG section here")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to check")
    args = parser.parse_args(argv)
    found = problems(args.tag, args.root)
    if found:
        print(f"{args.tag} cannot be released; set every version to the tag's:", file=sys.stderr)
        for problem in found:
            print(f"  {problem}", file=sys.stderr)
        return 1
    version = args.tag[1:]
    if args.notes is not None:
        notes = changelog_section((args.root / "CHANGELOG.md").read_text(), version)
        args.notes.write_text(f"{notes}\n")
    print(f"{args.tag}: package, Dockerfile, chart, README and CHANGELOG agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
