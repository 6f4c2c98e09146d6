"""The host side of a local node: its bridge, its firewall, and a thorough clean-up.

Pods live on one Linux bridge (``tickwork0``) whose address is the node's
address; the API server listens there too, so Pods reach it through the
``kubernetes`` Service. Nothing leaves the machine: a firewall table of our
own drops anything a Pod sends to another interface, and CoreDNS answers
only for the cluster's own names.

Everything here needs root, and there is one node per machine: the bridge,
the firewall table and containerd's shim sockets have fixed names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from tickwork.devcluster.errors import StartError

BRIDGE = "tickwork0"
#: Pods get addresses from this range; the node (the bridge) has the first one.
POD_SUBNET = "10.244.0.0/24"
NODE_ADDRESS = "10.244.0.1"
_PREFIX = 24
#: Our firewall table (nftables); deleted as a whole on clean-up.
FIREWALL_TABLE = "tickwork-node"
#: Tables that kube-proxy (nftables mode) creates.
_FOREIGN_TABLES = (("ip", "kube-proxy"), ("ip6", "kube-proxy"))
#: containerd puts every shim's socket here, whatever its own state directory.
SHIM_SOCKETS = Path("/run/containerd/s")
#: Debian's containernetworking-plugins.
CNI_BIN_DIR = Path("/usr/lib/cni")
#: cgroup v1 controllers are mounted one per directory here (cgroupfs driver).
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)
    if check and result.returncode != 0:
        raise StartError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result


def require_root() -> None:
    if os.geteuid() != 0:
        raise StartError(
            "a local node needs root (network namespaces, mounts, cgroups); run as root, "
            "or point the suite at a cluster with TICKWORK_TEST_KUBECONFIG"
        )
    needed = (("ip", "iproute2"), ("nft", "nftables"), ("iptables", "iptables"),
              ("ipset", "ipset"), ("conntrack", "conntrack"), ("mount", "mount"))  # fmt: skip
    for tool, package in needed:
        if shutil.which(tool) is None:
            raise StartError(f"{tool} is not installed; on Debian: apt-get install {package}")
    if not (CNI_BIN_DIR / "bridge").exists():
        package = "containernetworking-plugins"
        raise StartError(f"no CNI plugins in {CNI_BIN_DIR}; on Debian: apt-get install {package}")


def _sysctl(name: str, value: str) -> None:
    path = Path("/proc/sys") / name.replace(".", "/")
    if not path.exists():
        raise StartError(f"the kernel lacks {name} (needed by the local node)")
    path.write_text(value)


def up() -> None:
    """Create the bridge with the node's address and fence it in."""
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{NODE_ADDRESS}/{_PREFIX}", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    _sysctl("net.ipv4.ip_forward", "1")
    # Traffic between Pods on the bridge must pass netfilter, or a Service's
    # reply would skip the un-DNAT (kube-proxy) and policies would not apply.
    _sysctl("net.bridge.bridge-nf-call-iptables", "1")
    _sysctl("net.bridge.bridge-nf-call-ip6tables", "1")
    rules = f"""
table inet {FIREWALL_TABLE} {{
  chain forward {{
    type filter hook forward priority filter - 10; policy accept;
    iifname "{BRIDGE}" oifname != "{BRIDGE}" counter drop comment "Pods reach nothing off this node"
  }}
}}
"""
    result = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True,
                            check=False, timeout=30)  # fmt: skip
    if result.returncode != 0:
        raise StartError(f"nft could not load the node's firewall: {result.stderr.strip()}")


def _mounts_under(prefixes: tuple[Path, ...]) -> list[str]:
    """Mount points below any of ``prefixes``, deepest first."""
    points: list[str] = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].replace("\\040", " ")
        if any(point == str(p) or point.startswith(f"{p}/") for p in prefixes):
            points.append(point)
    return sorted(points, key=lambda point: point.count("/"), reverse=True)


def unmount_under(*prefixes: Path) -> None:
    for point in _mounts_under(prefixes):
        _run("umount", "--lazy", point, check=False)


def kill_processes_of(*binaries: Path) -> None:
    """SIGKILL every process running one of ``binaries`` (containerd's shims, say)."""
    wanted = {str(binary) for binary in binaries}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if str((entry / "exe").readlink()) in wanted:
                os.kill(int(entry.name), signal.SIGKILL)


def _remove_cgroups(name: str) -> None:
    """Remove the kubelet's cgroup tree ``name`` in every v1 hierarchy, leaves first."""
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / name
        if not top.is_dir():
            continue
        directories = sorted((p for p in top.rglob("*") if p.is_dir()),
                             key=lambda p: len(p.parts), reverse=True)  # fmt: skip
        for directory in [*directories, top]:
            with contextlib.suppress(OSError):
                directory.rmdir()


def _remove_kube_rules() -> None:
    """Drop the iptables chains (kubelet canaries, kube-router's firewall) and ipsets
    that the node's components made: every ``KUBE-`` name. A machine that is a
    real Kubernetes node has such rules too: the local node is not for one."""
    for save, restore in (("iptables-save", "iptables-restore"),
                          ("ip6tables-save", "ip6tables-restore")):  # fmt: skip
        if shutil.which(save) is None:
            continue
        dump = _run(save, check=False).stdout
        kept = "\n".join(line for line in dump.splitlines() if "KUBE-" not in line) + "\n"
        if kept.strip() != dump.strip():
            subprocess.run([restore], input=kept, capture_output=True, text=True,
                           check=False, timeout=30)  # fmt: skip
    if shutil.which("ipset") is not None:
        for name in _run("ipset", "list", "-n", check=False).stdout.split():
            if name.startswith("KUBE-"):
                _run("ipset", "destroy", name, check=False)


def down(*, netns_dir: Path | None = None) -> None:
    """Remove what :func:`up` and the node's components left on the host; idempotent."""
    if netns_dir is not None and netns_dir.is_dir():
        for netns in netns_dir.iterdir():
            _run("umount", "--lazy", str(netns), check=False)
            with contextlib.suppress(OSError):
                netns.unlink()
    # Pod interfaces (veth) vanish with their namespaces; the bridge is ours.
    _run("ip", "link", "delete", BRIDGE, check=False)
    for family, table in (("inet", FIREWALL_TABLE), *_FOREIGN_TABLES):
        _run("nft", "delete", "table", family, table, check=False)
    _remove_kube_rules()
    _remove_cgroups("kubepods")
    if SHIM_SOCKETS.is_dir():
        for socket in SHIM_SOCKETS.iterdir():
            with contextlib.suppress(OSError):
                socket.unlink()


def bridge_exists() -> bool:
    return _run("ip", "link", "show", BRIDGE, check=False).returncode == 0
