"""``tickwork-devcluster``: build, start and stop the local control plane.

``up`` is idempotent: when a control plane from an earlier ``up`` still
answers, it prints that one's kubeconfig. The kubeconfig path is always the
last line of ``up``'s output, so scripts can take it with ``tail -n1``.
``up --node`` adds a node (kubelet, containerd, pod network, DNS) and loads
Tickwork's image into it; ``image`` builds that image.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from tickwork_dev.devcluster import build, process
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.errors import DevClusterError
from tickwork_dev.devcluster.redis import RedisServer

UP_TIMEOUT_SECONDS = 3600.0  # a cold build of the control plane included


def state_dir() -> Path:
    return Path(os.environ.get("TICKWORK_DEVCLUSTER_DIR", ".devcluster")).resolve()


def _state_file() -> Path:
    return state_dir() / "state.json"


def _read_state() -> dict[str, object] | None:
    try:
        state: dict[str, object] = json.loads(_state_file().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return state


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _answers(state: dict[str, object]) -> bool:
    """True if the recorded control plane's apiserver is ready."""
    workdir = Path(str(state["workdir"]))
    context = ssl.create_default_context(cafile=str(workdir / "pki" / "ca.crt"))
    context.load_cert_chain(str(workdir / "pki" / "admin.crt"), str(workdir / "pki" / "admin.key"))
    url = f"{state['server']}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)  # noqa: PLR2004 - HTTP OK
    except OSError:
        return False


def _running_state() -> dict[str, object] | None:
    state = _read_state()
    if state and state.get("ready") and _alive(int(str(state["pid"]))) and _answers(state):
        return state
    return None


def cmd_build(args: argparse.Namespace) -> int:
    bundles = [build.controlplane_bundle(), build.controller_manager_bundle()]
    if args.helm:
        bundles.append(build.helm_bundle())
    if args.actionlint:
        bundles.append(build.actionlint_bundle())
    if args.helm_docs:
        bundles.append(build.helm_docs_bundle())
    if args.crane:
        bundles.append(build.crane_bundle())
    if args.kstatus:
        bundles.append(build.kstatus_bundle())
    if args.node:
        bundles += [
            build.node_bundle(),
            build.containerd_bundle(),
            build.runc_bundle(),
            build.kube_router_bundle(),
            build.coredns_bundle(),
        ]
    if args.autoscaling:
        bundles += [
            build.prometheus_bundle(),
            build.prometheus_adapter_bundle(),
            build.keda_bundle(),
        ]
    for bundle in bundles:
        started = time.monotonic()
        path = build.ensure_built(bundle)
        print(f"{bundle.name}: {path} ({time.monotonic() - started:.1f}s)")  # noqa: T201
    return 0


TOOLS = {
    "helm": build.helm_bundle,
    "actionlint": build.actionlint_bundle,
    "glua": build.lua_bundle,
    "helm-docs": build.helm_docs_bundle,
    "promtool": build.prometheus_bundle,
    "crane": build.crane_bundle,
    "kstatus": build.kstatus_bundle,
}


def cmd_tool_path(args: argparse.Namespace) -> int:
    """Print the path of a Go-built tool, building it first if the cache lacks it."""
    directory = build.ensure_built(TOOLS[args.tool](), log=False)
    print(directory / args.tool)  # noqa: T201
    return 0


def cmd_image(_args: argparse.Namespace) -> int:
    """Build Tickwork's image (and its Debian base) with podman; print what was built."""
    from tickwork_dev.devcluster import images  # noqa: PLC0415 - podman only when asked

    report = images.tickwork_image()
    how = "cached" if report.cached else "built"
    size = report.size_bytes / 2**20
    print(f"{how} {report.image.ref} in {report.seconds:.1f}s, {size:.0f} MiB uncompressed")  # noqa: T201
    print(f"archive: {report.image.archive}")  # noqa: T201
    print(report.image.ref)  # noqa: T201
    return 0


def cmd_manifests(_args: argparse.Namespace) -> int:
    from tickwork_dev.devcluster import manifests  # noqa: PLC0415 - needs helm, built on demand

    print(f"wrote {manifests.write()}")  # noqa: T201
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    state = _running_state()
    if state is None:
        cmd_down(args)
        directory = state_dir()
        directory.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "tickwork_dev.devcluster", "serve"]
        if args.with_controller_manager:
            argv.append("--with-controller-manager")
        if args.redis:
            argv.append("--redis")
        if args.node:
            argv.append("--node")
        log = directory / "supervisor.log"
        # The supervisor outlives this command; its servers die with it.
        proc = process.spawn(argv, log_path=log, die_with_parent=False)
        deadline = time.monotonic() + UP_TIMEOUT_SECONDS
        while (state := _read_state()) is None or not state.get("ready"):
            if proc.poll() is not None:
                print(process.log_tail(log, 60), file=sys.stderr)  # noqa: T201
                print("the control plane did not start; see above", file=sys.stderr)  # noqa: T201
                return 1
            if time.monotonic() > deadline:
                print("timed out waiting for the control plane", file=sys.stderr)  # noqa: T201
                return 1
            time.sleep(0.2)
    if state.get("redis_url"):
        print(f"redis: {state['redis_url']}")  # noqa: T201
    if state.get("image"):
        print(f"node: {state['node']}, image loaded: {state['image']}")  # noqa: T201
    print(f"server: {state['server']}")  # noqa: T201
    print(state["kubeconfig"])  # noqa: T201
    return 0


def _is_supervisor(pid: int) -> bool:
    """Whether ``pid`` still is our supervisor (a stale state file may name a reused pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"tickwork_dev.devcluster" in command and b"serve" in command


def cmd_down(_args: argparse.Namespace) -> int:
    state = _read_state()
    if state is None:
        return 0
    pid = int(str(state["pid"]))
    if _alive(pid) and _is_supervisor(pid):
        os.kill(pid, signal.SIGTERM)
        # A node's clean-up (containers, mounts, network) takes a while.
        deadline = time.monotonic() + 120
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    _state_file().unlink(missing_ok=True)
    print("control plane stopped")  # noqa: T201
    return 0


def cmd_status(_args: argparse.Namespace) -> int:
    state = _running_state()
    if state is None:
        print("not running")  # noqa: T201
        return 1
    print(json.dumps(state, indent=2))  # noqa: T201
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the servers in the foreground until SIGTERM or SIGINT (the supervisor)."""
    directory = state_dir()
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    redis = RedisServer(workdir=directory / "redis") if args.redis else None
    with contextlib.ExitStack() as stack:
        image, node_name = None, None
        if args.node:
            from tickwork_dev.devcluster import images, node  # noqa: PLC0415 - root and podman

            image = images.tickwork_image().image
            cluster = stack.enter_context(node.local_cluster(directory))
            if cluster.plane is None or cluster.node is None:
                raise DevClusterError("the local cluster came up without its node")
            cluster.node.load_image(image)
            plane, node_name = cluster.plane, cluster.node.name
        else:
            plane = ControlPlane(
                workdir=directory / "controlplane",
                with_controller_manager=args.with_controller_manager,
            )
            stack.enter_context(plane)
        if redis is not None:
            stack.enter_context(redis)
        state = {
            "pid": os.getpid(),
            "ready": True,
            "workdir": str(plane.workdir),
            "server": plane.server,
            "kubeconfig": str(plane.kubeconfig),
            "version": plane.version().get("gitVersion"),
            "redis_url": redis.url if redis else None,
            "node": node_name,
            "image": image.ref if image is not None else None,
        }
        tmp = _state_file().with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.rename(_state_file())
        print(f"control plane ready: {plane.server}", flush=True)  # noqa: T201
        stopping.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tickwork-devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build (or find cached) control-plane binaries")
    p_build.add_argument("--helm", action="store_true", help="build helm too")
    p_build.add_argument("--actionlint", action="store_true", help="build actionlint too")
    p_build.add_argument(
        "--kstatus", action="store_true", help="build kstatus (Flux's health check) too"
    )
    p_build.add_argument("--helm-docs", action="store_true", help="build helm-docs too")
    p_build.add_argument(
        "--crane", action="store_true", help="build crane too (a local OCI registry)"
    )
    p_build.add_argument(
        "--node",
        action="store_true",
        help="build a node's parts too (kubelet, containerd, runc, kube-router, CoreDNS)",
    )
    p_build.add_argument(
        "--autoscaling",
        action="store_true",
        help="build Prometheus, prometheus-adapter and KEDA too",
    )
    p_build.set_defaults(func=cmd_build)
    p_tool = sub.add_parser("tool-path", help="print the path of a Go-built tool (built if needed)")
    p_tool.add_argument("tool", choices=sorted(TOOLS))
    p_tool.set_defaults(func=cmd_tool_path)
    for name, func, text in (
        ("up", cmd_up, "start the control plane in the background (idempotent)"),
        ("serve", cmd_serve, "run the control plane in the foreground"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--with-controller-manager", action="store_true")
        p.add_argument("--redis", action="store_true", help="also start a redis-server")
        p.add_argument(
            "--node",
            action="store_true",
            help="add a node (needs root) and load Tickwork's image into it",
        )
        p.set_defaults(func=func)
    sub.add_parser("down", help="stop the background control plane").set_defaults(func=cmd_down)
    sub.add_parser(
        "manifests", help="render manifests/tickwork.yaml from the Helm chart"
    ).set_defaults(func=cmd_manifests)
    sub.add_parser("image", help="build Tickwork's image with podman").set_defaults(func=cmd_image)
    sub.add_parser("status", help="show the running control plane").set_defaults(func=cmd_status)
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except DevClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    return result


if __name__ == "__main__":
    sys.exit(main())
