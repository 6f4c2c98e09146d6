"""The host side of a local node: its bridge, its firewall, and a thorough clean-up.

Pods live on one Linux bridge (``tickwork0``) whose address is the node's
address; the API server listens there too, so Pods reach it through the
``kubernetes`` Service. Nothing leaves the machine: a firewall table of our
own drops anything a Pod sends to another interface, and anything it sends to
the host but the API server's port; CoreDNS answers only for the cluster's
own names.

Everything here needs root, and there is one node per machine. :func:`up`
records what it found (the sysctls it changes) in the node's run directory;
:func:`down` cleans up, restores them and removes the record, and cleans only
where such a record says the state is ours. A machine that already carries
Kubernetes networking state (a real node) is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tickwork_dev.devcluster.errors import StartError

BRIDGE = "tickwork0"
#: Pods get addresses from this range; the node (the bridge) has the first one.
POD_SUBNET = "10.244.0.0/24"
NODE_ADDRESS = "10.244.0.1"
_PREFIX = 24
#: Our firewall table (nftables); deleted as a whole on clean-up.
FIREWALL_TABLE = "tickwork-node"
#: Tables that kube-proxy (nftables mode) creates.
_FOREIGN_TABLES = (("ip", "kube-proxy"), ("ip6", "kube-proxy"))
#: What :func:`up` changes, restored by :func:`down`.
_SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
)
_RECORD = "host.json"
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
    needed = (
        ("ip", "iproute2"),
        ("nft", "nftables"),
        ("iptables", "iptables"),
        ("ipset", "ipset"),
        ("conntrack", "conntrack"),
        ("mount", "mount"),
    )
    for tool, package in needed:
        if shutil.which(tool) is None:
            raise StartError(f"{tool} is not installed; on Debian: apt-get install {package}")
    if not (CNI_BIN_DIR / "bridge").exists():
        package = "containernetworking-plugins"
        raise StartError(f"no CNI plugins in {CNI_BIN_DIR}; on Debian: apt-get install {package}")


def _sysctl_path(name: str) -> Path:
    path = Path("/proc/sys") / name.replace(".", "/")
    if not path.exists():
        raise StartError(f"the kernel lacks {name} (needed by the local node)")
    return path


def _foreign_state() -> str | None:
    """Kubernetes networking state on this machine that no local node of ours made."""
    if bridge_exists():
        return f"a {BRIDGE} bridge"
    if any(hierarchy.joinpath("kubepods").is_dir() for hierarchy in CGROUP_ROOT.iterdir()):
        return "kubepods cgroups (a kubelet runs here)"
    for family, table in _FOREIGN_TABLES:
        if _run("nft", "list", "table", family, table, check=False).returncode == 0:
            return f"the nftables table {family} {table} (kube-proxy)"
    if "KUBE-" in _run("iptables-save", check=False).stdout:
        return "KUBE- iptables chains (kube-proxy, a kubelet or kube-router)"
    return None


def up(run_dir: Path) -> None:
    """Create the bridge with the node's address and fence it in.

    Refuses a machine with Kubernetes networking state it did not make: clean-up
    would remove it.
    """
    foreign = _foreign_state()
    if foreign is not None:
        raise StartError(
            f"this machine has {foreign} that no local node of Tickwork made; the local "
            "node's clean-up would remove it, so it does not start here"
        )
    saved = {name: _sysctl_path(name).read_text().strip() for name in _SYSCTLS}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / _RECORD).write_text(json.dumps({"sysctls": saved}))
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{NODE_ADDRESS}/{_PREFIX}", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    # Forwarding on the bridge; and traffic between Pods on it must pass netfilter,
    # or a Service's reply would skip the un-DNAT (kube-proxy) and policies would
    # not apply.
    for name in _SYSCTLS:
        _sysctl_path(name).write_text("1")
    rules = f"""
table inet {FIREWALL_TABLE} {{
  set host_ports {{ type inet_service; }}
  chain forward {{
    type filter hook forward priority filter - 10; policy accept;
    iifname "{BRIDGE}" oifname != "{BRIDGE}" counter drop comment "Pods reach nothing off this node"
  }}
  chain input {{
    type filter hook input priority filter - 10; policy accept;
    iifname "{BRIDGE}" ct state established,related accept
    iifname "{BRIDGE}" tcp dport @host_ports accept
    iifname "{BRIDGE}" counter drop comment "Pods reach only the API server on the host"
  }}
}}
"""
    result = subprocess.run(
        ["nft", "-f", "-"], input=rules, capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        raise StartError(f"nft could not load the node's firewall: {result.stderr.strip()}")


#: A network namespace of the node's own holding an address the workers count as
#: public (on the chart's defaults they reach public addresses only): attacking
#: servers listen there. Routed on this machine only; nothing leaves it.
PUBLIC_NETNS = "tickwork-public"
PUBLIC_ADDRESS = "11.12.13.14"
_PUBLIC_LINK = ("twpub0", "twpub1")  # the host's end, the namespace's end
_PUBLIC_NET = ("10.250.0.1", "10.250.0.2")  # their addresses (/30)


def public_up() -> None:
    """Make :data:`PUBLIC_NETNS` with :data:`PUBLIC_ADDRESS`, and let Pods reach that one
    address (the firewall drops anything else they send off the bridge)."""
    host, inner = _PUBLIC_LINK
    public_down()
    _run("ip", "netns", "add", PUBLIC_NETNS)
    _run("ip", "link", "add", host, "type", "veth", "peer", "name", inner, "netns", PUBLIC_NETNS)
    _run("ip", "addr", "add", f"{_PUBLIC_NET[0]}/30", "dev", host)
    _run("ip", "link", "set", host, "up")
    inside = ("ip", "netns", "exec", PUBLIC_NETNS, "ip")
    _run(*inside, "link", "set", "lo", "up")
    _run(*inside, "addr", "add", f"{_PUBLIC_NET[1]}/30", "dev", inner)
    _run(*inside, "addr", "add", f"{PUBLIC_ADDRESS}/32", "dev", inner)
    _run(*inside, "link", "set", inner, "up")
    _run(*inside, "route", "add", "default", "via", _PUBLIC_NET[0])
    _run("ip", "route", "add", f"{PUBLIC_ADDRESS}/32", "via", _PUBLIC_NET[1])
    _run(
        "nft",
        "insert",
        "rule",
        "inet",
        FIREWALL_TABLE,
        "forward",
        "iifname",
        BRIDGE,
        "oifname",
        host,
        "ip",
        "daddr",
        PUBLIC_ADDRESS,
        "accept",
    )


def public_down() -> None:
    """Remove :func:`public_up`'s namespace (its link and route go with it). Idempotent."""
    _run("ip", "netns", "delete", PUBLIC_NETNS, check=False)
    _run("ip", "link", "delete", _PUBLIC_LINK[0], check=False)


def admit(port: int) -> None:
    """Let Pods reach ``port`` on the host (the API server's)."""
    _run("nft", "add", "element", "inet", FIREWALL_TABLE, "host_ports", f"{{ {port} }}")


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
    """Kill what still runs in the kubelet's cgroup tree ``name`` (containers whose
    shims died with a crashed node), then remove the tree in every hierarchy."""
    tops = [hierarchy / name for hierarchy in CGROUP_ROOT.iterdir() if (hierarchy / name).is_dir()]
    for top in tops:
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                for pid in procs.read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
    for top in tops:
        directories = sorted(
            (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        )
        for directory in [*directories, top]:
            for _ in range(50):  # a killed process leaves its cgroup a moment later
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # the kernel's own pace of reaping


def _remove_kube_rules() -> None:
    """Drop the iptables chains (kubelet canaries, kube-router's firewall) and ipsets
    that the node's components made: every ``KUBE-`` name. A machine that is a
    real Kubernetes node has such rules too: the local node is not for one."""
    for save, restore in (
        ("iptables-save", "iptables-restore"),
        ("ip6tables-save", "ip6tables-restore"),
    ):
        if shutil.which(save) is None:
            continue
        dump = _run(save, check=False).stdout
        kept = "\n".join(line for line in dump.splitlines() if "KUBE-" not in line) + "\n"
        if kept.strip() != dump.strip():
            subprocess.run(
                [restore], input=kept, capture_output=True, text=True, check=False, timeout=30
            )
    if shutil.which("ipset") is not None:
        for name in _run("ipset", "list", "-n", check=False).stdout.split():
            if name.startswith("KUBE-"):
                _run("ipset", "destroy", name, check=False)


def down(run_dir: Path, *, netns_dir: Path | None = None) -> None:
    """Remove what :func:`up` and the node's components left on the host, and restore
    the sysctls; only where :func:`up`'s record says the state is ours. Idempotent."""
    record = run_dir / _RECORD
    if not record.exists():
        return
    if netns_dir is not None and netns_dir.is_dir():
        for netns in netns_dir.iterdir():
            _run("umount", "--lazy", str(netns), check=False)
            with contextlib.suppress(OSError):
                netns.unlink()
    _remove_cgroups("kubepods")
    public_down()
    # Pod interfaces (veth) vanish with their namespaces; the bridge is ours.
    _run("ip", "link", "delete", BRIDGE, check=False)
    for family, table in (("inet", FIREWALL_TABLE), *_FOREIGN_TABLES):
        _run("nft", "delete", "table", family, table, check=False)
    _remove_kube_rules()
    with contextlib.suppress(OSError, ValueError, KeyError):
        for name, value in json.loads(record.read_text())["sysctls"].items():
            _sysctl_path(name).write_text(value)
    record.unlink(missing_ok=True)


def bridge_exists() -> bool:
    return _run("ip", "link", "show", BRIDGE, check=False).returncode == 0
