"""Render the chart's README with helm-docs (built from the Go module proxy, pinned in
hack/helm-docs/go.mod) from ``charts/tickwork/README.md.gotmpl`` and the ``# --``
comments in values.yaml, in the order values.yaml defines them.

``make chart-docs`` writes it; the chart tests render it into a copy of the chart
and compare, and fail when a value has no description.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tickwork_dev.devcluster import build

CHART = build.HACK_DIR.parent / "charts" / "tickwork"
TEMPLATE = "README.md.gotmpl"
_ROW = re.compile(r"^\| (?P<key>[^|]+) \| (?P<type>[^|]+) \| (?P<default>.*) \| (?P<text>.*) \|$")


def render(chart: Path = CHART) -> str:
    """The README helm-docs renders for ``chart`` (in a copy: the chart is not touched)."""
    helm_docs = build.ensure_built(build.helm_docs_bundle(), log=False) / "helm-docs"
    with tempfile.TemporaryDirectory(prefix="chart-docs-") as tmp:
        copy = Path(tmp) / chart.name
        shutil.copytree(chart, copy)
        result = subprocess.run(
            [
                str(helm_docs),
                "--chart-search-root",
                str(copy),
                "--template-files",
                TEMPLATE,
                "--sort-values-order",
                "file",
                "--log-level",
                "warning",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"helm-docs failed: {result.stderr.strip()}")
        return (copy / "README.md").read_text()


def values_table(readme: str) -> dict[str, str]:
    """Each value's key and description, from a rendered README's table."""
    rows = (_ROW.match(line) for line in readme.splitlines())
    return {m["key"].strip(): m["text"].strip() for m in rows if m and m["key"].strip() != "Key"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    text = render()
    undocumented = [key for key, description in values_table(text).items() if not description]
    if undocumented:
        print(  # noqa: T201
            f"values without a `# --` description: {', '.join(undocumented)}",
            file=sys.stderr,
        )
        return 1
    if args.write:
        (CHART / "README.md").write_text(text)
        print(f"wrote {CHART / 'README.md'}")  # noqa: T201
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
