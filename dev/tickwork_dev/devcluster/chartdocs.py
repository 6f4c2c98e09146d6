"""Render the chart's README from the ``# --`` comments in its values.yaml (helm-docs style).

Each value is documented where it is defined; ``make chart-docs`` turns the
comments into the table of ``charts/tickwork/README.md`` and a test fails
when a value has no description or the README is stale.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tickwork_dev.devcluster.build import HACK_DIR

CHART = HACK_DIR.parent / "charts" / "tickwork"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_]+):(?P<rest>.*)$")
_DOC = re.compile(r"^ *# -- ?(?P<text>.*)$")
_MORE = re.compile(r"^ *# ?(?P<text>.*)$")


@dataclass(frozen=True)
class Value:
    key: str
    type: str
    default: str
    description: str


def _type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list",
            dict: "object", type(None): "null"}.get(type(value), "object")  # fmt: skip


def _lookup(data: Any, path: list[str]) -> Any:
    for part in path:
        data = data[part]
    return data


def parse(values_text: str) -> tuple[list[Value], list[str]]:  # noqa: C901 - one pass, one state machine
    """Documented values, and the keys of leaf values that lack a description.

    A documented mapping is documented as a whole: its keys need no comment.
    """
    data = yaml.safe_load(values_text)
    documented: list[Value] = []
    undocumented: list[str] = []
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    covered_below: int | None = None  # indent of a mapping documented as a whole
    for line in values_text.splitlines():
        match = _KEY.match(line)
        if match is None:
            if (doc := _DOC.match(line)) is not None:
                pending = [doc.group("text")]
            elif pending is not None and (more := _MORE.match(line)):
                pending.append(more.group("text"))
            continue
        indent = len(match.group("indent"))
        if covered_below is not None:
            if indent > covered_below:
                continue
            covered_below = None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [key for _, key in stack] + [match.group("key")]
        value = _lookup(data, path)
        # A mapping, or a list of mappings (NetworkPolicy peers), is documented as a whole.
        nested = (isinstance(value, dict) and bool(value)) or (
            isinstance(value, list) and any(isinstance(item, dict) for item in value)
        )
        if pending is not None:
            default = json.dumps(value, separators=(",", ":"))
            documented.append(Value(".".join(path), _type(value), default, " ".join(pending)))
            if nested:
                covered_below = indent
        elif nested:
            stack.append((indent, match.group("key")))
        else:
            undocumented.append(".".join(path))
        pending = None
    return documented, undocumented


def render(chart: Path = CHART) -> str:
    values, undocumented = parse((chart / "values.yaml").read_text())
    if undocumented:
        raise ValueError(f"values without a `# --` description: {', '.join(undocumented)}")
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    rows = "\n".join(
        "| `{}` | {} | `{}` | {} |".format(
            v.key, v.type, v.default, v.description.replace("|", r"\|")
        )
        for v in values
    )
    intro = (chart / "README.intro.md").read_text().strip()
    return (
        f"# {meta['name']}\n\n"
        f"![Version: {meta['version']}](https://img.shields.io/badge/Version-{meta['version']}"
        f"-informational) ![AppVersion: {meta['appVersion']}](https://img.shields.io/badge/"
        f"AppVersion-{meta['appVersion']}-informational)\n\n"
        f"{meta['description']}\n\n{intro}\n\n"
        "## Values\n\n"
        "Generated from the comments in `values.yaml` by `make chart-docs`.\n\n"
        "| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n"
        f"{rows}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        (CHART / "README.md").write_text(text)
        print(f"wrote {CHART / 'README.md'}")  # noqa: T201
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
