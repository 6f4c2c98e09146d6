"""Values a task takes from Secrets (``valueFrom.secretKeyRef``, ``bodyFrom``).

A reference names a Secret and a key and nothing else: the Secret is read from the
job's own namespace, so a tenant can reach no other namespace's Secrets through a
job, whatever the worker's RBAC. Secrets are read when an attempt starts (a rotated
Secret serves the next attempt) and kept for that attempt only. Every value read is
remembered so that :meth:`SecretValues.redact` can take it out of any text headed for
status, Events, logs or the dead-letter queue — a target that echoes a token back
in its answer does not get it written into status.
"""

from __future__ import annotations

import base64
import binascii

from tickwork.api.models import SecretKeyRef
from tickwork.core.errors import PermanentTaskError
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork_worker.tasks.base import RetryableTaskError

REDACTED = "[redacted]"
_FORBIDDEN = 403
_SHORTEST_REDACTED = 4
"""Shorter values are not searched for in texts (they would mangle them, and a secret
that short protects nothing)."""


class SecretValues:
    """The Secrets of one attempt of a job in ``namespace``."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self._kube = kube
        self.namespace = namespace
        self._secrets: dict[str, dict[str, str]] = {}
        self._values: set[str] = set()

    async def read(self, ref: SecretKeyRef) -> str:
        """The value of ``ref``; a task error that names the Secret, never its content."""
        data = self._secrets.get(ref.name)
        if data is None:
            data = self._secrets[ref.name] = await self._fetch(ref.name)
        if ref.key not in data:
            raise PermanentTaskError(f"Secret {self.namespace}/{ref.name} has no key {ref.key!r}")
        value = data[ref.key]
        self._values.add(value)
        return value

    async def _fetch(self, name: str) -> dict[str, str]:
        try:
            secret = await self._kube.get_secret(self.namespace, name)
        except KubeApiError as exc:
            where = f"Secret {self.namespace}/{name}"
            if exc.not_found:
                # It may be created moments from now (by a secrets operator): retry.
                raise RetryableTaskError(f"{where} not found") from None
            if exc.status == _FORBIDDEN:
                raise PermanentTaskError(
                    f"the worker may not read {where}: Secrets by reference need the Helm "
                    "value worker.secrets.enabled=true (RBAC: get secrets)"
                ) from None
            raise RetryableTaskError(f"cannot read {where}: {exc.reason}") from None
        out: dict[str, str] = {}
        for key, encoded in (secret.get("data") or {}).items():
            try:
                out[key] = base64.b64decode(encoded, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue  # binary data cannot be a header or an env value; "no key"
        for key, text in (secret.get("stringData") or {}).items():
            out.setdefault(key, text)
        return out

    def redact(self, text: str | None) -> str | None:
        """``text`` with every value read in this attempt replaced by [redacted]."""
        if not text:
            return text
        for value in sorted(self._values, key=len, reverse=True):
            if len(value) >= _SHORTEST_REDACTED:
                text = text.replace(value, REDACTED)
        return text
