"""`helm upgrade` from the previous release to this tree's chart and image, in Pods,
with jobs whose histories the previous release filled (issue 48's upgrade from the
old status shape).

The previous release (:data:`tickwork_dev.devcluster.images.PREVIOUS_RELEASE`) is
built from its own tree, with its own chart and CRD, and writes each run's record as
that run's field manager, without a place in the history. This tree's workers write
a run on time into a place (``slot``) as the place's manager. After the upgrade the
old records must leave, the histories stay within their limits, the old managers
leave ``managedFields``, and ``kubectl get`` keeps showing the last and the next run.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pods.support import apply_jobs
from tests.support import row
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.recorder import EGRESS_VALUES as RECORDER_EGRESS
from tickwork_dev.devcluster.recorder import Recorder
from tickwork_dev.devcluster.release import (
    CHART,
    ClusterImages,
    Release,
    image_values,
    merge,
    previous_release,
)

NAMESPACE = "tickwork-upgrade"
CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
SUCCEEDING = ("upgrade-ok-a", "upgrade-ok-b")
FAILING = "upgrade-fails"
KEEP = 3  # the chart's default history: 3 successes and 3 others
pytestmark = pytest.mark.timeout(900)


def _jobs(recorder: Recorder) -> list[dict[str, Any]]:
    def job(name: str, url: str) -> dict[str, Any]:
        return {
            "apiVersion": "tickwork.dev/v1alpha1",
            "kind": "ScheduledJob",
            "metadata": {"name": name},
            "spec": {
                "schedule": "@every 10s",
                "retry": {"maxAttempts": 1},
                "task": {"http": {"url": url}},
            },
        }

    # The recorder answers at once: a run shorter than the worker's runningAfterSeconds
    # (0.5 s) is never marked Running, so its record takes a place. A host that does not
    # resolve fails each run at once, in the previous release as in this one.
    return [
        *(job(name, recorder.url(name)) for name in SUCCEEDING),
        job(FAILING, "http://refused.invalid/"),
    ]


def _jobs_now(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """The jobs, with their managedFields (kubectl leaves them out unless asked)."""
    result = cluster.kubectl(
        "get", "scheduledjobs", "-n", NAMESPACE, "-o", "json", "--show-managed-fields", timeout=120
    )
    return {str(j["metadata"]["name"]): j for j in json.loads(result.stdout)["items"]}


def _runs(job: dict[str, Any], *, succeeded: bool | None = None) -> list[dict[str, Any]]:
    """The job's history; only its successes, or only the rest, if asked."""
    runs: list[dict[str, Any]] = (job.get("status") or {}).get("runs") or []
    if succeeded is None:
        return runs
    return [r for r in runs if (r["outcome"] == "Succeeded") is succeeded]


def _summary(jobs: dict[str, dict[str, Any]], old_ids: dict[str, set[str]]) -> str:
    """Each job's history (old records marked), and its status managers."""
    return json.dumps(
        {
            name: {
                "runs": [_described(r, old=r["id"] in old_ids[name]) for r in _runs(job)],
                "managers": sorted(_status_managers(job)),
            }
            for name, job in jobs.items()
        }
    )


def _described(run: dict[str, Any], *, old: bool) -> str:
    """A history record as the summary shows it: outcome, slot, and whether it is old."""
    return f"{run['outcome']} {run.get('slot', '-')}{' OLD' if old else ''}"


def _moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def _status_managers(job: dict[str, Any]) -> set[str]:
    return {
        str(entry["manager"])
        for entry in job["metadata"].get("managedFields") or []
        if entry.get("subresource") == "status"
    }


@pytest.fixture(scope="module")
def previous(pods_cluster: Cluster, test_images: ClusterImages) -> Iterator[Release]:
    """The previous release, installed with its own chart, image and CRD (the CRD kept
    apart from the release, as the other modules do: it outlives their releases)."""
    image, chart = previous_release(pods_cluster)
    pods_cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        str(chart.parents[1] / "manifests" / "crds"),
    )
    values = merge(
        test_images.values(),
        image_values(image),
        RECORDER_EGRESS,
        {
            "crds": {"install": False},
            "operator": {"replicas": 1},
            "autoscaling": {"enabled": False},
            "worker": {"replicas": 1},
        },
    )
    release = Release(pods_cluster, NAMESPACE, values=values, chart=chart)
    try:
        release.install()
        yield release
        release.uninstall()
    finally:  # the modules after this one find this tree's CRD
        pods_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))


def test_an_upgrade_from_the_previous_release_lets_the_old_history_go_and_runs_go_on(
    previous: Release, recorder: Recorder, test_images: ClusterImages
) -> None:
    cluster = previous.cluster
    apply_jobs(cluster, NAMESPACE, _jobs(recorder))

    # The previous release fills every history (and trims it, in its own way).
    def filled() -> bool:
        jobs = _jobs_now(cluster)
        return (
            all(len(_runs(jobs[name], succeeded=True)) >= KEEP for name in SUCCEEDING)
            and len(_runs(jobs[FAILING], succeeded=False)) >= KEEP
        )

    wait_for(filled, timeout=180, interval=2, what="the previous release to fill the histories")
    before = _jobs_now(cluster)
    old_ids = {name: {r["id"] for r in _runs(job)} for name, job in before.items()}
    assert all("slot" not in r for job in before.values() for r in _runs(job))  # the old shape
    managers = {name: _status_managers(job) for name, job in before.items()}
    assert all(any(m.startswith("tickwork-run-") for m in held) for held in managers.values()), (
        managers
    )

    # The upgrade: this tree's CRD (kept apart, as installed), chart and image.
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    previous.chart = CHART
    previous.upgrade(test_images.values())

    def rolled() -> bool:
        pods = [
            *previous.pods("operator", terminating=True),
            *previous.pods("worker", terminating=True),
        ]
        return {p["spec"]["containers"][0]["image"] for p in pods} == {test_images.tickwork}

    wait_for(rolled, timeout=180, interval=1, what="every Pod on this tree's image")

    # The old records leave as this release's runs come: at once after a record that
    # took a place, in a batch for the failures (never placed: they are dead-lettered).
    # A run the old worker handed back as it drained ran again here as its own manager,
    # and leaves the same way.
    def settled() -> dict[str, dict[str, Any]] | None:
        jobs = _jobs_now(cluster)
        if any(old_ids[name] & {r["id"] for r in _runs(job)} for name, job in jobs.items()):
            return None
        placed = all(
            len(_runs(jobs[name])) == KEEP
            and all("slot" in r for r in _runs(jobs[name]))
            and not any(m.startswith("tickwork-run-") for m in _status_managers(jobs[name]))
            for name in SUCCEEDING
        )
        return jobs if placed else None

    try:
        wait_for(
            lambda: settled() is not None,
            timeout=240,
            interval=2,
            what="the previous release's records and managers to leave",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; now: {_summary(_jobs_now(cluster), old_ids)}") from None
    after = settled()
    assert after is not None
    for name in SUCCEEDING:
        job = after[name]
        successes = _runs(job, succeeded=True)
        assert sorted(r["slot"] for r in successes) == ["s0", "s1", "s2"]
        assert len({r["scheduledAt"] for r in successes}) == KEEP  # no instant twice
        # Only this release's managers: the operator's and one per place; the old
        # runs' managers left with their records (and lastRun, taken over by a place).
        managers = _status_managers(job)
        assert managers <= {"tickwork-operator", *(f"tickwork-runs-s{i}" for i in range(KEEP))}
        shown = row(cluster, NAMESPACE, name)
        assert (shown["last"], shown["nextRun"] != "") == ("Succeeded", True)
        status = job["status"]
        assert _moment(status["nextRunAt"]) > _moment(status["lastRun"]["scheduledAt"])
    failures = _runs(after[FAILING], succeeded=False)
    assert KEEP <= len(failures) < KEEP + 4, failures  # its limit, and a batch to come
    assert row(cluster, NAMESPACE, FAILING)["last"] == "Failed"
    # The runs went on through the upgrade: more executions than one history holds.
    counts = recorder.counts()
    assert all(counts.get(name, 0) > 2 * KEEP for name in SUCCEEDING), counts
