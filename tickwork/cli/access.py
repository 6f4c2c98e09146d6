"""The CLI's reach into Kubernetes: the user's own kubeconfig and RBAC, nothing else."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch
from kubernetes.config.config_exception import ConfigException

from tickwork.api import models

#: Jobs as the API server returns them (named here: ``Jobs.list`` hides the builtin in
#: the class's scope).
JobList = list[dict[str, Any]]


class CliError(Exception):
    """A message for the user; printed without a traceback, exit status 1."""


class ConflictError(CliError):
    """A conditional write lost to another (409): read again and retry."""


class Jobs:
    """ScheduledJobs in one namespace (or, for listing, every namespace)."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.api = k8s.CustomObjectsApi(api)
        self.namespace = namespace

    def _call(self, what: str, method: str, *args: Any, **params: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(self.api, method)(
                models.GROUP, models.VERSION, *args, **params
            )
        except k8s.ApiException as exc:
            if exc.status == 404:  # noqa: PLR2004 - HTTP not found
                raise CliError(f'{what} not found in namespace "{self.namespace}"') from None
            if exc.status == 403:  # noqa: PLR2004 - HTTP forbidden
                raise CliError(f"not allowed: {exc.reason}") from None
            if exc.status == 409:  # noqa: PLR2004 - HTTP conflict
                raise ConflictError(f"{what} changed meanwhile") from None
            raise CliError(f"the API server said {exc.status} {exc.reason}") from None
        return result

    def get(self, name: str) -> dict[str, Any]:
        return self._call(
            f'scheduledjob "{name}"',
            "get_namespaced_custom_object",
            self.namespace,
            models.PLURAL,
            name,
        )

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            f'scheduledjob "{name}"',
            "patch_namespaced_custom_object",
            self.namespace,
            models.PLURAL,
            name,
            body,
        )

    def list(self, *, all_namespaces: bool = False, selector: str = "") -> JobList:
        """Every job the user may list (with the labels ``selector`` asks for), sorted
        as kubectl sorts (namespace, name)."""
        return self.listed(all_namespaces=all_namespaces, selector=selector)[0]

    def listed(self, *, all_namespaces: bool = False, selector: str = "") -> tuple[JobList, str]:
        """:meth:`list`, and the resourceVersion of the list (where a watch goes on)."""
        found = self._call(
            "scheduledjobs", *self._where(all_namespaces=all_namespaces), label_selector=selector
        )
        items: JobList = found.get("items") or []
        ordered = sorted(
            items, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"])
        )
        return ordered, str((found.get("metadata") or {}).get("resourceVersion") or "")

    def _where(self, *, all_namespaces: bool) -> tuple[str, ...]:
        if all_namespaces:
            return ("list_cluster_custom_object", models.PLURAL)
        return ("list_namespaced_custom_object", self.namespace, models.PLURAL)

    def watch(
        self, version: str, *, all_namespaces: bool = False, selector: str = ""
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Changes of the jobs :meth:`listed` returned at ``version``, as (event type,
        job), until interrupted: a watch the API server ends goes on where it was; one
        whose version expired (410) lists again and goes on from there (the list's jobs
        come as ``ADDED``)."""
        method, *where = self._where(all_namespaces=all_namespaces)
        while True:
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                getattr(self.api, method),
                models.GROUP,
                models.VERSION,
                *where,
                label_selector=selector,
                resource_version=version,
            )
            expired = False
            try:
                for event in stream:
                    job = event["object"]
                    if event["type"] == "ERROR":
                        expired = _expired(job.get("code"), job.get("reason"))
                        break
                    version = job["metadata"].get("resourceVersion") or version
                    yield event["type"], job
            except k8s.ApiException as exc:
                expired = _expired(exc.status, exc.reason)
            if expired:
                jobs, version = self.listed(all_namespaces=all_namespaces, selector=selector)
                for job in jobs:
                    yield "ADDED", job


def _expired(status: Any, reason: Any) -> bool:
    """True for a watch whose version expired (410 Gone: list again); any other
    end of a watch is the user's to hear of."""
    if status == 410:  # noqa: PLR2004 - HTTP gone
        return True
    raise CliError(f"the watch ended: {status} {reason}")


def connect(args: argparse.Namespace) -> Jobs:
    """Jobs of the namespace kubectl would use: ``-n``, else the context's, else default."""
    try:
        k8s_config.load_kube_config(config_file=args.kubeconfig, context=args.context)  # type: ignore[no-untyped-call]
        _, active = k8s_config.list_kube_config_contexts(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    except (ConfigException, FileNotFoundError) as exc:
        raise CliError(f"no usable kubeconfig: {exc}") from None
    if args.context:
        contexts, _ = k8s_config.list_kube_config_contexts(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
        active = next((c for c in contexts if c.get("name") == args.context), active)
    namespace = args.namespace or (active or {}).get("context", {}).get("namespace") or "default"
    return Jobs(k8s.ApiClient(), namespace)
