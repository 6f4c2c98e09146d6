"""Run parameters: the names and values a manual trigger passes to its run.

``kubectl tickwork trigger JOB --param region=eu`` writes them as a JSON object
to the annotation :data:`RUN_PARAMS_ANNOTATION`, beside the run-now token; the
operator checks them here, publishes them with the run, and each task kind hands
them on (an HTTP header and body template placeholders, Python keyword
arguments, ``TICKWORK_PARAM_<NAME>`` environment variables). Scheduled runs have
none; a run started by other jobs' runs (``spec.after``) has ``upstreamRun`` and
``upstreamJob``, set by the operator.

They are bounded because every record of the run keeps them (``status.runs``
holds up to 40), and names are plain because they become environment variable
and template names: a letter, then letters, digits or underscores. Two names
that differ only in case are refused: ``TICKWORK_PARAM_REGION`` could not tell
them apart. Values are one line of text without control characters.
Parameters are not secret: they show in the job's annotations and status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from tickwork.core.annotations import ANNOTATION_LIMIT, RUN_PARAMS_ANNOTATION
from tickwork.core.errors import InvalidParamsError

#: The most parameters one run takes.
MAX_PARAMS = 8
#: The most text the names and values of one run's parameters hold together: each
#: of a job's 40 history records keeps them (see docs/operations.md, "Sizing").
PARAMS_TEXT_LIMIT = 128
PARAM_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
_NAME = re.compile(PARAM_NAME_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
ENV_PREFIX = "TICKWORK_PARAM_"

NAME_RULE = "a letter followed by up to 31 letters, digits or underscores"


def check_params(params: Mapping[str, object]) -> dict[str, str]:
    """``params`` if they are usable, as a plain dict; InvalidParamsError saying what
    to fix if not."""
    if len(params) > MAX_PARAMS:
        raise InvalidParamsError(f"at most {MAX_PARAMS} parameters, not {len(params)}")
    seen: dict[str, str] = {}
    checked: dict[str, str] = {}
    for name, value in params.items():
        if not _NAME.match(name):
            raise InvalidParamsError(f"parameter name {name!r} must be {NAME_RULE}")
        if not isinstance(value, str):
            raise InvalidParamsError(f"parameter {name!r} must be a string, not {value!r}")
        if _CONTROL.search(value):
            raise InvalidParamsError(
                f"parameter {name!r} must be one line of text without control characters"
            )
        twin = seen.get(name.upper())
        if twin is not None:
            raise InvalidParamsError(
                f"parameters {twin!r} and {name!r} differ only in case; "
                f"both would be {env_name(name)}"
            )
        seen[name.upper()] = name
        checked[name] = value
    size = sum(len(name) + len(value) for name, value in checked.items())
    if size > PARAMS_TEXT_LIMIT:
        raise InvalidParamsError(
            f"parameter names and values may hold at most {PARAMS_TEXT_LIMIT} characters "
            f"in all, not {size}; pass a reference (a date, an ID) rather than the data"
        )
    return checked


def parse_params(text: str | None) -> dict[str, str]:
    """The parameters an annotation value holds (none for a missing or blank one)."""
    if text is None or not text.strip():
        return {}
    if len(text) > ANNOTATION_LIMIT:
        raise InvalidParamsError(
            f"{RUN_PARAMS_ANNOTATION} holds {len(text)} characters; parameters take at most "
            f"{PARAMS_TEXT_LIMIT}"
        )
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidParamsError(
            f'{RUN_PARAMS_ANNOTATION} must be a JSON object of strings, like {{"region": "eu"}}'
            f" ({exc})"
        ) from None
    if not isinstance(value, dict):
        raise InvalidParamsError(
            f'{RUN_PARAMS_ANNOTATION} must be a JSON object of strings, like {{"region": "eu"}}'
        )
    return check_params(value)


def encode_params(params: Mapping[str, str]) -> str:
    """The compact JSON form: the annotation's value, and the ``Tickwork-Params`` header
    (ASCII, so any value fits a header)."""
    return json.dumps(dict(params), separators=(",", ":"), sort_keys=True)


def env_name(name: str) -> str:
    """The environment variable a command task gets the parameter ``name`` in."""
    return ENV_PREFIX + name.upper()


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (the CLI's ``--param``) split in two; the value may hold ``=``."""
    name, equals, value = text.partition("=")
    if not equals:
        raise InvalidParamsError(f"--param {text!r} must be NAME=VALUE, like region=eu")
    return name.strip(), value
