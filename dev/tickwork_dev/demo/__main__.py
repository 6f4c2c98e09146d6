"""``make demo``: Tickwork running locally on its embedded defaults, until Ctrl-C.

Starts a real control plane (etcd + kube-apiserver), Redis, the operator and
the worker as processes (or, with ``--queue memory``, watcher and worker in
one process and no Redis), installs the CRD, applies the examples plus a few
jobs that run within the first minute, and shows ``kubectl get
scheduledjobs`` as it changes. Everything is torn down on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tickwork_dev.demo.workdir import fresh_workdir
from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.errors import StartError
from tickwork_dev.devcluster.redis import RedisServer

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "demo"
REFRESH_SECONDS = 2.0


def _say(text: str) -> None:
    print(text, flush=True)  # noqa: T201 - the demo talks to its user


def demo_jobs(now: dt.datetime) -> list[dict[str, Any]]:
    """Jobs that show Tickwork working in the first minute or two."""
    run_at = (now + dt.timedelta(seconds=15)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def job(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "tickwork.dev/v1alpha1",
            "kind": "ScheduledJob",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }

    return [
        job(
            "hello-now",
            {
                "runAt": run_at,
                "description": "a one-shot run, 15 s from now",
                "task": {"echo": {"message": "hello from Tickwork"}},
            },
        ),
        job(
            "every-minute",
            {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Allow",
                "task": {"echo": {"message": "tick"}},
            },
        ),
        job(
            "nap",
            {
                "schedule": "*/2 * * * *",
                "timeZone": "Europe/Berlin",
                "task": {"python": {"name": "tickwork.sleep", "args": ["3"]}},
            },
        ),
    ]


def choose_queue(requested: str, *, redis_server: str | None) -> tuple[str, str]:
    """The queue the demo runs on, and a one-line notice when that is not what was asked.

    Without ``redis-server`` the default falls back to the in-memory queue rather than
    stopping a first try; ``--queue redis`` asked for explicitly still needs it
    (:class:`ValueError` says so).
    """
    if requested == "redis" and redis_server is None:
        raise ValueError(
            "redis-server is not installed: install it (apt-get install "
            "redis-server), or leave --queue out to run in memory"
        )
    if requested != "auto":
        return requested, ""
    if redis_server is not None:
        return "redis", ""
    return "memory", (
        "Notice: redis-server is not installed, so watcher and worker share an "
        "in-memory queue in one process (apt-get install redis-server for the "
        "real thing)."
    )


class Screen:
    """What the demo prints as the table changes: the whole screen redrawn in place on a
    terminal; elsewhere (a log, a pipe) only tables that changed, AGE aside."""

    CLEAR = "\x1b[H\x1b[2J"

    def __init__(self, *, terminal: bool) -> None:
        self.terminal = terminal
        self._last: list[list[str]] | None = None

    def frame(self, title: str, table: str) -> str | None:
        if self.terminal:
            return f"{self.CLEAR}{title}\n{table}"
        # AGE (the last column) ticks on every refresh; a change is anything else.
        shape = [line.split()[:-1] for line in table.splitlines()]
        if shape == self._last:
            return None
        self._last = shape
        return f"{title}\n{table}"


def _succeeded(cluster: Cluster, name: str) -> bool:
    result = cluster.kubectl("get", "sj", name, "-n", NAMESPACE, "-o", "json", check=False)
    if result.returncode != 0:
        return False
    last = (json.loads(result.stdout).get("status") or {}).get("lastRun") or {}
    return last.get("outcome") == "Succeeded"


def _start_components(
    cluster: Cluster,
    workdir: Path,
    queue: str,
    redis: RedisServer | None,
    stack: contextlib.ExitStack,
) -> None:
    # The demo's third job is a tickwork.sleep: Tickwork's demo tasks are turned on.
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "TICKWORK_OPERATOR_LOG_FORMAT": "text",
        "TICKWORK_WORKER_LOG_FORMAT": "text",
        "TICKWORK_WORKER_DEMO_TASKS": "true",
    }
    if queue == "memory":
        worker_port = process.free_port()
        local = TickworkProcess(
            command="tickwork-local",
            executable=sys.executable,
            args=["-m", "tickwork_dev.demo", "local"],
            env={**env, "TICKWORK_WORKER_HTTP_PORT": str(worker_port)},
            log_path=workdir / "tickwork-local.log",
            port_env="TICKWORK_OPERATOR_HTTP_PORT",
        ).start()
        stack.callback(local.stop)
        local.wait_ready()
        _say(f"  watcher + worker (one process, in-memory queue): log {local.log_path}")
        return
    assert redis is not None  # noqa: S101 - redis mode
    env |= {"TICKWORK_REDIS_URL": redis.url}
    for command in ("tickwork-operator", "tickwork-worker"):
        component = TickworkProcess(
            command=command, env=env, log_path=workdir / f"{command}.log"
        ).start()
        stack.callback(component.stop)
        component.wait_ready()
        _say(
            f"  {command}: http://127.0.0.1:{component.http_port}/metrics, log {component.log_path}"
        )


def run_demo(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir).resolve()
    fresh_workdir(workdir)
    with contextlib.ExitStack() as stack:
        _say("Starting a local Kubernetes control plane (etcd + kube-apiserver) ...")
        plane = stack.enter_context(ControlPlane(workdir=workdir / "controlplane"))
        cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane)
        _say(f"  API server {plane.server} {cluster.version()['gitVersion']}")
        _say(f"  export KUBECONFIG={plane.kubeconfig}   # to use kubectl meanwhile")
        cluster.kubectl("apply", "-f", str(ROOT / "manifests" / "crds"))
        cluster.wait_established("scheduledjobs.tickwork.dev", "calendars.tickwork.dev")
        redis = None
        try:
            queue, notice = choose_queue(args.queue, redis_server=shutil.which("redis-server"))
        except ValueError as exc:
            _say(f"error: {exc}")
            return 1
        if notice:
            _say(notice)
        args.queue = queue
        if queue == "redis":
            redis = stack.enter_context(RedisServer(workdir=workdir / "redis", appendonly=True))
            _say(f"  Redis on 127.0.0.1:{redis.port} (with a password, AOF on)")
        _say("Starting Tickwork ...")
        _start_components(cluster, workdir, args.queue, redis, stack)
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(ROOT / "manifests" / "examples"))
        items = demo_jobs(dt.datetime.now(dt.UTC))
        listing = {"apiVersion": "v1", "kind": "List", "items": items}
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(listing))
        _say(f"Applied manifests/examples and three demo jobs to namespace {NAMESPACE!r}.")
        _say("Ctrl-C stops everything.\n")
        return _watch(cluster, args)


def _watch(cluster: Cluster, args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.duration if args.duration else None
    screen = Screen(terminal=sys.stdout.isatty())
    try:
        while True:
            table = cluster.kubectl("get", "scheduledjobs", "-n", NAMESPACE, check=False).stdout
            title = (
                f"--- {dt.datetime.now().astimezone():%H:%M:%S}  kubectl get "
                f"scheduledjobs -n {NAMESPACE}   (Ctrl-C stops)"
            )
            shown = screen.frame(title, table)
            if shown is not None:
                _say(shown)
            if args.until_succeeded and all(
                _succeeded(cluster, name) for name in ("hello-now", "every-minute")
            ):
                _say("The demo jobs succeeded.")
                return 0
            if deadline is not None and time.monotonic() > deadline:
                _say("Time is up.")
                return 1 if args.until_succeeded else 0
            time.sleep(REFRESH_SECONDS)  # a refresh interval for a human watching
    except KeyboardInterrupt:
        _say("\nStopping ...")
        return 0


def run_local() -> int:
    from tickwork.logs import configure_logging  # noqa: PLC0415
    from tickwork_dev.demo.local import run_local as local  # noqa: PLC0415 - imports kopf
    from tickwork_operator.settings import OperatorSettings  # noqa: PLC0415
    from tickwork_worker.settings import WorkerSettings  # noqa: PLC0415

    operator, worker = OperatorSettings(queue="memory"), WorkerSettings(queue="memory")
    configure_logging(level=operator.log_level, json_format=operator.log_format == "json")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(local(operator, worker))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tickwork-demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "mode",
        nargs="?",
        choices=["demo", "local"],
        default="demo",
        help="local: watcher and worker in this process (used by --queue memory)",
    )
    parser.add_argument(
        "--queue",
        choices=["auto", "redis", "memory"],
        default="auto",
        help="auto (the default): Redis if redis-server is installed, else in memory",
    )
    parser.add_argument(
        "--pods",
        action="store_true",
        help="run the Helm chart in Pods on a local node (root) and watch the HPA absorb a burst",
    )
    parser.add_argument("--burst", type=int, default=100, help="with --pods: jobs in the burst")
    parser.add_argument(
        "--until-scaled",
        action="store_true",
        help="with --pods: exit 0 once the workers scaled up and back down (for scripts)",
    )
    parser.add_argument(
        "--workdir", default=os.environ.get("TICKWORK_DEMO_DIR", ".devcluster/demo")
    )
    parser.add_argument("--duration", type=float, default=0, help="stop after this many seconds")
    parser.add_argument(
        "--until-succeeded",
        action="store_true",
        help="exit 0 as soon as the demo jobs have succeeded (for scripts)",
    )
    args = parser.parse_args(argv)
    if args.mode == "local":
        return run_local()
    _stop_on_signals()
    try:
        if args.pods:
            from tickwork_dev.demo.pods import run_pods_demo  # noqa: PLC0415 - root, podman

            return run_pods_demo(args)
        return run_demo(args)
    except (subprocess.CalledProcessError, StartError) as exc:
        _say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:  # a signal during the start: cleaned up on the way here
        _say("Stopped.")
        return 130


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP — from `timeout`, CI or a closed terminal — stop the demo as
    Ctrl-C does, through the same clean-up: every process, container, mount and
    network rule it started goes."""

    def interrupt(signum: int, _frame: object) -> None:
        for number in (signal.SIGTERM, signal.SIGHUP):  # a second one must not cut the
            signal.signal(number, signal.SIG_IGN)  # clean-up short
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, interrupt)


if __name__ == "__main__":
    sys.exit(main())
