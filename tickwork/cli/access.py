"""The CLI's reach into Kubernetes: the user's own kubeconfig and RBAC, nothing else."""

from __future__ import annotations

import argparse
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from tickwork.api import models


class CliError(Exception):
    """A message for the user; printed without a traceback, exit status 1."""


class ConflictError(CliError):
    """A conditional write lost to another (409): read again and retry."""


class Jobs:
    """ScheduledJobs in one namespace (or, for listing, every namespace)."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.api = k8s.CustomObjectsApi(api)
        self.namespace = namespace

    def _call(self, what: str, method: str, *args: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(self.api, method)(models.GROUP, models.VERSION, *args)
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

    def list(self, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        """Every job the user may list, sorted as kubectl sorts (namespace, name)."""
        if all_namespaces:
            found = self._call("scheduledjobs", "list_cluster_custom_object", models.PLURAL)
        else:
            found = self._call(
                "scheduledjobs", "list_namespaced_custom_object", self.namespace, models.PLURAL
            )
        items: list[dict[str, Any]] = found.get("items") or []
        return sorted(
            items, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"])
        )


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
