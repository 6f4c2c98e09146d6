"""Values a task takes from Secrets (``valueFrom.secretKeyRef``, ``bodyFrom``).

A reference names a Secret and a key and nothing else: the Secret is read from the
job's own namespace, so a tenant can reach no other namespace's Secrets through a
job, whatever the worker's RBAC. Secrets are read when an attempt starts (a rotated
Secret serves the next attempt) and kept for that attempt only. Every value read is
remembered so that :meth:`SecretValues.redact` can take it out of any text headed for
status, Events, logs or the dead-letter queue — a target that echoes a token back
in its answer does not get it written into status.

A value leaves in no form: redaction looks for it with and without surrounding
whitespace (``kubectl create secret --from-file`` keeps the file's last newline),
line by line, and as libraries and servers print it — Python's ``repr`` of the
text and of its bytes, JSON and HTML escaping, percent-encoding.
Where a task cut a text (the first bytes of an answer, the last of an output), a
piece of a value at the cut is taken out too (:meth:`SecretValues.redact_edges`).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
import urllib.parse

from tickwork.api.models import SecretKeyRef
from tickwork.core.errors import PermanentTaskError
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork_worker.tasks.base import RetryableTaskError

REDACTED = "[redacted]"
_FORBIDDEN = 403
_SHORTEST_REDACTED = 4
"""Shorter values are not searched for in texts (they would mangle them, and a secret
that short protects nothing)."""
_SHORTEST_PIECE = 6
"""A piece of a value at a cut is taken out from this length on (shorter pieces are
too likely to be ordinary text, and tell little of the value)."""
_PERCENT = re.compile(r"%[0-9A-F]{2}")


def forms(value: str) -> frozenset[str]:
    """Every form in which ``value`` may show up in a text, long enough to look for."""
    bases = {value, value.strip(), *(line.strip() for line in value.splitlines())}
    found: set[str] = set()
    for base in bases:
        quoted = urllib.parse.quote(base, safe="")
        found |= {
            base,
            repr(base)[1:-1],
            str(base.encode())[2:-1],
            json.dumps(base)[1:-1],
            json.dumps(base, ensure_ascii=False)[1:-1],
            html.escape(base),
            quoted,
            urllib.parse.quote(base),
            urllib.parse.quote_plus(base),
            _PERCENT.sub(lambda m: m.group().lower(), quoted),
        }
    return frozenset(form for form in found if len(form) >= _SHORTEST_REDACTED)


class SecretValues:
    """The Secrets of one attempt of a job in ``namespace``."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self._kube = kube
        self.namespace = namespace
        self._secrets: dict[str, dict[str, str]] = {}
        self._forms: set[str] = set()
        self._binary: set[str] = set()
        """Secrets with a value that is not text (left out of ``_secrets``)."""

    async def read(self, ref: SecretKeyRef) -> str:
        """The value of ``ref``; a task error that names the Secret, never its content."""
        data = self._secrets.get(ref.name)
        if data is None:
            data = self._secrets[ref.name] = await self._fetch(ref.name)
        if ref.key not in data:
            raise PermanentTaskError(f"Secret {self.namespace}/{ref.name} has no key {ref.key!r}")
        value = data[ref.key]
        self._forms |= forms(value)
        return value

    async def read_whole(self, name: str) -> bool:
        """Every value of the Secret ``name`` taken in for redaction (an envFrom or a
        volume hands the container all of them); False if one is binary, which
        cannot be looked for in a text."""
        data = self._secrets.get(name)
        if data is None:
            data = self._secrets[name] = await self._fetch(name)
        for value in data.values():
            self._forms |= forms(value)
        return name not in self._binary

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
                    "value worker.secrets.enabled=true and the namespace among "
                    "watchNamespaces (or, with every namespace watched, among "
                    "worker.secrets.namespaces)"
                ) from None
            raise RetryableTaskError(f"cannot read {where}: {exc.reason}") from None
        out: dict[str, str] = {}
        for key, encoded in (secret.get("data") or {}).items():
            try:
                out[key] = base64.b64decode(encoded, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                self._binary.add(name)
                continue  # binary data cannot be a header or an env value; "no key"
        for key, text in (secret.get("stringData") or {}).items():
            out.setdefault(key, text)
        return out

    def redact(self, text: str | None) -> str | None:
        """``text`` with every value read in this attempt, in any of its forms,
        replaced by [redacted]."""
        if not text:
            return text
        for form in sorted(self._forms, key=len, reverse=True):
            text = text.replace(form, REDACTED)
        return text

    def redact_edges(self, text: str, *, start: bool = False, end: bool = False) -> str:
        """``text``, cut from something longer at its ``start`` or ``end``, without a
        piece of a value that the cut left there (the values themselves go later, in
        :meth:`redact`)."""
        for form in sorted(self._forms, key=len, reverse=True):
            shortest = min(_SHORTEST_PIECE, len(form))
            sizes = range(min(len(form), len(text)), shortest - 1, -1)
            if end:
                size = next((n for n in sizes if text.endswith(form[:n])), 0)
                text = text[:-size] + REDACTED if size else text
            if start:
                size = next((n for n in sizes if text.startswith(form[-n:])), 0)
                text = REDACTED + text[size:] if size else text
        return text
