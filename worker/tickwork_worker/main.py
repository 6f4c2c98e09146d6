"""``tickwork-worker``: run the executor; ``tickwork-worker check`` asks a running
worker's /healthz (for an exec probe; the chart probes /healthz over HTTP)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence

from tickwork.api import models
from tickwork.core.errors import QueueUnavailableError
from tickwork.heap import trim_periodically
from tickwork.kube.cache import JobCache, kept_current
from tickwork.kube.client import KubeApiError, KubeClient, load_configuration
from tickwork.kube.events import EventRecorder
from tickwork.kube.http import start_http
from tickwork.logs import configure_logging
from tickwork.queue import RedisSettings, open_queue
from tickwork.queue.connection import create_client, wait_until_ready
from tickwork.queue.messages import FairShare
from tickwork.queue.protocol import RunQueue
from tickwork.tracing import configured
from tickwork_worker.metrics import WorkerMetrics
from tickwork_worker.notify import Notifications
from tickwork_worker.runner import Runner
from tickwork_worker.settings import WorkerSettings
from tickwork_worker.tasks.base import TaskKinds
from tickwork_worker.tasks.command import CommandTask
from tickwork_worker.tasks.container import ContainerTask
from tickwork_worker.tasks.echo import EchoTask
from tickwork_worker.tasks.egress import guarded_client
from tickwork_worker.tasks.http import HttpTask
from tickwork_worker.tasks.python import PythonTask, discover
from tickwork_worker.tenants import TenantRules
from tickwork_worker.worker import Worker

logger = logging.getLogger("tickwork_worker")


async def _ready_queue(redis: RedisSettings | None) -> RunQueue:
    """The run queue, once Redis answers (the in-memory one without Redis)."""
    if redis is not None:
        client = create_client(redis)
        await wait_until_ready(client, redis, timeout_seconds=60)
        await client.aclose()
    return open_queue(redis)


async def run_worker(
    settings: WorkerSettings, *, queue: RunQueue | None = None, stop: asyncio.Event | None = None
) -> str:
    """Run until ``stop``; return why the process must end at once (a task's thread
    that does not stop, see the runner), or an empty string."""
    redis = RedisSettings() if settings.queue == "redis" else None
    if queue is None:
        queue = await _ready_queue(redis)
    if stop is None:  # we own the process: SIGTERM and Ctrl-C drain it
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    kube = KubeClient(load_configuration(settings.kubeconfig))
    metrics = WorkerMetrics(
        namespace_limit=settings.metrics_namespaces, job_limit=settings.metrics_jobs
    )
    events = EventRecorder(kube, component="tickwork-worker", instance=settings.name)
    jobs = _job_cache(settings, kube, metrics)
    rules = tenant_rules(settings)
    async with contextlib.AsyncExitStack() as clients:
        clients.enter_context(metrics.gc_pauses)  # times the collector's pauses
        # One HTTP client (connection pool) per set of egress rules, not per namespace.
        by_key = {
            r.key: await clients.enter_async_context(guarded_client(r.egress)) for r in rules.all()
        }
        kinds = TaskKinds()
        kinds.register(models.EchoTask, EchoTask())
        kinds.register(
            models.HttpTask,
            HttpTask(lambda namespace: by_key[rules.of(namespace).key], previews=settings.previews),
        )
        kinds.register(
            models.PythonTask,
            PythonTask(
                discover(demo=settings.demo_tasks), threads=settings.concurrency, rules=rules
            ),
        )
        kinds.register(
            models.CommandTask,
            CommandTask(
                enabled=settings.command_tasks,
                rules=rules,
                runner_socket=settings.command_runner,
                previews=settings.previews,
            ),
        )
        kinds.register(
            models.ContainerTask,
            ContainerTask(
                kube=kube,
                enabled=settings.container_tasks,
                ttl_seconds=settings.container_ttl_seconds,
                log_bytes=settings.container_log_bytes,
                previews=settings.previews,
            ),
        )
        runner = Runner(
            queue=queue,
            kube=kube,
            events=events,
            metrics=metrics,
            kinds=kinds,
            worker_name=settings.name,
            lease_seconds=settings.lease_seconds,
            soft_timeout_ratio=settings.soft_timeout_ratio,
            running_after_seconds=settings.running_after_seconds,
            jobs=jobs,
            start_check_watch_seconds=settings.start_check_watch_seconds,
            stuck_seconds=settings.stuck_seconds,
            tracing=configured("tickwork-worker"),
            notifications=Notifications(
                queue=queue,
                kube=kube,
                client_for=lambda namespace: by_key[rules.of(namespace).key],
                per_minute=settings.notices_per_minute,
                counted=lambda outcome: metrics.notices.labels(outcome=outcome).inc(),
            ),
        )
        worker = Worker(
            queue=queue,
            runner=runner,
            name=settings.name,
            concurrency=settings.concurrency,
            lease_seconds=settings.lease_seconds,
            claim_wait_seconds=settings.claim_wait_seconds,
            maintain_seconds=settings.maintain_seconds,
            grace_seconds=settings.grace_seconds,
            fair_share=rules.fair_share,
            finishing_per_slot=settings.finishing_per_slot,
        )

        async def liveness() -> str | None:
            # The claim loop goes round at least every claim wait, busy or idle.
            stuck = time.monotonic() - worker.last_loop
            if stuck > settings.stuck_seconds:
                return f"the claim loop is stuck ({stuck:.0f}s)"
            if runner.stuck:
                return runner.stuck
            return None

        readiness = _readiness(queue, kube, jobs)

        http = await start_http(
            host=settings.http_host,
            port=settings.http_port,
            registry=metrics.registry,
            liveness=liveness,
            readiness=readiness,
        )
        logger.info(
            "tickwork-worker %s: %d slot(s), queue %s, command tasks %s, container tasks %s, "
            "job cache %s, fair share %s",
            settings.name,
            settings.concurrency,
            redis.safe_url() if redis else "in memory",
            "enabled" if settings.command_tasks else "disabled",
            "enabled" if settings.container_tasks else "disabled",
            ", ".join(settings.namespaces) or "all namespaces" if jobs else "off",
            _fair_text(rules.fair_share),
        )
        try:
            async with kept_current(jobs):
                trimming = asyncio.create_task(trim_periodically(stop), name="heap trim")
                try:
                    await worker.run(stop)
                finally:
                    if runner.notifications is not None:
                        await runner.notifications.close()  # before the HTTP clients go
                    trimming.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await trimming
        finally:
            await http.cleanup()
            await queue.close()
            await kube.close()
            logger.info("tickwork-worker stopped")
    return runner.stuck


def _readiness(
    queue: RunQueue, kube: KubeClient, jobs: JobCache | None
) -> Callable[[], Awaitable[str | None]]:
    async def readiness() -> str | None:
        if jobs is not None and not jobs.synced:
            # Runs still start (from the API server), but a worker whose copy
            # cannot vouch for anything is not one to count on yet.
            return "the job cache is not synced (listing the ScheduledJobs again)"
        try:
            await queue.depth()
            await kube.request("GET", "/version")
        except QueueUnavailableError as exc:
            return str(exc)
        except KubeApiError as exc:
            return f"the API server does not answer: {exc}"
        return None

    return readiness


def _job_cache(
    settings: WorkerSettings, kube: KubeClient, metrics: WorkerMetrics
) -> JobCache | None:
    if not settings.job_cache:
        return None
    jobs = JobCache(kube, settings.namespaces)
    metrics.job_cache_synced.set_function(lambda: float(jobs.synced))
    metrics.job_cache_objects.set_function(lambda: float(len(jobs)))
    return jobs


_PR_SET_DUMPABLE = 4


def keep_memory_private() -> None:
    """Make this process non-dumpable, so that what it starts (command tasks, which run
    as the same user) cannot read its memory or environment through /proc, nor trace
    it: the Redis password and the API token live there. Linux only; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        logger.warning("could not make the worker non-dumpable (errno %d)", ctypes.get_errno())


def _fair_text(fair: FairShare | None) -> str:
    """The fair share as the start-up line tells it."""
    if fair is None:
        return "off"
    limits = [f"{fair.share:.0%} of the live slots"] if fair.share else []
    limits += [str(fair.max_in_flight)] if fair.max_in_flight else []
    return (
        f"{' and at most '.join(limits) or 'unlimited'} in flight, "
        f"{fair.runs_per_minute or 'unlimited'}/min per namespace "
        f"({len(fair.namespaces)} exception(s))"
    )


def tenant_rules(settings: WorkerSettings) -> TenantRules:
    """The installation's task rules with their per-namespace exceptions; ValueError
    (naming the entry) if the egress lists or the tenants' JSON are wrong."""

    def split(text: str) -> list[str]:
        return [item.strip() for item in text.split(",") if item.strip()]

    return TenantRules(
        egress_allow=split(settings.egress_allow),
        egress_deny=split(settings.egress_deny),
        python_tasks=split(settings.python_tasks),
        command_tasks=settings.command_tasks,
        max_runs=settings.max_runs_per_namespace,
        runs_per_minute=settings.runs_per_minute_per_namespace,
        share=settings.share_per_namespace,
        tenants=settings.tenants,
    )


def check(port: int) -> int:
    """Exit 0 if the local worker's /healthz answers ok (an exec liveness probe)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return 0 if response.status == 200 else 1  # noqa: PLR2004 - HTTP OK
    except OSError as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)  # noqa: T201
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tickwork-worker",
        description="Execute due runs from the queue (settings: TICKWORK_WORKER_* and "
        "TICKWORK_REDIS_* environment variables).",
    )
    parser.add_argument("command", nargs="?", choices=["run", "check"], default="run")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--queue", choices=["redis", "memory"])
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--http-port", type=int)
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if v is not None and k != "command"}
    settings = WorkerSettings(**overrides)
    if args.command == "check":
        return check(settings.http_port)
    configure_logging(level=settings.log_level, json_format=settings.log_format == "json")
    keep_memory_private()
    try:
        tenant_rules(settings)  # refuse a bad policy before connecting to anything
    except ValueError as exc:
        logger.error("invalid task rules: %s", exc)  # noqa: TRY400 - the message says it all
        return 2
    try:
        stuck = asyncio.run(run_worker(settings))
    except QueueUnavailableError as exc:
        logger.error("%s", exc)  # noqa: TRY400 - the message is the whole story
        return 1
    if stuck:
        # Exiting normally would wait for the thread; the run it holds is redelivered
        # once its lease expires, and this thread must not run beside that attempt.
        logger.error("exiting without waiting for a task's thread: %s", stuck)
        logging.shutdown()
        os._exit(70)
    return 0


if __name__ == "__main__":
    sys.exit(main())
