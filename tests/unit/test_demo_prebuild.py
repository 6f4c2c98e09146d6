"""`make demo` builds kube-apiserver and etcd beside `make install` (issue 47), with
the system Python alone: the build module must run before the venv exists, on the
standard library only (`-S`: no site-packages at all)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tickwork_dev.devcluster import build

DEV = Path(__file__).resolve().parents[2] / "dev"


def _run(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    empty = cache / "no-tools"  # no `go` on PATH, wherever this machine keeps one
    empty.mkdir(exist_ok=True)
    env = {"PATH": str(empty), "PYTHONPATH": str(DEV), "TICKWORK_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-S", "-m", "tickwork_dev.devcluster.build", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_a_built_control_plane_is_found_without_go_or_the_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKWORK_CACHE_DIR", str(tmp_path))
    built = build.controlplane_bundle().cached_dir()
    built.mkdir(parents=True)
    (built / ".complete").write_text("kubernetes=pinned")
    result = _run("controlplane", cache=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")


def test_a_missing_toolchain_is_one_line_naming_go(tmp_path: Path) -> None:
    result = _run("controlplane", cache=tmp_path)  # nothing cached
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: the Go toolchain is not on PATH")


def test_the_plain_demo_needs_no_controller_manager_build() -> None:
    assert build.controlplane_bundle().binaries == ("kube-apiserver", "etcd")
    assert build.controller_manager_bundle().binaries == ("kube-controller-manager",)


def test_an_unknown_bundle_is_refused(tmp_path: Path) -> None:
    result = _run("everything", cache=tmp_path)
    assert result.returncode == 2
    assert "usage: build {controlplane}" in result.stderr


def test_commands_with_the_same_flags_build_in_one_go_build() -> None:
    assert [[t.binary for t in g] for g in build._groups(build.controlplane_bundle().targets)] == [
        ["kube-apiserver", "etcd"]
    ]
    renamed = build.Target("keda-adapter", "github.com/kedacore/keda/v2/cmd/adapter")
    other_flags = build.Target("runc", "github.com/opencontainers/runc", cgo=True)
    plain = build.Target("ctr", "github.com/containerd/containerd/v2/cmd/ctr")
    grouped = build._groups((plain, renamed, other_flags, plain))
    assert [[t.binary for t in g] for g in grouped] == [
        ["ctr"],
        ["keda-adapter"],
        ["runc"],
        ["ctr"],
    ]


def test_every_go_build_makes_no_dwarf_and_a_new_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The linker strips DWARF (-s -w); the compiler must not make it either (0.89x of
    a cold build of the control plane), and binaries built with it are another key."""
    tools = tmp_path / "tools"
    tools.mkdir()
    calls = tmp_path / "calls"
    fake = tools / "go"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        'while [ "$1" != "-o" ]; do shift; done\n'
        'mkdir -p "$2"; for b in kube-apiserver etcd; do : > "$2/$b"; done\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.setenv("TICKWORK_CACHE_DIR", str(tmp_path / "cache"))
    bundle = build.controlplane_bundle()
    built = build.ensure_built(bundle, log=False)
    [argv] = calls.read_text().splitlines()
    assert "-gcflags=all=-dwarf=false" in argv.split()
    assert "-s -w" in argv
    before = bundle.key
    monkeypatch.setattr(build, "GCFLAGS", "all=")
    assert build.controlplane_bundle().key != before
    assert sorted(p.name for p in built.iterdir()) == [".complete", "etcd", "kube-apiserver"]
