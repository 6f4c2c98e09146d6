"""``tickwork-operator``: the watcher's entry point. Loads settings once and wires it up."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Sequence

import kopf

from tickwork.core.buckets import BucketIndex
from tickwork.core.errors import QueueUnavailableError
from tickwork.heap import trim_periodically
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.kube.events import EventRecorder
from tickwork.kube.http import start_http
from tickwork.kube.informer import Informer
from tickwork.logs import configure_logging
from tickwork.queue import RedisSettings, open_queue
from tickwork.queue.connection import create_client, wait_until_ready
from tickwork.queue.protocol import RunQueue
from tickwork.tracing import configured
from tickwork_operator import api_server_policy
from tickwork_operator.api_server_policy import PolicyTarget
from tickwork_operator.calendars import CalendarFeed, calendar_informer
from tickwork_operator.claims import NamespaceClaims
from tickwork_operator.feed import JobFeed, informer
from tickwork_operator.handlers import kopf_settings, registry
from tickwork_operator.leader import LeaderElector
from tickwork_operator.metrics import OperatorMetrics
from tickwork_operator.settings import OperatorSettings
from tickwork_operator.state import WatchState
from tickwork_operator.ticker import Ticker

logger = logging.getLogger("tickwork_operator")


#: How long the operator's own loops get to end after a SIGTERM: a tick that waits for
#: an unreachable Redis (each command retried for up to a minute) is cancelled then; its
#: runs are published by the next leader (the queue drops what is published twice).
STOP_SECONDS = 5.0


async def _stopped(tasks: list[asyncio.Task[None]], *, within: float) -> None:
    """Wait up to ``within`` seconds for ``tasks`` to end, then cancel what has not."""
    _, pending = await asyncio.wait(tasks, timeout=within)
    for task in pending:
        logger.warning("%s did not stop within %.0fs: cancelled", task.get_name(), within)
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _redis_queue(redis: RedisSettings) -> RunQueue:
    client = create_client(redis)
    await wait_until_ready(client, redis, timeout_seconds=60)
    await client.aclose()
    return open_queue(redis)


def _claims(
    settings: OperatorSettings, kube: KubeClient, state: WatchState, metrics: OperatorMetrics
) -> NamespaceClaims | None:
    if not settings.namespace_claims:
        return None
    return NamespaceClaims(
        kube,
        identity=settings.release,
        namespaces=settings.namespaces,
        state=state,
        metrics=metrics,
        duration_seconds=settings.claim_duration_seconds,
        renew_seconds=settings.claim_renew_seconds,
    )


def _leadership(
    metrics: OperatorMetrics,
    claims: NamespaceClaims | None,
    leading: bool,  # noqa: FBT001
) -> None:
    metrics.leader.set(1 if leading else 0)
    if claims is not None:
        claims.leadership_changed(leading)


async def run_operator(settings: OperatorSettings, *, queue: RunQueue | None = None) -> None:
    """Run until SIGTERM/SIGINT: watch, elect, tick; release the Lease on the way out."""
    if settings.kubeconfig:
        os.environ["KUBECONFIG"] = settings.kubeconfig  # for kopf's own login
    redis = RedisSettings() if settings.queue == "redis" else None
    if queue is None:
        queue = await _redis_queue(redis) if redis is not None else open_queue(None)
    kube = KubeClient(load_configuration(settings.kubeconfig))
    metrics = OperatorMetrics()
    state = WatchState(
        index=BucketIndex(start=time.time(), width=settings.bucket_seconds),
        schedule_in_status=settings.schedule_in_status,
    )
    metrics.count_jobs(state.phases, state.late.keys)
    events = EventRecorder(kube, component="tickwork-operator", instance=settings.identity)
    claims = _claims(settings, kube, state, metrics)
    elector = LeaderElector(
        kube,
        namespace=settings.lease_namespace,
        name=settings.lease_name,
        identity=settings.identity,
        duration_seconds=settings.lease_duration_seconds,
        renew_seconds=settings.lease_renew_seconds,
        on_change=functools.partial(_leadership, metrics, claims),
    )
    ticker = Ticker(
        state=state,
        queue=queue,
        kube=kube,
        events=events,
        metrics=metrics,
        tick_seconds=settings.tick_seconds,
        reconcile_seconds=settings.reconcile_seconds,
        queue_name=redis.queue if redis else "memory",
        holds_lease=lambda: elector.leading,
        catchup_runs_per_second=settings.catchup_runs_per_second,
        claims=claims,
        tracing=configured("tickwork-operator"),
    )
    stop = asyncio.Event()
    kopf_ready = asyncio.Event()
    # The ScheduledJobs are listed and watched here, not by kopf (tickwork_operator.feed).
    feed = JobFeed(state, ticker)
    jobs = informer(kube, feed, settings.namespaces, page_size=settings.list_page_size)
    calendar_feed, calendars = _calendars(kube, state, ticker, settings.namespaces)

    async def liveness() -> str | None:
        # The event loop answered; the ticker must be going round too.
        return ticker.stuck(
            leading=elector.leading_event.is_set(),
            now=time.monotonic(),
            limit=settings.stuck_seconds,
        )

    async def readiness() -> str | None:
        if len(calendar_feed.watching) < len(calendar_feed.scopes):
            return "not watching Calendars yet"
        if not kopf_ready.is_set() or len(feed.watching) < len(jobs.scopes):
            return "not watching ScheduledJobs yet"
        try:
            await queue.depth()
        except QueueUnavailableError as exc:
            return str(exc)
        return None

    http = await start_http(
        host=settings.http_host,
        port=settings.http_port,
        registry=metrics.registry,
        liveness=liveness,
        readiness=readiness,
    )
    # The ticker runs once the leader has also done a round of its namespaces' claims.
    ticking = elector.leading_event if claims is None else claims.ready
    background = [
        asyncio.create_task(elector.run(stop), name="leader election"),
        asyncio.create_task(ticker.run(ticking, stop), name="ticker"),
        # A cold start's list leaves the allocator at its peak: give the pages back.
        asyncio.create_task(trim_periodically(stop), name="heap trim"),
    ]
    if claims is not None:
        background.append(
            asyncio.create_task(claims.run(elector.leading_event, stop), name="namespace claims")
        )
    if settings.api_server_policy:
        target = PolicyTarget(
            name=settings.api_server_policy,
            namespace=settings.lease_namespace,
            selector=json.loads(settings.api_server_policy_selector),
            owner=settings.api_server_policy_owner,
        )
        background.append(
            asyncio.create_task(
                api_server_policy.keep(kube, target, stop), name="API server policy"
            )
        )
    logger.info(
        "tickwork-operator %s watching %s, queue %s",
        settings.identity,
        ", ".join(settings.namespaces) or "all namespaces",
        redis.safe_url() if redis else "in memory",
    )
    following = asyncio.create_task(
        _follow(calendars, calendar_feed, jobs), name="Calendar and ScheduledJob list and watch"
    )
    metrics.gc_pauses.install()
    try:
        await kopf.operator(
            registry=registry,
            settings=kopf_settings(),
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            memo=kopf.Memo(stop=stop),
            ready_flag=kopf_ready,
            standalone=True,
        )
    finally:
        stop.set()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await _stopped(background, within=STOP_SECONDS)
        await http.cleanup()
        await queue.close()
        await kube.close()
        metrics.gc_pauses.remove()
        logger.info("tickwork-operator stopped")


def _calendars(
    kube: KubeClient, state: WatchState, ticker: Ticker, namespaces: list[str]
) -> tuple[CalendarFeed, Informer]:
    """The Calendars' feed and informer: a change re-plans the jobs that name the
    calendar, and wakes the ticker."""

    def replan(keys: list[tuple[str, str]]) -> None:
        if keys:
            state.replan(keys, now=dt.datetime.now(dt.UTC))
            ticker.wakeup.set()

    feed = CalendarFeed(state.calendars, replan, list(namespaces) or [None])
    return feed, calendar_informer(kube, feed)


#: How long the jobs wait for the Calendars' first list before they are followed anyway.
CALENDARS_WAIT_SECONDS = 30.0


async def _follow(
    calendars: Informer,
    calendar_feed: CalendarFeed,
    jobs: Informer,
    *,
    wait_seconds: float = CALENDARS_WAIT_SECONDS,
) -> None:
    """Follow the Calendars, and the jobs once the Calendars came in whole: a job that
    names one is never planned (nor taken for Invalid) before its calendar is known.
    If the Calendars cannot be listed (their CRD not installed, no RBAC), the jobs are
    followed after ``wait_seconds`` all the same, with an error in the log: a job that
    names a Calendar is Invalid until the list comes, the others run."""
    watching = asyncio.create_task(calendars.run(), name="Calendar list and watch")
    try:
        try:
            async with asyncio.timeout(wait_seconds):
                await calendar_feed.listed.wait()
        except TimeoutError:
            logger.error(  # noqa: TRY400 - the informer logs each failed list
                "the Calendars were not listed within %.0f s (is the calendars.tickwork.dev "
                "CRD installed, and may the operator list it?): scheduling without them",
                wait_seconds,
            )
        await jobs.run()
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tickwork-operator",
        description="Watch ScheduledJobs and publish their due runs (settings: "
        "TICKWORK_OPERATOR_* and TICKWORK_REDIS_* environment variables).",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster or $KUBECONFIG)")
    parser.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        help="watch this namespace (repeat); default: all",
    )
    parser.add_argument("--queue", choices=["redis", "memory"])
    parser.add_argument("--http-port", type=int)
    args = parser.parse_args(argv)
    overrides = {key: value for key, value in vars(args).items() if value is not None}
    settings = OperatorSettings(**overrides)
    configure_logging(level=settings.log_level, json_format=settings.log_format == "json")
    try:
        asyncio.run(run_operator(settings))
    except QueueUnavailableError as exc:
        logger.error("%s", exc)  # noqa: TRY400 - the message is the whole story
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
