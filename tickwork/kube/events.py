"""Kubernetes Events about ScheduledJobs, as ``kubectl describe`` shows them.

Repeated identical Events (same object, reason and message) are folded in
memory for a while instead of flooding etcd — the same courtesy client-go's
recorder extends. Posting an Event never fails the caller: an Event is a
notice, and losing one must not lose a run.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from tickwork.api import models
from tickwork.core.text import cap
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.status import timestamp

logger = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
_FOLD_SECONDS = 600.0
_MAX_REMEMBERED = 10_000


@dataclass(frozen=True)
class JobRef:
    namespace: str
    name: str
    uid: str


def build_event(
    job: JobRef,
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    instance: str,
    now: dt.datetime,
) -> dict[str, Any]:
    """A core/v1 Event body about ``job``."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{job.name}.{secrets.token_hex(8)}",
            "namespace": job.namespace,
        },
        "involvedObject": {
            "apiVersion": models.API_VERSION,
            "kind": models.KIND,
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.uid,
        },
        "type": type_,
        "reason": reason,
        "message": cap(message),
        "source": {"component": component},
        "reportingComponent": f"tickwork.dev/{component}",
        "reportingInstance": instance[:128],
        "firstTimestamp": timestamp(now),
        "lastTimestamp": timestamp(now),
        "count": 1,
    }


class EventRecorder:
    """Posts Events, folding repeats of the same one within ten minutes."""

    def __init__(self, client: KubeClient, *, component: str, instance: str) -> None:
        self._client = client
        self._component = component
        self._instance = instance
        self._recent: dict[tuple[str, str, str, str], float] = {}

    async def post(self, job: JobRef, *, type_: str, reason: str, message: str) -> None:
        key = (job.namespace, job.uid, reason, message)
        now = time.monotonic()
        if now - self._recent.get(key, -_FOLD_SECONDS) < _FOLD_SECONDS:
            return
        if len(self._recent) > _MAX_REMEMBERED:
            self._recent.clear()
        self._recent[key] = now
        body = build_event(
            job,
            type_=type_,
            reason=reason,
            message=message,
            component=self._component,
            instance=self._instance,
            now=dt.datetime.now(dt.UTC),
        )
        try:
            await self._client.create_event(job.namespace, body)
        except KubeApiError as exc:
            logger.warning(
                "could not post event %s for %s/%s: %s", reason, job.namespace, job.name, exc
            )
