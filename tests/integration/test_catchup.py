"""Catch-up after an outage and backfills, with the ``tickwork-operator`` process as users
run it, the real control plane, a real Redis and the ``tickwork`` CLI: what is published
after the operator was down, once each even when it is killed in the middle; a backfill
asked for from the CLI, published in order and recorded; a leader change in the middle
of a backfill. (The same decisions in milliseconds: tests/unit/test_operator_catchup.py.)
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.test_cli import tickwork
from tests.support import ECHO, Jobs, QueueProbe, lead, rfc3339
from tickwork.api.models import OperatorStatus
from tickwork.core.runs import backfill_run_id, scheduled_run_id
from tickwork.kube import status as writes
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.queue.messages import RunMessage
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

Start = Callable[..., TickworkProcess]
pytestmark = pytest.mark.timeout(240)
MINUTE = dt.timedelta(minutes=1)
#: Late runs at one every two seconds: slow enough to stop an operator in the middle.
SLOW = {"TICKWORK_OPERATOR_CATCHUP_RUNS_PER_SECOND": "0.5"}
#: The operator's write as it publishes each run (lastScheduleTime), which these tests
#: read to see a catch-up progress with no worker running (off by default: each run's
#: record shows it then).
IN_STATUS = {"TICKWORK_OPERATOR_SCHEDULE_IN_STATUS": "true"}


def down_since(
    cluster: Cluster, jobs: Jobs, name: str, spec: dict[str, Any], *, minutes: int
) -> tuple[str, list[dt.datetime]]:
    """A per-minute job whose status says the operator last published a run ``minutes``
    minutes ago (and went down): its uid, and the runs due since then."""
    job = jobs.create(name, {"schedule": "* * * * *", **spec, "task": ECHO})
    uid = job["metadata"]["uid"]
    now = dt.datetime.now(dt.UTC)
    latest = now.replace(second=0, microsecond=0)
    if (now - latest).total_seconds() > 40:  # keep clear of the next minute
        latest += MINUTE
    # ... and of the grace after this one: a run less than 10 s late is on time for every
    # policy (None too), so the last run of the outage must be older than that.
    settled = latest + dt.timedelta(seconds=15)
    wait_for(lambda: dt.datetime.now(dt.UTC) >= settled, timeout=40, what="15 s past the minute")
    last = latest - minutes * MINUTE
    share = OperatorStatus(
        observed_generation=job["metadata"]["generation"],
        phase=None,
        last_schedule_time=last,
        next_run_at=last + MINUTE,
    )

    async def write() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(
                jobs.namespace,
                name,
                uid,
                writes.operator_body(share),
                field_manager=writes.OPERATOR_MANAGER,
                force=True,
            )

    asyncio.run(write())
    return uid, [last + k * MINUTE for k in range(1, minutes + 1)]


def published(probe: QueueProbe, seen: list[RunMessage]) -> list[str]:
    seen.extend(probe.drain())
    return [m.run_id for m in seen]


def backfilled(probe: QueueProbe, seen: list[RunMessage]) -> list[str]:
    """The backfilled runs published so far (scheduled ones may come on the hour too)."""
    return [i for i in published(probe, seen) if ".backfill." in i]


def test_after_an_outage_all_publishes_each_missed_run_once_even_across_a_kill(
    start_operator: Start, cluster: Cluster, jobs: Jobs, probe: QueueProbe
) -> None:
    spec = {"concurrencyPolicy": "Allow", "catchup": {"policy": "All", "windowSeconds": 3600}}
    uid, missed = down_since(cluster, jobs, "all", spec, minutes=6)
    # AllowAll: no worker runs the caught-up run here, so under the default Skip a run
    # on time while the test lasts (the minute may move on) is skipped and counted missed.
    latest_uid, _ = down_since(
        cluster,
        jobs,
        "latest",
        {"catchup": {"policy": "Latest"}, "concurrencyPolicy": "AllowAll"},
        minutes=6,
    )
    none_uid, _ = down_since(cluster, jobs, "none", {"catchup": {"policy": "None"}}, minutes=6)
    expected = [scheduled_run_id(uid, moment) for moment in missed]
    seen: list[RunMessage] = []

    first = start_operator("op-a", **SLOW, **IN_STATUS)
    lead(first)
    # Latest and None are decided at once; their status is written before the kill, so
    # the next leader does not decide them again after the minute has moved on (when a
    # seventh run would be due and the count would include one more). Latest's decision
    # (the count, the run it started) is written before its run is queued.
    wait_for(
        lambda: (
            all(jobs.status(name).get("missedRuns") for name in ("latest", "none"))
            and jobs.status("latest").get("lastScheduleTime", "") >= rfc3339(missed[-1])
        ),
        timeout=60,
        what="Latest and None decided and reported",
    )
    # Killed in the middle, once status records some of the runs (not all).
    wait_for(
        lambda: jobs.status("all").get("lastScheduleTime", "") >= rfc3339(missed[1]),
        timeout=60,
        what="two runs recorded",
    )
    first.kill()
    assert jobs.status("all")["lastScheduleTime"] < rfc3339(missed[-1])
    second = start_operator("op-b", **SLOW, **IN_STATUS)
    lead(second)
    wait_for(
        lambda: jobs.status("all").get("lastScheduleTime", "") >= rfc3339(missed[-1]),
        timeout=90,
        what="every run caught up",
    )
    wait_for(lambda: set(expected) <= set(published(probe, seen)), timeout=30, what="the queue")

    def runs_of(job_uid: str) -> list[str]:
        """The job's runs due in the outage that were published (later ones are on time)."""
        outage = {scheduled_run_id(job_uid, moment) for moment in missed}
        return [i for i in published(probe, seen) if i in outage]

    assert runs_of(uid) == expected  # each once, oldest first
    # The new leader went on from status: it published none of the recorded runs again
    # (at most the one on its way when the first was killed, which the queue dropped).
    assert second.log().count("run published again") <= 1, second.log()
    assert jobs.status("all").get("missedRuns") is None
    # Latest: the last run only; None: nothing; both count the rest.
    # If the minute moved on before the first leader decided (a slow start), the newest
    # due run was the next one, on time: Latest started that one, and the outage's last
    # run was one more missed. Either way exactly the newest due run started.
    latest = runs_of(latest_uid)
    if not latest:
        assert scheduled_run_id(latest_uid, missed[-1] + MINUTE) in published(probe, seen)
    else:
        assert latest == [scheduled_run_id(latest_uid, missed[-1])]
    assert jobs.status("latest")["missedRuns"] == len(missed) - len(latest)
    assert runs_of(none_uid) == []
    # (One more if the next minute fell due while no operator led, past the 10 s grace.)
    wait_for(
        lambda: (jobs.status("none").get("missedRuns") or 0) >= len(missed),
        timeout=30,
        what="None counts every run missed",
    )


BACKFILL_SPEC = {
    "schedule": "@every 1h",
    "notBefore": "2026-11-01T00:00:00Z",
    "concurrencyPolicy": "Allow",
    "task": ECHO,
}
HOURS = [dt.datetime(2026, 11, 2, h, tzinfo=dt.UTC) for h in range(12)]


def test_a_backfill_from_the_cli_is_published_in_order_and_recorded(
    start_operator: Start, cluster: Cluster, jobs: Jobs, namespace: str, probe: QueueProbe
) -> None:
    uid = jobs.create("reports", BACKFILL_SPEC)["metadata"]["uid"]
    done = tickwork(
        cluster,
        namespace,
        "backfill",
        "reports",
        "--from",
        rfc3339(HOURS[0]),
        "--to",
        rfc3339(HOURS[-1]),
        "--name",
        "nov-2",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        'scheduledjob "reports" backfill nov-2: 12 run(s) from 2026-11-02T00:00:00+00:00 to '
        "2026-11-02T11:00:00+00:00"
    )
    assert jobs.get("reports")["spec"]["backfills"] == [
        {"name": "nov-2", "from": "2026-11-02T00:00:00Z", "to": "2026-11-02T11:00:00Z"}
    ]
    # Refused before any patch: too many runs, a backwards range, a one-shot job.
    for args, why in (
        (("--from", "2026-11-01T00:00:00Z", "--to", "2027-01-15T00:00:00Z"), "more than the 1000"),
        (("--from", "2026-11-03T00:00:00Z", "--to", "2026-11-02T00:00:00Z"), "later than"),
        (("--from", "yesterday", "--to", "2026-11-02T00:00:00Z"), "RFC 3339"),
    ):
        refused = tickwork(cluster, namespace, "backfill", "reports", *args)
        assert refused.returncode == 1
        assert why in refused.stderr
    jobs.create("once", {"runAt": "2027-01-01T00:00:00Z", "task": ECHO})
    refused = tickwork(
        cluster,
        namespace,
        "backfill",
        "once",
        "--from",
        rfc3339(HOURS[0]),
        "--to",
        rfc3339(HOURS[-1]),
    )
    assert "recurring jobs only" in refused.stderr

    lead(start_operator())
    wait_for(
        lambda: (jobs.status("reports").get("backfills") or [{}])[0].get("completedAt"),
        timeout=60,
        what="the backfill complete",
    )
    expected = [backfill_run_id(uid, "nov-2", hour) for hour in HOURS]
    seen: list[RunMessage] = []
    wait_for(lambda: len(backfilled(probe, seen)) >= len(expected), timeout=30, what="the runs")
    assert backfilled(probe, seen) == expected
    assert [m.scheduled_at for m in seen if ".backfill." in m.run_id] == [
        hour.isoformat() for hour in HOURS
    ]
    [progress] = jobs.status("reports")["backfills"]
    assert (progress["published"], progress["skipped"]) == (12, 0)
    assert progress["doneUntil"] == rfc3339(HOURS[-1])
    wait_for(
        lambda: any(e[1] == "BackfillComplete" for e in jobs.events("reports")),
        timeout=30,
        what="the BackfillComplete Event",
    )


def test_a_leader_change_in_the_middle_of_a_backfill_goes_on_without_duplicates(
    start_operator: Start, jobs: Jobs, probe: QueueProbe
) -> None:
    backfill = {"name": "b1", "from": rfc3339(HOURS[0]), "to": rfc3339(HOURS[-1])}
    uid = jobs.create("reports", {**BACKFILL_SPEC, "backfills": [backfill]})["metadata"]["uid"]
    first = start_operator("op-a", **SLOW)
    lead(first)
    standby = start_operator("op-b", **SLOW)

    def progress() -> dict[str, Any]:
        return (jobs.status("reports").get("backfills") or [{}])[0]

    wait_for(lambda: progress().get("published", 0) >= 3, timeout=60, what="three runs recorded")
    first.kill()
    assert progress().get("completedAt") is None
    wait_for(standby.is_leader, timeout=30, what="the standby to lead")
    wait_for(lambda: progress().get("completedAt"), timeout=90, what="the backfill complete")
    expected = [backfill_run_id(uid, "b1", hour) for hour in HOURS]
    seen: list[RunMessage] = []
    wait_for(lambda: len(backfilled(probe, seen)) >= len(expected), timeout=30, what="the runs")
    assert backfilled(probe, seen) == expected  # in order, each once
    assert progress()["published"] == len(HOURS)
    assert standby.log().count("run published again") <= 1, standby.log()
