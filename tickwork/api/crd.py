"""Generate the CRDs (ScheduledJob, Calendar) from the pydantic models.

``python -m tickwork.api.crd`` prints them; ``--write`` updates the
committed copies (``make crd``). pydantic's JSON Schema is turned into a
Kubernetes *structural* schema: references are inlined, ``X | None`` becomes
an optional ``X``, titles and ``additionalProperties: false`` go (the API
server prunes and, with kubectl's default strict field validation, refuses
unknown fields), and the ``x-kubernetes-*`` extensions the models carry stay.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from tickwork.api import calendar, models, rules

CRD_NAME = f"{models.PLURAL}.{models.GROUP}"
CALENDAR_CRD_NAME = f"{calendar.CALENDAR_PLURAL}.{models.GROUP}"
#: Where the committed copies go, relative to the repository root.
FOLDERS = (Path("manifests/crds"), Path("charts/tickwork/files"))

_KEEP = {
    "type",
    "format",
    "description",
    "default",
    "enum",
    "items",
    "properties",
    "required",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "maxProperties",
    "minProperties",
    "nullable",
}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {
        "name": "Schedule",
        "type": "string",
        "jsonPath": ".spec.schedule",
        "description": "Cron expression of a recurring job",
    },
    {
        "name": "Run At",
        "type": "string",
        "jsonPath": ".spec.runAt",
        "description": "Instant of a one-shot job",
    },
    {"name": "Zone", "type": "string", "jsonPath": ".spec.timeZone", "priority": 1},
    {
        "name": "Priority",
        "type": "string",
        "jsonPath": ".spec.priority",
        "description": "High or Low; empty: Normal",
        "priority": 1,
    },
    {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
    {
        "name": "Phase",
        "type": "string",
        "jsonPath": ".status.phase",
        "description": (
            "The lifecycle (the operator's): Scheduled, Suspended, Paused, Completed, Invalid"
        ),
    },
    {
        "name": "Active",
        "type": "string",
        "jsonPath": ".status.activeRuns[0].state",
        "description": "A run started and not finished (Running or Retrying)",
    },
    {
        "name": "Last",
        "type": "string",
        "jsonPath": ".status.lastRun.outcome",
        "description": "How the last finished run ended",
    },
    {
        "name": "Last Run",
        "type": "date",
        "jsonPath": ".status.lastRun.scheduledAt",
        "description": "When the last finished run was scheduled",
    },
    # A string, not a date: kubectl prints future dates as "<invalid>".
    {"name": "Next Run", "type": "string", "jsonPath": ".status.nextRunAt"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _unwrap(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """Inline a ``$ref`` or collapse an ``X | None`` union; None if ``node`` is neither."""
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"only `X | None` unions map to a structural schema: {node}")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        return {**options[0], **rest}
    return None


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    unwrapped = _unwrap(node, defs)
    if unwrapped is not None:
        return _resolve(unwrapped, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _resolve(prop, defs) for name, prop in value.items()}
        elif key == "items" or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = _resolve(value, defs)
        elif key in _KEEP or key.startswith("x-kubernetes-"):
            out[key] = value
    if out.get("default", ...) is None:
        del out["default"]
    return _ordered(out)


_ORDER = ("type", "description")


def _ordered(schema: dict[str, Any]) -> dict[str, Any]:
    """Put ``type`` and ``description`` first, the way hand-written CRDs read."""
    head = {key: schema[key] for key in _ORDER if key in schema}
    return head | {key: value for key, value in schema.items() if key not in head}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI v3 structural schema of a model, as the CRD embeds it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    schema: dict[str, Any] = _resolve(raw, defs)
    return schema


@dataclass(frozen=True)
class Kind:
    """One resource of the API group, as its CRD names and describes it."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    description: str
    spec: type[BaseModel]
    status: type[BaseModel] | None
    columns: tuple[dict[str, Any], ...]

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{models.GROUP}"


SCHEDULED_JOB = Kind(
    kind=models.KIND,
    plural=models.PLURAL,
    singular=models.SINGULAR,
    short_names=tuple(models.SHORT_NAMES),
    description="ScheduledJob runs a task on a cron schedule or once at a given time.",
    spec=models.ScheduledJobSpec,
    status=models.ScheduledJobStatus,
    columns=tuple(PRINTER_COLUMNS),
)
CALENDAR = Kind(
    kind=calendar.CALENDAR_KIND,
    plural=calendar.CALENDAR_PLURAL,
    singular=calendar.CALENDAR_SINGULAR,
    short_names=calendar.CALENDAR_SHORT_NAMES,
    description="Calendar lists days, on a time zone's wall clock, that ScheduledJobs of "
    "its namespace keep their runs off (spec.calendars.notOn) or to (onlyOn).",
    spec=calendar.CalendarSpec,
    status=None,
    columns=(
        {"name": "Zone", "type": "string", "jsonPath": ".spec.timeZone"},
        {"name": "Description", "type": "string", "jsonPath": ".spec.description"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ),
)
KINDS = (SCHEDULED_JOB, CALENDAR)
#: Each committed copy, relative to the repository root, and its kind.
OUTPUTS = tuple((folder / f"{kind.crd_name}.yaml", kind) for kind in KINDS for folder in FOLDERS)


def build_crd(kind: Kind = SCHEDULED_JOB) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string", "description": models.API_VERSION},
        "kind": {"type": "string", "description": kind.kind},
        # The API server allows nothing on metadata but its type (no description).
        "metadata": {"type": "object"},
        "spec": structural_schema(kind.spec),
    }
    if kind.status is not None:
        properties["status"] = structural_schema(kind.status)
    root: dict[str, Any] = {
        "type": "object",
        "description": kind.description,
        "required": ["spec"],
        "properties": properties,
    }
    if kind is SCHEDULED_JOB:  # the one rule that reads the object's name
        root["x-kubernetes-validations"] = [rules.AFTER_NOT_ITSELF.to_schema()]
    version: dict[str, Any] = {"name": models.VERSION, "served": True, "storage": True}
    if kind.status is not None:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = list(kind.columns)
    version["schema"] = {"openAPIV3Schema": root}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": kind.crd_name,
            "labels": {
                "app.kubernetes.io/name": "tickwork",
                "app.kubernetes.io/part-of": "tickwork",
            },
        },
        "spec": {
            "group": models.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": list(kind.short_names),
                "categories": ["tickwork"],
            },
            "versions": [version],
        },
    }


def render(kind: Kind = SCHEDULED_JOB) -> str:
    header = (
        "# Generated from tickwork/api/models.py by `make crd` (python -m tickwork.api.crd"
        " --write).\n# Do not edit by hand: a test fails when this file and the models differ.\n"
    )
    body: str = yaml.safe_dump(build_crd(kind), sort_keys=False, width=4096)
    return header + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update the committed copies")
    parser.add_argument("--root", type=Path, default=Path(), help="repository root")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write("---\n".join(render(kind) for kind in KINDS))
        return 0
    for relative, kind in OUTPUTS:
        path = args.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(kind))
        print(f"wrote {path}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
