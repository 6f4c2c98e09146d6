"""A container task at every limit of its schema: every list full, every string the
two text budgets do not count at its longest, and both budgets spent. What
docs/operations.md ("Sizing") gives as its worst case holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tickwork.api import rules
from tickwork.api.models import ScheduledJobSpec
from tickwork.api.tasks.podtext import POD_TEXT_BUDGET

pytestmark = pytest.mark.unit

#: docs/operations.md, "Sizing": a container task's spec at every limit.
CONTAINER_SPEC_BOUND = 87_000


def _label_key(i: int) -> str:
    return "n" * 253 + "/" + "k" * 61 + chr(97 + i)  # 316 characters


def _container() -> dict[str, Any]:
    image = "r" + "a" * 1023
    quantities = {"example.com/" + "r" * 240 + f"{j:01d}": "9" * 64 for j in range(8)}
    requirement = {"key": "k", "operator": "In", "values": [str(j) for j in range(8)]}
    term = {"matchExpressions": [requirement] * 4, "matchFields": [requirement]}
    pod_term = {
        "labelSelector": {
            "matchLabels": {f"k{j}": "v" for j in range(4)},
            "matchExpressions": [requirement] * 4,
        },
        "topologyKey": "t",
    }
    items = [{"key": "k", "path": str(j), "mode": 420} for j in range(8)]

    def volume(i: int) -> dict[str, Any]:
        if i % 2:
            source = {"secret": {"secretName": "s", "items": items, "defaultMode": 420}}
        else:
            source = {"configMap": {"name": "c", "items": items, "defaultMode": 420}}
        return {"name": f"v{i}", **source}

    def mounts(n: int) -> list[dict[str, Any]]:
        return [{"name": f"v{i}", "mountPath": f"/{i}", "subPath": "s"} for i in range(n)]

    def env(n: int) -> list[dict[str, Any]]:
        ref = {"secretKeyRef": {"name": "s", "key": "k"}}
        return [{"name": f"E{j}", "valueFrom": ref} for j in range(n)]

    def sources(n: int) -> list[dict[str, Any]]:
        return [{"prefix": "P", "secretRef": {"name": "s", "optional": True}}] * n

    both = {
        "requiredDuringSchedulingIgnoredDuringExecution": [pod_term] * 2,
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": pod_term}
        ]
        * 2,
    }
    return {
        "image": image,
        "command": ["c"] * 32,
        "args": ["a"] * 32,
        "env": env(32),
        "envFrom": sources(8),
        "volumes": [volume(i) for i in range(16)],
        "volumeMounts": mounts(16),
        "initContainers": [
            {
                "name": "i" * 62 + str(i),
                "image": image,
                "command": ["c"] * 32,
                "args": ["a"] * 32,
                "env": env(8),
                "envFrom": sources(4),
                "volumeMounts": mounts(8),
                "imagePullPolicy": "IfNotPresent",
            }
            for i in range(4)
        ],
        "imagePullSecrets": [{"name": "p" * 252 + str(j)} for j in range(4)],
        "resources": {"limits": quantities, "requests": quantities},
        "imagePullPolicy": "IfNotPresent",
        "serviceAccountName": "s" * 253,
        "nodeSelector": {_label_key(j): "v" * 63 for j in range(16)},
        "tolerations": [
            {
                "key": _label_key(j),
                "operator": "Equal",
                "value": "v" * 63,
                "effect": "NoExecute",
                "tolerationSeconds": 86400,
            }
            for j in range(16)
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term] * 4},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "preference": term}
                ]
                * 4,
            },
            "podAffinity": both,
            "podAntiAffinity": both,
        },
        "securityContext": {
            "runAsUser": 2147483647,
            "runAsGroup": 2147483647,
            "runAsNonRoot": False,
            "readOnlyRootFilesystem": True,
            "fsGroup": 2147483647,
            "supplementalGroups": [2147483647] * 16,
        },
    }


def test_a_container_task_at_every_limit_stays_within_the_documented_bound() -> None:
    spec = ScheduledJobSpec.model_validate(
        {"schedule": "@daily", "task": {"container": _container()}}
    )
    structure = len(json.dumps(spec.to_wire()))
    # The two budgets' text on top of the structure (the short strings they count here
    # are counted twice: an upper bound).
    worst = structure + rules.TASK_TEXT_BUDGET + POD_TEXT_BUDGET
    assert worst <= CONTAINER_SPEC_BOUND, worst
    assert worst > CONTAINER_SPEC_BOUND - 2_000  # the bound is the measured worst case


def test_one_more_entry_in_a_full_list_is_refused() -> None:
    container = _container()
    container["volumes"].append({"name": "extra", "emptyDir": {}})
    with pytest.raises(ValueError, match="at most 16"):
        ScheduledJobSpec.model_validate({"schedule": "@daily", "task": {"container": container}})
