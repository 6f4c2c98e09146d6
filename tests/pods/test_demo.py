"""`make demo DEMO_ARGS=--pods`, minus starting the node (the session's node serves):
the chart installed, a burst queued, and the worker replicas printed as they rise
and fall back."""

from __future__ import annotations

import argparse
import re

import pytest

from tickwork_dev.demo import pods as demo
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.release import Release

pytestmark = pytest.mark.timeout(900)


def test_the_pods_demo_shows_the_workers_absorb_a_burst(
    pods_cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(burst=40, duration=480, until_scaled=True)
    try:
        assert demo.show(pods_cluster, args) == 0
    finally:
        # Two Tickwork releases watching every namespace would both run every job.
        Release(pods_cluster, "tickwork").uninstall()
        for namespace in (demo.EXAMPLES, demo.BURST):
            pods_cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    out = capsys.readouterr().out
    print(out)  # noqa: T201 - shown with a failure: what the demo printed
    workers = [int(n) for n in re.findall(r"workers: (\d+) \(", out)]
    assert workers[0] == demo.MIN_WORKERS
    assert max(workers) > demo.MIN_WORKERS
    assert workers[-1] == demo.MIN_WORKERS
    assert "burst: 40 Succeeded" in out
    assert "hello-once" in out  # the examples' table, as kubectl get prints it
    assert "The workers scaled up, absorbed the burst and scaled back down." in out
