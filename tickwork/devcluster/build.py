"""Build the local control plane's binaries from the Go module proxy, cached by version.

The pins live in the wrapper modules under ``hack/`` (``hack/controlplane/go.mod``
for kube-apiserver, kube-controller-manager and etcd; ``hack/helm/go.mod`` for
helm). The cache key is the pinned versions plus a digest of ``go.mod`` and
``go.sum``, so a warm run finds the binaries and never calls ``go``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tickwork.devcluster.errors import BuildError

#: Where the wrapper modules live, relative to the repository root.
HACK_DIR = Path(__file__).resolve().parents[2] / "hack"

#: Binaries each bundle produces.
CONTROLPLANE_BINARIES = ("kube-apiserver", "kube-controller-manager", "etcd")

_STAMP = ".complete"


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
class Bundle:
    """One wrapper module and the binaries it builds."""

    name: str
    module_dir: Path
    binaries: tuple[str, ...]
    versions: dict[str, str]

    @property
    def key(self) -> str:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.module_dir / name).read_bytes())
        pins = "-".join(f"{k}-{v}" for k, v in sorted(self.versions.items()))
        return f"{self.name}-{pins}-{digest.hexdigest()[:10]}"

    def cached_dir(self) -> Path:
        return cache_root() / "bin" / self.key


def controlplane_bundle() -> Bundle:
    module_dir = HACK_DIR / "controlplane"
    gomod = (module_dir / "go.mod").read_text()
    return Bundle(
        name="controlplane",
        module_dir=module_dir,
        binaries=CONTROLPLANE_BINARIES,
        versions={
            "kubernetes": _required_version(gomod, "k8s.io/kubernetes"),
            "etcd": _required_version(gomod, "go.etcd.io/etcd/server/v3"),
        },
    )


def _tool_bundle(name: str, module: str) -> Bundle:
    """A wrapper module ``hack/<name>`` that builds the one binary ``name`` from ``module``."""
    module_dir = HACK_DIR / name
    gomod = (module_dir / "go.mod").read_text()
    return Bundle(
        name=name,
        module_dir=module_dir,
        binaries=(name,),
        versions={name: _required_version(gomod, module)},
    )


def helm_bundle() -> Bundle:
    return _tool_bundle("helm", "helm.sh/helm/v3")


def actionlint_bundle() -> Bundle:
    """actionlint, which the tests run on the GitHub Actions workflows shipped for users."""
    return _tool_bundle("actionlint", "github.com/rhysd/actionlint")


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


def _helm_ldflags(version: str, gomod: str) -> str:
    kube = _required_version(gomod, "k8s.io/client-go")  # v0.X.Y
    minor = kube.split(".")[1]
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={version}"]
    flags += ["-X helm.sh/helm/v3/internal/version.gitTreeState=clean"]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor=1", f"-X {package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def _targets(bundle: Bundle) -> list[tuple[str, str, str]]:
    """(binary name, package to build, ldflags) for each binary of a bundle."""
    if bundle.name == "helm":
        gomod = (bundle.module_dir / "go.mod").read_text()
        flags = _helm_ldflags(bundle.versions["helm"], gomod)
        return [("helm", "helm.sh/helm/v3/cmd/helm", flags)]
    if bundle.name == "actionlint":
        version = bundle.versions["actionlint"]
        flags = f"-s -w -X github.com/rhysd/actionlint.version={version}"
        return [("actionlint", "github.com/rhysd/actionlint/cmd/actionlint", flags)]
    flags = _kube_ldflags(bundle.versions["kubernetes"])
    return [
        ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", flags),
        ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager", flags),
        ("etcd", "./cmd/etcd", "-s -w"),
    ]


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
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    env.setdefault("GOTOOLCHAIN", "local")
    staging = Path(tempfile.mkdtemp(prefix=f".{bundle.key}.", dir=target.parent))
    try:
        for binary, package, ldflags in _targets(bundle):
            if log:
                print(f"building {binary} ({package}) into {target} ...", flush=True)  # noqa: T201
            result = subprocess.run(
                [
                    go,
                    "build",
                    "-trimpath",
                    "-ldflags",
                    ldflags,
                    "-o",
                    str(staging / binary),
                    package,
                ],
                cwd=bundle.module_dir,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
                raise BuildError(f"`go build {package}` failed (exit {result.returncode}):\n{tail}")
        (staging / _STAMP).write_text(" ".join(f"{k}={v}" for k, v in bundle.versions.items()))
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


#: CRDs of optional integrations the chart can render objects for, fetched from
#: the Go module proxy (module, version, files inside the module), so that the
#: API server can validate ServiceMonitors and KEDA ScaledObjects in tests.
THIRD_PARTY_CRDS = (
    ("github.com/prometheus-operator/prometheus-operator", "v0.85.0",
     ("example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",)),
    ("github.com/kedacore/keda/v2", "v2.21.0",
     ("config/crd/bases/keda.sh_scaledobjects.yaml",
      "config/crd/bases/keda.sh_triggerauthentications.yaml")),
)  # fmt: skip


def third_party_crds() -> list[Path]:
    """Paths of the pinned third-party CRDs, downloaded once into the Go module cache."""
    import json  # noqa: PLC0415 - only this helper parses go's output

    go = _go()
    paths: list[Path] = []
    for module, version, files in THIRD_PARTY_CRDS:
        result = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            capture_output=True, text=True, check=False, cwd=HACK_DIR,
            env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
        )  # fmt: skip
        if result.returncode != 0:
            raise BuildError(f"go mod download {module}@{version} failed:\n{result.stderr}")
        directory = Path(json.loads(result.stdout)["Dir"])
        paths += [directory / name for name in files]
    return paths
