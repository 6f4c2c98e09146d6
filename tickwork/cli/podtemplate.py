"""A CronJob's Pod template as a ``container`` task (for ``tickwork import``), and
what of it could not be carried over, each named in ``left_out``.

The first container gives the task's image, command, args, env (values, Secrets'
and ConfigMaps' keys), envFrom, volume mounts, resources and pull policy; the Pod its
service account, node selector, tolerations, affinity, volumes, image pull Secrets,
init containers (which share the task's resources and security settings) and
security settings. A piece the task's schema refuses (a hostPath
volume, a pod affinity term that reaches other namespaces) is left out with the
schema's reason, and the mounts of a volume left out go with it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from tickwork.api.tasks.container import InitContainer
from tickwork.api.tasks.pod import Affinity, EnvFromSource, Volume, VolumeMount

#: What the container task takes of a Pod spec and of its container.
_POD_KEYS = {
    "containers",
    "restartPolicy",
    "serviceAccountName",
    "serviceAccount",
    "nodeSelector",
    "tolerations",
    "affinity",
    "volumes",
    "imagePullSecrets",
    "initContainers",
    "securityContext",
    "dnsPolicy",
    "schedulerName",
    "terminationGracePeriodSeconds",
}
_CONTAINER_KEYS = {
    "name",
    "image",
    "command",
    "args",
    "env",
    "envFrom",
    "volumeMounts",
    "resources",
    "imagePullPolicy",
    "securityContext",
    "terminationMessagePath",
    "terminationMessagePolicy",
}
_SECURITY_KEYS = {
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "readOnlyRootFilesystem",
    "fsGroup",
    "supplementalGroups",
}


def _env(variables: list[dict[str, Any]], left_out: list[str]) -> list[dict[str, Any]]:
    carried = []
    for variable in variables:
        source = variable.get("valueFrom")
        if source is None:
            carried.append({"name": variable["name"], "value": str(variable.get("value", ""))})
            continue
        kind = next((k for k in ("secretKeyRef", "configMapKeyRef") if k in source), None)
        if kind is None:
            left_out.append(f"env {variable['name']}: valueFrom {', '.join(source)}")
            continue
        ref = source[kind]
        carried.append(
            {
                "name": variable["name"],
                "valueFrom": {kind: {"name": ref["name"], "key": ref["key"]}},
            }
        )
    return carried


def _security(
    pod: dict[str, Any], container: dict[str, Any], left_out: list[str]
) -> dict[str, Any]:
    """The container task's security settings: the container's, else the Pod's."""
    merged = {**(pod.get("securityContext") or {}), **(container.get("securityContext") or {})}
    extra = sorted(set(merged) - _SECURITY_KEYS - {"seccompProfile"})
    if extra:
        left_out.append(f"securityContext: {', '.join(extra)}")
    return {key: merged[key] for key in sorted(_SECURITY_KEYS) if key in merged}


def _checked(model: type[BaseModel], value: Any, what: str, left_out: list[str]) -> bool:
    """``value`` fits the task's ``model``; if not, it is named in ``left_out`` with why."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        why = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            why = "the container task has no such field"
        left_out.append(f"{what}: {where + ': ' if where else ''}{why}")
        return False
    return True


def _pod_fields(pod: dict[str, Any], left_out: list[str]) -> tuple[dict[str, Any], set[str]]:
    """The container task's volumes, pull Secrets and affinity a Pod spec gives, and the
    names of the volumes left out (their mounts go with them)."""
    task: dict[str, Any] = {}
    volumes = [
        volume
        for volume in pod.get("volumes") or []
        if _checked(Volume, volume, f"volume {volume.get('name', '?')}", left_out)
    ]
    dropped = {v.get("name", "") for v in pod.get("volumes") or []} - {v["name"] for v in volumes}
    if volumes:
        task["volumes"] = volumes
    if pod.get("imagePullSecrets"):
        task["imagePullSecrets"] = [{"name": s["name"]} for s in pod["imagePullSecrets"]]
    affinity = pod.get("affinity")
    if affinity and _checked(Affinity, affinity, "affinity", left_out):
        task["affinity"] = affinity
    return task, dropped


def _mounts_and_sources(
    container: dict[str, Any], dropped: set[str], left_out: list[str]
) -> dict[str, Any]:
    """A container's volumeMounts (those of volumes carried over) and envFrom."""
    named = container.get("name", "?")
    out: dict[str, Any] = {}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        what = f"container {named}: mount {mount.get('mountPath', '?')}"
        if mount.get("name") in dropped:
            left_out.append(f"{what}: its volume {mount['name']} is left out")
        elif _checked(VolumeMount, mount, what, left_out):
            mounts.append(mount)
    if mounts:
        out["volumeMounts"] = mounts
    sources = [
        source
        for source in container.get("envFrom") or []
        if _checked(EnvFromSource, source, f"container {named}: envFrom", left_out)
    ]
    if sources:
        out["envFrom"] = sources
    return out


def _init_containers(
    pod: dict[str, Any], dropped: set[str], left_out: list[str]
) -> list[dict[str, Any]]:
    carried = []
    for container in pod.get("initContainers") or []:
        named = container.get("name", "?")
        extra = sorted(set(container) - _CONTAINER_KEYS - {"securityContext"})
        left_out.extend(f"init container {named}: {key}" for key in extra)
        left_out.extend(
            f"init container {named}: {key} (the task's apply)"
            for key in ("securityContext", "resources")
            if container.get(key)
        )
        init = {
            "name": named,
            **_container(container, left_out),
            **_mounts_and_sources(container, dropped, left_out),
        }
        init.pop("resources", None)
        if _checked(InitContainer, init, f"init container {named}", left_out):
            carried.append(init)
    return carried


def _container(container: dict[str, Any], left_out: list[str]) -> dict[str, Any]:
    """The container task's fields a container gives."""
    task: dict[str, Any] = {"image": container["image"]}
    for key in ("command", "args"):
        if container.get(key):
            task[key] = [str(item) for item in container[key]]
    if container.get("env"):
        task["env"] = _env(container["env"], left_out)
    resources = container.get("resources") or {}
    kept = {
        kind: {name: str(quantity) for name, quantity in resources[kind].items()}
        for kind in ("requests", "limits")
        if resources.get(kind)
    }
    if kept:
        task["resources"] = kept
    if container.get("imagePullPolicy"):
        task["imagePullPolicy"] = container["imagePullPolicy"]
    return task


def _placement(pod: dict[str, Any]) -> dict[str, Any]:
    """The container task's fields a Pod spec gives: its account and its nodes."""
    task: dict[str, Any] = {}
    account = pod.get("serviceAccountName") or pod.get("serviceAccount")
    if account:
        task["serviceAccountName"] = account
    if pod.get("nodeSelector"):
        task["nodeSelector"] = dict(pod["nodeSelector"])
    if pod.get("tolerations"):
        task["tolerations"] = list(pod["tolerations"])
    return task


def container_task(template: dict[str, Any], left_out: list[str]) -> dict[str, Any] | None:
    pod = template.get("spec") or {}
    left_out.extend(f"the Pod's {key}" for key in sorted(set(pod) - _POD_KEYS))
    if (template.get("metadata") or {}).get("labels") or (template.get("metadata") or {}).get(
        "annotations"
    ):
        left_out.append("the Pod's labels and annotations")
    containers = pod.get("containers") or []
    if not containers:
        left_out.append("no container in the Pod template")
        return None
    if len(containers) > 1:
        names = ", ".join(c.get("name", "?") for c in containers[1:])
        left_out.append(f"containers after the first ({names}): one container per task")
    container = containers[0]
    named = container.get("name", "?")
    left_out.extend(f"container {named}: {key}" for key in sorted(set(container) - _CONTAINER_KEYS))
    pod_fields, dropped = _pod_fields(pod, left_out)
    task = {
        **_container(container, left_out),
        **_mounts_and_sources(container, dropped, left_out),
        **_placement(pod),
        **pod_fields,
    }
    inits = _init_containers(pod, dropped, left_out)
    if inits:
        task["initContainers"] = inits
    security = _security(pod, container, left_out)
    if "runAsNonRoot" not in security:
        left_out.append(
            "the task runs as non-root by default: set securityContext.runAsNonRoot: false "
            "if the image needs root"
        )
    if security:
        task["securityContext"] = security
    return {"container": task}
