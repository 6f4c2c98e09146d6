"""Faults on the operator's side, with real ``tickwork-operator`` processes, the real
API server and Redis: issue 13's items 4 and 6 to 9.

* a deleted job's queued run is withdrawn from the queue; a suspended job's stays,
  for its worker to record Skipped (4);
* a run Redis refuses to take (out of memory, read-only) is published once Redis
  takes writes again, never dropped (6);
* a leader cut off from the API server (a paused relay) stops publishing before
  its Lease may have passed to a standby: no run published by two leaders (7);
* a run ID of another job forged into status is never published (8);
* a run-now token longer than status holds runs once, status follows (9).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest
import redis as redis_lib

from tests.support import (
    ECHO,
    Jobs,
    QueueProbe,
    lead,
    relayed_api_server,
    rfc3339,
    whole_seconds_from_now,
)
from tickwork.core.runs import manual_run_id, scheduled_run_id
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

pytestmark = pytest.mark.timeout(240)


def test_the_queued_run_of_a_deleted_job_is_withdrawn_a_suspended_ones_stays(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    """A run published moments before its job is deleted is taken out of the queue,
    so no worker starts it, whatever its own copy of the job says. A suspended job's
    run stays queued: its worker skips it and records why."""
    lead(start_operator())
    run_at = whole_seconds_from_now(2)
    runs = {}
    for name in ("held", "gone"):
        job = jobs.create(name, {"runAt": rfc3339(run_at), "task": ECHO})
        runs[name] = scheduled_run_id(job["metadata"]["uid"], run_at)
    for name, run_id in runs.items():
        wait_for(
            lambda run_id=run_id: probe.locate(run_id) is RunLocation.READY,
            timeout=30,
            what="the run queued",
        )
        wait_for(lambda name=name: "queuedRun" in jobs.status(name), timeout=10, what="queuedRun")
    jobs.patch("held", {"spec": {"suspend": True}})
    jobs.delete("gone")
    wait_for(
        lambda: probe.locate(runs["gone"]) is RunLocation.CANCELLED,
        timeout=15,
        what="the deleted job's run withdrawn",
    )
    wait_for(lambda: jobs.status("held").get("phase") == "Suspended", timeout=15, what="Suspended")
    assert probe.locate(runs["held"]) is RunLocation.READY
    assert [m.run_id for m in probe.drain()] == [runs["held"]]


def test_a_run_redis_refuses_to_take_is_published_once_it_takes_writes_again(
    start_operator: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
    redis_url: str,
) -> None:
    operator = start_operator()
    lead(operator)
    admin = redis_lib.Redis.from_url(redis_url)
    try:
        # Out of memory (maxmemory far below what is used, no eviction): every write
        # is refused with an OOM error, which is no connection error.
        admin.config_set("maxmemory", "1")
        run_at = whole_seconds_from_now(2)
        job = jobs.create("refused", {"runAt": rfc3339(run_at), "task": ECHO})
        run_id = scheduled_run_id(job["metadata"]["uid"], run_at)
        wait_for(
            lambda: (
                (operator.metric("tickwork_api_errors_total", 'operation="queue.enqueue"') or 0)
                >= 2
            ),
            timeout=30,
            what="refused publishes",
        )
        assert probe.locate(run_id) is None
        assert operator.log_matches(r"could not publish .* refuses writes .*maxmemory")
    finally:
        admin.config_set("maxmemory", "0")
        admin.close()
    # The due entry stayed in the index: published as soon as Redis takes it.
    wait_for(lambda: probe.locate(run_id) is RunLocation.READY, timeout=15, what="the run")


@pytest.mark.timeout(180)
def test_a_leader_cut_off_from_the_api_server_stops_publishing_before_its_lease_may_end(
    start_operator: Callable[..., TickworkProcess],
    jobs: Jobs,
    probe: QueueProbe,
    cluster: Cluster,
    tmp_path: Path,
) -> None:
    proxy, through_proxy = relayed_api_server(cluster, tmp_path / "through-proxy.kubeconfig")
    lease = {"TICKWORK_OPERATOR_LEASE_DURATION_SECONDS": "6"}
    try:
        leader = start_operator("op-a", KUBECONFIG=str(through_proxy), **lease)
        lead(leader)
        first = whole_seconds_from_now(5)
        due = {first + dt.timedelta(seconds=n): f"tick-{n:02d}" for n in range(24)}
        runs = {}
        for at, name in due.items():
            job = jobs.create(name, {"runAt": rfc3339(at), "task": ECHO})
            runs[at] = scheduled_run_id(job["metadata"]["uid"], at)
        wait_for(
            lambda: probe.locate(runs[first]) is RunLocation.READY, timeout=30, what="the first run"
        )
        # The leader's renewals now hang, as under a paused API server. Its lease may
        # end 6 s after its last renewal began: from then on it must publish nothing.
        proxy.pause()
        paused = dt.datetime.now(dt.UTC)
        wait_for(
            lambda: dt.datetime.now(dt.UTC) > paused + dt.timedelta(seconds=13),
            timeout=20,
            what="runs falling due while cut off",
        )
        window = (paused + dt.timedelta(seconds=7), paused + dt.timedelta(seconds=12))
        cut_off = [run for at, run in runs.items() if window[0] < at < window[1]]
        assert len(cut_off) >= 3
        assert [probe.locate(run) for run in cut_off] == [None] * len(cut_off)
        # A standby takes over and publishes them: no run lost.
        lead(start_operator("op-b", **lease))
        wait_for(
            lambda: all(probe.locate(run) is not None for run in runs.values()),
            timeout=60,
            what="every run published",
        )
    finally:
        proxy.close()


def test_a_run_id_of_another_job_forged_into_status_is_never_published(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator("op-a", TICKWORK_OPERATOR_RECONCILE_SECONDS="1"))
    run_at = whole_seconds_from_now(8)
    victim = jobs.create("victim", {"runAt": rfc3339(run_at), "task": ECHO})
    victim_run = scheduled_run_id(victim["metadata"]["uid"], run_at)
    jobs.create("forger", {"runAt": rfc3339(whole_seconds_from_now(3600)), "task": ECHO})
    # Whoever may patch the forger's status names the victim's coming run as its
    # own current run; the reconciler used to re-publish it under the forger, and
    # the victim's real run then deduplicated against it.
    jobs.api.patch_namespaced_custom_object_status(
        *jobs._args,
        "forger",
        {
            "status": {
                "activeRuns": [
                    {
                        "id": victim_run,
                        "scheduledAt": rfc3339(run_at),
                        "state": "Running",
                        "attempt": 1,
                    }
                ]
            }
        },
    )
    wait_for(
        lambda: probe.locate(victim_run) is RunLocation.READY, timeout=30, what="the victim's run"
    )
    [message] = probe.drain()
    assert message.run_id == victim_run
    assert (message.name, message.uid) == ("victim", victim["metadata"]["uid"])


def test_a_run_now_token_longer_than_status_holds_runs_once_and_status_follows(
    start_operator: Callable[..., TickworkProcess], jobs: Jobs, probe: QueueProbe
) -> None:
    lead(start_operator())
    job = jobs.create("long-token", {"schedule": "0 0 1 1 *", "task": ECHO})
    uid = job["metadata"]["uid"]
    token = "release-" + "x" * 400  # an annotation may hold this; lastTriggerToken may not
    annotate = {"metadata": {"annotations": {"tickwork.dev/run-now": token}}}
    jobs.patch("long-token", annotate)
    run_id = manual_run_id(uid, token)
    wait_for(lambda: probe.locate(run_id) is not None, timeout=30, what="manual run")
    # Status records the token's key; before, every write of this job's status was
    # refused (422) from then on.
    wait_for(
        lambda: "lastTriggerToken" in jobs.status("long-token"), timeout=30, what="status written"
    )
    recorded = jobs.status("long-token")["lastTriggerToken"]
    assert len(recorded) <= 33
    assert run_id.endswith(recorded)
    jobs.patch("long-token", {"metadata": {"labels": {"touched": "yes"}}})
    jobs.patch("long-token", annotate)  # the same token again: nothing more
    jobs.patch("long-token", {"metadata": {"annotations": {"tickwork.dev/run-now": "next"}}})
    wait_for(
        lambda: probe.locate(manual_run_id(uid, "next")) is not None,
        timeout=30,
        what="the next manual run",
    )
    assert sorted(m.run_id for m in probe.drain()) == sorted([run_id, manual_run_id(uid, "next")])
