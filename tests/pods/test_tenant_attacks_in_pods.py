"""The attack suite against the chart in real Pods, on its production defaults
(issue 46): a hostile tenant — a ServiceAccount that may only create and read
ScheduledJobs in its namespace, impersonated — and a hostile server on an address
the workers count as public (a network namespace of the local node's own: on the
defaults the workers reach public addresses only). No value is changed but the
images (no registry here), the local node's DNS port, and the CRD managed apart
from the release (it outlives other releases of these tests; this module's name
sorts after test_chart_in_pods.py, whose release installs the CRD with Helm's
ownership and would refuse one applied here first).

Each attack succeeded on the code before issue 46: a reply of a few hundred bytes
restarted a worker past its 512 Mi limit; an internal error page was in status for
anyone with `view`; one namespace's long runs held every slot of the workers that
existed (the old default limit was 40 a namespace).

The last two attacks need what the defaults leave off, and the release is upgraded
for them with that alone: Secrets for one namespace's jobs (`worker.secrets`), and
the demo image with its tasks on (a plain function that ignores its timeout, as an
installer's own task may). On the code before issue 46 a Secret's value made with
`--from-file` (its final newline kept) came back escaped in the HTTP library's error
— in status, Events, the worker's log and the dead letters — and a retry ran while
the thread of the attempt before still ran.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pods.support import right_now, seconds_from_now, wait_ended, wait_outcomes
from tests.support import apply_as, tenant_account
from tickwork_dev.devcluster import hostnet
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.release import ClusterImages, Release, merge

NAMESPACE = "tickwork-attacks"
JOBS = "tickwork-attacks-jobs"
OTHERS = "tickwork-attacks-others"
SECRETS = "tickwork-attacks-secrets"
PORT = 8080
SERVER = f"http://{hostnet.PUBLIC_ADDRESS}:{PORT}"
CANARY = "canary-" + os.urandom(6).hex()
MARK = secrets.token_hex(12)
"""A part of the Secret's value found in every form of it (no encoding escapes hex)."""
VALUE = f"tok/{MARK}+'\"&="
HOLD_SECONDS = 20
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def hostile(pods_cluster: Cluster) -> Iterator[str]:
    """The hostile server, on the public address; its URL."""
    if pods_cluster.node is None:
        raise AssertionError("the attack suite in Pods needs the local node's public address")
    hostnet.public_up()
    server = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            hostnet.PUBLIC_NETNS,
            sys.executable,
            "-m",
            "tickwork_dev.devcluster.hostile",
            str(PORT),
            CANARY,
        ],
    )
    try:
        yield SERVER
    finally:
        server.kill()
        server.wait()
        hostnet.public_down()


@pytest.fixture(scope="module")
def defaults(pods_cluster: Cluster, test_images: ClusterImages, hostile: str) -> Iterator[Release]:
    """The chart on its production defaults."""
    crds = Path(__file__).resolve().parents[2] / "manifests" / "crds"
    pods_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    values = merge(test_images.values(), {"crds": {"install": False}})
    release = Release(pods_cluster, NAMESPACE, values=values)
    release.install()
    for namespace in (JOBS, OTHERS):
        pods_cluster.kubectl("create", "namespace", namespace)
    try:
        yield release
    finally:
        release.uninstall()
        pods_cluster.kubectl("delete", "namespace", JOBS, OTHERS, "--wait=false")


@pytest.fixture(scope="module")
def tenant(defaults: Release) -> str:
    return tenant_account(defaults.cluster, JOBS)


def _http_job(name: str, path: str) -> dict[str, Any]:
    task = {"http": {"url": f"{SERVER}{path}", "method": "GET"}}
    return right_now(name, task, timeoutSeconds=600)


def _submit(cluster: Cluster, who: str, namespace: str, job: dict[str, Any]) -> None:
    result = apply_as(cluster, who, namespace, job)
    assert result.returncode == 0, result.stderr


def _viewer(cluster: Cluster, namespace: str) -> str:
    """A ServiceAccount bound to the built-in `view` role in ``namespace``; its name to
    impersonate."""
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "viewer")
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "rolebinding",
        "viewer",
        "--clusterrole=view",
        f"--serviceaccount={namespace}:viewer",
    )
    return f"system:serviceaccount:{namespace}:viewer"


def _restarts(release: Release) -> int:
    return sum(
        c["restartCount"] for p in release.pods("worker") for c in p["status"]["containerStatuses"]
    )


def test_a_reply_bomb_leaves_every_worker_standing(defaults: Release, tenant: str) -> None:
    cluster = defaults.cluster
    before = _restarts(defaults)
    _submit(cluster, tenant, JOBS, _http_job("bomb", "/bomb"))
    wait_outcomes(cluster, JOBS, {"bomb"}, "Succeeded", timeout=120)
    _submit(cluster, tenant, JOBS, _http_job("after-bomb", "/ok"))
    wait_outcomes(cluster, JOBS, {"after-bomb"}, "Succeeded", timeout=120)
    assert _restarts(defaults) == before  # no worker went past its memory limit


def test_a_viewer_reads_no_reply_body_in_status(defaults: Release, tenant: str) -> None:
    cluster = defaults.cluster
    viewer = _viewer(cluster, JOBS)
    _submit(cluster, tenant, JOBS, _http_job("error-page", "/canary"))
    wait_outcomes(cluster, JOBS, {"error-page"}, "Failed", timeout=120)
    seen = cluster.kubectl(
        "--as", viewer, "-n", JOBS, "get", "scheduledjob", "error-page", "-o", "json"
    ).stdout
    last = json.loads(seen)["status"]["lastRun"]
    assert "500" in last["error"], last
    assert CANARY not in seen


def test_a_tenant_flooding_long_runs_leaves_slots_for_the_others(
    defaults: Release, tenant: str
) -> None:
    """As many runs that hold their slot for 300 s as the workers have slots: the
    tenant gets half of them, and another namespace's run goes through meanwhile."""
    cluster = defaults.cluster
    workers = len(defaults.pods("worker"))
    slots = workers * 8  # worker.concurrency's default
    for i in range(slots):
        _submit(cluster, tenant, JOBS, _http_job(f"hog-{i}", "/slow"))

    def holding() -> int:
        jobs = json.loads(cluster.kubectl("-n", JOBS, "get", "scheduledjobs", "-o", "json").stdout)[
            "items"
        ]
        return sum(
            len(j.get("status", {}).get("activeRuns") or [])
            for j in jobs
            if j["metadata"]["name"].startswith("hog-")
        )

    wait_for(
        lambda: holding() >= slots // 2,
        timeout=120,
        interval=1,
        what="the tenant's runs holding their share",
    )
    other = tenant_account(cluster, OTHERS)
    _submit(cluster, other, OTHERS, _http_job("innocent", "/ok"))
    # Well within the hogs' 300 s: it did not wait for one of them to end.
    wait_outcomes(cluster, OTHERS, {"innocent"}, "Succeeded", timeout=90)
    assert holding() <= len(defaults.pods("worker")) * 8 // 2  # of the slots there are now
    # Done with: their runs are withdrawn, not left holding slots for 300 s.
    cluster.kubectl(
        "-n", JOBS, "delete", "scheduledjobs", *(f"hog-{i}" for i in range(slots)), "--wait=false"
    )


# -- with what the defaults leave off ----------------------------------------------------


@pytest.fixture(scope="module")
def opted_in(
    defaults: Release, test_images: ClusterImages, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The release upgraded with Secrets for the jobs of SECRETS and the demo image's
    tasks, nothing else; a tenant of SECRETS, who may not read its Secrets, to
    impersonate. The Secret is made as `kubectl create secret --from-file` makes it:
    `from-file` keeps its file's final newline, `two-lines` holds a line break."""
    cluster = defaults.cluster
    cluster.kubectl("create", "namespace", SECRETS)
    files = tmp_path_factory.mktemp("secret")
    (files / "from-file").write_text(VALUE + "\n")
    (files / "two-lines").write_text(f"{VALUE}\nsecond-line-{MARK}")
    sources = [f"--from-file={files / key}" for key in ("from-file", "two-lines")]
    cluster.kubectl("-n", SECRETS, "create", "secret", "generic", "api", *sources)
    opt_in: dict[str, object] = {"worker": {"secrets": {"enabled": True, "namespaces": [SECRETS]}}}
    defaults.upgrade(merge(test_images.demo_values(), opt_in))
    try:
        yield tenant_account(cluster, SECRETS)
    finally:
        cluster.kubectl("delete", "namespace", SECRETS, "--wait=false")


def _secret_job(name: str, path: str, key: str) -> dict[str, Any]:
    job = _http_job(name, path)
    reference = {"secretKeyRef": {"name": "api", "key": key}}
    job["spec"]["task"]["http"]["headers"] = [{"name": "Authorization", "valueFrom": reference}]
    job["spec"]["retry"] = {"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 1}
    return job


def _left_behind(release: Release, viewer: str) -> str:
    """Everything the runs left where someone other than the Secret's readers may look:
    status and Events as a `view` user reads them, every worker container's log, and
    the dead letters in Redis."""
    cluster = release.cluster
    seen = [
        cluster.kubectl("--as", viewer, "-n", SECRETS, "get", kind, "-o", "json").stdout
        for kind in ("scheduledjobs", "events")
    ]
    for pod in release.pods("worker"):
        name = pod["metadata"]["name"]
        seen.append(
            cluster.kubectl("-n", release.namespace, "logs", name, "--all-containers").stdout
        )
    [redis] = release.pods("redis")
    dead = (  # a hash or a sorted set: one of the two reads answers WRONGTYPE
        "for key in $(redis-cli --scan --pattern '*dead*'); do "
        'redis-cli --raw hgetall "$key"; redis-cli --raw zrange "$key" 0 -1; done; true'
    )
    exec_in_redis = ("-n", release.namespace, "exec", redis["metadata"]["name"], "--")
    seen.append(cluster.kubectl(*exec_in_redis, "sh", "-c", dead).stdout)
    return "\n".join(seen)


def test_a_secret_value_comes_back_in_no_form(defaults: Release, opted_in: str) -> None:
    """The value with its `--from-file` newline is sent trimmed (the server checks
    its digest) and the run succeeds at once; a value with a line break fails once,
    naming the header only. Neither value is anywhere a viewer or an operator reads."""
    cluster = defaults.cluster
    viewer = _viewer(cluster, SECRETS)
    digest = hashlib.sha256(VALUE.encode()).hexdigest()
    _submit(cluster, opted_in, SECRETS, _secret_job("from-file", f"/auth/{digest}", "from-file"))
    _submit(cluster, opted_in, SECRETS, _secret_job("two-lines", "/ok", "two-lines"))
    runs = wait_ended(cluster, SECRETS, {"from-file", "two-lines"}, timeout=120)
    left = _left_behind(defaults, viewer)
    assert "from-file" in left  # the places were read, the job's name is in them
    assert MARK not in left
    assert (runs["from-file"]["outcome"], runs["from-file"]["attempts"]) == ("Succeeded", 1), runs
    assert (runs["two-lines"]["outcome"], runs["two-lines"]["attempts"]) == ("Failed", 1), runs
    assert "header 'Authorization' holds a line break" in runs["two-lines"]["error"], runs


def test_a_retry_never_runs_beside_a_thread_that_ignored_its_timeout(
    defaults: Release, opted_in: str
) -> None:
    """`tickwork.hold` blocks its first attempt's thread HOLD_SECONDS against a 1 s
    timeout. The retry starts only once that thread ended (before, a second or two
    after the timeout, beside it: on the same worker the task itself fails saying so,
    on another the run ended long before the thread)."""
    cluster = defaults.cluster
    task = {"python": {"name": "tickwork.hold", "args": [str(HOLD_SECONDS)]}}
    retry = {"maxAttempts": 2, "backoffSeconds": 1, "maxBackoffSeconds": 1}
    spec = {"runAt": seconds_from_now(0), "timeoutSeconds": 1, "retry": retry, "task": task}
    job = {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": "hold"},
        "spec": spec,
    }
    _submit(cluster, opted_in, SECRETS, job)
    last = wait_ended(cluster, SECRETS, {"hold"}, timeout=120)["hold"]
    assert (last["outcome"], last["attempts"]) == ("Succeeded", 2), last
    scheduled, finished = (
        dt.datetime.fromisoformat(last[key]) for key in ("scheduledAt", "finishedAt")
    )
    assert finished - scheduled >= dt.timedelta(seconds=HOLD_SECONDS), last
