"""How a worker's copy keeps one job: what a run reads of it, packed small.

Objects are kept as what a run reads of them (:func:`for_a_run`: metadata without
``managedFields``, the spec, and of status only the phase, which runs ended and
how, the dead letters and the cancel requests), as compact JSON deflated against a
preset dictionary of what every ScheduledJob spells out (its keys, condition
reasons, the API version), and parsed when a run asks for one: ~0.2 KB a job with a
full history instead of 2 to 8 KB. The initial list is encoded page by page, so
100,000 jobs are never held as parsed JSON at once (benchmarks/rounds.md, "The
worker's job cache").

The uid is kept in 16 bytes and the resourceVersion as an integer where they are
what the API server makes; both compare equal as the text they came from.
"""

from __future__ import annotations

import json
import sys
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from tickwork.api import models
from tickwork.core.annotations import RUN_NOW_ANNOTATION


def _packed_uid(uid: str) -> bytes | str:
    """A uid in 16 bytes (49 of RSS instead of 85) when it is a UUID, as the API
    server makes them; any other text as it is."""
    try:
        packed = uuid.UUID(uid)
    except ValueError:
        return uid
    return packed.bytes if str(packed) == uid else uid


def comparable(version: str) -> int | None:
    """A resourceVersion as the integer KEP-5504 compares (a positive integer without
    leading zeros), else None."""
    if version.isdigit() and version[0] != "0":
        return int(version)
    return None


def _packed_version(version: str) -> int | str:
    """A resourceVersion as an int when it is one written canonically (etcd's are),
    else as it is: compared for equality only here."""
    number = comparable(version)
    return version if number is None else number


@dataclass(frozen=True, slots=True)
class Cached:
    """One job of the copy (its RSS per job: benchmarks/results/worker_memory.json)."""

    packed_uid: bytes | str
    packed_version: int | str
    generation: int
    body: bytes
    delivered: int = 0
    """:meth:`JobCache.mark` when the list or the watch last brought the job."""
    awaiting: str | None = None
    """A copy read or written meanwhile that the watch has not brought yet: its
    resourceVersion. The watch's events of the job before it are older: skipped."""

    @property
    def uid(self) -> str:
        packed = self.packed_uid
        return str(uuid.UUID(bytes=packed)) if isinstance(packed, bytes) else packed

    @property
    def resource_version(self) -> str:
        return str(self.packed_version)


class Jobs:
    """The cached jobs by (namespace, name), held as one dict of names per namespace:
    no key tuple per job (56 bytes each at 100,000 jobs)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Cached]] = {}

    def get(self, key: tuple[str, str]) -> Cached | None:
        names = self._by_namespace.get(key[0])
        return None if names is None else names.get(key[1])

    def __getitem__(self, key: tuple[str, str]) -> Cached:
        return self._by_namespace[key[0]][key[1]]

    def __setitem__(self, key: tuple[str, str], cached: Cached) -> None:
        self._by_namespace.setdefault(sys.intern(key[0]), {})[key[1]] = cached

    def __delitem__(self, key: tuple[str, str]) -> None:
        names = self._by_namespace[key[0]]
        del names[key[1]]
        if not names:
            del self._by_namespace[key[0]]

    def __len__(self) -> int:
        return sum(len(names) for names in self._by_namespace.values())

    def count(self, namespace: str) -> int:
        return len(self._by_namespace.get(namespace, ()))

    def keys(self, namespace: str | None = None) -> list[tuple[str, str]]:
        """Every key (of ``namespace`` only, if given)."""
        spaces = [namespace] if namespace is not None else list(self._by_namespace)
        return [(space, name) for space in spaces for name in self._by_namespace.get(space, {})]


def identity(obj: dict[str, Any]) -> tuple[tuple[str, str], str, str, int]:
    metadata = obj.get("metadata") or {}
    # A namespace is shared by many jobs: one string for all of them.
    key = (sys.intern(str(metadata.get("namespace", ""))), str(metadata.get("name", "")))
    return (
        key,
        str(metadata.get("uid", "")),
        str(metadata.get("resourceVersion") or ""),
        int(metadata.get("generation") or 0),
    )


#: What most ScheduledJobs' JSON spells out, as a preset dictionary for deflate: a
#: job's compact JSON is mostly these keys and values (zlib looks back into it, the
#: most common strings last).
_DICTIONARY = json.dumps(
    {
        "status": {
            "cancelRequests": [{"id": "", "requestedAt": "", "reason": ""}],
            "deadRuns": [{"attempts": 3, "failedAt": "", "id": "", "scheduledAt": ""}],
            "phase": "Scheduled",
            "runs": [{"id": "", "outcome": "Failed", "scheduledAt": ""}],
            "lastRun": {"id": "", "outcome": "Succeeded", "scheduledAt": ""},
        },
        "spec": {
            "concurrencyPolicy": "Skip",
            "retry": {"backoffSeconds": 10, "maxAttempts": 3},
            "suspend": False,
            "timeoutSeconds": 300,
            "startingDeadlineSeconds": 0,
            "history": {"failedRuns": 3, "successfulRuns": 3},
            "timeZone": "UTC",
            "runAt": "",
            "task": {
                "echo": {"message": ""},
                "command": {"args": []},
                "python": {"callable": "", "kwargs": {}},
                "http": {"body": "", "headers": {}, "method": "POST", "url": "https://"},
            },
            "schedule": "0 * * * *",
        },
        "metadata": {
            "annotations": {RUN_NOW_ANNOTATION: ""},
            "labels": {},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "name": "",
            "namespace": "default",
            "resourceVersion": "",
            "uid": "00000000-0000-0000-0000-000000000000",
        },
        "apiVersion": models.API_VERSION,
        "kind": models.KIND,
    },
    separators=(",", ":"),
).encode()


#: Raw deflate with a 4 KiB window (the dictionary fits; a job's JSON seldom repeats
#: itself further back): tens of microseconds a job (benchmarks/rounds.md).
_WBITS = -12


def encode(obj: dict[str, Any]) -> bytes:
    """``obj`` as the cache keeps it: what a run reads of it, compact JSON, deflated."""
    compact = {**for_a_run(obj), "apiVersion": models.API_VERSION, "kind": models.KIND}
    packer = zlib.compressobj(6, zlib.DEFLATED, _WBITS, 5, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY)
    raw = json.dumps(compact, separators=(",", ":")).encode()
    return packer.compress(raw) + packer.flush()


def decode(body: bytes) -> dict[str, Any]:
    unpacker = zlib.decompressobj(_WBITS, _DICTIONARY)
    found: dict[str, Any] = json.loads(unpacker.decompress(body) + unpacker.flush())
    return found


#: Of a finished run's record, what says which run it was and how it ended (the
#: fields a record cannot be without; ``why_skip`` reads the ID and the outcome), and
#: its place in the history (``JobAccess.finish`` writes the next record over the oldest).
_ENDED = ("id", "scheduledAt", "outcome", "slot")
#: Of a dead letter, what says which run it is (``JobAccess.finish`` counts them).
_DEAD = ("id", "scheduledAt", "failedAt", "attempts")


def for_a_run(obj: dict[str, Any]) -> dict[str, Any]:
    """What a worker reads of a job to start, skip or record a run: its metadata
    without ``managedFields`` (often most of the object), its spec, and of status the
    phase (a pause), the runs that ended (``lastRun``, ``runs``: ID and outcome, so a
    redelivered run that finished is not run again), the dead letters (their IDs) and
    the operator's cancel requests. The rest of status — the history's results, times
    and parameters, ``nextRuns``, conditions — is the operator's and the user's, and
    with a full history it is most of a job. Dropped page by page, so a list of
    100,000 jobs is never held whole."""
    metadata = dict(obj.get("metadata") or {})
    metadata.pop("managedFields", None)
    status = obj.get("status") or {}
    kept: dict[str, Any] = {}
    if "phase" in status:
        kept["phase"] = status["phase"]
    if isinstance(status.get("lastRun"), dict):
        kept["lastRun"] = _only(status["lastRun"], _ENDED)
    for key, fields in (("runs", _ENDED), ("deadRuns", _DEAD)):
        if isinstance(status.get(key), list) and status[key]:
            kept[key] = [_only(item, fields) for item in status[key]]
    if status.get("cancelRequests"):
        kept["cancelRequests"] = status["cancelRequests"]
    return {**obj, "metadata": metadata, "status": kept}


def _only(item: Any, fields: tuple[str, ...]) -> Any:
    """``item``'s ``fields`` (a mangled item is kept as it is: validation says so)."""
    if not isinstance(item, dict):
        return item
    return {key: item[key] for key in fields if key in item}


def entry(
    obj: dict[str, Any], *, delivered: int, awaiting: str | None = None
) -> tuple[tuple[str, str], Cached]:
    key, uid, version, generation = identity(obj)
    return key, Cached(
        packed_uid=_packed_uid(uid),
        packed_version=_packed_version(version),
        generation=generation,
        body=encode(obj),
        delivered=delivered,
        awaiting=awaiting,
    )
