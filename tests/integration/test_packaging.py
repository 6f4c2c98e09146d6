"""What the image does, without a container engine: build the wheel, install it into a
fresh virtualenv from nothing but wheels, and run both entry points; and the
Dockerfile passes hadolint."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(600)


def run(*argv: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert result.returncode == 0, f"{argv}: {result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_dockerfile_passes_hadolint_and_pins_the_project_version() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    run(hadolint, "Dockerfile")
    dockerfile = (ROOT / "Dockerfile").read_text()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"ARG TICKWORK_VERSION={version}" in dockerfile
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)
    assert "python:3.11." in dockerfile  # a pinned patch release, not a floating tag


PRODUCT_PACKAGES = {"tickwork", "tickwork_operator", "tickwork_worker"}
# What the wheel must never carry: the development harness and its dependencies.
HARNESS = (
    "tickwork_dev",
    "devcluster",
    "/demo/",
    "reference.py",
    "cryptography",
    "demo_tasks",
    "builtin.py",
)


def image_build_context(tmp_path: Path) -> Path:
    """What the Dockerfile's build stage sees (.dockerignore's list), in a fresh folder:
    a wheel built in the checkout would pick up a stale build/ folder."""
    ignore = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    context = tmp_path / "context"
    context.mkdir()
    for name in ignore:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source,
                context / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
            )
        else:
            shutil.copy2(source, context / name)
    return context


def pip_wheel(into: Path, *argv: str | Path) -> str:
    """``pip wheel`` with ``argv``, its wheels written to ``into``."""
    return run(sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", into, *argv)


def test_the_wheel_holds_the_product_and_nothing_of_the_harness(tmp_path: Path) -> None:
    context = image_build_context(tmp_path)
    pip_wheel(tmp_path, "--no-deps", context)
    [wheel] = tmp_path.glob("tickwork-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [
            line
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == PRODUCT_PACKAGES
    leaked = [n for n in names if any(part in n for part in HARNESS)]
    assert leaked == []
    # Every shipped module is Python or the typing marker: no data folders, no archives.
    assert {Path(n).suffix for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        ".py",
        ".typed",
    }
    assert not any("cryptography" in r for r in requires), requires
    assert not any("http2" in r for r in requires), requires  # aiohttp talks to the API server
    for script in (
        "tickwork-operator",
        "tickwork-worker",
        "tickwork ",
        "kubectl-tickwork",
        "kubectl_complete-tickwork",
    ):
        assert script in scripts
    assert "devcluster" not in scripts
    assert "tickwork-demo" not in scripts
    assert "tickwork.demo_tasks" not in scripts  # the demo tasks are not the product's


def test_the_wheel_installs_alone_and_both_entry_points_run(
    tmp_path: Path, cluster: Cluster, redis_url: str, crd: None, namespace: str
) -> None:
    wheels = tmp_path / "wheels"
    # The image's build stage: wheels of Tickwork and every dependency.
    pip_wheel(wheels, "--constraint", "constraints.txt", image_build_context(tmp_path))
    [wheel] = wheels.glob("tickwork-*.whl")
    target = tmp_path / "venv"
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    # The image's runtime stage: install from those wheels only, no index.
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", wheels, wheel)
    code = "import tickwork_operator, tickwork_worker, tickwork; print(tickwork.__file__)"
    location = run(python, "-c", code, cwd=tmp_path).strip()
    assert str(target) in location  # the installed copy, not this checkout
    for script in ("tickwork-operator", "tickwork-worker", "tickwork", "kubectl-tickwork"):
        assert "usage:" in run(target / "bin" / script, "--help", cwd=tmp_path)
    # The CLI, the operator and the worker load without the harness or its certificates
    # library, whatever the dependencies happen to install.
    code = (
        "import sys, tickwork.cli, tickwork_operator.main, tickwork_worker.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'tickwork_dev', 'cryptography'}))"
    )
    assert run(python, "-c", code, cwd=tmp_path).strip() == "[]"

    # And it works: the installed worker comes up against the real parts.
    worker = TickworkProcess(
        command="tickwork-worker",
        env={
            "KUBECONFIG": str(cluster.kubeconfig),
            "TICKWORK_REDIS_URL": redis_url,
            "TICKWORK_REDIS_QUEUE": namespace,
            "PATH": f"{target / 'bin'}:{os.environ['PATH']}",
        },
        log_path=tmp_path / "worker.log",
        executable=str(target / "bin" / "tickwork-worker"),
    )
    try:
        worker.start()
        worker.wait_ready()
    finally:
        worker.stop()
    assert "tickwork-worker" in worker.log()


def test_the_kind_script_and_ci_script_pass_shellcheck() -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    run(
        shellcheck,
        ".ci/run",
        "scripts/kind-e2e.sh",
        "scripts/build-kubectl-plugin.sh",
        "hack/controlplane/gen-gomod.sh",
    )
    script = (ROOT / "scripts" / "kind-e2e.sh").read_text()
    # kind runs the very suite CI runs on its local node, pointed at the kind cluster.
    for step in (
        "docker build",
        "kind load docker-image",
        "TICKWORK_TEST_KUBECONFIG=",
        "TICKWORK_TEST_IMAGE=",
        "pytest tests/pods",
    ):
        assert step in script


def test_the_github_workflows_pass_actionlint_and_run_the_real_scripts(tmp_path: Path) -> None:
    from tickwork_dev.devcluster import build  # noqa: PLC0415 - only this test needs the Go tool

    actionlint = build.ensure_built(build.actionlint_bundle(), log=False) / "actionlint"
    shellcheck = Path(sys.executable).parent / "shellcheck"
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert {w.name for w in workflows} >= {"ci.yml", "kind-e2e.yml", "release.yml"}
    run(actionlint, "-shellcheck", shellcheck, *workflows)
    assert "run: .ci/run" in (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "scripts/kind-e2e.sh" in (ROOT / ".github" / "workflows" / "kind-e2e.yml").read_text()
    release = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert "scripts/release_check.py" in release  # the check tests/unit runs too

    # The linter is live: a workflow with an unknown key and a bad expression fails it.
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    stepz: []\n"
        "    steps:\n      - run: echo ${{ github.nope( }}\n"
    )
    result = subprocess.run(
        [str(actionlint), str(broken)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "stepz" in result.stdout
