"""The chart installed for real: `helm install` on a cluster with a node, and the
journeys users go through, with the operator, the workers and Redis in Pods.

One release serves the whole module, in the order a user meets it: install,
a second release for the same namespaces refused, a first job, a cron job
(created first, checked last, so its three minutes overlap the rest), leader
hand-over, workers deleted during a burst, the autoscaler absorbing a burst, a
drain held to the workers' budget, NetworkPolicy, an upgrade while runs are in
flight, and uninstall. Executions are counted at the recorder Pod (the far end of
each HTTP task), never inferred from Tickwork's own status.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.pods.support import (
    apply_jobs,
    connect,
    job_list,
    one_shot,
    prober,
    seconds_from_now,
    wait_outcomes,
)
from tests.support import row
from tickwork.tracing import run_trace_id
from tickwork_dev.devcluster.addons import served_backlog
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.errors import StartError
from tickwork_dev.devcluster.hostnet import NODE_ADDRESS
from tickwork_dev.devcluster.recorder import EGRESS_VALUES as RECORDER_EGRESS
from tickwork_dev.devcluster.recorder import Recorder
from tickwork_dev.devcluster.release import ClusterImages, Release, image_values, merge
from tickwork_dev.devcluster.scaling import run_burst

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "tickwork-e2e"
#: The cron job's own tenant: the bursts below are another tenant's (NAMESPACE's), held
#: to their fair share, so they cannot delay it past its next minute.
CRON_NAMESPACE = "tickwork-e2e-cron"
MIN_WORKERS = 1
CONCURRENCY = 8  # the chart's worker.concurrency
pytestmark = pytest.mark.timeout(600)


def release_values(images: ClusterImages, monitoring: str, recorder: Recorder) -> dict[str, object]:
    """The chart's defaults, except for the images and what makes scaling observable
    in minutes (a short scale-down window and few workers), and traces on, sent to
    the recorder, which is an OTLP collector too."""
    return merge(
        images.values(),
        RECORDER_EGRESS,
        {
            "traces": {
                "otlpEndpoint": f"http://recorder.{recorder.namespace}.svc.cluster.local:8080",
                "collectorPeers": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": recorder.namespace}
                        },
                        "podSelector": {"matchLabels": {"app": "recorder"}},
                    }
                ],
            },
            "operator": {"replicas": 2},
            "autoscaling": {
                "enabled": True,
                "mode": "hpa",
                "minReplicas": MIN_WORKERS,
                "maxReplicas": 5,
                "behavior": {"scaleDownStabilizationSeconds": 15, "scaleDownPercent": 100},
            },
            "networkPolicy": {
                "metricsFrom": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": monitoring}
                        }
                    },
                ]
            },
        },
    )


@pytest.fixture(scope="module")
def release(
    pods_cluster: Cluster, test_images: ClusterImages, monitoring: str, recorder: Recorder
) -> Iterator[Release]:
    values = release_values(test_images, monitoring, recorder)
    installed = Release(pods_cluster, NAMESPACE, values=values)
    installed.install()
    yield installed
    if installed.helm("list", "--short").strip():
        installed.uninstall()


@pytest.fixture(scope="module")
def cron_job(release: Release, recorder: Recorder) -> str:
    """A job on `* * * * *`, in a namespace of its own, created before the other
    journeys so that its three minutes pass while they run; checked by the test at
    the end of the module."""
    name = "every-minute"
    job = {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "task": {"http": {"url": recorder.url(name)}},
            # Every run stays in status.runs while the module lasts (well under 20
            # minutes): the check at the end compares each execution with a record.
            "history": {"successfulRuns": 20, "failedRuns": 20},
        },
    }
    space = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CRON_NAMESPACE}}
    release.cluster.kubectl("apply", "-f", "-", input_text=json.dumps(space))
    apply_jobs(release.cluster, CRON_NAMESPACE, [job])
    return name


def test_the_release_runs_every_component_in_pods(release: Release, cron_job: str) -> None:
    del cron_job  # created now, checked at the end
    operators = release.pods("operator")
    assert len(operators) == 2
    assert all(pod["status"]["phase"] == "Running" for pod in operators)
    wait_for(
        lambda: release.leader() in {p["metadata"]["name"] for p in operators},
        timeout=30,
        what="a leader",
    )
    [redis] = release.pods("redis")
    assert redis["status"]["phase"] == "Running"
    # The server runs with maxmemory at half its container's memory limit (the chart
    # computes it), and its probes (the CLI with the password from the environment) pass.
    limit = redis["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert limit.endswith("Mi"), limit
    maxmemory = release.cluster.kubectl(
        "-n",
        release.namespace,
        "exec",
        redis["metadata"]["name"],
        "--",
        "sh",
        "-c",
        "redis-cli config get maxmemory | tail -n 1",
    ).stdout
    assert maxmemory.strip() == str(int(limit[:-2]) * 1024 * 1024 // 2)
    assert all(c["ready"] for c in redis["status"]["containerStatuses"])
    workers = release.deployment("worker")
    assert workers["status"]["readyReplicas"] >= MIN_WORKERS
    claim = release.cluster.kubectl(
        "-n", release.namespace, "get", "pvc", f"data-{release.fullname}-redis-0", "-o", "json"
    )
    assert json.loads(claim.stdout)["status"]["phase"] == "Bound"


def test_the_workers_budget_counts_the_worker_pods_and_lets_one_go_at_a_time(
    release: Release,
) -> None:
    """The disruption controller finds the worker pods by the budget's selector: a
    drain may take one of them at a time (a wrong selector would count none)."""

    def counted() -> bool:
        found = release.cluster.kubectl(
            "-n", release.namespace, "get", "pdb", f"{release.fullname}-worker", "-o", "json"
        )
        status = json.loads(found.stdout).get("status") or {}
        ready = release.deployment("worker")["status"].get("readyReplicas") or 0
        healthy = (status.get("expectedPods"), status.get("currentHealthy"))
        return ready >= 1 and healthy == (ready, ready) and status.get("disruptionsAllowed") == 1

    wait_for(counted, timeout=90, what="the workers' budget to count the ready workers")


def test_a_second_release_for_the_same_namespaces_is_refused(release: Release) -> None:
    """Two operators that watch one namespace would each run its jobs: `helm install`
    of a second cluster-wide release refuses before it creates anything, naming the
    operator that runs in Pods here."""
    values = merge(
        release.values, {"crds": {"install": False}, "redis": {"persistence": {"enabled": False}}}
    )
    second = Release(release.cluster, f"{NAMESPACE}-second", values=values)
    try:
        with pytest.raises(StartError) as refused:
            second.install(timeout="1m")
        running = f"{release.namespace}/{release.deployment('operator')['metadata']['name']}"
        assert f"{running} (watching every namespace) in every namespace" in str(refused.value)
        made = release.cluster.kubectl(
            "get", "deployments", "-n", second.namespace, "-o", "name", check=False
        )
        assert not made.stdout.strip()
    finally:
        release.cluster.kubectl(
            "delete", "namespace", second.namespace, "--ignore-not-found", "--wait=false"
        )


def test_an_upgrade_that_changes_no_pod_restarts_none(release: Release) -> None:
    before = {c: {p["metadata"]["name"] for p in release.pods(c)} for c in ("operator", "redis")}
    release.upgrade({})
    after = {c: {p["metadata"]["name"] for p in release.pods(c)} for c in ("operator", "redis")}
    assert after == before


def test_pods_run_as_non_root_with_a_read_only_root_filesystem(release: Release) -> None:
    for component in ("operator", "worker"):
        pod = release.pods(component)[0]["metadata"]["name"]
        exec_ = ("-n", release.namespace, "exec", str(pod), "--")
        uid = release.cluster.kubectl(*exec_, "id", "-u").stdout.strip()
        assert uid == "10001", f"{component} runs as {uid}"
        write = release.cluster.kubectl(*exec_, "touch", "/probe", check=False)
        assert write.returncode != 0
        assert "Read-only file system" in write.stderr
        # tini is PID 1 (it acts on SIGTERM at once and reaps orphans), Tickwork its child.
        command = release.cluster.kubectl(*exec_, "cat", "/proc/1/cmdline").stdout
        assert command.split("\0")[:3] == ["tini", "--", f"tickwork-{component}"], command


def test_the_job_example_succeeds_and_kubectl_get_shows_it(release: Release) -> None:
    cluster, namespace = release.cluster, release.namespace
    # The README's quick start: applied as it is written (its runAt has passed).
    example = yaml.safe_load((ROOT / "manifests/examples/job.yaml").read_text())
    cluster.kubectl("apply", "-n", namespace, "-f", str(ROOT / "manifests/examples/job.yaml"))
    name = example["metadata"]["name"]
    wait_outcomes(cluster, namespace, {name}, "Succeeded", timeout=90)
    [job] = [j for j in job_list(cluster, namespace) if j["metadata"]["name"] == name]
    assert job["status"]["lastRun"]["result"] == "Executed: hello from Tickwork"
    wait_for(
        lambda: row(cluster, namespace, name)["phase"] == "Completed", timeout=30, what="Completed"
    )
    shown = row(cluster, namespace, name)
    assert (shown["active"], shown["last"], shown["nextRun"]) == ("", "Succeeded", "")
    assert shown["runAt"] == example["spec"]["runAt"]
    assert shown["lastRun"] != ""
    # The release scheduled the namespace under its claim, in its own name.
    assert _claim_holder(release, namespace) == _release_identity(release)


def test_a_run_is_one_trace_at_the_collector_from_publish_to_the_task(
    release: Release, recorder: Recorder
) -> None:
    """Traces on in Pods (issue 51, item 3): the operator's publish span and the
    worker's attempt with its read, execute and status spans reach a collector in
    another namespace, through the workers' egress policy, in the trace derived from
    the run ID; the HTTP task is called with the execute span as its traceparent."""
    cluster, namespace = release.cluster, release.namespace
    job = one_shot("traced", recorder.url("traced"), run_at=seconds_from_now(3))
    apply_jobs(cluster, namespace, [job])
    wait_outcomes(cluster, namespace, {"traced"}, "Succeeded", timeout=90)
    [found] = [j for j in job_list(cluster, namespace) if j["metadata"]["name"] == "traced"]
    trace = f"{run_trace_id(found['status']['lastRun']['id']):032x}"
    wanted = {
        ("tickwork-operator", "tickwork.publish"),
        ("tickwork-worker", "tickwork.attempt"),
        ("tickwork-worker", "tickwork.read"),
        ("tickwork-worker", "tickwork.execute"),
        ("tickwork-worker", "tickwork.status"),
    }
    spans: list[dict[str, str]] = []

    def arrived() -> bool:
        spans[:] = recorder.spans(trace)
        return wanted <= {(s["service"], s["name"]) for s in spans}

    # The exporters send in batches, every 5 s by default.
    wait_for(arrived, timeout=60, interval=1, what="the run's spans at the collector")
    [execute] = [s for s in spans if s["name"] == "tickwork.execute"]
    assert recorder.traceparents()["traced"] == f"00-{trace}-{execute['span']}-01"
    [publish] = [s for s in spans if s["name"] == "tickwork.publish"]
    [attempt] = [s for s in spans if s["name"] == "tickwork.attempt"]
    assert publish["parent"] == attempt["parent"]  # both under the run's own parent


def _claim_holder(release: Release, namespace: str) -> str:
    """Who holds the ``tickwork-scheduler`` Lease of ``namespace`` (one release per namespace)."""
    return release.cluster.kubectl(
        "-n",
        namespace,
        "get",
        "lease",
        "tickwork-scheduler",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ).stdout


def _release_identity(release: Release) -> str:
    """A release's name in its claims: its leader Lease, ``namespace/name``."""
    return f"{release.namespace}/{release.deployment('operator')['metadata']['name']}"


def _one_shots(
    recorder: Recorder, prefix: str, count: int, *, first_due: int, spread: int, delay: float = 0
) -> list[dict[str, object]]:
    """``count`` one-shots due from ``first_due`` seconds on, spread over ``spread`` seconds."""
    return [
        one_shot(
            f"{prefix}-{i:03d}",
            recorder.url(f"{prefix}-{i:03d}", delay=delay),
            run_at=seconds_from_now(first_due + (i * spread) // max(1, count)),
        )
        for i in range(count)
    ]


def _assert_each_ran_once(recorder: Recorder, release: Release, names: set[str]) -> None:
    counts = recorder.counts()
    lost = sorted(name for name in names if counts.get(name, 0) == 0)
    assert not lost, f"runs lost: {lost}"
    jobs = {j["metadata"]["name"]: j for j in job_list(release.cluster, release.namespace)}
    over = {
        name: counts[name]
        for name in names
        if counts[name] > jobs[name]["status"]["lastRun"]["attempts"]
    }
    assert not over, f"executed more often than attempted: {over}"


def test_deleting_the_leading_operator_hands_over_within_15_s_and_loses_no_run(
    release: Release, recorder: Recorder
) -> None:
    cluster, namespace = release.cluster, release.namespace
    jobs = _one_shots(recorder, "handover", 30, first_due=8, spread=30)
    apply_jobs(cluster, namespace, jobs)
    leader = release.leader()
    assert leader is not None
    # The hand-over happens in the middle of the sequence: once its first run executed.
    wait_for(
        lambda: recorder.counts().get("handover-000", 0) > 0,
        timeout=60,
        interval=0.2,
        what="the first run",
    )
    started = time.monotonic()
    cluster.kubectl("-n", namespace, "delete", "pod", leader, "--wait=false")

    def new_leader() -> bool:
        holder = release.leader()
        return holder is not None and holder != leader

    wait_for(new_leader, timeout=30, interval=0.2, what="a new leader")
    assert time.monotonic() - started <= 15
    names = {str(job["metadata"]["name"]) for job in jobs}
    wait_outcomes(cluster, namespace, names, "Succeeded", timeout=180)
    _assert_each_ran_once(recorder, release, names)
    # The claim on the namespace stays the release's across the handover.
    assert _claim_holder(release, namespace) == _release_identity(release)
    wait_for(
        lambda: len(release.pods("operator")) == 2,
        timeout=120,
        what="the Deployment replacing the deleted operator",
    )


def test_deleting_worker_pods_during_a_burst_loses_no_run(
    release: Release, recorder: Recorder
) -> None:
    cluster, namespace = release.cluster, release.namespace
    jobs = _one_shots(recorder, "evicted", 40, first_due=8, spread=4, delay=3)
    apply_jobs(cluster, namespace, jobs)
    wait_for(lambda: recorder.inflight() > 0, timeout=60, interval=0.2, what="runs executing")
    workers = [str(p["metadata"]["name"]) for p in release.pods("worker")]
    cluster.kubectl("-n", namespace, "delete", "pod", *workers, "--wait=false")
    names = {str(job["metadata"]["name"]) for job in jobs}
    wait_outcomes(cluster, namespace, names, "Succeeded", timeout=240)
    _assert_each_ran_once(recorder, release, names)


def test_the_hpa_scales_the_workers_with_the_backlog_and_back_without_losing_a_run(
    release: Release, recorder: Recorder
) -> None:
    wait_for(
        lambda: release.deployment("worker")["status"].get("replicas") == MIN_WORKERS,
        timeout=180,
        what="workers at the minimum before the burst",
    )
    burst = run_burst(release, recorder, jobs=40, task_seconds=20, min_replicas=MIN_WORKERS)
    assert burst.peak_replicas >= 3, burst.summary()
    assert burst.first_extra_ready is not None
    assert burst.drained is not None, burst.summary()
    assert burst.back_to_min is not None, burst.summary()
    assert not burst.lost, burst.lost
    assert not burst.executed_more_than_attempts, burst.executed_more_than_attempts
    assert set(burst.outcomes.values()) == {"Succeeded"}
    # The backlog counts in-flight runs: busy workers are not scaled away.
    crowded = [s for s in burst.samples if s.executing > MIN_WORKERS * CONCURRENCY]
    assert crowded
    assert all(s.replicas > MIN_WORKERS for s in crowded), burst.summary()


def test_a_drain_evicts_one_worker_at_a_time_and_the_budget_refuses_the_second(
    release: Release,
) -> None:
    """The eviction API, as `kubectl drain` calls it, with two ready workers: the first
    eviction goes through, the second at once is refused by the workers' budget (a
    drain waits and tries again; a lost budget would let both go, every run with them)."""
    cluster, namespace = release.cluster, release.namespace
    hpa = f"{release.fullname}-worker"

    def set_minimum(replicas: int) -> None:
        patch = json.dumps({"spec": {"minReplicas": replicas}})
        cluster.kubectl("-n", namespace, "patch", "hpa", hpa, "--type=merge", "-p", patch)

    def evict(pod: str) -> str:
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        done = cluster.kubectl(
            "create",
            "--raw",
            f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction",
            "-f",
            "-",
            input_text=json.dumps(eviction),
            check=False,
        )
        return "evicted" if done.returncode == 0 else done.stderr

    ready: list[str] = []

    def two_ready_and_one_allowed() -> bool:
        found = cluster.kubectl("-n", namespace, "get", "pdb", hpa, "-o", "json")
        status = json.loads(found.stdout).get("status") or {}
        ready[:] = [
            str(p["metadata"]["name"])
            for p in release.pods("worker")
            if not p["metadata"].get("deletionTimestamp")
            and all(c["ready"] for c in p["status"].get("containerStatuses") or [{"ready": 0}])
        ]
        budget = (status.get("currentHealthy"), status.get("disruptionsAllowed"))
        return len(ready) == 2 and budget == (2, 1)

    set_minimum(2)
    try:
        wait_for(two_ready_and_one_allowed, timeout=180, what="two ready workers, one allowed")
        first, second = ready
        assert evict(first) == "evicted"
        refused = evict(second)
        assert "disruption budget" in refused, refused
        assert second in {str(p["metadata"]["name"]) for p in release.pods("worker")}
        # The evicted worker is replaced; then a drain's next try may take another.
        wait_for(two_ready_and_one_allowed, timeout=180, what="the evicted worker replaced")
    finally:
        set_minimum(MIN_WORKERS)


def test_the_backlog_metric_reaches_the_releases_own_namespace_only(release: Release) -> None:
    """Another namespace's HPA (another release with the same queue name, or a tenant)
    must neither scale on this release's backlog nor read it."""
    cluster = release.cluster
    wait_for(
        lambda: bool(served_backlog(cluster, release.namespace)),
        timeout=60,
        what="the backlog served to the release's namespace",
    )
    for other in (CRON_NAMESPACE, "default"):
        assert not served_backlog(cluster, other), other


def test_network_policy_admits_only_tickwork_to_redis_and_the_scraper_to_metrics(
    release: Release, monitoring: str, test_images: ClusterImages
) -> None:
    cluster, namespace = release.cluster, release.namespace
    redis = f"{release.fullname}-redis.{namespace}.svc.cluster.local"
    operator_ip = str(release.pods("operator")[0]["status"]["podIP"])
    worker = release.staying_pod("worker")
    insider = prober(cluster, monitoring, test_images.tickwork)  # the admitted scraper's namespace
    outsider = prober(cluster, namespace, test_images.tickwork)  # same namespace, no labels
    try:
        # Admitted: a worker to Redis, the monitoring namespace to the metrics port. (The
        # agent learns new Pods' addresses within moments: wait until it has.)
        wait_for(
            lambda: connect(cluster, namespace, worker, redis, 6379) == "open",
            timeout=30,
            what="a worker reaching Redis",
        )
        wait_for(
            lambda: connect(cluster, monitoring, insider, operator_ip, 8080) == "open",
            timeout=30,
            what="the scraper's namespace reaching the metrics",
        )
        # Refused, every time: a Pod without Tickwork's labels, even in its namespace.
        for _ in range(3):
            assert connect(cluster, namespace, outsider, redis, 6379).startswith("closed")
            assert connect(cluster, namespace, outsider, operator_ip, 8080).startswith("closed")
            # ... and the admitted scraper still only reaches the metrics port, not Redis.
            assert connect(cluster, monitoring, insider, redis, 6379).startswith("closed")
        # The kubelet's probes come from the node: still admitted (the pods stay Ready).
        assert all(
            c["ready"] for p in release.pods("operator") for c in p["status"]["containerStatuses"]
        )
    finally:
        cluster.kubectl("-n", namespace, "delete", "pod", outsider, "--wait=false")
        cluster.kubectl("-n", monitoring, "delete", "pod", insider, "--wait=false")


def test_workers_reach_dns_the_api_server_and_redis_but_no_other_pod(
    release: Release, monitoring: str, test_images: ClusterImages
) -> None:
    """The workers' egress NetworkPolicy: what a `command` task (or anything else in
    the worker's Pod) can connect to, whatever the worker process's own rules."""
    cluster, namespace = release.cluster, release.namespace
    worker = release.staying_pod("worker")
    name = "bystander"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": monitoring},
        "spec": {
            "containers": [
                {
                    "name": "http",
                    "image": test_images.tickwork,
                    "command": ["python3", "-m", "http.server", "8080"],
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "securityContext": {"runAsNonRoot": True},
            "terminationGracePeriodSeconds": 0,
        },
    }
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(pod))
    outsider = prober(cluster, namespace, test_images.tickwork)  # no egress policy
    try:
        cluster.kubectl(
            "-n",
            monitoring,
            "wait",
            "--for=condition=Ready",
            f"pod/{name}",
            "--timeout=60s",
            timeout=90,
        )
        bystander = str(
            json.loads(cluster.kubectl("-n", monitoring, "get", "pod", name, "-o", "json").stdout)[
                "status"
            ]["podIP"]
        )
        # The bystander serves: a Pod without the policy reaches it.
        wait_for(
            lambda: connect(cluster, namespace, outsider, bystander, 8080) == "open",
            timeout=30,
            what="the bystander serving",
        )
        api = "kubernetes.default.svc.cluster.local"
        wait_for(
            lambda: connect(cluster, namespace, worker, api, 443) == "open",
            timeout=30,
            what="a worker reaching the API server by name",
        )
        # The operator keeps the workers' policy for the API server from its slice.
        api_slice = json.loads(
            cluster.kubectl(
                "-n", "default", "get", "endpointslice", "kubernetes", "-o", "json"
            ).stdout
        )
        kept = json.loads(
            cluster.kubectl(
                "-n",
                namespace,
                "get",
                "networkpolicy",
                f"{release.fullname}-worker-apiserver",
                "-o",
                "json",
            ).stdout
        )
        [rule] = kept["spec"]["egress"]
        assert sorted(peer["ipBlock"]["cidr"].split("/")[0] for peer in rule["to"]) == sorted(
            a for endpoint in api_slice["endpoints"] for a in endpoint["addresses"]
        )
        redis = f"{release.fullname}-redis.{namespace}.svc.cluster.local"
        assert connect(cluster, namespace, worker, redis, 6379) == "open"
        for _ in range(3):  # ... but not the bystander, nor the node's other ports
            assert connect(cluster, namespace, worker, bystander, 8080).startswith("closed")
            assert connect(cluster, namespace, worker, NODE_ADDRESS, 10250).startswith("closed")
    finally:
        cluster.kubectl("-n", namespace, "delete", "pod", outsider, "--wait=false")
        cluster.kubectl("-n", monitoring, "delete", "pod", name, "--wait=false")


def test_helm_upgrade_to_a_rebuilt_image_while_runs_are_in_flight_loses_no_run(
    release: Release, recorder: Recorder, test_images: ClusterImages
) -> None:
    cluster, namespace = release.cluster, release.namespace
    jobs = _one_shots(recorder, "upgrade", 40, first_due=5, spread=40, delay=4)
    apply_jobs(cluster, namespace, jobs)
    wait_for(lambda: recorder.inflight() > 0, timeout=60, interval=0.2, what="runs executing")
    release.upgrade(image_values(test_images.upgrade))

    def rolled() -> bool:
        pods = [
            *release.pods("operator", terminating=True),
            *release.pods("worker", terminating=True),
        ]
        return {pod["spec"]["containers"][0]["image"] for pod in pods} == {test_images.upgrade}

    # helm --wait returns when the new Pods are ready; the old ones finish their runs.
    wait_for(rolled, timeout=120, interval=1, what="every Pod on the new image")
    names = {str(job["metadata"]["name"]) for job in jobs}
    wait_outcomes(cluster, namespace, names, "Succeeded", timeout=240)
    _assert_each_ran_once(recorder, release, names)


@pytest.mark.timeout(420)
def test_the_cron_job_ran_three_times_once_a_minute(
    release: Release, recorder: Recorder, cron_job: str
) -> None:
    cluster, namespace = release.cluster, CRON_NAMESPACE

    def runs() -> list[dict[str, str]]:
        [job] = [j for j in job_list(cluster, namespace) if j["metadata"]["name"] == cron_job]
        found: list[dict[str, str]] = job.get("status", {}).get("runs") or []
        return found

    wait_for(
        lambda: sum(r["outcome"] == "Succeeded" for r in runs()) >= 3,
        timeout=300,
        interval=2,
        what="three runs",
    )
    scheduled = sorted(dt.datetime.fromisoformat(r["scheduledAt"]) for r in runs())
    gaps = [b - a for a, b in itertools.pairwise(scheduled)]
    assert all(gap == dt.timedelta(minutes=1) for gap in gaps), (scheduled, runs())
    shown = row(cluster, namespace, cron_job)
    assert shown["schedule"] == "* * * * *"
    assert shown["lastRun"] != ""
    assert shown["nextRun"] != ""
    # Executions at the far end: at least one per run that succeeded, and none beyond
    # the attempts recorded (worker Pods were deleted mid-run by the journeys above, so
    # a run may have taken a second attempt) plus one run executing right now.
    executions = recorder.counts().get(cron_job, 0)
    recorded = runs()
    assert len(recorded) < 20, "the history limit cut runs off: raise it"
    succeeded = sum(r["outcome"] == "Succeeded" for r in recorded)
    attempted = sum(int(r.get("attempts", 1)) for r in recorded)
    assert succeeded <= executions <= attempted + 1, (executions, recorded)


def test_helm_uninstall_keeps_the_crd_and_the_scheduledjobs(release: Release) -> None:
    cluster, namespace = release.cluster, release.namespace
    before = {j["metadata"]["name"] for j in job_list(cluster, namespace)}
    assert before
    release.uninstall()
    wait_for(
        lambda: release.pods("operator", terminating=True) == [],
        timeout=60,
        what="the operator's Pods gone",
    )
    cluster.kubectl("get", "crd", "scheduledjobs.tickwork.dev")
    after = {j["metadata"]["name"] for j in job_list(cluster, namespace)}
    assert after == before
