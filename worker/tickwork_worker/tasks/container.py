"""The ``container`` task: run a container as a batch/v1 Job in the job's namespace.

An attempt finds its run's Job (an earlier attempt's still running or succeeded,
whose worker died; or its own, made before a hand-back) or creates its own
(:mod:`.jobs`), then watches it until it ends. The result is the container's exit
code and the tail of its log: exit 0 succeeds; any other ending fails and is
retried by the job's retry policy, the deadline (``timeoutSeconds``) as "timed
out". A cancelled attempt (concurrency policy, timeout, a cancel, a lost lease,
shutdown) deletes its Job, so its Pod stops and no Job runs without a worker.

The log tail goes through the same redaction as other tasks' output: the values
of the Secrets the containers may see (keys their variables reference, whole Secrets
in envFrom and volumes) are read to be taken out; if the worker may not read them,
or one holds a binary value, the log is not kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from tickwork.api import models
from tickwork.api.models import ScheduledJobSpec
from tickwork.api.tasks.container import InitContainer
from tickwork.core.errors import PermanentTaskError
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork_worker.tasks import jobs
from tickwork_worker.tasks.base import RetryableTaskError, RunContext, TaskResult

logger = logging.getLogger(__name__)

_FORBIDDEN = 403
#: A watch is renewed this often (bookmarks keep it talking meanwhile).
_WATCH_SECONDS = 240
#: After an API error while watching, wait this long before asking again.
_RETRY_SECONDS = 2.0
#: Log lines asked for; the bytes are bounded by ``log_bytes`` too.
_LOG_LINES = 200
#: The result keeps this much of the log's end (status holds 1,024 characters).
_TAIL_CHARS = 900


class ContainerDisabledError(PermanentTaskError):
    pass


class ContainerTask:
    def __init__(
        self,
        *,
        kube: KubeClient,
        enabled: bool,
        ttl_seconds: int,
        log_bytes: int,
        previews: bool = False,
    ) -> None:
        """``ttl_seconds``: the Jobs' ttlSecondsAfterFinished; ``log_bytes``: the most
        of a container's log read for its tail; ``previews``: keep that tail in the
        result (off: the log is not read)."""
        self._kube = kube
        self.enabled = enabled
        self._ttl = ttl_seconds
        self._log_bytes = log_bytes
        self._previews = previews

    async def execute(self, spec: ScheduledJobSpec, run: RunContext) -> TaskResult:
        task = spec.task.container
        assert task is not None  # noqa: S101 - dispatched by kind
        if not self.enabled:
            raise ContainerDisabledError(
                "container tasks are turned off in this installation; an administrator can "
                "turn them on with the Helm value worker.containerTasks.enabled=true "
                "(TICKWORK_WORKER_CONTAINER_TASKS=true)"
            )
        redactable = await self._learn_secrets(run, task)
        if run.job_uid is None:
            raise PermanentTaskError("the run does not name its ScheduledJob's uid")
        owner = jobs.Owner(name=run.name, uid=run.job_uid)
        wanted = jobs.build_job(
            task, run, owner=owner, timeout_seconds=spec.timeout_seconds, ttl_seconds=self._ttl
        )
        name = wanted["metadata"]["name"]
        try:
            job = await self._find_or_create(run, owner, wanted)
            name = job["metadata"]["name"]  # an earlier attempt's, when taken over
            end = await self._wait(run.namespace, job)
        except asyncio.CancelledError:
            # Also when cancelled while the Job was being created: it may exist already.
            # Shielded: the deletion completes even if this task is cancelled again.
            await asyncio.shield(self._delete(run.namespace, name))
            raise
        return await self._result(
            run, job, end, redactable=redactable, timeout_seconds=spec.timeout_seconds
        )

    async def _learn_secrets(self, run: RunContext, task: models.ContainerTask) -> bool:
        """Read the Secrets the containers may see (keys in ``env``, whole Secrets in
        ``envFrom`` and volumes, the init containers' too) so the log can be redacted;
        False if one cannot be read, or holds a binary value (the log is then not kept)."""
        containers: list[models.ContainerTask | InitContainer] = [task, *task.init_containers]
        refs = [
            var.value_from.secret_key_ref
            for c in containers
            for var in c.env
            if var.value_from is not None and var.value_from.secret_key_ref is not None
        ]
        whole = {s.secret_ref.name for c in containers for s in c.env_from if s.secret_ref}
        whole |= {v.secret.secret_name for v in task.volumes if v.secret is not None}
        if not refs and not whole:
            return True
        if run.secrets is None:
            return False
        try:
            for ref in refs:
                await run.secrets.read(ref)
            for name in sorted(whole):
                if not await run.secrets.read_whole(name):
                    return False
        except (PermanentTaskError, RetryableTaskError):
            return False
        return True

    async def _find_or_create(
        self, run: RunContext, owner: jobs.Owner, wanted: dict[str, Any]
    ) -> dict[str, Any]:
        selector = (
            f"{jobs.RUN_LABEL}={jobs.run_digest(run.run_id)},{jobs.JOB_UID_LABEL}={owner.uid}"
        )
        try:
            found = jobs.to_adopt(
                await self._kube.list_batch_jobs(run.namespace, selector), run.run_id, owner.uid
            )
            if found is not None:
                logger.info(
                    "taking over Job %s", found["metadata"]["name"], extra={"run_id": run.run_id}
                )
                return found
            try:
                return await self._kube.create_batch_job(run.namespace, wanted)
            except KubeApiError as exc:
                if not exc.conflict:
                    raise
                existing = await self._kube.get_batch_job(run.namespace, wanted["metadata"]["name"])
                if not jobs.belongs_to(existing, run.run_id, owner.uid):
                    raise PermanentTaskError(
                        f"a Job named {wanted['metadata']['name']} exists in "
                        f"{run.namespace} and is not this run's"
                    ) from None
                return existing
        except KubeApiError as exc:
            raise _task_error(exc, f"cannot create the run's Job in {run.namespace}") from None

    async def _wait(self, namespace: str, job: dict[str, Any]) -> jobs.JobEnd:
        """Watch the Job until it ends."""
        name = job["metadata"]["name"]
        while (end := jobs.job_end(job)) is None:
            try:
                job = await self._watch_once(namespace, job)
            except KubeApiError as exc:
                if exc.not_found:
                    raise _deleted(name) from None
                if not exc.unavailable:
                    raise _task_error(exc, f"cannot watch the Job {name}") from None
                await asyncio.sleep(_RETRY_SECONDS)
                with contextlib.suppress(KubeApiError):
                    job = await self._kube.get_batch_job(namespace, name)
        return end

    async def _watch_once(self, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
        """One watch request from the Job's version: the Job as it ended, or as it was
        when the watch ended (the server's timeout, a version too old)."""
        name = job["metadata"]["name"]
        params = {
            "fieldSelector": f"metadata.name={name}",
            "resourceVersion": job["metadata"].get("resourceVersion", ""),
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(_WATCH_SECONDS),
        }
        path = self._kube.batch_jobs_path(namespace)
        async for event in self._kube.watch(path, params, idle_timeout=_WATCH_SECONDS + 60):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                # 410 Gone (the version is too old) or another error: read it again.
                return await self._kube.get_batch_job(namespace, name)
            if kind == "DELETED":
                raise _deleted(name)
            if kind == "BOOKMARK":
                job["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
                continue
            job = obj
            if jobs.job_end(job) is not None:
                break
        return job

    async def _result(
        self,
        run: RunContext,
        job: dict[str, Any],
        end: jobs.JobEnd,
        *,
        redactable: bool,
        timeout_seconds: int,
    ) -> TaskResult:
        name = job["metadata"]["name"]
        if jobs.timed_out(end):
            raise RetryableTaskError(
                f"timed out after {timeout_seconds}s (the Job {name} reached its "
                "activeDeadlineSeconds)"
            )
        code, tail = await self._container_end(run.namespace, job, with_log=self._previews)
        tail = run.cut(tail, start=True, end=True)  # tailLines, then limitBytes
        if not redactable and tail:
            tail = "(log not kept: the worker may not read the Secrets it could contain)"
        what = f"exit {code}" if code is not None else f"Job {end.reason or 'ended'}"
        summary = what + (f": {tail}" if tail else "")
        if end.succeeded and code in (0, None):
            return TaskResult(summary=summary)
        raise RetryableTaskError(summary if code is not None else f"{summary} {end.message}")

    async def _container_end(
        self, namespace: str, job: dict[str, Any], *, with_log: bool
    ) -> tuple[int | None, str]:
        """The exit code and (``with_log``) the log's tail of the Job's Pod (None, "" if
        it is gone)."""
        uid = job["metadata"].get("uid", "")
        try:
            pods = await self._kube.list_pods(
                namespace, f"batch.kubernetes.io/controller-uid={uid}"
            )
        except KubeApiError:
            return None, ""
        ended = [(code, pod) for pod in pods if (code := jobs.exit_code(pod)) is not None]
        if not ended:
            return None, ""
        code, pod = ended[-1]
        if not with_log:
            return code, ""
        try:
            log = await self._kube.pod_log(
                namespace,
                pod["metadata"]["name"],
                container=jobs.CONTAINER,
                tail_lines=_LOG_LINES,
                limit_bytes=self._log_bytes,
            )
        except KubeApiError as exc:
            log = f"(log not available: {exc.reason or exc.status})"
        return code, log.strip()[-_TAIL_CHARS:]

    async def _delete(self, namespace: str, name: str) -> None:
        try:
            await self._kube.delete_batch_job(namespace, name)
        except KubeApiError as exc:
            if not exc.not_found:
                logger.warning("could not delete the Job %s/%s: %s", namespace, name, exc)


def _deleted(name: str) -> RetryableTaskError:
    return RetryableTaskError(f"the Job {name} was deleted before it ended")


def _task_error(exc: KubeApiError, what: str) -> Exception:
    if exc.status == _FORBIDDEN:
        return PermanentTaskError(
            f"{what}: the worker may not (RBAC) - container tasks need the Helm value "
            "worker.containerTasks.enabled=true and the namespace among watchNamespaces"
        )
    if exc.unavailable:
        return RetryableTaskError(f"{what}: {exc}")
    return PermanentTaskError(f"{what}: {exc}")
