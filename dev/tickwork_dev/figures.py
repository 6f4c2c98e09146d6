"""Published figures, checked against the results files they cite.

A figure in README.md or docs/*.md names where it comes from as a Markdown link to
its results file, with the value's place in the file as the link's title::

    p99 [**0.125 s**](../benchmarks/results/cronjob.json "results[n=100].tickwork.lag_p99_seconds")

The title is a path into the JSON — keys joined by dots (``['a key']`` for one with
spaces), ``[2]`` for an item of a list, ``[n=100]`` for the item whose ``n`` is
100 — or an arithmetic of paths and numbers with ``*`` and ``/`` (``a.x / b.x``,
``share * 100``). The link's text holds one number, shown to as many decimals as
the reader is given: the file's value must round to it (half a unit of the last
decimal shown either way). A text without a number is compared as a string: the
file's value must begin with it (a commit's short hash, a date).

``unchecked`` finds what looks like a measured figure (a number with a unit: s, ms,
µs, the multiplication sign, %, MiB, runs/s...) outside such links and outside code
spans, for the texts that must hold no other figure: a target or a setting, which
nothing measured, is written in a code span (`` `≤ 0.15 s` ``).

    python -m tickwork_dev.figures [FILE.md ...]   # every problem, one per line
"""

from __future__ import annotations

import json
import operator
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_LINK = re.compile(r'\[((?:[^\[\]]|\[[^\]]*\])+)\]\(([^)\s]+\.json)\s+"([^"]+)"\)')
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_STEP = re.compile(r"\.?([A-Za-z_][\w-]*)|\['([^']+)'\]|\[(\d+)\]|\[([\w-]+)=([^\]]+)\]")
_CODE = re.compile(r"`[^`]*`")
_UNITS = r"(?:ms|µs|ns|s|min|h|\u00d7|%|MiB|KiB|GiB|MB|KB|GB|B|runs/s|/s)"
_FIGURE = re.compile(rf"(?<![\w.\-/])\d[\d,]*(?:\.\d+)?\s?{_UNITS}(?![\w/])")


@dataclass(frozen=True)
class Figure:
    doc: Path
    line: int
    text: str
    target: str
    expression: str

    @property
    def file(self) -> Path:
        return (self.doc.parent / self.target).resolve()

    def where(self) -> str:
        doc = self.doc.relative_to(ROOT) if self.doc.is_relative_to(ROOT) else self.doc
        return f"{doc}:{self.line}"


def figures(doc: Path, text: str | None = None) -> list[Figure]:
    """Every checked figure in ``doc`` (Markdown links to a ``.json`` with a title)."""
    text = doc.read_text() if text is None else text
    found = []
    for match in _LINK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found.append(Figure(doc, line, match[1], match[2], match[3]))
    return found


@cache
def _load(path: Path) -> Any:
    return json.loads(path.read_text())


def resolve(data: Any, path: str) -> Any:
    """The value at ``path`` in ``data`` (see the module's docstring); KeyError if none."""
    position = 0
    value = data
    while position < len(path):
        step = _STEP.match(path, position)
        if step is None or step.end() == position:
            raise KeyError(f"cannot read {path!r} at {path[position:]!r}")
        key, quoted, index, field, wanted = step.groups()
        key = key if key is not None else quoted
        if key is not None:
            if not isinstance(value, dict) or key not in value:
                raise KeyError(f"no {key!r} in {path!r}")
            value = value[key]
        elif index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                raise KeyError(f"no item {index} in {path!r}")
            value = value[int(index)]
        else:
            items = [
                item
                for item in (value if isinstance(value, list) else [])
                if isinstance(item, dict) and str(item.get(field)) == wanted
            ]
            if len(items) != 1:
                raise KeyError(f"{len(items)} items with {field}={wanted} in {path!r}")
            value = items[0]
        position = step.end()
    return value


_OPERATORS = {"*": operator.mul, "/": operator.truediv}


def evaluate(data: Any, expression: str) -> Any:
    """A path, or paths and numbers joined by ``*`` and ``/`` (left to right)."""
    parts = re.split(r"\s+([*/])\s+", expression.strip())
    terms = parts[0::2]
    values = []
    for term in terms:
        if re.fullmatch(r"-?\d+(?:\.\d+)?", term):
            values.append(float(term))
        else:
            values.append(resolve(data, term))
    result = values[0]
    for symbol, value in zip(parts[1::2], values[1:], strict=True):
        result = _OPERATORS[symbol](float(result), float(value))
    return result


def problem(figure: Figure) -> str | None:
    """Why ``figure`` does not match its file, or None when it does."""
    if not figure.file.is_file():
        return f"{figure.where()}: {figure.target} does not exist"
    try:
        value = evaluate(_load(figure.file), figure.expression)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
        return f'{figure.where()}: {figure.target} "{figure.expression}": {exc}'
    mismatch = _mismatch(figure.text.replace("*", "").replace("`", "").strip(), value)
    if mismatch is None:
        return None
    return f'{figure.where()}: {mismatch} ({figure.target} "{figure.expression}")'


def _mismatch(shown: str, value: Any) -> str | None:
    if isinstance(value, str):
        return None if shown and value.startswith(shown) else f"{value!r} does not begin {shown!r}"
    numbers = _NUMBER.findall(shown)
    if not numbers:
        return f"{shown!r} holds no number"
    if len(numbers) > 1:
        return f"{shown!r} holds more than one number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"the file holds {value!r}, no number"
    number = Decimal(numbers[0].replace(",", ""))
    places = max(0, -int(number.as_tuple().exponent))
    if abs(Decimal(repr(float(value))) - number) > Decimal(5) / 10 ** (places + 1):
        return f"the text says {numbers[0]}, the file {value!r}"
    return None


def unchecked(text: str) -> list[str]:
    """Figure-like numbers (a number and a unit) outside checked links and code spans."""
    bare = _CODE.sub(" ", _LINK.sub(" ", text))
    return [match[0] for match in _FIGURE.finditer(bare)]


def results_names(results: Path | None = None) -> set[str]:
    """The names of the results files (``cronjob.json``...)."""
    return {path.name for path in (results or ROOT / "benchmarks" / "results").glob("*.json")}


def cited_unchecked(text: str, names: set[str]) -> list[str]:
    """Figures outside checked links in a paragraph or table row that names a results
    file: a figure that says where it comes from is checked against it."""
    found = []
    for block in re.split(r"\n\s*\n|\n(?=\|)", text):
        bare = _LINK.sub(" ", block)
        if any(name in bare for name in names):
            found += unchecked(block)
    return found


def section(text: str, heading: str) -> str:
    """The text under the Markdown heading ``heading`` (any level), to the next heading
    of the same level or higher."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.lstrip("#")
        level = len(line) - len(stripped)
        if level and stripped.strip() == heading:
            body = []
            for following in lines[index + 1 :]:
                hashes = len(following) - len(following.lstrip("#"))
                if hashes and hashes <= level and following[hashes : hashes + 1] == " ":
                    break
                body.append(following)
            return "\n".join(body)
    raise KeyError(f"no heading {heading!r}")


def published_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def problems(docs: list[Path]) -> Iterator[str]:
    for doc in docs:
        for figure in figures(doc):
            found = problem(figure)
            if found is not None:
                yield found


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    docs = [Path(name).resolve() for name in names] or published_docs()
    found = list(problems(docs))
    sys.stdout.writelines(f"{line}\n" for line in found)
    checked = sum(len(figures(doc)) for doc in docs)
    sys.stderr.write(f"{checked} figure(s) checked, {len(found)} problem(s)\n")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
