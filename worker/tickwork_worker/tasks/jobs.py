"""The batch/v1 Job of one attempt of a ``container`` task, and what a Job's state
says about it: pure functions over dicts, no I/O (the task in
:mod:`tickwork_worker.tasks.container` sends and watches them).

One attempt is one Job, named from the run ID and the attempt, so that whoever
handles the attempt again finds the Job instead of creating a second. The Job
does not retry (``backoffLimit: 0``, ``restartPolicy: Never``): Tickwork's retry
policy does, one Job per attempt. ``activeDeadlineSeconds`` is the job's
``timeoutSeconds``; ``ttlSecondsAfterFinished`` leaves finished Jobs to the TTL
controller. The Pod is as restricted as the "restricted" Pod Security level asks
unless the spec relaxes it, and whatever it sets the namespace's Pod Security
admission still judges: nothing is granted here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from tickwork.api.models import API_VERSION, KIND, ContainerTask
from tickwork.api.tasks.container import ContainerEnvVar, ContainerSecurity, InitContainer
from tickwork_worker.tasks.base import RunContext
from tickwork_worker.tasks.command import run_environment

#: The container's name in the Pod.
CONTAINER = "task"
MANAGED_BY = "tickwork"
#: Labels of the Job and its Pod: the ScheduledJob (by uid), the run (by a digest of its
#: ID, which may be longer than a label value), and the attempt.
JOB_UID_LABEL = "tickwork.dev/scheduledjob-uid"
RUN_LABEL = "tickwork.dev/run"
ATTEMPT_LABEL = "tickwork.dev/attempt"
#: Annotations with what the labels cannot hold.
RUN_ID_ANNOTATION = "tickwork.dev/run-id"
JOB_ANNOTATION = "tickwork.dev/scheduledjob"
_NAME_LIMIT = 63  # the Pods' job-name label holds the Job's name
_UNSAFE = re.compile(r"[^a-z0-9-]+")


def run_digest(run_id: str) -> str:
    """A short stable digest of a run ID: a label value and part of the Job's name."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:16]


def job_name(owner: str, run_id: str, attempt: int) -> str:
    """``<owner>-<digest>-<attempt>``, at most 63 characters; the same for the same
    attempt of the same run, whoever computes it."""
    suffix = f"-{run_digest(run_id)[:10]}-{attempt}"
    prefix = _UNSAFE.sub("-", owner.lower())[: _NAME_LIMIT - len(suffix)].strip("-")
    return f"{prefix or 'run'}{suffix}"


@dataclass(frozen=True)
class Owner:
    """The ScheduledJob a Job belongs to (its ownerReference)."""

    name: str
    uid: str


def build_job(
    task: ContainerTask,
    run: RunContext,
    *,
    owner: Owner,
    timeout_seconds: int,
    ttl_seconds: int,
) -> dict[str, Any]:
    """The Job of attempt ``run.attempt``."""
    labels = {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        JOB_UID_LABEL: owner.uid,
        RUN_LABEL: run_digest(run.run_id),
        ATTEMPT_LABEL: str(run.attempt),
    }
    annotations = {RUN_ID_ANNOTATION: run.run_id, JOB_ANNOTATION: owner.name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(owner.name, run.run_id, run.attempt),
            "namespace": run.namespace,
            "labels": labels,
            "annotations": annotations,
            # No blockOwnerDeletion: that would need the right to update the owner's
            # finalizers; the garbage collector deletes the Job with its ScheduledJob anyway.
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": timeout_seconds,
            "ttlSecondsAfterFinished": ttl_seconds,
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": _pod_spec(task, run),
            },
        },
    }


def _pod_spec(task: ContainerTask, run: RunContext) -> dict[str, Any]:
    settings = task.security_context
    container = _container(task, CONTAINER, _environment(task.env, run), settings)
    if task.image_pull_policy is not None:
        container["imagePullPolicy"] = task.image_pull_policy.value
    inits = [
        _container(init, init.name, _environment(init.env, run), settings)
        for init in task.init_containers
    ]
    if task.resources is not None:  # the init containers' too: the Pod reserves no more
        wanted = {"requests": task.resources.requests, "limits": task.resources.limits}
        resources = {key: dict(value) for key, value in wanted.items() if value}
        for each in (container, *inits):
            each["resources"] = resources
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        # The token only where the spec names an account: that is what it is for.
        "automountServiceAccountToken": task.service_account_name is not None,
        "securityContext": _pod_security(settings),
        "containers": [container],
    }
    optional: dict[str, Any] = {
        "initContainers": inits,
        "volumes": [volume.to_wire() for volume in task.volumes],
        "imagePullSecrets": [secret.to_wire() for secret in task.image_pull_secrets],
        "serviceAccountName": task.service_account_name,
        "nodeSelector": dict(task.node_selector),
        "tolerations": [t.to_wire() for t in task.tolerations],
        "affinity": task.affinity.to_wire() if task.affinity is not None else None,
    }
    spec.update({key: value for key, value in optional.items() if value})
    return spec


def _pod_security(settings: ContainerSecurity | None) -> dict[str, Any]:
    """Restricted unless the spec relaxes it; the groups the spec names."""
    pod: dict[str, Any] = {
        "runAsNonRoot": settings.run_as_non_root if settings else True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if settings is None:
        return pod
    named = {
        "runAsUser": settings.run_as_user,
        "runAsGroup": settings.run_as_group,
        "fsGroup": settings.fs_group,
    }
    pod.update({key: value for key, value in named.items() if value is not None})
    if settings.supplemental_groups:
        pod["supplementalGroups"] = list(settings.supplemental_groups)
    return pod


def _container(
    given: ContainerTask | InitContainer,
    name: str,
    env: list[dict[str, Any]],
    settings: ContainerSecurity | None,
) -> dict[str, Any]:
    """A container of the Pod, the task's or an init container, with the task's
    security ``settings`` (the caller adds the task's resources)."""
    container: dict[str, Any] = {
        "name": name,
        "image": given.image,
        "env": env,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": bool(settings and settings.read_only_root_filesystem),
        },
    }
    if given.command:
        container["command"] = list(given.command)
    if given.args:
        container["args"] = list(given.args)
    if isinstance(given, InitContainer) and given.image_pull_policy is not None:
        container["imagePullPolicy"] = given.image_pull_policy.value
    if given.env_from:
        container["envFrom"] = [source.to_wire() for source in given.env_from]
    if given.volume_mounts:
        container["volumeMounts"] = [mount.to_wire() for mount in given.volume_mounts]
    return container


def _environment(variables: list[ContainerEnvVar], run: RunContext) -> list[dict[str, Any]]:
    """The spec's variables, then the run's (which win, as for command tasks)."""
    own = run_environment(run)
    env: list[dict[str, Any]] = [var.to_wire() for var in variables if var.name not in own]
    for item in env:
        if "valueFrom" in item:
            item.pop("value", None)
    env.extend({"name": name, "value": value} for name, value in own.items())
    return env


# -- reading a Job ---------------------------------------------------------------


@dataclass(frozen=True)
class JobEnd:
    """How a finished Job ended."""

    succeeded: bool
    reason: str
    """The condition's reason: Completions reached, BackoffLimitExceeded, DeadlineExceeded..."""
    message: str


def job_end(job: dict[str, Any]) -> JobEnd | None:
    """The Job's end, or None while it runs. Only Complete and Failed count: the
    interim SuccessCriteriaMet and FailureTarget come before the Pods have stopped."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "Failed"):
            return JobEnd(
                succeeded=condition["type"] == "Complete",
                reason=condition.get("reason") or "",
                message=condition.get("message") or "",
            )
    return None


def timed_out(end: JobEnd) -> bool:
    return not end.succeeded and end.reason == "DeadlineExceeded"


def exit_code(pod: dict[str, Any]) -> int | None:
    """The task container's exit code, once it has terminated."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated is not None:
                return int(terminated.get("exitCode", -1))
    return None


def belongs_to(job: dict[str, Any], run_id: str, owner_uid: str) -> bool:
    """The Job is one of this run's (not another's that shares the digest)."""
    metadata = job.get("metadata") or {}
    return (metadata.get("annotations") or {}).get(RUN_ID_ANNOTATION) == run_id and any(
        ref.get("uid") == owner_uid for ref in metadata.get("ownerReferences") or []
    )


def attempt_of(job: dict[str, Any]) -> int:
    try:
        return int(((job.get("metadata") or {}).get("labels") or {}).get(ATTEMPT_LABEL, 0))
    except ValueError:
        return 0


def to_adopt(jobs: list[dict[str, Any]], run_id: str, owner_uid: str) -> dict[str, Any] | None:
    """Among the Jobs of a run, one an attempt takes over instead of creating its own:
    one still running or that succeeded (an earlier attempt whose worker died, so the
    run does not execute twice), the latest attempt first. Failed Jobs and Jobs being
    deleted are not taken: the attempt makes its own."""
    candidates = [
        job
        for job in jobs
        if belongs_to(job, run_id, owner_uid)
        and not (job.get("metadata") or {}).get("deletionTimestamp")
        and not ((end := job_end(job)) is not None and not end.succeeded)
    ]
    return max(candidates, key=attempt_of, default=None)
