"""One Kubernetes node on this machine, registered with the local control plane.

containerd 2.x with runc (both built from the Go module proxy) is the CRI
runtime; the kubelet and kube-proxy (nftables mode) come from the control
plane's own Kubernetes module; Pods sit on a CNI bridge (Debian's
``containernetworking-plugins``) fenced in by :mod:`.hostnet`; a NetworkPolicy
agent enforces policies; CoreDNS runs as a Pod behind the cluster DNS
Service. Images are imported from archives (:mod:`.images`); a registry on
loopback (:mod:`.registry`) can be trusted for pulls over plain HTTP.

Two settings this machine requires (``../shared/notes/local-node.md``):
the kubelet runs on cgroup v1 with the cgroupfs driver (``failCgroupV1:
false``), and containerd restricts OOM score adjustments, because processes
here lack CAP_SYS_RESOURCE.

Why one long module (~480 lines): the node's parts (containerd, kubelet,
kube-proxy, CNI, DNS) are configured against each other's paths and
addresses; the configuration files they read are generated here together.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tickwork_dev.devcluster import addons, build, certs, hostnet, images, process
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.controlplane import ControlPlane
from tickwork_dev.devcluster.errors import StartError

READY_TIMEOUT_SECONDS = 180.0
# Measured: a Pods session with every add-on holds 1.2 GiB under the node directory;
# image builds (podman storage, archives) and etcd need the rest.
MIN_FREE_GIB = 8.0
#: Short, fixed paths: unix socket paths are limited to 108 bytes.
RUN_DIR = Path("/run/tickwork-node")
#: The longest path a Unix socket may have (sun_path, 108 bytes with its final NUL).
MAX_SOCKET_PATH = 107
CLUSTER_DNS = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
#: The controller-manager settings a node's autoscaling tests want: the HPA
#: looks every 5 s instead of 15 s (the behaviour policies still bound it).
CONTROLLER_MANAGER_ARGS = ("--horizontal-pod-autoscaler-sync-period=5s",)


def _containerd_config(
    *,
    root: Path,
    state: Path,
    socket: Path,
    runc: Path,
    cni_conf: Path,
    sandbox: str,
    registry_hosts: Path,
) -> str:
    return f"""\
version = 3
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{sandbox}"
    # One hosts.toml per registry (<dir>/<host:port>/hosts.toml), read at each pull:
    # a registry started later is trusted without restarting containerd.
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "{registry_hosts}"

  [plugins.'io.containerd.cri.v1.runtime']
    # Processes here lack CAP_SYS_RESOURCE: lowering oom_score_adj fails every sandbox.
    restrict_oom_score_adj = true
    # Network namespaces under our own state directory, so clean-up finds them all.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{hostnet.CNI_BIN_DIR}"]
      conf_dir = "{cni_conf}"
"""


def _cni_config(ipam_dir: Path) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "tickwork",
        "plugins": [
            {
                "type": "bridge",
                "bridge": hostnet.BRIDGE,
                "isGateway": True,
                "ipMasq": False,  # nothing leaves the node, so nothing to masquerade
                "hairpinMode": True,  # a Pod reaches itself through its own Service
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": hostnet.POD_SUBNET, "gateway": hostnet.NODE_ADDRESS}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _kubelet_config(
    *, workdir: Path, ca: Path, socket: Path, healthz_port: int
) -> dict[str, object]:
    resolv = workdir / "resolv.conf"
    # Pods with dnsPolicy Default get this file: no resolver off the node.
    resolv.write_text(f"nameserver {hostnet.NODE_ADDRESS}\n")
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": hostnet.NODE_ADDRESS,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "containerRuntimeEndpoint": f"unix://{socket}",
        # This machine: cgroup v1 controllers next to cgroup2 ("hybrid"), no systemd.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [CLUSTER_DNS],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv),
        "podLogsDir": str(workdir / "pod-logs"),
        # A shared test machine's disk and memory are not this node's to guard.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        # Images are loaded as `kind load` does and some are also pulled from a local
        # registry under another name: with KubeletEnsureSecretPulledImages (beta, on
        # since 1.35) a pull makes the kubelet re-check every other name of that image,
        # and an `imagePullPolicy: Never` Pod then fails with ErrImageNeverPull.
        "imagePullCredentialsVerificationPolicy": "NeverVerify",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "maxPods": 110,
        "rotateCertificates": False,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    }


@dataclass
class Node:
    """The node's processes, in ``workdir``; the control plane must be started with
    ``address=hostnet.NODE_ADDRESS`` (see :func:`local_cluster`)."""

    workdir: Path
    plane: ControlPlane
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _containerd_dir: Path | None = None
    _runc: Path | None = None
    _imported: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return certs.NODE_NAME

    @property
    def socket(self) -> Path:
        return RUN_DIR / "containerd.sock"

    def log_path(self, component: str) -> Path:
        return self.workdir / "logs" / f"{component}.log"

    def diagnose(self, *, lines: int = 12) -> str:
        """Free disk under the node's directory and the last errors of its runtime."""
        free = shutil.disk_usage(self.workdir).free / 2**30
        out = [f"node disk: {free:.1f} GiB free under {self.workdir}"]
        for component in ("containerd", "kubelet"):
            path = self.log_path(component)
            if not path.exists():
                continue
            errors = [
                line
                for line in path.read_text(errors="replace").splitlines()
                if "level=error" in line or line.startswith("E")
            ]
            out.append(f"{component} errors ({len(errors)}), the last:")
            out.extend(f"  {line[:240]}" for line in errors[-lines:])
        return "\n".join(out)

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        # The kubelet makes Unix sockets under its root (pod-resources/<10 digits>):
        # past 107 bytes the bind fails deep in its start with "invalid argument".
        longest = len(os.fsencode(self.workdir / "kubelet" / "pod-resources" / ("0" * 10)))
        if longest > MAX_SOCKET_PATH:
            raise StartError(
                f"the node's directory {self.workdir} is too long for the kubelet's Unix "
                f"sockets ({longest} > {MAX_SOCKET_PATH} bytes): use a shorter one"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        bin_dir = build.ensure_built(build.node_bundle())
        self._containerd_dir = build.ensure_built(build.containerd_bundle())
        self._runc = build.ensure_built(build.runc_bundle()) / "runc"
        kube_router = build.ensure_built(build.kube_router_bundle()) / "kube-router"
        pause = images.pause_image()
        try:
            self._start_containerd(pause.ref)
            self.load_image(pause)
            self._start_kubelet(bin_dir / "kubelet")
            self.plane.start_scheduler()
            self._start_kube_proxy(bin_dir / "kube-proxy")
            self._start_network_policy_agent(kube_router)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every component and leave nothing behind on the host (idempotent)."""
        for name in ("network-policy-agent", "kube-proxy", "kubelet"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                process.stop(proc)
        self._remove_containers()
        proc = self._procs.pop("containerd", None)
        if proc is not None:
            process.stop(proc)
        if self._containerd_dir is not None:
            hostnet.kill_processes_of(self._containerd_dir / "containerd-shim-runc-v2")
        state = RUN_DIR / "state"
        hostnet.unmount_under(state, self.workdir)
        hostnet.down(RUN_DIR, netns_dir=state / "netns")
        hostnet.unmount_under(state, self.workdir)
        # The unpacked images and Pod volumes are gigabytes; the logs stay for a post-mortem.
        for bulky in ("containerd", "kubelet"):
            shutil.rmtree(self.workdir / bulky, ignore_errors=True)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = process.spawn(argv, log_path=self.log_path(name))
        self._procs[name] = proc
        return proc

    def _start(self, name: str, argv: list[str], *, healthz: str, what: str) -> None:
        """Start a component and wait until its (loopback) health endpoint answers."""
        proc = self._spawn(name, argv)
        process.wait_until(
            lambda: _http_ok(healthz),
            what=what,
            timeout=READY_TIMEOUT_SECONDS,
            proc=proc,
            log_path=self.log_path(name),
        )

    # -- containerd -------------------------------------------------------------------

    def _start_containerd(self, sandbox: str) -> None:
        assert self._containerd_dir is not None  # noqa: S101 - set in start()
        assert self._runc is not None  # noqa: S101 - set in start()
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        cni_conf = self.workdir / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-tickwork.conflist").write_text(
            json.dumps(_cni_config(self.workdir / "cni" / "ipam"), indent=2)
        )
        self.registry_hosts.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "containerd.toml"
        config.write_text(
            _containerd_config(
                root=self.workdir / "containerd",
                state=RUN_DIR / "state",
                socket=self.socket,
                runc=self._runc,
                cni_conf=cni_conf,
                sandbox=sandbox,
                registry_hosts=self.registry_hosts,
            )
        )
        proc = self._spawn(
            "containerd", [str(self._containerd_dir / "containerd"), "--config", str(config)]
        )
        process.wait_until(
            lambda: self.ctr("version", check=False).returncode == 0,
            what="containerd",
            timeout=READY_TIMEOUT_SECONDS,
            proc=proc,
            log_path=self.log_path("containerd"),
        )

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        assert self._containerd_dir is not None  # noqa: S101 - set in start()
        argv = [
            str(self._containerd_dir / "ctr"),
            "--address",
            str(self.socket),
            "--namespace",
            "k8s.io",
            *args,
        ]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise StartError(f"ctr {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    @property
    def registry_hosts(self) -> Path:
        return self.workdir / "certs.d"

    def trust_plain_http_registry(self, host: str) -> None:
        """Let the runtime pull from the registry at ``host`` (``127.0.0.1:PORT``) over
        plain HTTP, as a node is configured for an in-house registry without TLS."""
        directory = self.registry_hosts / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts.toml").write_text(
            f'server = "http://{host}"\n\n[host."http://{host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
        )

    def forget_registry(self, host: str) -> None:
        shutil.rmtree(self.registry_hosts / host, ignore_errors=True)

    def load_image(self, image: images.Image) -> None:
        """Import an image archive into the node's runtime (what `kind load` does)."""
        if image.ref in self._imported:
            return
        self.ctr("images", "import", "--local", str(image.archive))
        names = self.ctr("images", "list", "--quiet").stdout.split()
        if image.ref not in names:
            raise StartError(f"importing {image.archive} did not provide {image.ref}: {names}")
        self._imported.add(image.ref)

    def _remove_containers(self) -> None:
        if "containerd" not in self._procs:
            return
        for task in self.ctr("tasks", "list", "--quiet", check=False).stdout.split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
            self.ctr("tasks", "delete", "--force", task, check=False)
        for container in self.ctr("containers", "list", "--quiet", check=False).stdout.split():
            self.ctr("containers", "delete", container, check=False)

    # -- kubelet and kube-proxy -------------------------------------------------------

    def _start_kubelet(self, binary: Path) -> None:
        pki = self.plane.pki
        kubeconfig = self.plane.write_kubeconfig("kubelet", pki.kubelet, f"system:node:{self.name}")
        healthz = process.free_port()
        config = self.workdir / "kubelet.json"
        config.write_text(
            json.dumps(
                _kubelet_config(
                    workdir=self.workdir, ca=pki.ca_cert, socket=self.socket, healthz_port=healthz
                ),
                indent=2,
            )
        )
        self._start(
            "kubelet",
            [
                str(binary),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={self.name}",
                f"--node-ip={hostnet.NODE_ADDRESS}",
                f"--root-dir={self.workdir / 'kubelet'}",
                f"--cert-dir={self.workdir / 'kubelet-pki'}",
                "--v=1",
            ],
            healthz=f"http://127.0.0.1:{healthz}/healthz",
            what="kubelet",
        )

    def _start_kube_proxy(self, binary: Path) -> None:
        kubeconfig = self.plane.write_kubeconfig(
            "kube-proxy", self.plane.pki.kube_proxy, "system:kube-proxy"
        )
        healthz = process.free_port()
        self._start(
            "kube-proxy",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={self.name}",
                "--proxy-mode=nftables",
                f"--cluster-cidr={hostnet.POD_SUBNET}",
                f"--healthz-bind-address=127.0.0.1:{healthz}",
                f"--metrics-bind-address=127.0.0.1:{process.free_port()}",
                "--v=1",
            ],
            healthz=f"http://127.0.0.1:{healthz}/healthz",
            what="kube-proxy",
        )

    def _start_network_policy_agent(self, binary: Path) -> None:
        """kube-router's firewall alone: NetworkPolicy as iptables rules and ipsets.

        (kube-network-policies, SIG Network's agent, needs nft_queue, which this
        kernel lacks; kube-router uses only what it has.)
        """
        self.plane.apply(_network_policy_agent_rbac())
        kubeconfig = self.plane.write_kubeconfig(
            "network-policy-agent",
            self.plane.pki.network_policy_agent,
            certs.NETWORK_POLICY_AGENT,
        )
        health = process.free_port()
        self._start(
            "network-policy-agent",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={self.name}",
                "--run-firewall=true",
                "--run-router=false",
                "--run-service-proxy=false",
                f"--service-cluster-ip-range={certs.SERVICE_CLUSTER_IP_RANGE}",
                f"--health-port={health}",
                "--iptables-sync-period=30s",
                "--v=1",
            ],
            healthz=f"http://127.0.0.1:{health}/healthz",
            what="kube-router (NetworkPolicy)",
        )


def _network_policy_agent_rbac() -> list[dict[str, object]]:
    """What the NetworkPolicy agent reads: Pods, Namespaces, policies and its Node."""
    name = "tickwork:network-policy-agent"
    rules = [
        {
            "apiGroups": [""],
            "resources": ["pods", "namespaces", "nodes", "services", "endpoints"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User",
                    "name": certs.NETWORK_POLICY_AGENT,
                }
            ],
        },
    ]


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - loopback URL we built
        return bool(response.status == 200)  # noqa: PLR2004 - HTTP OK


def require_free_space(workdir: Path, minimum_gib: float = MIN_FREE_GIB) -> None:
    """Fail before starting when the disk cannot hold the node's images: containerd
    would import them and then fail to unpack them, and every Pod would hang in
    ContainerCreating with nothing in the test's output to say why."""
    workdir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(workdir).free / 2**30
    if free < minimum_gib:
        raise StartError(
            f"{free:.1f} GiB free under {workdir}; the local node needs {minimum_gib:.0f} GiB "
            "(unpacked images, Pod volumes, etcd). Free space there (old pytest temp "
            "directories: /tmp/pytest-of-$USER) and run again."
        )


@contextlib.contextmanager
def _exclusive() -> Iterator[None]:
    """Hold the machine's one node lock; a second node would fight over the bridge."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with (RUN_DIR / "lock").open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise StartError(
                f"another local node is running (pid {lock.read().strip() or '?'}); "
                "stop it first (tickwork-devcluster down)"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        yield


def clean_stale(workdir: Path | None = None) -> None:
    """Remove what a node that died without cleaning up (SIGKILL) left behind: its
    processes, mounts (also those under ``workdir``, an earlier run's), network and
    firewall rules."""
    with _exclusive():
        _clean_stale()
        if workdir is not None:
            hostnet.unmount_under(workdir)


def _clean_stale() -> None:
    """Remove what a node that died without cleaning up (SIGKILL) left behind."""
    binaries = [
        build.containerd_bundle().cached_dir() / name
        for name in ("containerd", "containerd-shim-runc-v2")
    ]
    binaries += [build.node_bundle().cached_dir() / name for name in ("kubelet", "kube-proxy")]
    hostnet.kill_processes_of(*binaries)
    state = RUN_DIR / "state"
    hostnet.unmount_under(state)
    hostnet.down(RUN_DIR, netns_dir=state / "netns")


@contextlib.contextmanager
def local_cluster(workdir: Path) -> Iterator[Cluster]:
    """A control plane with one node, cluster DNS and NetworkPolicy, for as long as
    the context lasts; everything is removed from the host afterwards."""
    hostnet.require_root()
    with _exclusive():
        _clean_stale()
        require_free_space(workdir)
        plane = ControlPlane(
            workdir=workdir / "controlplane",
            with_controller_manager=True,
            address=hostnet.NODE_ADDRESS,
            controller_manager_args=CONTROLLER_MANAGER_ARGS,
        )
        node = Node(workdir=workdir / "node", plane=plane)
        try:
            hostnet.up(RUN_DIR)
            with plane:
                try:
                    hostnet.admit(plane.apiserver_port)
                    node.start()
                    cluster = Cluster(kubeconfig=plane.kubeconfig, plane=plane, node=node)
                    coredns = addons.coredns_image()
                    node.load_image(coredns)
                    addons.install_coredns(
                        cluster, coredns.ref, cluster_dns=CLUSTER_DNS, domain=CLUSTER_DOMAIN
                    )
                    yield cluster
                finally:
                    node.stop()  # while the API server still answers its components
        finally:
            node.stop()  # idempotent: also when the bridge or the control plane failed
