"""``tickwork import cronjob/NAME``: a CronJob as a ScheduledJob with a container task,
and what of it could not be carried over.

A pure conversion (:func:`from_cronjob`): the CronJob's schedule, time zone, suspend,
overlap policy (CronJob's default, ``Allow``, spelled out), starting deadline, history
limits, retries (``backoffLimit`` + 1 attempts) and deadline (``activeDeadlineSeconds``)
become the job's; its Pod template becomes the task (:mod:`tickwork.cli.podtemplate`).
Everything else is named in :attr:`Imported.left_out`, never dropped quietly; a
CronJob whose result the ScheduledJob schema refuses is not imported at all.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client as k8s
from pydantic import ValidationError

from tickwork.api import models
from tickwork.cli.access import CliError, Jobs, connect
from tickwork.cli.podtemplate import container_task

#: Where a ScheduledJob says which CronJob it came from.
IMPORTED_FROM = "tickwork.dev/imported-from"
_JOB_KEYS = {"template", "backoffLimit", "activeDeadlineSeconds"}
#: Fields the API server fills in every Job template: left out only if set otherwise.
_JOB_DEFAULTS = {
    "parallelism": 1,
    "completions": 1,
    "completionMode": "NonIndexed",
    "suspend": False,
    "podReplacementPolicy": "TerminatingOrFailed",
    "manualSelector": False,
}
_MAX_ATTEMPTS = 20
_MAX_TIMEOUT = 86400
_MIN_DEADLINE = 10
_MAX_HISTORY = 20


@dataclass
class Imported:
    """A CronJob as a ScheduledJob: the manifest, and what did not carry over."""

    source: str
    """``namespace/name`` of the CronJob."""
    job: dict[str, Any] | None
    """The ScheduledJob (None: the CronJob cannot be imported, ``left_out`` says why)."""
    left_out: list[str] = field(default_factory=list)


def _zone_prefix(schedule: str) -> tuple[str, str | None]:
    """A schedule's ``CRON_TZ=``/``TZ=`` prefix taken off, and its zone."""
    for prefix in ("CRON_TZ=", "TZ="):
        if schedule.startswith(prefix):
            zone, _, rest = schedule[len(prefix) :].partition(" ")
            return rest.strip(), zone
    return schedule, None


def _spec(cron: dict[str, Any], task: dict[str, Any], left_out: list[str]) -> dict[str, Any]:
    schedule, zone = _zone_prefix(str(cron.get("schedule") or ""))
    spec: dict[str, Any] = {"schedule": schedule}
    zone = cron.get("timeZone") or zone
    if zone:
        spec["timeZone"] = zone
    spec["suspend"] = bool(cron.get("suspend", False))
    spec["concurrencyPolicy"] = cron.get("concurrencyPolicy") or "Allow"  # CronJob's default
    deadline = cron.get("startingDeadlineSeconds")
    if deadline is not None:
        if deadline < _MIN_DEADLINE:
            left_out.append(f"startingDeadlineSeconds {deadline}: raised to {_MIN_DEADLINE}")
        spec["startingDeadlineSeconds"] = max(int(deadline), _MIN_DEADLINE)
    history = {
        "successfulRuns": min(int(cron.get("successfulJobsHistoryLimit", 3)), _MAX_HISTORY),
        "failedRuns": min(int(cron.get("failedJobsHistoryLimit", 1)), _MAX_HISTORY),
    }
    spec["history"] = history
    job = (cron.get("jobTemplate") or {}).get("spec") or {}
    left_out.extend(
        f"the Job's {key}"
        for key in sorted(set(job) - _JOB_KEYS)
        if key not in _JOB_DEFAULTS or job[key] != _JOB_DEFAULTS[key]
    )
    attempts = int(job.get("backoffLimit", 6)) + 1  # the Job's default, 6
    if attempts > _MAX_ATTEMPTS:
        left_out.append(f"backoffLimit {attempts - 1}: {_MAX_ATTEMPTS} attempts at most")
    spec["retry"] = {"maxAttempts": min(attempts, _MAX_ATTEMPTS)}
    if job.get("activeDeadlineSeconds"):
        timeout = int(job["activeDeadlineSeconds"])
        if timeout > _MAX_TIMEOUT:
            left_out.append(f"activeDeadlineSeconds {timeout}: {_MAX_TIMEOUT} at most")
        spec["timeoutSeconds"] = min(timeout, _MAX_TIMEOUT)
    spec["task"] = task
    return spec


def from_cronjob(cronjob: dict[str, Any]) -> Imported:
    """``cronjob`` (a ``batch/v1`` CronJob as the API server returns it) as a
    ScheduledJob of the same name and namespace."""
    meta = cronjob.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    left_out: list[str] = []
    cron = cronjob.get("spec") or {}
    template = ((cron.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    task = container_task(template, left_out)
    source = f"{namespace}/{name}"
    if task is None:
        return Imported(source, None, left_out)
    spec = _spec(cron, task, left_out)
    try:
        models.ScheduledJobSpec.model_validate(spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        left_out.append(f"not imported: spec.{where}: {first['msg'].removeprefix('Value error, ')}")
        return Imported(source, None, left_out)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "annotations": {IMPORTED_FROM: f"cronjob/{name}"},
    }
    if meta.get("labels"):
        metadata["labels"] = dict(meta["labels"])
    job = {
        "apiVersion": models.API_VERSION,
        "kind": models.KIND,
        "metadata": metadata,
        "spec": spec,
    }
    return Imported(source, job, left_out)


def _names(targets: list[str]) -> list[str]:
    """CronJob names from ``cronjob/NAME`` (kubectl's forms) or a bare NAME."""
    names = []
    for target in targets:
        kind, slash, name = target.rpartition("/")
        if slash and kind not in ("cronjob", "cronjobs", "cronjob.batch", "cronjobs.batch"):
            raise CliError(f"{target!r}: only CronJobs are imported (cronjob/NAME)")
        names.append(name)
    return names


def _render(results: list[Imported]) -> str:
    """The ScheduledJobs as one YAML stream for ``kubectl apply -f -``; what did not
    carry over as comments above each."""
    documents = []
    for result in results:
        lines = [f"# from cronjob {result.source}"]
        lines += [f"#   left out: {item}" for item in result.left_out]
        if result.job is not None:
            lines.append(yaml.safe_dump(result.job, sort_keys=False).rstrip())
        documents.append("\n".join(lines))
    return "\n---\n".join(documents)


def _cronjobs(batch: k8s.BatchV1Api, namespace: str, args: argparse.Namespace) -> list[Any]:
    name = ""
    try:
        if args.all:
            if args.all_namespaces:
                return list(batch.list_cron_job_for_all_namespaces().items)
            return list(batch.list_namespaced_cron_job(namespace).items)
        found = []
        for name in _names(args.targets):
            found.append(batch.read_namespaced_cron_job(name, namespace))
    except k8s.ApiException as exc:
        if exc.status == 404:  # noqa: PLR2004 - HTTP not found
            raise CliError(f'cronjob "{name}" not found in namespace "{namespace}"') from None
        raise CliError(f"the API server said {exc.status} {exc.reason}") from None
    return found


def cmd_import(args: argparse.Namespace) -> str:
    """CronJobs as ScheduledJobs: printed (the default), or created (``--apply``), the
    CronJob suspended only with ``--suspend-source``, once its ScheduledJob exists."""
    if bool(args.targets) == bool(args.all):
        raise CliError("name CronJobs (cronjob/NAME ...) or give --all")
    if args.suspend_source and not args.apply:
        raise CliError("--suspend-source needs --apply: a CronJob is suspended once its job exists")
    jobs = connect(args)
    client = jobs.api.api_client
    batch = k8s.BatchV1Api(client)
    results = [
        from_cronjob(client.sanitize_for_serialization(c))
        for c in _cronjobs(batch, jobs.namespace, args)
    ]
    if not args.apply:
        return _render(results)
    said = []
    for result in results:
        said += [f"{result.source}: left out: {item}" for item in result.left_out]
        if result.job is None:
            said.append(f"{result.source}: not imported")
            continue
        meta = result.job["metadata"]
        created = _create(jobs, result)
        said.append(created.said)
        if args.suspend_source and created.ours:
            batch.patch_namespaced_cron_job(
                meta["name"], meta["namespace"], {"spec": {"suspend": True}}
            )
            said.append(f"cronjob {result.source} suspended")
    return "\n".join(said)


@dataclass(frozen=True)
class _Created:
    said: str
    ours: bool
    """The ScheduledJob under the name is this CronJob's (created now, or before)."""


def _create(jobs: Jobs, result: Imported) -> _Created:
    """Create ``result``'s job; one that exists under the name is left as it is (and
    counts as this CronJob's only if an import of it made it)."""
    assert result.job is not None  # noqa: S101 - only imported jobs are created
    meta = result.job["metadata"]
    args = (models.GROUP, models.VERSION, meta["namespace"], models.PLURAL)
    try:
        jobs.api.create_namespaced_custom_object(*args, result.job)
    except k8s.ApiException as exc:
        if exc.status != 409:  # noqa: PLR2004 - HTTP conflict: it exists
            raise CliError(
                f"{result.source}: the API server said {exc.status} {exc.reason}"
            ) from None
        held = Jobs(jobs.api.api_client, meta["namespace"]).get(meta["name"])
        source = ((held.get("metadata") or {}).get("annotations") or {}).get(IMPORTED_FROM)
        if source == meta["annotations"][IMPORTED_FROM]:
            return _Created(f'scheduledjob "{meta["name"]}" exists (imported before)', ours=True)
        text = f'scheduledjob "{meta["name"]}" exists and is not this import: left as it is'
        return _Created(text, ours=False)
    return _Created(
        f'scheduledjob "{meta["name"]}" created from cronjob {result.source}', ours=True
    )
