"""Body templates of ``http`` tasks: JSON whose strings hold placeholders, filled in
for each run.

A template is valid JSON as written; placeholders sit inside its strings, so a
placeholder outside one is a JSON error the API server's schema check and the
operator report at once::

    {"region": "{{ params.region }}", "due": "{{scheduledTime}}", "try": "{{ attempt }}"}

Names: ``runId``, ``scheduledTime`` (RFC 3339, UTC), ``attempt``, ``job``,
``namespace``, ``params`` (every parameter, an object) and ``params.NAME`` (one,
empty or null when the run was not given it). A string that is exactly one
placeholder takes the value's JSON type (``"{{attempt}}"`` becomes ``1``,
``"{{params}}"`` an object, a missing parameter ``null``); inside a longer string
(or a key) a value is text. Values are JSON-escaped where they go, so a parameter
cannot leave the string it was put in: the body stays the JSON the template
promised, whatever a trigger passes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tickwork.core.params import encode_params

#: One placeholder as it appears in a template's text.
PLACEHOLDER_PATTERN = r"\{\{[^{}]*\}\}"
#: A placeholder that names a value (RE2 and Python agree on it).
KNOWN_PLACEHOLDER_PATTERN = (
    r"\{\{\s*(?:runId|scheduledTime|attempt|job|namespace|"
    r"params(?:\.[A-Za-z][A-Za-z0-9_]{0,31})?)\s*\}\}"
)
#: The most placeholders a template holds: each can add a run's parameters to the body.
MAX_PLACEHOLDERS = 32

_PLACEHOLDER = re.compile(PLACEHOLDER_PATTERN)
_KNOWN = re.compile(KNOWN_PLACEHOLDER_PATTERN)
#: A JSON string literal; in valid JSON every '"' outside one starts one.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_KEY_FOLLOWS = re.compile(r"\s*:")


JSON_MESSAGE = (
    "bodyTemplate must be JSON, with each placeholder inside a string "
    '(\'{"try": "{{attempt}}"}\', not \'{"try": {{attempt}}}\')'
)
NAMES_MESSAGE = (
    "bodyTemplate placeholders are {{runId}}, {{scheduledTime}}, {{attempt}}, {{job}}, "
    "{{namespace}}, {{params}} or {{params.NAME}} (NAME: a letter, then letters, digits "
    "or underscores)"
)
COUNT_MESSAGE = f"bodyTemplate may hold at most {MAX_PLACEHOLDERS} placeholders"


class TemplateError(ValueError):
    """A template that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class RunValues:
    """What placeholders stand for in one run."""

    run_id: str
    scheduled_time: str
    attempt: int
    job: str
    namespace: str
    params: Mapping[str, str] = field(default_factory=dict)

    def typed(self, name: str) -> object:
        """The value of ``name`` as JSON has it (a string that is only this placeholder)."""
        if name == "attempt":
            return self.attempt
        if name == "params":
            return dict(self.params)
        if name.startswith("params."):
            return self.params.get(name.removeprefix("params."))
        simple = {
            "runId": self.run_id,
            "scheduledTime": self.scheduled_time,
            "job": self.job,
            "namespace": self.namespace,
        }
        if name not in simple:
            raise TemplateError(f"no placeholder {{{{{name}}}}}")
        return simple[name]

    def text(self, name: str) -> str:
        """The value of ``name`` as text (a placeholder inside a longer string)."""
        value = self.typed(name)
        if value is None:
            return ""
        if isinstance(value, dict):
            return encode_params(value)
        return str(value)


def _name(placeholder: str) -> str:
    return placeholder[2:-2].strip()


def check_template(text: str) -> None:
    """Refuse a template that is not JSON, names an unknown value or holds too many
    placeholders (the API server's CEL rules give the same messages)."""
    try:
        json.loads(text)
    except ValueError as exc:
        raise TemplateError(f"{JSON_MESSAGE} ({exc})") from None
    found = _PLACEHOLDER.findall(text)
    for placeholder in found:
        if not _KNOWN.fullmatch(placeholder):
            raise TemplateError(f"{NAMES_MESSAGE}: not {placeholder}")
    if len(found) > MAX_PLACEHOLDERS:
        raise TemplateError(COUNT_MESSAGE)


def render_template(text: str, values: RunValues) -> str:
    """The body for one run: ``text`` (a checked template) with its placeholders filled in."""

    def literal(match: re.Match[str]) -> str:
        raw = match.group(0)
        if "{{" not in raw:
            return raw
        is_key = _KEY_FOLLOWS.match(text, match.end()) is not None
        if not is_key and _PLACEHOLDER.fullmatch(raw[1:-1]):
            return json.dumps(values.typed(_name(raw[1:-1])), ensure_ascii=False)
        return _PLACEHOLDER.sub(
            lambda inner: json.dumps(values.text(_name(inner.group(0))), ensure_ascii=False)[1:-1],
            raw,
        )

    return _STRING.sub(literal, text)
