"""Generate the ScheduledJob CRD from the pydantic models.

``python -m tickwork.api.crd`` prints the CRD; ``--write`` updates the
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
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from tickwork.api import models

CRD_NAME = f"{models.PLURAL}.{models.GROUP}"
#: The committed copies, relative to the repository root.
OUTPUTS = (
    Path("manifests/crds") / f"{CRD_NAME}.yaml",
    Path("charts/tickwork/files") / f"{CRD_NAME}.yaml",
)

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

PRINTER_COLUMNS = [
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


def build_crd() -> dict[str, Any]:
    spec = structural_schema(models.ScheduledJobSpec)
    status = structural_schema(models.ScheduledJobStatus)
    root = {
        "type": "object",
        "description": "ScheduledJob runs a task on a cron schedule or once at a given time.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "tickwork.dev/v1alpha1"},
            "kind": {"type": "string", "description": "ScheduledJob"},
            # The API server allows nothing on metadata but its type (no description).
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {
                "app.kubernetes.io/name": "tickwork",
                "app.kubernetes.io/part-of": "tickwork",
            },
        },
        "spec": {
            "group": models.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": models.KIND,
                "listKind": f"{models.KIND}List",
                "plural": models.PLURAL,
                "singular": models.SINGULAR,
                "shortNames": list(models.SHORT_NAMES),
                "categories": ["tickwork"],
            },
            "versions": [
                {
                    "name": models.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def render() -> str:
    header = (
        "# Generated from tickwork/api/models.py by `make crd` (python -m tickwork.api.crd"
        " --write).\n# Do not edit by hand: a test fails when this file and the models differ.\n"
    )
    body: str = yaml.safe_dump(build_crd(), sort_keys=False, width=4096)
    return header + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update the committed copies")
    parser.add_argument("--root", type=Path, default=Path(), help="repository root")
    args = parser.parse_args(argv)
    text = render()
    if not args.write:
        sys.stdout.write(text)
        return 0
    for relative in OUTPUTS:
        path = args.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
