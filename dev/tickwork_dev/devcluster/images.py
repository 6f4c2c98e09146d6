"""Container images for the local node, built here without any registry.

Three kinds, each saved as an archive that the node's containerd imports:

* **the Debian base**: ``mmdebstrap --variant=minbase`` with python3 from
  Debian's packages, imported into podman (the stand-in for the public
  ``python`` image, which no registry here can serve);
* **images from a Dockerfile** built with podman on that base: Tickwork's own
  image (the repository's ``Dockerfile``), its demo image (the ``demo`` stage:
  the product plus the demo tasks) and Redis from Debian's package
  (``hack/images/redis.Containerfile``);
* **single-binary images** of Go components (the pause sandbox, CoreDNS,
  Prometheus, ...), written directly as OCI archives: a static binary, a
  ``passwd`` entry for a numeric non-root user, nothing else.

Archives are cached under ``<cache>/images`` by a digest of what went into
them, so a warm run builds nothing.

Why one long module (~430 lines): the three kinds of image share the archive
format and the cache; each kind is a short section below.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tickwork_dev.devcluster import build
from tickwork_dev.devcluster.errors import BuildError

ROOT = build.HACK_DIR.parent
IMAGES_DIR = build.HACK_DIR / "images"

#: Where images built here are named; never a registry anyone pulls from.
LOCAL_REGISTRY = "localhost/tickwork-dev"

#: The Debian release and packages of the base image.
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "tini")
#: Documentation and translations are dead weight in an image.
_DPKG_EXCLUDES = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)
#: Numeric non-root user of single-binary images (the "nonroot" of distroless).
NONROOT_UID = 65532

#: Files of the repository that go into Tickwork's image (see .dockerignore).
_TICKWORK_CONTEXT = ("Dockerfile", "pyproject.toml", "constraints.txt", "README.md")
_TICKWORK_TREES = ("tickwork", "operator", "worker", "dev/demo-tasks")

#: podman runs its build steps with Debian's runc and ulimits within the hard
#: limits of this machine (its defaults raise RLIMIT_NOFILE, which fails here).
_PODMAN_RUNTIME = "/usr/sbin/runc"
_ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
#: The host's trust store, so pip in a build step trusts what the host trusts.
_HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True)
class Image:
    """A built image: its name and the archive containerd imports."""

    repository: str
    tag: str
    archive: Path

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


def images_dir() -> Path:
    return build.cache_root() / "images"


def _digest(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def _cached(name: str, key: str, make: Callable[[Path], None]) -> Path:
    """The archive ``<images>/<name>-<key>.tar``, made once under a lock."""
    directory = images_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}-{key}.tar"
    if target.exists():
        return target
    with (directory / f".{name}-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        staging = directory / f".{name}-{key}.partial"
        staging.unlink(missing_ok=True)
        try:
            make(staging)
            staging.rename(target)
        finally:
            staging.unlink(missing_ok=True)
    return target


def _run(argv: list[str], *, what: str, timeout: float = 1800) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise BuildError(
            f"{what} failed (exit {result.returncode}): {' '.join(argv[:4])} ...\n{tail}"
        )
    return result.stdout


def _require(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BuildError(f"{tool} is not installed; on Debian: apt-get install {package}")
    return path


# -- podman ------------------------------------------------------------------


def podman(*args: str, what: str, timeout: float = 1800) -> str:
    binary = _require("podman", "podman")
    return _run([binary, "--runtime", _PODMAN_RUNTIME, *args], what=what, timeout=timeout)


def _podman_has(ref: str) -> bool:
    binary = _require("podman", "podman")
    result = subprocess.run([binary, "image", "exists", ref], capture_output=True, check=False)
    return result.returncode == 0


def _podman_load(ref: str, archive: Path) -> None:
    """Make ``ref`` available to podman builds, loading it from its archive if needed."""
    if not _podman_has(ref):
        podman("load", "--input", str(archive), what=f"podman load {ref}")
        if not _podman_has(ref):
            raise BuildError(f"{archive} did not provide {ref}")


def _podman_save(ref: str, target: Path) -> None:
    podman(
        "save",
        "--format",
        "docker-archive",
        "--output",
        str(target),
        ref,
        what=f"podman save {ref}",
    )


# -- the Debian base ------------------------------------------------------------


def debian_base() -> Image:
    """Debian minbase with python3 and venv: the base of every Debian-built image."""
    key = _digest(DEBIAN_SUITE, DEBIAN_MIRROR, *BASE_PACKAGES, *_DPKG_EXCLUDES)
    repository, tag = f"{LOCAL_REGISTRY}/python", f"{DEBIAN_SUITE}-{key}"

    def make(target: Path) -> None:
        mmdebstrap = _require("mmdebstrap", "mmdebstrap")
        with tempfile.TemporaryDirectory(prefix="tickwork-rootfs-") as scratch:
            rootfs = Path(scratch) / "rootfs.tar"
            argv = [
                mmdebstrap,
                "--variant=minbase",
                "--mode=root",
                "--quiet",
                f"--include={','.join(BASE_PACKAGES)}",
            ]
            argv += [f"--dpkgopt={option}" for option in _DPKG_EXCLUDES]
            argv += ["--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*"]
            _run([*argv, DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR], what="mmdebstrap")
            podman(
                "import",
                "--change",
                'CMD ["python3"]',
                str(rootfs),
                f"{repository}:{tag}",
                what="podman import",
            )
        _podman_save(f"{repository}:{tag}", target)

    archive = _cached("python", key, make)
    _podman_load(f"{repository}:{tag}", archive)
    return Image(repository, tag, archive)


# -- images built from a Dockerfile -----------------------------------------------


def _files_under(root: Path, names: Iterable[str], trees: Iterable[str]) -> list[Path]:
    files = [root / name for name in names]
    for tree in trees:
        files += sorted(
            path
            for path in (root / tree).rglob("*")
            if path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix != ".pyc"
            and not any(part.endswith(".egg-info") for part in path.parts)
        )
    return files


def _context_digest(root: Path, files: list[Path], *extra: str) -> str:
    parts: list[bytes | str] = list(extra)
    for path in files:
        parts += [str(path.relative_to(root)), path.read_bytes()]
    return _digest(*parts)


def _podman_build(
    *,
    dockerfile: Path,
    context: Path,
    ref: str,
    build_args: dict[str, str],
    target: Path,
    stage: str | None = None,
) -> None:
    argv = ["build", "--network", "host", *_ULIMITS, "--file", str(dockerfile), "--tag", ref]
    if stage is not None:
        argv += ["--target", stage]
    if _HOST_CA_BUNDLE.exists():
        argv += ["--volume", f"{_HOST_CA_BUNDLE}:/etc/ssl/certs/ca-certificates.crt:ro"]
    for name, value in build_args.items():
        argv += ["--build-arg", f"{name}={value}"]
    podman(*argv, str(context), what=f"podman build {ref}")
    _podman_save(ref, target)


@dataclass
class BuildReport:
    """What `make image` reports: the image, its size and how long it took."""

    image: Image
    seconds: float
    size_bytes: int
    cached: bool


def tickwork_image(*, tag_suffix: str = "", root: Path = ROOT) -> BuildReport:
    """Tickwork's image from the Dockerfile of the tree at ``root`` (this repository's
    by default; :func:`previous_release_tree` for the previous release), on the
    Debian base.

    ``tag_suffix`` builds a *different* image from the same sources (one more
    label), as a release with a new image would be; the upgrade journey uses it.
    """
    started = time.monotonic()
    base = debian_base()
    files = _files_under(root, _TICKWORK_CONTEXT, _TICKWORK_TREES)
    key = _context_digest(root, files, base.ref, tag_suffix)
    repository, tag = "localhost/tickwork", f"dev-{key}"
    cached = (images_dir() / f"tickwork-{key}.tar").exists()

    def make(target: Path) -> None:
        ref = f"{repository}:{tag}"
        args = {"PYTHON_IMAGE": base.ref}
        if not tag_suffix:
            _podman_build(
                dockerfile=root / "Dockerfile",
                context=root,
                ref=ref,
                build_args=args,
                target=target,
            )
            return
        plain = tickwork_image(root=root).image
        _podman_load(plain.ref, plain.archive)
        with tempfile.TemporaryDirectory() as scratch:
            derived = Path(scratch) / "Containerfile"
            derived.write_text(
                f"FROM {plain.ref}\nLABEL dev.tickwork.rebuild={json.dumps(tag_suffix)}\n"
            )
            _podman_build(
                dockerfile=derived, context=Path(scratch), ref=ref, build_args={}, target=target
            )

    archive = _cached("tickwork", key, make)
    image = Image(repository, tag, archive)
    return BuildReport(image, time.monotonic() - started, _image_size(image, archive), cached)


#: The release the upgrade test in Pods starts from (tests/pods/test_upgrade.py): the
#: main of the round before issue 48 changed where a run's record goes in the history.
PREVIOUS_RELEASE = "b92c9d7e5368f93ccdb8cfd064c89782bbb7afe6"


def previous_release_tree(commit: str = PREVIOUS_RELEASE) -> Path:
    """The files of ``commit`` (its chart, Dockerfile and sources), taken from this
    clone's history once and kept in the cache, outside the repository."""
    target = build.cache_root() / "trees" / commit
    if (target / "Dockerfile").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{commit}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "Dockerfile").exists():
            return target
        staging = target.parent / f".{commit}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            raise BuildError(
                f"the previous release {commit} is not in this clone's history (a shallow "
                f"clone?): git archive said {archive.stderr.decode().strip()!r}"
            )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(staging, filter="data")
        staging.rename(target)
    return target


def demo_image() -> Image:
    """Tickwork's image plus its demo tasks (the Dockerfile's ``demo`` stage): the
    workers' image wherever ``tickwork.sleep`` and friends are used in Pods."""
    base = debian_base()
    files = _files_under(ROOT, _TICKWORK_CONTEXT, _TICKWORK_TREES)
    key = _context_digest(ROOT, files, base.ref, "demo")
    repository, tag = "localhost/tickwork-demo", f"dev-{key}"

    def make(target: Path) -> None:
        _podman_build(
            dockerfile=ROOT / "Dockerfile",
            context=ROOT,
            ref=f"{repository}:{tag}",
            build_args={"PYTHON_IMAGE": base.ref},
            target=target,
            stage="demo",
        )

    return Image(repository, tag, _cached("tickwork-demo", key, make))


def _image_size(image: Image, archive: Path) -> int:
    """Bytes of the image's layers, uncompressed (what `podman images` shows)."""
    del image
    with tarfile.open(archive) as tar:
        return sum(member.size for member in tar.getmembers() if member.name.endswith(".tar"))


def redis_image() -> Image:
    """Redis from Debian's ``redis-server`` package (7.0, BSD-licensed) on the base."""
    base = debian_base()
    dockerfile = IMAGES_DIR / "redis.Containerfile"
    key = _digest(base.ref, dockerfile.read_bytes())
    repository, tag = f"{LOCAL_REGISTRY}/redis", f"{DEBIAN_SUITE}-{key}"

    def make(target: Path) -> None:
        _podman_build(
            dockerfile=dockerfile,
            context=IMAGES_DIR,
            ref=f"{repository}:{tag}",
            build_args={"BASE_IMAGE": base.ref},
            target=target,
        )

    return Image(repository, tag, _cached("redis", key, make))


# -- single-binary images ---------------------------------------------------------


@dataclass(frozen=True)
class BinaryImage:
    """A static binary in an otherwise empty image, run as a numeric non-root user."""

    name: str
    tag: str
    files: dict[str, Path]
    """Path in the image -> file on this machine."""
    entrypoint: tuple[str, ...]
    user: int = NONROOT_UID
    env: tuple[str, ...] = field(default=())

    @property
    def repository(self) -> str:
        return f"{LOCAL_REGISTRY}/{self.name}"


def _tar_bytes(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _entry(
    name: str, *, data: bytes | None = None, mode: int = 0o644
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
    else:
        info.size = len(data)
    return info, data


def _layer(spec: BinaryImage) -> bytes:
    user = spec.user
    entries = [
        _entry("etc", mode=0o755),
        _entry(
            "etc/passwd",
            data=(
                f"root:x:0:0:root:/root:/sbin/nologin\n"
                f"nonroot:x:{user}:{user}:nonroot:/home/nonroot:/sbin/nologin\n"
            ).encode(),
        ),
        _entry("etc/group", data=f"root:x:0:\nnonroot:x:{user}:\n".encode()),
        _entry("tmp", mode=0o1777),
    ]
    directories = {"etc", "tmp"}
    for inside, source in sorted(spec.files.items()):
        parts = inside.strip("/").split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent not in directories:
                directories.add(parent)
                entries.append(_entry(parent, mode=0o755))
        executable = os.access(source, os.X_OK)
        entries.append(
            _entry("/".join(parts), data=source.read_bytes(), mode=0o755 if executable else 0o644)
        )
    return _tar_bytes(entries)


def _blob(content: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(content).hexdigest(), content


def write_oci_archive(spec: BinaryImage, target: Path) -> None:
    """Write ``spec`` as an OCI image-layout tar that ``ctr images import`` reads."""
    layer_tar = _layer(spec)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    layer_digest, layer = _blob(gzip.compress(layer_tar, mtime=0))
    config = {
        "architecture": "amd64" if os.uname().machine == "x86_64" else "arm64",
        "os": "linux",
        "config": {
            "User": f"{spec.user}:{spec.user}",
            "Entrypoint": list(spec.entrypoint),
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", *spec.env],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tickwork-devcluster (single static binary)"}],
    }
    config_digest, config_blob = _blob(json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_blob),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": layer_digest,
                "size": len(layer),
            }
        ],
    }
    manifest_digest, manifest_blob = _blob(json.dumps(manifest, sort_keys=True).encode())
    ref = f"{spec.repository}:{spec.tag}"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_blob),
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": spec.tag,
                },
            }
        ],
    }
    entries = [
        _entry("oci-layout", data=b'{"imageLayoutVersion":"1.0.0"}'),
        _entry("index.json", data=json.dumps(index).encode()),
        _entry("blobs", mode=0o755),
        _entry("blobs/sha256", mode=0o755),
    ]
    for digest, content in (
        (layer_digest, layer),
        (config_digest, config_blob),
        (manifest_digest, manifest_blob),
    ):
        entries.append(_entry(f"blobs/sha256/{digest.split(':')[1]}", data=content))
    target.write_bytes(_tar_bytes(entries))


def binary_image(spec: BinaryImage) -> Image:
    """The OCI archive of ``spec``, cached by the digest of its files and settings."""
    parts: list[bytes | str] = [repr((spec.name, spec.tag, spec.entrypoint, spec.user, spec.env))]
    for inside, source in sorted(spec.files.items()):
        parts += [inside, source.read_bytes()]
    key = _digest(*parts)
    archive = _cached(spec.name, key, lambda target: write_oci_archive(spec, target))
    return Image(spec.repository, spec.tag, archive)


def pause_image() -> Image:
    """The sandbox ("pause") image, compiled from Kubernetes' own pause.c with gcc."""
    bundle = build.node_bundle()
    version = bundle.versions["kubernetes"]
    source = build.module_file("k8s.io/kubernetes", version, "build/pause/linux/pause.c")
    directory = build.cache_root() / "bin" / f"pause-{version}"
    binary = directory / "pause"
    if not binary.exists():
        gcc = _require("gcc", "gcc")
        directory.mkdir(parents=True, exist_ok=True)
        staging = directory / ".pause.partial"
        _run(
            [
                gcc,
                "-Os",
                "-Wall",
                "-Werror",
                "-static",
                f"-DVERSION={version}",
                "-o",
                str(staging),
                str(source),
            ],
            what="gcc pause.c",
        )
        staging.rename(binary)
    spec = BinaryImage("pause", version, {"/pause": binary}, ("/pause",))
    return binary_image(spec)
