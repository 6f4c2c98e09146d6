"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and, on demand,
kube-controller-manager and kube-scheduler, with RBAC on and a generated PKI.

With a node (:mod:`.node`) the API server listens on the node's address
instead of loopback, so that Pods reach it through the ``kubernetes`` Service;
aggregated APIs (the metrics adapters the autoscaler reads) are set up either way.

Binaries come from, in order: ``TICKWORK_CONTROLPLANE_BIN`` or
``KUBEBUILDER_ASSETS`` (a directory holding ``kube-apiserver`` and ``etcd``,
as envtest users have), else the cached Go build (:mod:`.build`).

Why one long module (~390 lines): the PKI, the flags and the start order of
etcd and the control-plane components depend on each other line by line.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tickwork_dev.devcluster import build, certs, process
from tickwork_dev.devcluster.errors import StartError

#: How long each server may take to become ready; a cold apiserver on two
#: loaded cores needs far less, so hitting this means something is wrong.
READY_TIMEOUT_SECONDS = 120.0


def _named_bin_dir() -> tuple[str, Path] | None:
    """The variable naming a directory of binaries, and that directory, if one is set."""
    for var in ("TICKWORK_CONTROLPLANE_BIN", "KUBEBUILDER_ASSETS"):
        value = os.environ.get(var)
        if value:
            return var, Path(value)
    return None


def resolve_binaries(*, need_controller_manager: bool = False) -> Path:
    """The directory that holds kube-apiserver and etcd (building them if needed)."""
    named = _named_bin_dir()
    if named is None:
        return build.ensure_built(build.controlplane_bundle())
    var, path = named
    wanted = ["kube-apiserver", "etcd"]
    if need_controller_manager:
        wanted.append("kube-controller-manager")
    missing = [name for name in wanted if not (path / name).exists()]
    if missing:
        raise StartError(f"{var}={path} lacks {', '.join(missing)}")
    return path


def controller_manager_binary() -> Path:
    """kube-controller-manager: from the named directory, else its own cached build
    (made on first use)."""
    named = _named_bin_dir()
    if named is not None:
        return named[1] / "kube-controller-manager"
    return build.ensure_built(build.controller_manager_bundle()) / "kube-controller-manager"


def _kubeconfig(
    server: str, pki: certs.Pki, client: certs.ClientCert, user: str
) -> dict[str, object]:
    def read(path: Path) -> str:
        import base64  # noqa: PLC0415 - only needed here

        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "tickwork-local",
                "cluster": {"server": server, "certificate-authority-data": read(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": read(client.cert),
                    "client-key-data": read(client.key),
                },
            }
        ],
        "contexts": [
            {"name": "tickwork-local", "context": {"cluster": "tickwork-local", "user": user}}
        ],
        "current-context": "tickwork-local",
    }


def _healthy_insecure(port: int) -> bool:
    """/healthz of a controller-manager or scheduler on loopback.

    It is open to anonymous requests by their default
    --authorization-always-allow-paths and served with a self-signed
    certificate, which is all it can be checked against.
    """
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    url = f"https://127.0.0.1:{port}/healthz"
    with urllib.request.urlopen(url, timeout=5, context=insecure) as response:
        return bool(response.status == 200)  # noqa: PLR2004 - HTTP OK


@dataclass
class ControlPlane(process.Started):
    """etcd + kube-apiserver (+ kube-controller-manager) in ``workdir``.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    workdir: Path
    with_controller_manager: bool = False
    bin_dir: Path | None = None
    etcd_port: int = 0
    apiserver_port: int = 0
    address: str = "127.0.0.1"
    """Where the API server listens and what it advertises (a node's address for Pods)."""
    controller_manager_args: tuple[str, ...] = ()
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _pki: certs.Pki | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.apiserver_port}"

    @property
    def pki(self) -> certs.Pki:
        assert self._pki is not None  # noqa: S101 - set in start()
        return self._pki

    def log_path(self, component: str) -> Path:
        return self.workdir / "logs" / f"{component}.log"

    # -- lifecycle -------------------------------------------------------

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.bin_dir is None:
            self.bin_dir = resolve_binaries(need_controller_manager=self.with_controller_manager)
        extra_ips = () if self.address == "127.0.0.1" else (self.address,)
        self._pki = certs.generate_pki(self.workdir / "pki", server_ips=extra_ips)
        try:
            self.start_etcd()
            self.start_apiserver()
            self.kubeconfig.write_text(
                json.dumps(
                    _kubeconfig(self.server, self._pki, self._pki.admin, "tickwork-admin"), indent=2
                )
            )
            self.kubeconfig.chmod(0o600)
            if self.with_controller_manager:
                self.start_controller_manager()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every server, the API server first and etcd last."""
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                process.stop(proc)

    def pids(self) -> dict[str, int]:
        """The running servers' process IDs, by name (etcd, kube-apiserver, ...)."""
        return {name: proc.pid for name, proc in self._procs.items() if proc.poll() is None}

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = process.spawn(argv, log_path=self.log_path(name))
        self._procs[name] = proc
        return proc

    def _binary(self, name: str) -> str:
        assert self.bin_dir is not None  # noqa: S101 - set in start()
        path = self.bin_dir / name
        if not path.exists():
            found = shutil.which(name)
            if found is None:
                raise StartError(f"{name} not found in {self.bin_dir}")
            return found
        return str(path)

    def start_etcd(self) -> None:
        """Start etcd; its data directory is kept across restarts (see :meth:`restart`)."""
        if not self.etcd_port:
            self.etcd_port = process.free_port()
        peer_port = process.free_port()
        client_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        proc = self._spawn(
            "etcd",
            [
                self._binary("etcd"),
                "--name=tickwork",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=tickwork={peer_url}",
                "--listen-metrics-urls=",
                "--log-level=warn",
                # A throwaway test store: fsync costs much and protects nothing here.
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client_url}/health", timeout=2) as response:  # noqa: S310 - loopback URL we built
                return bool(json.loads(response.read()).get("health") == "true")

        process.wait_until(
            healthy,
            what="etcd",
            timeout=READY_TIMEOUT_SECONDS,
            proc=proc,
            log_path=self.log_path("etcd"),
        )

    def start_apiserver(self) -> None:
        assert self._pki is not None  # noqa: S101 - set in start()
        pki = self._pki
        if not self.apiserver_port:
            self.apiserver_port = process.free_port()
        argv = [
            self._binary("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.apiserver_port}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca_cert}",
            # Kubelets are authorised by the Node authorizer, everyone else by RBAC.
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--anonymous-auth=false",
            # Reach kubelets (logs, exec) at their address: resolving a node's name
            # would ask a resolver off this machine.
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={pki.apiserver_kubelet_client.cert}",
            f"--kubelet-client-key={pki.apiserver_kubelet_client.key}",
            # Aggregated APIs (external.metrics.k8s.io from prometheus-adapter or KEDA):
            # the API server proxies to them as the front-proxy client, straight to the
            # endpoint's Pod address rather than through a Service address.
            f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={certs.FRONT_PROXY_CLIENT}",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
            f"--proxy-client-key-file={pki.front_proxy_client.key}",
            "--enable-aggregator-routing=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={certs.SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--v=1",
        ]
        if not self.with_controller_manager:
            # Without the controller-manager nobody creates the `default`
            # ServiceAccount, which that admission plugin insists on.
            argv.append("--disable-admission-plugins=ServiceAccount")
        proc = self._spawn("kube-apiserver", argv)
        context = self.ssl_context()

        def ready() -> bool:
            request = urllib.request.Request(f"{self.server}/readyz")  # noqa: S310 - loopback URL we built
            with urllib.request.urlopen(request, timeout=5, context=context) as response:  # noqa: S310
                return bool(response.status == 200)  # noqa: PLR2004 - HTTP OK

        process.wait_until(
            ready,
            what="kube-apiserver",
            timeout=READY_TIMEOUT_SECONDS,
            proc=proc,
            log_path=self.log_path("kube-apiserver"),
        )

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager (Deployments, ReplicaSets, CronJobs, ...)."""
        assert self._pki is not None  # noqa: S101 - set in start()
        if "kube-controller-manager" in self._procs:
            return
        pki = self._pki
        port = process.free_port()
        kcm_config = self.write_kubeconfig(
            "controller-manager", pki.controller_manager, "system:kube-controller-manager"
        )
        named = self.bin_dir / "kube-controller-manager" if self.bin_dir else None
        kcm = named if named is not None and named.exists() else controller_manager_binary()
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(kcm),
                f"--kubeconfig={kcm_config}",
                f"--authentication-kubeconfig={kcm_config}",
                f"--authorization-kubeconfig={kcm_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                "--v=1",
                *self.controller_manager_args,
            ],
        )
        self.with_controller_manager = True
        self._wait_healthy("kube-controller-manager", proc, port)

    def start_scheduler(self) -> None:
        """Start kube-scheduler (a node's Pods need one); its binary comes with the node's."""
        if "kube-scheduler" in self._procs:
            return
        config = self.write_kubeconfig("scheduler", self.pki.scheduler, "system:kube-scheduler")
        port = process.free_port()
        binary = build.ensure_built(build.node_bundle()) / "kube-scheduler"
        proc = self._spawn(
            "kube-scheduler",
            [
                str(binary),
                f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        self._wait_healthy("kube-scheduler", proc, port)

    def _wait_healthy(self, name: str, proc: subprocess.Popen[bytes], port: int) -> None:
        process.wait_until(
            lambda: _healthy_insecure(port),
            what=name,
            timeout=READY_TIMEOUT_SECONDS,
            proc=proc,
            log_path=self.log_path(name),
        )

    def write_kubeconfig(self, stem: str, client: certs.ClientCert, user: str) -> Path:
        """A kubeconfig for one component's client certificate, next to the PKI."""
        path = self.workdir / f"{stem}.kubeconfig"
        path.write_text(json.dumps(_kubeconfig(self.server, self.pki, client, user)))
        path.chmod(0o600)
        return path

    def apply(self, objects: list[dict[str, object]]) -> None:
        """Create or update cluster-scoped objects (RBAC for a node's agents) as the
        cluster admin, with server-side apply; no kubectl needed."""
        for body in objects:
            api_version = str(body["apiVersion"])
            kind = str(body["kind"]).lower() + "s"
            name = body["metadata"]["name"]  # type: ignore[index]
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            url = f"{self.server}{prefix}/{kind}/{name}?fieldManager=tickwork-devcluster&force=true"
            request = urllib.request.Request(  # noqa: S310 - the URL we built
                url,
                data=json.dumps(body).encode(),
                method="PATCH",
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
            with urllib.request.urlopen(request, timeout=10, context=self.ssl_context()):  # noqa: S310
                pass

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (an outage); :meth:`start_apiserver` brings it back."""
        proc = self._procs.pop("kube-apiserver", None)
        if proc is not None:
            process.stop(proc)

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver on the same port; etcd keeps its data."""
        self.stop_apiserver()
        self.start_apiserver()

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS context that trusts the local CA and presents the admin certificate."""
        assert self._pki is not None  # noqa: S101 - set in start()
        context = ssl.create_default_context(cafile=str(self._pki.ca_cert))
        context.load_cert_chain(str(self._pki.admin.cert), str(self._pki.admin.key))
        return context

    def version(self) -> dict[str, str]:
        request = urllib.request.Request(f"{self.server}/version")  # noqa: S310 - loopback URL we built
        with urllib.request.urlopen(request, timeout=5, context=self.ssl_context()) as response:  # noqa: S310
            result: dict[str, str] = json.loads(response.read())
            return result
