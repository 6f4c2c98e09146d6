"""What priorities and concurrency keys cost the run queue: a queue with neither set
against the previous code, in the same session, a queue with all three priorities
waiting, and one whose runs all name one concurrency key.

    python benchmarks/priorities.py --before /tmp/wt-before [--runs 20000] [--rounds 5]

On one fresh ``redis-server`` (a password on, as in production), each round runs, in
a child process whose ``PYTHONPATH`` is the tree measured:

* ``before``: the tree given with ``--before`` (the previous main), Normal runs only;
* ``after``: this tree, Normal runs only (no job sets a priority);
* ``mixed``: this tree, the runs a third each High, Normal and Low;
* ``keyed``: this tree, every run naming one key with a limit of 5: of each claim of
  ten, five run and five are claimed to wait and handed to the key's list (as a
  worker does after writing their Waiting entry, which is not measured here);
* ``keyed_before``: the same runs on the previous tree, whose claim set waiting runs
  aside at once (and showed them nowhere).

A child enqueues ``--runs`` messages, then claims them ten at a time and
acknowledges each, as a worker does, and reports runs per second (enqueue to last
ack) and Redis commands per run (``INFO commandstats``, which counts the commands
inside Lua scripts). Rounds alternate the three, so a noisy minute hits each alike;
the ratios are of medians. Writes benchmarks/results/priorities.json and a plot.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tickwork_dev.devcluster.measure import (
    benchmark_parser,
    code_commit,
    pyplot,
    save_figure,
    save_report,
)
from tickwork_dev.devcluster.redis import RedisServer

HERE = Path(__file__).resolve().parents[1]


#: What a child process runs, with the measured tree first on its path: only the
#: queue's public classes, which both trees have.
_CHILD = """
import asyncio, json, sys, time
import redis.asyncio as aioredis
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage

LEVELS = ("High", None, "Low")

async def main(url, queue, runs, kind):
    settings = RedisSettings(url=url, queue=queue)
    run_queue = RedisRunQueue(create_client(settings), settings)
    stats = aioredis.Redis.from_url(url)

    async def commands():
        info = await stats.info("commandstats")
        return sum(int(entry["calls"]) for entry in info.values())

    def message(n):
        extra = {"priority": LEVELS[n % 3]} if kind == "mixed" and LEVELS[n % 3] else {}
        if kind.startswith("keyed"):
            extra = {"concurrency_key": "bench/db", "concurrency_limit": 5}
        return RunMessage(
            run_id=f"uid-{n}.20261207T000000Z", namespace="bench", name=f"job-{n}",
            uid=f"uid-{n}", **extra,
        )

    before = await commands()
    started = time.perf_counter()
    await asyncio.gather(*(run_queue.enqueue(message(n)) for n in range(runs)))
    done = 0
    while done < runs:
        claims = await run_queue.claim(consumer="bench", lease_seconds=60, count=10)
        waiting = [c for c in claims if getattr(c, "waits_for_key", False)]
        running = [c for c in claims if c not in waiting]
        await asyncio.gather(*(run_queue.wait_for_key(claim) for claim in waiting))
        await asyncio.gather(*(run_queue.ack(claim) for claim in running))
        done += len(running)
    elapsed = time.perf_counter() - started
    calls = await commands() - before
    await run_queue.close()
    await stats.aclose()
    print(json.dumps({"runs_per_second": runs / elapsed, "redis_commands_per_run": calls / runs}))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""


def _round(tree: Path, url: str, queue: str, runs: int, *, kind: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, queue, str(runs), kind],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4))
    kinds = ["before", "after", "mixed", "keyed_before", "keyed"]
    for index, kind in enumerate(kinds):
        values = [r["runs_per_second"] for r in report["rounds"][kind]]
        axis.scatter([index] * len(values), values, label=kind)
    axis.set_xticks(
        range(len(kinds)),
        ["previous main", "neither set", "3 priorities", "key (previous)", "one key, limit 5"],
    )
    axis.set_ylabel("runs per second (enqueue, claim, ack)")
    axis.set_title("The run queue with priorities and concurrency keys")
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "priorities")
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    kinds = {
        "before": args.before,
        "after": HERE,
        "mixed": HERE,
        "keyed_before": args.before,
        "keyed": HERE,
    }
    rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="priorities-") as tmp:
        redis = RedisServer(workdir=Path(tmp) / "redis")
        redis.start()
        try:
            for n in range(args.rounds):
                for kind, tree in kinds.items():
                    result = _round(tree, redis.url, f"{kind}-{n}", args.runs, kind=kind)
                    print(json.dumps({"round": n, "kind": kind, **result}), flush=True)
                    rounds[kind].append(result)
        finally:
            redis.stop()

    def median(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[kind])

    report: dict[str, Any] = {
        "benchmark": "priorities",
        "commit": code_commit(),
        "before_commit": code_commit(args.before),
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "settings": {"runs": args.runs, "rounds": args.rounds, "claim_count": 10},
        "rounds": rounds,
        "runs_per_second_after_over_before": round(
            median("after", "runs_per_second") / median("before", "runs_per_second"), 3
        ),
        "runs_per_second_mixed_over_after": round(
            median("mixed", "runs_per_second") / median("after", "runs_per_second"), 3
        ),
        "runs_per_second_keyed_over_after": round(
            median("keyed", "runs_per_second") / median("after", "runs_per_second"), 3
        ),
        "runs_per_second_keyed_over_keyed_before": round(
            median("keyed", "runs_per_second") / median("keyed_before", "runs_per_second"), 3
        ),
        "redis_commands_per_run": {
            kind: round(median(kind, "redis_commands_per_run"), 2) for kind in rounds
        },
    }
    save_report(report, args.out, args)
    _plot(report, args.plot)
    print(json.dumps({k: v for k, v in report.items() if k != "rounds"}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
