"""The kubectl plugin as krew installs it: the archive scripts/build-kubectl-plugin.sh
builds (one executable, no Python needed), found by kubectl on PATH and talking to
the real API server; .krew.yaml names that archive for every platform."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.support import Jobs
from tickwork_dev.devcluster.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
TAG = f"v{VERSION}"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plugin")
    built = subprocess.run(
        [str(ROOT / "scripts/build-kubectl-plugin.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return Path(built.stdout.strip().splitlines()[-1])


def render_krew(archive: Path) -> dict[str, object]:
    """.krew.yaml as krew-release-bot renders it for this tag (the SHA-256 of the
    archive built here for its platform; a stand-in for the others)."""
    text = (ROOT / ".krew.yaml").read_text().replace("{{ .TagName }}", TAG)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()

    def uri_and_sha(match: re.Match[str]) -> str:
        url = match.group(1)
        sha = digest if url.endswith(archive.name) else "0" * 64
        return f'uri: {url}\n      sha256: "{sha}"'

    rendered = re.sub(r'\{\{addURIAndSha "([^"]+)" \.TagName \}\}', uri_and_sha, text)
    document: dict[str, object] = yaml.safe_load(rendered)
    return document


def test_kubectl_finds_the_plugin_and_it_talks_to_the_cluster(
    archive: Path, tmp_path: Path, cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["LICENSE", "kubectl-tickwork"]
        tar.extractall(tmp_path, filter="data")
    jobs.create("nightly", {"schedule": "@daily", "task": {"echo": {}}})
    # Only the plugin's directory and kubectl's: no Python of ours on PATH.
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "KUBECONFIG": str(cluster.kubeconfig),
        "HOME": str(tmp_path),
    }
    kubectl = "/usr/bin/kubectl"

    def plugin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, "tickwork", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert plugin("version").stdout.strip() == f"tickwork {VERSION}"
    listing = plugin("get", "-n", namespace)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines()[1].split()[0] == "nightly"
    missing = plugin("runs", "nope", "-n", namespace)
    assert missing.returncode == 1
    assert "not found" in missing.stderr


def test_the_krew_manifest_names_each_platforms_archive(archive: Path) -> None:
    manifest = render_krew(archive)
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"] == {"name": "tickwork"}
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    assert spec["version"] == TAG
    assert len(spec["shortDescription"]) <= 60  # krew-index's rule
    platforms = {
        (p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"]): p
        for p in spec["platforms"]
    }
    assert set(platforms) == {(o, a) for o in ("linux", "darwin") for a in ("amd64", "arm64")}
    for (os_, arch), platform in platforms.items():
        assert platform["uri"].endswith(f"/{TAG}/kubectl-tickwork_{TAG}_{os_}_{arch}.tar.gz")
        assert platform["bin"] == "kubectl-tickwork"
        assert {f["from"] for f in platform["files"]} == {"kubectl-tickwork", "LICENSE"}
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
    here = platforms[
        (os.uname().sysname.lower(), "amd64" if os.uname().machine == "x86_64" else "arm64")
    ]
    assert here["uri"].endswith("/" + archive.name)
    assert here["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
