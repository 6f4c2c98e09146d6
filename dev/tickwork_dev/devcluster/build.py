"""Build the local control plane's binaries from the Go module proxy, cached by version.

The pins live in the wrapper modules under ``hack/`` (``hack/controlplane/go.mod``
for kube-apiserver, etcd and, in a bundle of its own, kube-controller-manager;
``hack/helm/go.mod`` for helm). The cache key is the pinned versions plus a digest
of ``go.mod`` and ``go.sum``, so a warm run finds the binaries and never calls ``go``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tickwork_dev.devcluster.errors import BuildError

#: Where the wrapper modules live, relative to the repository root.
HACK_DIR = Path(__file__).resolve().parents[3] / "hack"

_STAMP = ".complete"

#: The compiler's flags for every package: no DWARF. The linker strips it anyway
#: (``-s -w``), and not making it takes 0.89x the time of a cold build of
#: kube-apiserver and etcd (309 s against 348 s on two cores): the critical path
#: of a fresh machine's first ``make demo``. The binaries are the same code.
GCFLAGS = "all=-dwarf=false"


def cache_root() -> Path:
    """The directory that holds built binaries; outside the repository on purpose."""
    explicit = os.environ.get("TICKWORK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "tickwork"


def _required_version(gomod: str, module: str) -> str:
    """The version of ``module`` that a go.mod requires (direct or indirect)."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", gomod, re.MULTILINE)
    if match is None:
        raise BuildError(f"{module} is not pinned in the wrapper go.mod")
    return match.group(1)


@dataclass(frozen=True)
class Target:
    """One binary of a bundle: the package to build and how."""

    binary: str
    package: str
    ldflags: str = "-s -w"
    tags: tuple[str, ...] = ()
    cgo: bool = False
    """Link against C libraries (runc needs libseccomp); everything else is static Go."""


@dataclass(frozen=True)
class Bundle:
    """One wrapper module and the binaries it builds."""

    name: str
    module_dir: Path
    versions: dict[str, str]
    targets: tuple[Target, ...]

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(target.binary for target in self.targets)

    @property
    def key(self) -> str:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.module_dir / name).read_bytes())
        for target in self.targets:  # a changed flag or tag is another build
            digest.update(repr(target).encode())
        digest.update(GCFLAGS.encode())
        pins = "-".join(f"{k}-{v}" for k, v in sorted(self.versions.items()))
        return f"{self.name}-{pins}-{digest.hexdigest()[:10]}"

    def cached_dir(self) -> Path:
        return cache_root() / "bin" / self.key


def _gomod(folder: str) -> str:
    return (HACK_DIR / folder / "go.mod").read_text()


def _kube_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{name}={value}" for name, value in stamps.items()]
    return " ".join(flags)


def _kubernetes(name: str, commands: tuple[str, ...], *, etcd: bool = False) -> Bundle:
    """Kubernetes commands from ``hack/controlplane``; they share one pin and one go.sum."""
    gomod = _gomod("controlplane")
    kube = _required_version(gomod, "k8s.io/kubernetes")
    flags = _kube_ldflags(kube)
    targets = [Target(command, f"k8s.io/kubernetes/cmd/{command}", flags) for command in commands]
    versions = {"kubernetes": kube}
    if etcd:  # the same flags, so that one `go build` makes both (-X of a missing name: no-op)
        targets.append(Target("etcd", "./cmd/etcd", flags))
        versions["etcd"] = _required_version(gomod, "go.etcd.io/etcd/server/v3")
    return Bundle(name, HACK_DIR / "controlplane", versions, tuple(targets))


def controlplane_bundle() -> Bundle:
    """kube-apiserver and etcd: all that the plain demo and most tests start."""
    return _kubernetes("controlplane", ("kube-apiserver",), etcd=True)


def controller_manager_bundle() -> Bundle:
    """kube-controller-manager, built on first use (Deployments, Jobs, garbage
    collection): the plain demo never starts it, so a fresh machine's first demo
    does not wait for it."""
    return _kubernetes("controller-manager", ("kube-controller-manager",))


def node_bundle() -> Bundle:
    """What a node adds to the control plane: the scheduler, the kubelet, kube-proxy."""
    return _kubernetes("node", ("kube-scheduler", "kubelet", "kube-proxy"))


def containerd_bundle() -> Bundle:
    """containerd 2.x (the node's CRI runtime), its runc shim, and ctr to import images."""
    version = _required_version(_gomod("containerd"), "github.com/containerd/containerd/v2")
    flags = f"-s -w -X github.com/containerd/containerd/v2/version.Version={version}"
    # Snapshotters for filesystems this node does not use need C libraries or kernels
    # it does not have; overlayfs and native stay.
    tags = ("no_btrfs", "no_devmapper", "no_zfs")
    base = "github.com/containerd/containerd/v2/cmd"
    return Bundle(
        "containerd",
        HACK_DIR / "containerd",
        {"containerd": version},
        tuple(
            Target(binary, f"{base}/{binary}", flags, tags)
            for binary in ("containerd", "containerd-shim-runc-v2", "ctr")
        ),
    )


def runc_bundle() -> Bundle:
    """runc with seccomp (cgo + libseccomp), which RuntimeDefault seccomp profiles need."""
    version = _required_version(_gomod("runc"), "github.com/opencontainers/runc")
    flags = f"-s -w -X main.version={version.lstrip('v')}"
    target = Target("runc", "github.com/opencontainers/runc", flags, ("seccomp",), cgo=True)
    return Bundle("runc", HACK_DIR / "runc", {"runc": version}, (target,))


def coredns_bundle() -> Bundle:
    """CoreDNS with the plugins a cluster's DNS needs (``hack/coredns/main.go``)."""
    version = _required_version(_gomod("coredns"), "github.com/coredns/coredns")
    return Bundle("coredns", HACK_DIR / "coredns", {"coredns": version}, (Target("coredns", "."),))


def kube_router_bundle() -> Bundle:
    """kube-router, whose NetworkPolicy firewall (iptables + ipset) the node runs alone."""
    module = "github.com/cloudnativelabs/kube-router/v2"
    version = _required_version(_gomod("kube-router"), module)
    flags = f"-s -w -X {module}/pkg/version.Version={version}"
    target = Target("kube-router", f"{module}/cmd/kube-router", flags)
    return Bundle("kube-router", HACK_DIR / "kube-router", {"kube-router": version}, (target,))


def prometheus_bundle() -> Bundle:
    """Prometheus with Kubernetes service discovery only (the others need cloud SDKs), and
    promtool, which checks and unit-tests the chart's alerting rules."""
    module = "github.com/prometheus/prometheus"
    version = _required_version(_gomod("prometheus"), module)
    minor, patch = version.lstrip("v").split(".")[1:3]  # module v0.316.0 is Prometheus 3.16.0
    release = f"{int(minor) // 100}.{int(minor) % 100}.{patch}"
    flags = f"-s -w -X github.com/prometheus/common/version.Version={release}"
    tags = ("netgo", "remove_all_sd", "enable_kubernetes_sd")
    targets = (
        Target("prometheus", f"{module}/cmd/prometheus", flags, tags),
        Target("promtool", f"{module}/cmd/promtool", flags, tags),
    )
    return Bundle("prometheus", HACK_DIR / "prometheus", {"prometheus": release}, targets)


def prometheus_adapter_bundle() -> Bundle:
    """prometheus-adapter: serves external.metrics.k8s.io from Prometheus queries."""
    module = "sigs.k8s.io/prometheus-adapter"
    version = _required_version(_gomod("prometheus-adapter"), module)
    target = Target("prometheus-adapter", f"{module}/cmd/adapter")
    return Bundle(
        "prometheus-adapter",
        HACK_DIR / "prometheus-adapter",
        {"prometheus-adapter": version},
        (target,),
    )


def keda_bundle() -> Bundle:
    """KEDA's operator and its metrics API server (the admission webhooks are optional)."""
    module = "github.com/kedacore/keda/v2"
    version = _required_version(_gomod("keda"), module)
    flags = (
        f"-s -w -X {module}/version.Version={version} -X {module}/version.GitCommit=go-module-proxy"
    )
    targets = (
        Target("keda", f"{module}/cmd/operator", flags),
        Target("keda-adapter", f"{module}/cmd/adapter", flags),
    )
    return Bundle("keda", HACK_DIR / "keda", {"keda": version}, targets)


def helm_bundle() -> Bundle:
    gomod = _gomod("helm")
    version = _required_version(gomod, "helm.sh/helm/v3")
    minor = _required_version(gomod, "k8s.io/client-go").split(".")[1]  # v0.X.Y
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={version}"]
    flags += ["-X helm.sh/helm/v3/internal/version.gitTreeState=clean"]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor=1", f"-X {package}.k8sVersionMinor={minor}"]
    target = Target("helm", "helm.sh/helm/v3/cmd/helm", " ".join(flags))
    return Bundle("helm", HACK_DIR / "helm", {"helm": version}, (target,))


def actionlint_bundle() -> Bundle:
    """actionlint, which the tests run on the GitHub Actions workflows shipped for users."""
    version = _required_version(_gomod("actionlint"), "github.com/rhysd/actionlint")
    flags = f"-s -w -X github.com/rhysd/actionlint.version={version}"
    target = Target("actionlint", "github.com/rhysd/actionlint/cmd/actionlint", flags)
    return Bundle("actionlint", HACK_DIR / "actionlint", {"actionlint": version}, (target,))


def lua_bundle() -> Bundle:
    """glua, gopher-lua's interpreter: the Lua VM Argo CD runs health checks in."""
    version = _required_version(_gomod("lua"), "github.com/yuin/gopher-lua")
    target = Target("glua", "github.com/yuin/gopher-lua/cmd/glua", "-s -w")
    return Bundle("lua", HACK_DIR / "lua", {"gopher-lua": version}, (target,))


def kstatus_bundle() -> Bundle:
    """kstatus (sigs.k8s.io/cli-utils) behind a small command of ours: the health
    check Flux and kpt compute for any object, run by the tests on ScheduledJobs."""
    version = _required_version(_gomod("kstatus"), "sigs.k8s.io/cli-utils")
    target = Target("kstatus", "tickwork.dev/hack/kstatus", "-s -w")
    return Bundle("kstatus", HACK_DIR / "kstatus", {"cli-utils": version}, (target,))


def helm_docs_bundle() -> Bundle:
    """helm-docs, which renders the chart's README (values table) from values.yaml."""
    version = _required_version(_gomod("helm-docs"), "github.com/norwoodj/helm-docs")
    flags = f"-s -w -X main.version={version}"
    target = Target("helm-docs", "github.com/norwoodj/helm-docs/cmd/helm-docs", flags)
    return Bundle("helm-docs", HACK_DIR / "helm-docs", {"helm-docs": version}, (target,))


def crane_bundle() -> Bundle:
    """crane, whose ``crane registry serve`` is a local OCI registry: the README's
    ``helm install oci://...`` is tested against it, with the images pushed there."""
    module = "github.com/google/go-containerregistry"
    version = _required_version(_gomod("crane"), module)
    flags = f"-s -w -X {module}/cmd/crane/cmd.Version={version}"
    target = Target("crane", f"{module}/cmd/crane", flags)
    return Bundle("crane", HACK_DIR / "crane", {"crane": version}, (target,))


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain is not on PATH; install Go >= 1.26 (or set KUBEBUILDER_ASSETS "
            "to a directory holding kube-apiserver and etcd)"
        )
    return go


def ensure_built(bundle: Bundle, *, log: bool = True) -> Path:
    """Return the directory holding the bundle's binaries, building them once if needed."""
    target = bundle.cached_dir()
    if (target / _STAMP).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{bundle.key}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run waits for our build
        if (target / _STAMP).exists():
            return target
        _build_into(bundle, target, log=log)
    return target


def _build_into(bundle: Bundle, target: Path, *, log: bool) -> None:
    go = _go()
    staging = Path(tempfile.mkdtemp(prefix=f".{bundle.key}.", dir=target.parent))
    try:
        for group in _groups(bundle.targets):
            _go_build(go, bundle, group, staging, into=target, log=log)
        (staging / _STAMP).write_text(" ".join(f"{k}={v}" for k, v in bundle.versions.items()))
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _groups(targets: tuple[Target, ...]) -> list[list[Target]]:
    """Targets built by one `go build` each group: neighbours with the same flags whose
    binary is named as their package. One build of several commands keeps both cores
    busy where one command's build has a single package left to compile, or links."""

    def joinable(item: Target) -> tuple[str, tuple[str, ...], bool] | None:
        named_as_package = item.package.rstrip("/").rsplit("/", 1)[-1] == item.binary
        return (item.ldflags, item.tags, item.cgo) if named_as_package else None

    groups: list[list[Target]] = []
    for item in targets:
        flags = joinable(item)
        if groups and flags is not None and joinable(groups[-1][-1]) == flags:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def _go_build(
    go: str, bundle: Bundle, group: list[Target], staging: Path, *, into: Path, log: bool
) -> None:
    first = group[0]
    if log:
        for item in group:
            print(f"building {item.binary} ({item.package}) into {into} ...", flush=True)  # noqa: T201
    env = {
        **os.environ,
        "CGO_ENABLED": "1" if first.cgo else "0",
        "GOFLAGS": "-mod=readonly -buildvcs=false",
    }
    env.setdefault("GOTOOLCHAIN", "local")
    argv = [go, "build", "-trimpath", f"-gcflags={GCFLAGS}", "-ldflags", first.ldflags]
    if first.tags:
        argv += ["-tags", ",".join(first.tags)]
    # One binary: its name; several: the directory (each named as its package).
    output = str(staging / first.binary) if len(group) == 1 else f"{staging}/"
    packages = [item.package for item in group]
    result = subprocess.run(
        [*argv, "-o", output, *packages],
        cwd=bundle.module_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise BuildError(
            f"`go build {' '.join(packages)}` failed (exit {result.returncode}):\n{tail}"
        )


#: CRDs of optional integrations the chart can render objects for, fetched from
#: the Go module proxy (module, version, files inside the module), so that the API
#: server can validate ServiceMonitors, PrometheusRules and KEDA ScaledObjects in tests.
THIRD_PARTY_CRDS = (
    (
        "github.com/prometheus-operator/prometheus-operator",
        "v0.85.0",
        (
            "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
            "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
        ),
    ),
    (
        "github.com/kedacore/keda/v2",
        "v2.21.0",
        (
            "config/crd/bases/keda.sh_scaledobjects.yaml",
            "config/crd/bases/keda.sh_triggerauthentications.yaml",
        ),
    ),
)


def module_dir(module: str, version: str) -> Path:
    """The read-only copy of ``module@version`` in the Go module cache (downloaded once)."""
    result = subprocess.run(
        [_go(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=False,
        cwd=HACK_DIR,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
    )
    if result.returncode != 0:
        raise BuildError(f"go mod download {module}@{version} failed:\n{result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def module_file(module: str, version: str, name: str) -> Path:
    """One file of a module, e.g. Kubernetes' pause.c or KEDA's CRDs."""
    path = module_dir(module, version) / name
    if not path.exists():
        raise BuildError(f"{module}@{version} has no {name}")
    return path


def third_party_crds() -> list[Path]:
    """Paths of the pinned third-party CRDs, downloaded once into the Go module cache."""
    return [
        module_file(module, version, name)
        for module, version, files in THIRD_PARTY_CRDS
        for name in files
    ]


def main(argv: list[str]) -> int:
    """``python -m tickwork_dev.devcluster.build controlplane``: build one bundle with
    the standard library alone, before the venv exists — `make demo` runs it beside
    `make install`, so a fresh machine waits for the longer of pip and Go, not both."""
    bundles = {"controlplane": controlplane_bundle}
    if len(argv) != 1 or argv[0] not in bundles:
        print(f"usage: build {{{','.join(bundles)}}}", file=sys.stderr)  # noqa: T201
        return 2
    try:
        ensure_built(bundles[argv[0]]())
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
