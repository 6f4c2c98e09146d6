"""The list of every module of the product in docs/architecture.md ("Every module"),
by package, each with the first sentence of its docstring: made from the code, so
that a newcomer finds each module by what it does and the list never misses one.

``python -m tickwork_dev.moduledocs --write`` rewrites the list;
tests/unit/test_architecture_modules.py fails when it differs from the code.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = (
    ROOT / "tickwork",
    ROOT / "operator" / "tickwork_operator",
    ROOT / "worker" / "tickwork_worker",
)
BEGIN = "<!-- every module: made by python -m tickwork_dev.moduledocs --write -->"
END = "<!-- end of every module -->"
_SENTENCE = re.compile(r"^(.+?[.:;])(\s|$)", re.DOTALL)


def summary(path: Path) -> str:
    """The first sentence of the module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    text = " ".join(doc.split())
    match = _SENTENCE.match(text)
    first = match.group(1) if match else text
    if not first:
        raise ValueError(f"{path} has no docstring")
    return first.rstrip(":;").replace("|", "\\|")


def table() -> str:
    """The markdown of the list: one table per package."""
    out: list[str] = []
    for package in PACKAGES:
        modules = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
        out += [f"`{package.relative_to(ROOT)}/`", "", "| module | what it is |", "|---|---|"]
        for path in modules:
            name = path.relative_to(package).as_posix()
            out.append(f"| `{name}` | {summary(path)} |")
        out.append("")
    return "\n".join(out)


def rewritten(doc: str) -> str:
    """``doc`` with its list between the markers made anew."""
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return f"{doc[:start]}\n\n{table()}\n{doc[end:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/architecture.md")
    args = parser.parse_args(argv)
    doc = DOC.read_text()
    new = rewritten(doc)
    if args.write:
        DOC.write_text(new)
    elif new != doc:
        sys.stderr.write(
            "docs/architecture.md's module list is out of date: "
            "python -m tickwork_dev.moduledocs --write\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
