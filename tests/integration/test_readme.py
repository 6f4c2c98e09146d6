"""The README's examples are accepted by the real API server as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tickwork_dev.devcluster.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.MULTILINE | re.DOTALL)


def test_the_first_job_is_accepted(cluster: Cluster, namespace: str, crd: None) -> None:
    [first_job] = [b for b in blocks("yaml") if "kind: ScheduledJob" in b]
    cluster.kubectl("apply", "-n", namespace, "--dry-run=server", "-f", "-", input_text=first_job)


def test_the_burst_snippet_makes_300_valid_jobs_due_on_one_minute(
    cluster: Cluster, namespace: str, crd: None
) -> None:
    [snippet] = [b for b in blocks("sh") if "seq 1 300" in b]
    generator = snippet.split("| kubectl apply -f -")[0]  # stop before the apply
    made = subprocess.run(
        ["bash", "-c", generator], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    documents = [d for d in yaml.safe_load_all(made) if d]
    assert len(documents) == 300
    assert len({d["spec"]["runAt"] for d in documents}) == 1
    assert len({d["metadata"]["name"] for d in documents}) == 300
    result = cluster.kubectl(
        "apply", "-n", namespace, "--dry-run=server", "-f", "-", input_text=made, timeout=120
    )
    assert result.stdout.count("created (server dry run)") == 300


@pytest.mark.parametrize("command", ["make demo", "make test"])
def test_the_readme_starts_with_the_two_commands(command: str) -> None:
    first_block = blocks("sh")[0]
    assert command in first_block
