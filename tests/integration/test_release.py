"""The release workflow: its first job refuses a tag the checkout disagrees with, run as
the workflow runs it; the chart's default image is the appVersion's; and the jobs
publish what the README promises (actionlint checks the syntax, test_packaging.py)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_release_versions import VERSION_FILES
from tickwork_dev.devcluster import manifests

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
pytestmark = pytest.mark.timeout(120)


def release_check(tag: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/release_check.py", tag, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_release_check_fails_on_a_tag_the_checkout_does_not_carry() -> None:
    result = release_check("v99.0.0")
    assert result.returncode == 1
    assert "v99.0.0 cannot be released" in result.stderr
    assert f"Chart.yaml appVersion is {VERSION}, the tag says 99.0.0" in result.stderr
    assert "CHANGELOG.md has no '## 99.0.0' section" in result.stderr


def test_the_release_check_passes_on_the_checkouts_version_and_writes_its_notes(
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "checkout"
    for name in VERSION_FILES:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text((ROOT / name).read_text())
    changelog = checkout / "CHANGELOG.md"
    if f"\n## {VERSION}\n" not in changelog.read_text():  # as the release commit will
        changelog.write_text(changelog.read_text().replace("## Unreleased", f"## {VERSION}"))
    notes = tmp_path / "notes.md"
    result = release_check(f"v{VERSION}", "--notes", str(notes), "--root", str(checkout))
    assert result.returncode == 0, result.stderr
    text = notes.read_text()
    assert text.strip()
    assert not any(line.startswith("## ") for line in text.splitlines())  # one section only


def test_the_chart_runs_the_image_of_its_app_version_by_default() -> None:
    chart = yaml.safe_load((manifests.CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == VERSION
    argv = [manifests.helm(), "template", "tw", str(manifests.CHART)]
    rendered = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    images = {
        c["image"]
        for o in yaml.safe_load_all(rendered)
        if o and o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    }
    assert images == {f"ghcr.io/tickwork/tickwork:{VERSION}"}


def _jobs() -> dict[str, Any]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the key `on` as True.
    assert workflow[True] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {}
    jobs: dict[str, Any] = workflow["jobs"]
    return jobs


def _step(job: dict[str, Any], action: str) -> dict[str, Any]:
    [step] = [s for s in job["steps"] if s.get("uses", "").startswith(action + "@")]
    return step


def test_the_workflow_checks_the_tag_before_anything_is_published() -> None:
    jobs = _jobs()
    assert 'scripts/release_check.py "$GITHUB_REF_NAME"' in str(jobs["verify"]["steps"])
    publishing = {"image", "chart", "python-package", "kubectl-plugin"}
    assert all(
        jobs[name]["needs"] == "verify" or "verify" in jobs[name]["needs"] for name in publishing
    )
    assert set(jobs["github-release"]["needs"]) == {
        "verify",
        "image",
        "chart",
        "pypi",
        "kubectl-plugin",
    }


def test_the_kubectl_plugin_is_built_per_platform_by_the_suites_script_then_sent_to_krew() -> None:
    jobs = _jobs()
    plugin = jobs["kubectl-plugin"]
    assert len(plugin["strategy"]["matrix"]["runner"]) == 4  # .krew.yaml's four platforms
    assert "scripts/build-kubectl-plugin.sh dist" in str(plugin["steps"])
    assert "artifacts/kubectl-plugin-*/*.tar.gz" in str(jobs["github-release"]["steps"])
    assert jobs["krew-index"]["needs"] == "github-release"
    _step(jobs["krew-index"], "rajatjindal/krew-release-bot")


def test_the_image_is_multi_arch_with_an_sbom_and_a_keyless_signature() -> None:
    image = _jobs()["image"]
    build = _step(image, "docker/build-push-action")["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64"
    assert build["target"] == "product"
    assert build["sbom"] is True
    assert build["provenance"] == "mode=max"
    assert build["tags"].endswith(":${{ needs.verify.outputs.version }}")
    _step(image, "docker/setup-qemu-action")
    _step(image, "sigstore/cosign-installer")
    assert image["permissions"] == {"contents": "read", "packages": "write", "id-token": "write"}
    assert 'cosign sign --yes "${IMAGE}@${DIGEST}"' in str(image["steps"])


def test_the_chart_is_pushed_as_a_signed_oci_artifact() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["env"]["CHARTS"] == "oci://ghcr.io/tickwork/charts"
    steps = str(workflow["jobs"]["chart"]["steps"])
    assert "helm package charts/tickwork" in steps
    assert 'helm push "dist/tickwork-${VERSION}.tgz" "$CHARTS"' in steps
    assert "cosign sign --yes" in steps
    assert workflow["jobs"]["chart"]["permissions"]["id-token"] == "write"


def test_the_python_package_is_published_by_trusted_publishing() -> None:
    jobs = _jobs()
    assert "python -m build" in str(jobs["python-package"]["steps"])
    pypi = jobs["pypi"]
    assert pypi["environment"]["name"] == "pypi"
    assert pypi["permissions"] == {"id-token": "write"}  # no token, and nothing else
    publish = _step(pypi, "pypa/gh-action-pypi-publish")
    assert "with" not in publish  # no password: PyPI trusts the workflow's OIDC token
