"""A small asyncio client for the few Kubernetes calls Tickwork makes.

Over 400 lines: every call Tickwork makes to the API server, with the retries,
timeouts and errors they share, in one client.

Credentials come from :mod:`tickwork.kube.credentials` (the in-cluster service
account, a kubeconfig; the official ``kubernetes`` package's loaders only for what
those do not read, such as exec plugins), the transport is ``aiohttp`` — the HTTP
stack kopf already brings, and the cheapest of the four measured on a status write
(a third of httpx's CPU: benchmarks/rounds.md, "Four Kubernetes clients"). Only the calls the
operator and the worker need exist: read, list and watch ScheduledJobs, apply
their status, delete one, post an Event, read/write a Lease, and for container
tasks create, watch and delete a batch/v1 Job and read its Pod's log.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self

import aiohttp

from tickwork.api import models
from tickwork.kube.credentials import Connection, load_configuration

__all__ = ["Connection", "KubeApiError", "KubeClient", "load_configuration"]

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: Lists answered with each object's metadata only (as client-go's metadata informers ask).
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
#: Statuses that mean "not now" rather than "no": no answer, timeout, throttled.
_RETRYABLE = frozenset({0, 408, 429})
_UNAUTHORIZED = 401


_LEAKS_CLOSED_TLS = sys.version_info < (3, 12, 8) or (3, 13, 0) <= sys.version_info < (3, 13, 1)


class KubeApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status} {reason}: {message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404  # noqa: PLR2004 - HTTP status

    @property
    def unavailable(self) -> bool:
        """No answer, an overloaded or throttling server (0, 5xx, 408, 429): worth
        retrying later. Anything else (400, 403, 422) asking again cannot fix."""
        return self.status in _RETRYABLE or self.status >= 500  # noqa: PLR2004 - HTTP status

    @property
    def conflict(self) -> bool:
        return self.status == 409  # noqa: PLR2004 - HTTP status


def _raise_for_status(status: int, reason: str | None, content: bytes) -> None:
    if status < 400:  # noqa: PLR2004 - HTTP errors
        return
    try:
        details = json.loads(content)
        reason, message = details.get("reason", ""), details.get("message", "")
    except ValueError:
        message = content[:500].decode(errors="replace")
    raise KubeApiError(status, reason or "", message)


class KubeClient:
    """Async calls against one API server. Use as an async context manager."""

    def __init__(
        self,
        configuration: Connection,
        *,
        timeout_seconds: float = 30.0,
        max_connections: int = 64,
    ) -> None:
        self._configuration = configuration
        self._timeout_seconds = timeout_seconds
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self.writes = 0
        """Mutating requests sent (for the "API writes per run" figure)."""

    def _http(self) -> aiohttp.ClientSession:
        """The session, made on first use (it belongs to the running event loop)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=self._configuration.ssl_context(),
                limit=self._max_connections,
                # Keep connections across the quiet minutes between bursts of runs:
                # a fresh TLS handshake per request at the top of every minute costs
                # the API server more than the requests themselves.
                keepalive_timeout=600.0,
                # A watch cancelled mid-stream closes its TLS connection without the
                # shutdown handshake; CPython before 3.12.8 then never closes the socket
                # (python/cpython#118960), one file descriptor lost per relist. aiohttp
                # aborts such transports itself when asked (and warns if asked where
                # CPython is fixed).
                enable_cleanup_closed=_LEAKS_CLOSED_TLS,
            )
            self._session = aiohttp.ClientSession(
                self._configuration.host,
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self._timeout_seconds),
                raise_for_status=False,
                auto_decompress=True,
            )
        return self._session

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _authorization(self) -> dict[str, str]:
        return self._configuration.authorization()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> dict[str, Any]:
        payload = await self._send(
            method, path, body=body, params=params, content_type=content_type, accept=accept
        )
        result: dict[str, Any] = json.loads(payload) if payload else {}
        return result

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any,
        params: dict[str, str] | None,
        content_type: str,
        accept: str,
    ) -> bytes:
        headers = {"Accept": accept, **self._authorization()}
        content = None
        if body is not None:
            headers["Content-Type"] = content_type
            content = json.dumps(body).encode()
        if method != "GET":
            self.writes += 1
        for attempt in (1, 2):
            try:
                async with self._http().request(
                    method, path, data=content, params=params, headers=headers
                ) as response:
                    status, reason = response.status, response.reason
                    payload = await response.read()
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # A kept-alive connection the server closed meanwhile: once more,
                # on a fresh one. (Every call Tickwork makes is safe to repeat.)
                if attempt == 2:  # noqa: PLR2004 - the second try
                    raise KubeApiError(0, "Unavailable", f"{type(exc).__name__}: {exc}") from None
                continue
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise KubeApiError(0, "Unavailable", f"{type(exc).__name__}: {exc}") from None
            if status == _UNAUTHORIZED and attempt == 1:
                # A rotated service-account token: read it again, once.
                self._configuration.expire()
                headers = {**headers, **self._authorization()}
                continue
            _raise_for_status(status, reason, payload)
            return payload
        raise AssertionError("the second attempt returns or raises")  # pragma: no cover

    async def watch(
        self, path: str, params: dict[str, str], *, idle_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request, until the server ends it. ``idle_timeout``:
        longest silence tolerated (ask for bookmarks to keep a quiet watch talking)."""
        headers = {"Accept": "application/json", **self._authorization()}
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self._timeout_seconds, sock_read=idle_timeout
        )
        try:
            async with self._http().get(
                path, params={**params, "watch": "1"}, headers=headers, timeout=timeout
            ) as response:
                if response.status >= 400:  # noqa: PLR2004 - HTTP errors
                    _raise_for_status(response.status, response.reason, await response.read())
                # Lines of any length (an object may be ~1.5 MiB): split by hand rather
                # than with readline, whose buffer has a limit.
                pending = b""
                async for chunk in response.content.iter_any():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield json.loads(line)
                if pending.strip():
                    yield json.loads(pending)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeApiError(0, "Unavailable", f"{type(exc).__name__}: {exc}") from None

    # -- ScheduledJobs ----------------------------------------------------

    @staticmethod
    def _job_path(namespace: str, name: str) -> str:
        return f"{KubeClient.jobs_path(namespace)}/{name}"

    @staticmethod
    def jobs_path(namespace: str | None) -> str:
        """The ScheduledJob collection of ``namespace``, or of all namespaces for None."""
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{models.GROUP}/{models.VERSION}{where}/{models.PLURAL}"

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.request("GET", self._job_path(namespace, name))

    @staticmethod
    def calendars_path(namespace: str | None) -> str:
        """The Calendar collection of ``namespace``, or of all namespaces for None."""
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{models.GROUP}/{models.VERSION}{where}/calendars"

    async def job_metadata(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The job's metadata as it is now (None if there is no such job): a consistent
        read that API servers since 1.31 answer from their watch cache once it has
        caught up with etcd, metadata only — far cheaper than a GET of the object,
        which reads and decodes it from etcd."""
        found, _ = await self.job_metadata_at(namespace, name)
        return found

    async def job_metadata_at(self, namespace: str, name: str) -> tuple[dict[str, Any] | None, str]:
        """:meth:`job_metadata`, and the resourceVersion the answer is current at (the
        list's): every change of a ScheduledJob before it is in the answer's past."""
        answer = await self.request(
            "GET",
            self.jobs_path(namespace),
            params={"fieldSelector": f"metadata.name={name}"},
            accept=_METADATA_LIST,
        )
        items: list[dict[str, Any]] = answer.get("items") or []
        version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
        return ((items[0].get("metadata") or {}) if items else None), version

    async def jobs_metadata(self, namespace: str) -> dict[str, dict[str, Any]]:
        """The metadata of every job of ``namespace`` as it is now, by name: the same
        consistent read as :meth:`job_metadata`, for a whole namespace at once."""
        answer = await self.request("GET", self.jobs_path(namespace), accept=_METADATA_LIST)
        items: list[dict[str, Any]] = answer.get("items") or []
        found = (item.get("metadata") or {} for item in items)
        return {str(metadata.get("name")): metadata for metadata in found}

    async def apply_job_status(
        self,
        namespace: str,
        name: str,
        uid: str,
        status: dict[str, Any] | None,
        *,
        field_manager: str,
        force: bool,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of ``status`` as ``field_manager``; refused (409) if the uid
        changed, or (``resource_version``) if the object is no longer that version.
        ``force`` says the caller knowingly takes over fields another manager owns;
        without it, such a conflict is refused (409).
        ``status`` None gives up every status field the manager owns (and the manager's
        entry in ``managedFields``): an empty ``status: {}`` would keep the entry."""
        metadata = {"name": name, "namespace": namespace, "uid": uid}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        body: dict[str, Any] = {
            "apiVersion": models.API_VERSION,
            "kind": models.KIND,
            "metadata": metadata,
        }
        if status is not None:
            body["status"] = status
        return await self.request(
            "PATCH",
            f"{self._job_path(namespace, name)}/status",
            body=body,
            params={"fieldManager": field_manager, "force": "true" if force else "false"},
            content_type=APPLY_PATCH,
        )

    async def patch_job_status(
        self, namespace: str, name: str, operations: list[dict[str, Any]], *, field_manager: str
    ) -> dict[str, Any]:
        """A JSON patch (RFC 6902) of the job's status subresource: all its operations
        or none (a failed ``test`` refuses the whole patch, 422)."""
        return await self.request(
            "PATCH",
            f"{self._job_path(namespace, name)}/status",
            body=operations,
            params={"fieldManager": field_manager},
            content_type=JSON_PATCH,
        )

    async def merge_job_status(
        self, namespace: str, name: str, status: dict[str, Any], *, field_manager: str
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386) of the job's status subresource: a field set to
        None is removed, whichever field manager held it (an apply cannot remove what
        its manager does not own)."""
        return await self.request(
            "PATCH",
            f"{self._job_path(namespace, name)}/status",
            body={"status": status},
            params={"fieldManager": field_manager},
            content_type=MERGE_PATCH,
        )

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """Delete the job if it is still the object with ``uid``."""
        await self.request(
            "DELETE",
            self._job_path(namespace, name),
            body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}},
        )

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")

    # -- Events and Leases ------------------------------------------------

    async def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        await self.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event)

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
            )
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self.request(
            "POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body=lease
        )

    async def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT with the lease's resourceVersion: a concurrent change makes this a 409."""
        name = lease["metadata"]["name"]
        return await self.request(
            "PUT",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            body=lease,
        )

    # -- batch/v1 Jobs of container tasks ------------------------------------

    @staticmethod
    def batch_jobs_path(namespace: str) -> str:
        return f"/apis/batch/v1/namespaces/{namespace}/jobs"

    async def create_batch_job(self, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", self.batch_jobs_path(namespace), body=job)

    async def get_batch_job(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.request("GET", f"{self.batch_jobs_path(namespace)}/{name}")

    async def list_batch_jobs(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        answer = await self.request(
            "GET", self.batch_jobs_path(namespace), params={"labelSelector": label_selector}
        )
        items: list[dict[str, Any]] = answer.get("items") or []
        return items

    async def delete_batch_job(self, namespace: str, name: str) -> None:
        """Delete the Job; the garbage collector then deletes its Pods (which stops them)."""
        await self.request(
            "DELETE",
            f"{self.batch_jobs_path(namespace)}/{name}",
            body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
        )

    async def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        answer = await self.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": label_selector}
        )
        items: list[dict[str, Any]] = answer.get("items") or []
        return items

    async def pod_log(
        self, namespace: str, name: str, *, container: str, tail_lines: int, limit_bytes: int
    ) -> str:
        """The last ``tail_lines`` lines of a container's log, at most ``limit_bytes``."""
        payload = await self._send(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods/{name}/log",
            body=None,
            params={
                "container": container,
                "tailLines": str(tail_lines),
                "limitBytes": str(limit_bytes),
            },
            content_type="application/json",
            accept="*/*",
        )
        return payload.decode(errors="replace")
