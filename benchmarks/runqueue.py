"""The run queue against saq, arq and dramatiq, on the same Redis, in the same run.

    python benchmarks/runqueue.py [--runs 10000] [--concurrency 10] [--systems ...]

(Named runqueue.py, not queue.py: a script's folder comes first on sys.path,
and a file called queue.py would shadow the standard library's queue.)

For each system, on a fresh ``redis-server`` (password on, as in production):

1. the producer (this process) enqueues ``--runs`` no-op jobs: *enqueue time*;
2. one consumer process with ``--concurrency`` slots, started and connected
   beforehand, is told to go and runs them all: *drain time* (go → last run),
   runs per second, and *duplicate executions* (every run records its ID);
3. Redis round trips per run (requests the client libraries sent, counted in
   both processes) and Redis commands per run (``INFO commandstats``, which also
   counts the commands inside Lua scripts).

Tickwork's consumer is the worker's own claim loop (``tickwork_worker.worker.Worker``)
with leases (at-least-once); only the task is a no-op and the API server is not
involved. The others run with their defaults except concurrency.
``tickwork-fair`` is the same under a fair share (the chart's default is one):
runs of 10 namespaces, at most 2 of one namespace in flight, so runs over it are
parked and returned as their namespace's runs end. Targets: drain faster than
the fastest of the others; the fair share costs at most a fifth; at most 3 round
trips per run; no duplicates. Prints JSON lines, writes benchmarks/results/runqueue.json and a plot.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import multiprocessing
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import redis as redis_sync

from tickwork_dev.devcluster.measure import benchmark_parser, save_figure, save_report
from tickwork_dev.devcluster.redis import RedisServer

SYSTEMS = ("tickwork", "tickwork-fair", "saq", "arq", "dramatiq")
#: tickwork-fair: runs spread over this many namespaces, at most FAIR_LIMIT of one in flight.
FAIR_NAMESPACES, FAIR_LIMIT = 10, 2

# -- counting round trips -----------------------------------------------------------

_ROUND_TRIPS = [0]


def count_round_trips() -> None:
    """Count every request redis-py writes to a socket (a pipeline is one)."""
    import redis.asyncio.connection as async_connection  # noqa: PLC0415
    import redis.connection as sync_connection  # noqa: PLC0415

    original_async = async_connection.AbstractConnection.send_packed_command
    original_sync = sync_connection.AbstractConnection.send_packed_command

    async def counted_async(self: Any, command: Any, check_health: bool = True) -> None:  # noqa: FBT001, FBT002
        _ROUND_TRIPS[0] += 1
        await original_async(self, command, check_health)

    def counted_sync(self: Any, command: Any, check_health: bool = True) -> None:  # noqa: FBT001, FBT002
        _ROUND_TRIPS[0] += 1
        original_sync(self, command, check_health)  # type: ignore[no-untyped-call]

    async_connection.AbstractConnection.send_packed_command = counted_async  # type: ignore[method-assign]
    sync_connection.AbstractConnection.send_packed_command = counted_sync  # type: ignore[method-assign]


def redis_commands(url: str) -> int:
    client = redis_sync.Redis.from_url(url)
    try:
        stats: dict[str, dict[str, int]] = client.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if not k.startswith("cmdstat_info"))
    finally:
        client.close()


# -- the systems: producer and consumer for each ------------------------------------

EXECUTED: list[str] = []


async def produce_tickwork(url: str, runs: int, namespaces: int = 1) -> None:
    from tickwork.queue.connection import create_client  # noqa: PLC0415
    from tickwork.queue.messages import RunMessage  # noqa: PLC0415
    from tickwork.queue.redis_queue import RedisRunQueue  # noqa: PLC0415
    from tickwork.queue.settings import RedisSettings  # noqa: PLC0415

    settings = RedisSettings(url=url, queue="bench")
    queue = RedisRunQueue(create_client(settings), settings)
    try:
        limit = asyncio.Semaphore(100)

        async def one(i: int) -> None:
            async with limit:
                await queue.enqueue(
                    RunMessage(
                        run_id=f"run-{i}",
                        namespace=f"ns-{i % namespaces}",
                        name=f"job-{i}",
                        uid="uid",
                    )
                )

        await asyncio.gather(*(one(i) for i in range(runs)))
    finally:
        await queue.close()


async def consume_tickwork(
    url: str, runs: int, concurrency: int, go: Callable[[], None], fair_limit: int = 0
) -> None:
    from tickwork.queue.connection import create_client  # noqa: PLC0415
    from tickwork.queue.messages import Claim, FairShare  # noqa: PLC0415
    from tickwork.queue.redis_queue import RedisRunQueue  # noqa: PLC0415
    from tickwork.queue.settings import RedisSettings  # noqa: PLC0415
    from tickwork_worker.worker import Worker  # noqa: PLC0415

    settings = RedisSettings(url=url, queue="bench")
    queue = RedisRunQueue(create_client(settings), settings)
    stop = asyncio.Event()

    class NoopRunner:
        async def process(self, claim: Claim, ended: Callable[[], None] = lambda: None) -> None:
            EXECUTED.append(claim.run_id)
            ended()
            await queue.ack(claim)
            if len(EXECUTED) >= runs:
                stop.set()

    fair = FairShare(max_in_flight=fair_limit) if fair_limit else None
    worker = Worker(
        queue=queue,
        runner=NoopRunner(),
        name="bench",
        concurrency=concurrency,
        lease_seconds=30,
        claim_wait_seconds=1,
        maintain_seconds=5,
        grace_seconds=5,
        fair_share=fair,
    )
    await queue.depth()  # connected before the clock starts
    go()
    await worker.run(stop)
    await queue.close()


async def saq_noop(_ctx: Any, *, i: int) -> None:
    EXECUTED.append(str(i))


async def produce_saq(url: str, runs: int) -> None:
    from saq import Queue  # noqa: PLC0415

    queue = Queue.from_url(url)
    await queue.connect()
    limit = asyncio.Semaphore(100)

    async def one(i: int) -> None:
        async with limit:
            await queue.enqueue("saq_noop", i=i)

    await asyncio.gather(*(one(i) for i in range(runs)))
    await queue.disconnect()


async def consume_saq(url: str, runs: int, concurrency: int, go: Callable[[], None]) -> None:
    from saq import Queue, Worker  # noqa: PLC0415

    queue = Queue.from_url(url)
    await queue.connect()
    worker = Worker(queue, functions=[saq_noop], concurrency=concurrency)
    go()
    task = asyncio.create_task(worker.start())
    while len(EXECUTED) < runs and not task.done():  # noqa: ASYNC110 - no event to wait on
        await asyncio.sleep(0.01)
    await worker.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def arq_noop(_ctx: Any, i: int) -> None:
    EXECUTED.append(str(i))


def _arq_settings(url: str) -> Any:
    from arq.connections import RedisSettings as ArqSettings  # noqa: PLC0415

    return ArqSettings.from_dsn(url)


async def produce_arq(url: str, runs: int) -> None:
    from arq import create_pool  # noqa: PLC0415

    pool = await create_pool(_arq_settings(url))
    limit = asyncio.Semaphore(100)

    async def one(i: int) -> None:
        async with limit:
            await pool.enqueue_job("arq_noop", i)

    await asyncio.gather(*(one(i) for i in range(runs)))
    await pool.aclose()


async def consume_arq(url: str, runs: int, concurrency: int, go: Callable[[], None]) -> None:
    from arq import create_pool  # noqa: PLC0415
    from arq.worker import Worker, func  # noqa: PLC0415

    pool = await create_pool(_arq_settings(url))  # connected before the clock starts
    worker = Worker(
        functions=[func(arq_noop, name="arq_noop")],  # type: ignore[arg-type]
        redis_pool=pool,
        max_jobs=concurrency,
        burst=True,
        handle_signals=False,
    )
    go()
    await worker.main()  # burst: returns once the queue is empty
    await worker.close()
    del runs


def _dramatiq_actor(url: str) -> Any:
    import dramatiq  # noqa: PLC0415
    from dramatiq.brokers.redis import RedisBroker  # noqa: PLC0415

    broker = RedisBroker(url=url)  # type: ignore[no-untyped-call]
    dramatiq.set_broker(broker)

    @dramatiq.actor(broker=broker, max_retries=0)
    def dramatiq_noop(i: int) -> None:
        EXECUTED.append(str(i))

    return broker, dramatiq_noop


async def produce_dramatiq(url: str, runs: int) -> None:
    _, actor = _dramatiq_actor(url)
    for i in range(runs):
        actor.send(i)


async def consume_dramatiq(url: str, runs: int, concurrency: int, go: Callable[[], None]) -> None:
    import dramatiq  # noqa: PLC0415

    broker, _ = _dramatiq_actor(url)
    worker = dramatiq.Worker(broker, worker_threads=concurrency)
    go()
    worker.start()
    while len(EXECUTED) < runs:  # noqa: ASYNC110 - dramatiq's threads give no event
        await asyncio.sleep(0.01)
    worker.stop()


Side = Callable[..., Coroutine[Any, Any, None]]
PRODUCERS: dict[str, Side] = {
    "tickwork": produce_tickwork,
    "saq": produce_saq,
    "arq": produce_arq,
    "dramatiq": produce_dramatiq,
    "tickwork-fair": functools.partial(produce_tickwork, namespaces=FAIR_NAMESPACES),
}
CONSUMERS: dict[str, Side] = {
    "tickwork": consume_tickwork,
    "saq": consume_saq,
    "arq": consume_arq,
    "dramatiq": consume_dramatiq,
    "tickwork-fair": functools.partial(consume_tickwork, fair_limit=FAIR_LIMIT),
}


def consumer_process(  # noqa: PLR0917
    system: str, url: str, runs: int, concurrency: int, ready: Any, start: Any, results: Any
) -> None:
    """The consumer's own process: connect, say ready, wait for the signal, drain."""
    count_round_trips()
    began: list[float] = []

    def go() -> None:
        ready.set()
        start.wait()
        _ROUND_TRIPS[0] = 0
        began.append(time.monotonic())

    asyncio.run(CONSUMERS[system](url, runs, concurrency, go))
    elapsed = time.monotonic() - began[0]
    counts = Counter(EXECUTED)
    results.put(
        {
            "drain_seconds": elapsed,
            "executions": len(EXECUTED),
            "unique": len(counts),
            "round_trips": _ROUND_TRIPS[0],
        }
    )


def measure(system: str, workdir: Path, runs: int, concurrency: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    with RedisServer(workdir=workdir / system) as server:
        url = server.url
        _ROUND_TRIPS[0] = 0
        started = time.monotonic()
        asyncio.run(PRODUCERS[system](url, runs))
        enqueue_seconds = time.monotonic() - started
        produced_round_trips = _ROUND_TRIPS[0]
        commands_before = redis_commands(url)
        ready, start, results = context.Event(), context.Event(), context.Queue()
        arguments = (system, url, runs, concurrency, ready, start, results)
        process = context.Process(target=consumer_process, args=arguments)
        process.start()
        if not ready.wait(timeout=120):
            process.kill()
            raise RuntimeError(f"{system}'s consumer did not start")
        commands_before = redis_commands(url)
        start.set()
        outcome = results.get(timeout=600)
        process.join(timeout=60)
        commands = redis_commands(url) - commands_before
        memory = server.memory()
    drain = outcome["drain_seconds"]
    return {
        "system": system,
        "runs": runs,
        "concurrency": concurrency,
        "enqueue_seconds": round(enqueue_seconds, 3),
        "enqueued_per_second": round(runs / enqueue_seconds),
        "drain_seconds": round(drain, 3),
        "drained_per_second": round(runs / drain),
        "executions": outcome["executions"],
        "duplicate_executions": outcome["executions"] - outcome["unique"],
        "lost": runs - outcome["unique"],
        "round_trips_per_run": round((produced_round_trips + outcome["round_trips"]) / runs, 2),
        "redis_commands_per_run_incl_scripts": round(commands / runs, 2),
        "redis_memory": memory,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = report["results"]
    figure, axis = plt.subplots(figsize=(6.5, 3.8))
    colors = ["tab:green" if r["system"].startswith("tickwork") else "tab:grey" for r in rows]
    axis.bar([r["system"] for r in rows], [r["drained_per_second"] for r in rows], color=colors)
    axis.set_ylabel("no-op runs drained per second")
    axis.set_title(f"One consumer, concurrency {rows[0]['concurrency']}, {rows[0]['runs']:,} runs")
    axis.grid(visible=True, axis="y", alpha=0.3)
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "runqueue")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    args = parser.parse_args(argv)
    count_round_trips()
    report: dict[str, Any] = {
        "benchmark": "runqueue",
        "python": platform.python_version(),
        "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="runqueue-bench-") as tmp:
        for system in args.systems:
            row = measure(system, Path(tmp), args.runs, args.concurrency)
            print(json.dumps(row), flush=True)
            report["results"].append(row)
    ours = next((r for r in report["results"] if r["system"] == "tickwork"), None)
    fair = next((r for r in report["results"] if r["system"] == "tickwork-fair"), None)
    others = [
        r["drained_per_second"] for r in report["results"] if not r["system"].startswith("tickwork")
    ]
    if ours is not None and others:
        report["tickwork_vs_fastest_other"] = round(ours["drained_per_second"] / max(others), 2)
    if ours is not None and fair is not None:
        report["fair_share_vs_none"] = round(
            fair["drained_per_second"] / ours["drained_per_second"], 2
        )
    save_report(report, args.out, args)
    plot(report, args.plot)
    met = all(
        row["duplicate_executions"] == 0 and row["lost"] == 0 and row["round_trips_per_run"] <= 3
        for row in (ours, fair)
        if row is not None
    ) and (ours is not None or fair is not None)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
