"""The text budget of a container task's references and placement (env names and the
keys they read, envFrom, volumes, mounts, affinity), apart from the task text budget
(rules.CONTAINER_TEXT_BUDGET): the CEL rule the API server runs and its Python twin,
side by side, so that both count the same characters. With every list full and every
name at its longest the Pod fields would reach 270 KB a job; with the budget a
container task stays within the bound docs/operations.md ("Sizing") gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork.api.rules import CelRule
from tickwork.api.tasks.pod import (
    Affinity,
    EnvFromSource,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    Volume,
    VolumeMount,
)

if TYPE_CHECKING:
    from tickwork.api.tasks.container import ContainerEnvVar, ContainerTask, InitContainer

POD_TEXT_BUDGET = 16384


def _opt(field: str, expression: str) -> str:
    """CEL: ``expression`` if ``field`` is set, else 0."""
    return f"(has({field}) ? {expression} : 0)"


def _sum(field: str, var: str, expression: str) -> str:
    """CEL: the sum of ``expression`` over the list ``field`` (0 if unset)."""
    return _opt(field, f"{field}.map({var}, {expression}).sum()")


def _cel_refs(c: str) -> str:
    ref = "e.valueFrom.{kind}"
    refs = " + ".join(
        _opt(
            ref.format(kind=kind),
            f"size({ref.format(kind=kind)}.name) + size({ref.format(kind=kind)}.key)",
        )
        for kind in ("secretKeyRef", "configMapKeyRef")
    )
    env = _sum(f"{c}.env", "e", f"size(e.name) + {_opt('e.valueFrom', refs)}")
    sources = _sum(
        f"{c}.envFrom",
        "f",
        " + ".join(
            [_opt("f.prefix", "size(f.prefix)")]
            + [_opt(f"f.{kind}", f"size(f.{kind}.name)") for kind in ("configMapRef", "secretRef")]
        ),
    )
    mounts = _sum(
        f"{c}.volumeMounts", "m", "size(m.mountPath) + " + _opt("m.subPath", "size(m.subPath)")
    )
    return f"{env} + {sources} + {mounts}"


def _files(source: str, name: str) -> str:
    items = _sum(f"{source}.items", "i", "size(i.key) + size(i.path)")
    return _opt(source, f"size({source}.{name}) + {items}")


_VOLUMES = _sum(
    "self.volumes",
    "v",
    "size(v.name) + "
    + " + ".join(
        [
            _files("v.configMap", "name"),
            _files("v.secret", "secretName"),
            _opt("v.persistentVolumeClaim", "size(v.persistentVolumeClaim.claimName)"),
        ]
    ),
)
_REQUIREMENTS = "size(r.key) + " + _sum("r.values", "x", "size(x)")


def _cel_node_term(t: str) -> str:
    return " + ".join(
        _sum(f"{t}.{field}", "r", _REQUIREMENTS) for field in ("matchExpressions", "matchFields")
    )


def _cel_pod_term(t: str) -> str:
    match = f"{t}.labelSelector.matchLabels"
    labels = _opt(match, f"{match}.map(k, size(k) + size({match}[k])).sum()")
    requirements = _sum(f"{t}.labelSelector.matchExpressions", "r", _REQUIREMENTS)
    return f"size({t}.topologyKey) + {labels} + {requirements}"


_REQUIRED, _PREFERRED = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)
_NODE = "self.affinity.nodeAffinity"
_AFFINITY = _opt(
    "self.affinity",
    " + ".join(
        [
            _opt(
                _NODE,
                _sum(f"{_NODE}.{_REQUIRED}.nodeSelectorTerms", "t", _cel_node_term("t")).replace(
                    f"has({_NODE}.{_REQUIRED}.nodeSelectorTerms)", f"has({_NODE}.{_REQUIRED})"
                )
                + " + "
                + _sum(f"{_NODE}.{_PREFERRED}", "p", _cel_node_term("p.preference")),
            )
        ]
        + [
            _opt(
                f"self.affinity.{kind}",
                _sum(f"self.affinity.{kind}.{_REQUIRED}", "t", _cel_pod_term("t"))
                + " + "
                + _sum(
                    f"self.affinity.{kind}.{_PREFERRED}", "p", _cel_pod_term("p.podAffinityTerm")
                ),
            )
            for kind in ("podAffinity", "podAntiAffinity")
        ]
    ),
)
POD_TEXT = CelRule(
    rule=f"{_cel_refs('self')} + {_sum('self.initContainers', 'c', _cel_refs('c'))} + {_VOLUMES} + "
    f"{_AFFINITY} <= {POD_TEXT_BUDGET}",
    message="the container task's names, keys, paths and affinity terms (env, envFrom, "
    "volumes, volumeMounts, init containers, affinity) may hold at most 16 KiB of text "
    "in all",
)


# -- the Python twin ----------------------------------------------------------------


def volumes_text(volumes: list[Volume]) -> int:
    """The characters the volumes' names, sources, keys and paths hold."""
    total = 0
    for volume in volumes:
        total += len(volume.name)
        files = volume.config_map or volume.secret
        if volume.config_map is not None:
            total += len(volume.config_map.name)
        if volume.secret is not None:
            total += len(volume.secret.secret_name)
        if files is not None:
            total += sum(len(item.key) + len(item.path) for item in files.items)
        if volume.persistent_volume_claim is not None:
            total += len(volume.persistent_volume_claim.claim_name)
    return total


def sources_text(sources: list[EnvFromSource], mounts: list[VolumeMount]) -> int:
    """The characters a container's envFrom and volumeMounts hold."""
    total = 0
    for source in sources:
        ref = source.config_map_ref or source.secret_ref
        total += len(source.prefix) + (len(ref.name) if ref is not None else 0)
    for mount in mounts:
        total += len(mount.mount_path) + len(mount.sub_path or "")
    return total


def _requirements(
    requirements: list[NodeSelectorRequirement] | list[LabelSelectorRequirement],
) -> int:
    return sum(len(r.key) + sum(len(value) for value in r.values) for r in requirements)


def _node_term(term: NodeSelectorTerm) -> int:
    return _requirements(term.match_expressions) + _requirements(term.match_fields)


def _pod_term(term: PodAffinityTerm) -> int:
    selector = term.label_selector
    labels = sum(len(key) + len(value) for key, value in selector.match_labels.items())
    return len(term.topology_key) + labels + _requirements(selector.match_expressions)


def affinity_text(affinity: Affinity | None) -> int:
    """The characters the affinity's keys, values and topology keys hold."""
    if affinity is None:
        return 0
    total = 0
    node = affinity.node_affinity
    if node is not None:
        required = node.required_during_scheduling_ignored_during_execution
        if required is not None:
            total += sum(_node_term(term) for term in required.node_selector_terms)
        preferred = node.preferred_during_scheduling_ignored_during_execution
        total += sum(_node_term(p.preference) for p in preferred)
    for pods in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if pods is not None:
            total += sum(
                _pod_term(t) for t in pods.required_during_scheduling_ignored_during_execution
            )
            total += sum(
                _pod_term(p.pod_affinity_term)
                for p in pods.preferred_during_scheduling_ignored_during_execution
            )
    return total


def pod_text(task: ContainerTask) -> int:
    """What :data:`POD_TEXT` counts of ``task``."""
    containers: list[ContainerTask | InitContainer] = [task, *task.init_containers]
    return (
        sum(_env_text(c.env) + sources_text(c.env_from, c.volume_mounts) for c in containers)
        + volumes_text(task.volumes)
        + affinity_text(task.affinity)
    )


def _env_text(variables: list[ContainerEnvVar]) -> int:
    total = 0
    for var in variables:
        total += len(var.name)
        if var.value_from is not None:
            ref = var.value_from.secret_key_ref or var.value_from.config_map_key_ref
            total += len(ref.name) + len(ref.key) if ref is not None else 0
    return total
