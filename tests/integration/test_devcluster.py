"""The local control plane's launcher: idempotent `up`, clean `down`, and no orphan
servers when whoever started them dies."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.cluster import existing_cluster
from tickwork_dev.devcluster.errors import StartError
from tickwork_dev.devcluster.node import require_free_space

pytestmark = pytest.mark.skipif(
    existing_cluster() is not None, reason="launcher tests need the local control plane"
)


def _wait_for_exit(pids: list[int], timeout: float) -> list[int]:
    """Block until every pid has exited (pidfd readiness, no polling); return survivors."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue  # already gone
    try:
        pending = set(fds)
        while pending:
            ready, _, _ = select.select(list(pending), [], [], timeout)
            if not ready:
                break
            pending -= set(ready)
    finally:
        for fd in fds:
            os.close(fd)
    return [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _is_zombie(pid)]


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _command_lines() -> list[str]:
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return lines


def _devcluster(state: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TICKWORK_DEVCLUSTER_DIR": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "tickwork_dev.devcluster", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(300)
def test_up_is_idempotent_prints_the_kubeconfig_last_and_down_leaves_nothing(
    tmp_path: Path,
) -> None:
    first = _devcluster(tmp_path, "up")
    assert first.returncode == 0, first.stderr
    kubeconfig = Path(first.stdout.splitlines()[-1])
    assert kubeconfig.is_file()

    state = json.loads((tmp_path / "state.json").read_text())
    supervisor = int(state["pid"])
    servers = process.children(supervisor)
    assert len(servers) == 2  # etcd and kube-apiserver

    second = _devcluster(tmp_path, "up")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1] == str(kubeconfig)
    assert json.loads((tmp_path / "state.json").read_text())["pid"] == supervisor

    down = _devcluster(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    assert _wait_for_exit([supervisor, *servers], timeout=30) == []
    assert not (tmp_path / "state.json").exists()


@pytest.mark.timeout(300)
def test_servers_die_with_the_process_that_started_them(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import json, os, sys, threading
        from pathlib import Path
        from tickwork_dev.devcluster.controlplane import ControlPlane
        plane = ControlPlane(workdir=Path({str(tmp_path)!r}))
        plane.start()
        print(json.dumps([p.pid for p in plane._procs.values()]), flush=True)
        threading.Event().wait()
    """)
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as owner:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line, "the control plane did not start"
        servers = json.loads(line)
        assert len(servers) == 2

        owner.send_signal(signal.SIGKILL)  # an interrupted test run, at its harshest
        owner.wait()
    assert _wait_for_exit(servers, timeout=30) == []


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path: the kubelet's Unix sockets live under the node's
    (a worker's pytest directory, popen-gwN/<test name>, is too deep for them)."""
    path = Path(tempfile.mkdtemp(prefix="tw-node-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(600)
def test_up_with_a_node_runs_pods_with_tickworks_image_and_down_removes_it(
    short_tmp: Path,
) -> None:
    from tickwork_dev.devcluster import hostnet  # noqa: PLC0415 - only this test needs it

    tmp_path = short_tmp
    up = _devcluster(tmp_path, "up", "--node", timeout=540)  # the image may be built first
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = Path(up.stdout.splitlines()[-1])
        assert "image loaded: localhost/tickwork:dev-" in up.stdout
        kubectl = [str(Path(sys.executable).parent / "kubectl"), f"--kubeconfig={kubeconfig}"]
        listed = subprocess.run(
            [*kubectl, "get", "nodes", "-o", "json"], capture_output=True, text=True, check=True
        )
        nodes = json.loads(listed.stdout)
        [node] = nodes["items"]
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True"
        # The image loaded into the node runs as a Pod (it is never pulled: no registry).
        image = up.stdout.split("image loaded: ")[1].split()[0]
        subprocess.run(
            [
                *kubectl,
                "run",
                "probe",
                f"--image={image}",
                "--restart=Never",
                "--image-pull-policy=Never",
                "--command",
                "--",
                "tickwork-worker",
                "--help",
            ],
            check=True,
            capture_output=True,
        )
        succeeded = "--for=jsonpath={.status.phase}=Succeeded"
        subprocess.run(
            [*kubectl, "wait", succeeded, "pod/probe", "--timeout=120s"],
            check=True,
            capture_output=True,
        )
        dns = subprocess.run(
            [
                *kubectl,
                "-n",
                "kube-system",
                "get",
                "pods",
                "-l",
                "k8s-app=kube-dns",
                "-o",
                "jsonpath={.items[0].status.phase}",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert dns.stdout == "Running"
        assert hostnet.bridge_exists()
    finally:
        down = _devcluster(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    # Nothing of the node is left on the host: bridge, firewall, mounts, processes.
    assert not hostnet.bridge_exists()
    tables = subprocess.run(
        ["nft", "list", "tables"], capture_output=True, text=True, check=True
    ).stdout
    assert hostnet.FIREWALL_TABLE not in tables
    assert "kube-proxy" not in tables
    assert "/run/tickwork-node" not in Path("/proc/self/mounts").read_text()
    leftovers = [
        cmd
        for cmd in _command_lines()
        if any(
            name in cmd
            for name in ("containerd-shim-runc-v2", "kubelet --config", "kube-router --kubeconfig")
        )
    ]
    assert leftovers == []


def test_a_node_without_room_for_its_images_refuses_to_start_and_says_where(
    tmp_path: Path,
) -> None:
    require_free_space(tmp_path, minimum_gib=0.001)
    with pytest.raises(StartError, match=rf"GiB free under {tmp_path}; the local node needs"):
        require_free_space(tmp_path, minimum_gib=10**9)


def test_a_node_directory_too_deep_for_the_kubelets_sockets_is_refused_at_once(
    tmp_path: Path,
) -> None:
    from tickwork_dev.devcluster.controlplane import ControlPlane  # noqa: PLC0415
    from tickwork_dev.devcluster.node import Node  # noqa: PLC0415

    deep = tmp_path / ("x" * 90)
    node = Node(workdir=deep, plane=ControlPlane(workdir=tmp_path / "controlplane"))
    with pytest.raises(StartError, match=r"too long for the kubelet's Unix sockets .* > 107"):
        node.start()
    assert not deep.exists()  # refused before anything was made or started
