"""Container tasks on the local node (issue 17, item 1): the chart installed, each run
attempt a batch/v1 Job in the job's namespace whose Pod runs Tickwork's image. A
container that succeeds, one that fails and is retried (a Job per attempt, each
created once), one that times out, one cancelled by a newer run (concurrencyPolicy
Replace: its Job deleted, its Pod gone), one cancelled with `kubectl tickwork
cancel`, one given a Secret's value, a ServiceAccount and a nodeSelector, three
imported from CronJobs (volumes, envFrom, an init container, affinity), and finished
Jobs deleted by the TTL controller. Every Job the namespace sees is recorded by a
watch from the start."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cli import tickwork
from tests.pods.support import (
    apply_jobs,
    job_list,
    one_of_each,
    seconds_from_now,
    wait_outcomes,
)
from tickwork_dev.devcluster.cluster import Cluster, kubectl_binary
from tickwork_dev.devcluster.components import wait_for
from tickwork_dev.devcluster.release import ClusterImages, Release
from tickwork_worker.tasks import jobs as job_names

NAMESPACE = "tickwork-containers"
TTL_SECONDS = 40
pytestmark = pytest.mark.timeout(600)
CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"


@dataclass
class JobLog:
    """Every Job event in the namespace, from a `kubectl get jobs --watch` started
    before the first ScheduledJob."""

    process: subprocess.Popen[str]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def read(self) -> None:
        assert self.process.stdout is not None
        decoder, pending = json.JSONDecoder(), ""
        for line in self.process.stdout:
            pending += line
            while pending.strip():
                try:
                    event, end = decoder.raw_decode(pending.lstrip())
                except ValueError:
                    break  # an object not complete yet
                pending = pending.lstrip()[end:]
                self.events.append((event["type"], event["object"]))

    def created(self, run_digest: str) -> dict[str, set[str]]:
        """The uids each Job of a run had, by name (one uid: created once)."""
        out: dict[str, set[str]] = {}
        for kind, obj in list(self.events):
            meta = obj["metadata"]
            if (
                kind == "ADDED"
                and (meta.get("labels") or {}).get(job_names.RUN_LABEL) == run_digest
            ):
                out.setdefault(meta["name"], set()).add(meta["uid"])
        return out


@pytest.fixture(scope="module")
def release(pods_cluster: Cluster, test_images: ClusterImages) -> Iterator[Release]:
    pods_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    values = one_of_each(
        test_images,
        previews={"enabled": True},  # the tests read logs
        containerTasks={"enabled": True, "ttlSecondsAfterFinished": TTL_SECONDS},
    )
    installed = Release(pods_cluster, NAMESPACE, values=values)
    installed.install()
    yield installed
    # The ScheduledJobs first: their Jobs go with them (ownerReferences).
    pods_cluster.kubectl(
        "-n", NAMESPACE, "delete", "scheduledjobs", "--all", "--wait=true", timeout=120
    )
    installed.uninstall()


@pytest.fixture(scope="module")
def job_log(release: Release) -> Iterator[JobLog]:
    argv = [
        kubectl_binary(),
        f"--kubeconfig={release.cluster.kubeconfig}",
        "-n",
        NAMESPACE,
        "get",
        "jobs.batch",
        "--watch",
        "--output-watch-events",
        "-o",
        "json",
    ]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    log = JobLog(process)
    reader = threading.Thread(target=log.read, daemon=True)
    reader.start()
    yield log
    process.terminate()
    process.wait(timeout=10)
    reader.join(timeout=10)  # it ends at the pipe's end
    assert process.stdout is not None
    process.stdout.close()


def _python(code: str, image: str, **spec: Any) -> dict[str, Any]:
    return {
        "container": {
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-c", code],
            **spec,
        }
    }


def _job(name: str, task: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "metadata": {"name": name},
        "spec": {"task": task, **spec},
    }


def _status(cluster: Cluster, name: str) -> dict[str, Any]:
    [job] = [j for j in job_list(cluster, NAMESPACE) if j["metadata"]["name"] == name]
    status: dict[str, Any] = job.get("status") or {}
    return status


def _wait_job_and_pod_gone(cluster: Cluster, job: str, run_id: str) -> None:
    """Until the Job of the first attempt of ``run_id`` is deleted, and its Pod too."""
    name = job_names.job_name(job, run_id, 1)
    wait_for(
        lambda: _batch_job(cluster, name) is None,
        timeout=60,
        interval=1,
        what=f"the Job {name} deleted",
    )
    wait_for(
        lambda: not _pods_of(cluster, run_id),
        timeout=120,
        interval=2,
        what="the cancelled run's Pod gone",
    )


def _batch_job(cluster: Cluster, name: str) -> dict[str, Any] | None:
    result = cluster.kubectl("-n", NAMESPACE, "get", "job", name, "-o", "json", check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _pods_of(cluster: Cluster, run_id: str) -> list[dict[str, Any]]:
    selector = f"{job_names.RUN_LABEL}={job_names.run_digest(run_id)}"
    result = cluster.kubectl("-n", NAMESPACE, "get", "pods", "-l", selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    return items


@pytest.fixture(scope="module")
def replaced(release: Release, job_log: JobLog, test_images: ClusterImages) -> str:
    """A job every 20 s whose container sleeps for ten minutes, with concurrencyPolicy
    Replace (the old name of CancelOther): each run is cancelled by the next. Created
    first, checked later."""
    del job_log  # watching already
    code = "import time; print('sleeping', flush=True); time.sleep(600)"
    job = _job(
        "replaced",
        _python(code, test_images.tickwork),
        schedule="@every 20s",
        concurrencyPolicy="Replace",
        timeoutSeconds=600,
    )
    apply_jobs(release.cluster, NAMESPACE, [job])
    return "replaced"


def test_a_container_that_succeeds_gives_its_exit_code_and_log(
    release: Release, job_log: JobLog, replaced: str, test_images: ClusterImages
) -> None:
    del replaced  # under way meanwhile
    cluster = release.cluster
    code = (
        "import os; env = os.environ; print('hello from a container'); "
        "print('run', env['TICKWORK_RUN_ID'], 'attempt', env['TICKWORK_ATTEMPT'])"
    )
    job = _job(
        "hello",
        _python(
            code, test_images.tickwork, resources={"requests": {"cpu": "10m", "memory": "32Mi"}}
        ),
        runAt=seconds_from_now(0),
        timeoutSeconds=120,
    )
    apply_jobs(cluster, NAMESPACE, [job])
    wait_outcomes(cluster, NAMESPACE, {"hello"}, "Succeeded", timeout=180)
    last = _status(cluster, "hello")["lastRun"]
    assert last["result"].startswith("exit 0: hello from a container"), last
    assert f"run {last['id']} attempt 1" in last["result"]
    # The Job of attempt 1, as Tickwork made it: its name derived from the run.
    sj = json.loads(
        cluster.kubectl("-n", NAMESPACE, "get", "scheduledjob", "hello", "-o", "json").stdout
    )
    name = job_names.job_name("hello", last["id"], 1)
    batch = _batch_job(cluster, name)
    assert batch is not None, f"no Job {name}"
    assert batch["spec"]["backoffLimit"] == 0
    assert batch["spec"]["activeDeadlineSeconds"] == 120
    assert batch["spec"]["ttlSecondsAfterFinished"] == TTL_SECONDS
    pod = batch["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    [owner] = batch["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("ScheduledJob", sj["metadata"]["uid"])
    assert batch["metadata"]["labels"][job_names.ATTEMPT_LABEL] == "1"
    assert any(
        c["type"] == "Complete" and c["status"] == "True" for c in batch["status"]["conditions"]
    )
    assert job_log.created(job_names.run_digest(last["id"])) == {name: {batch["metadata"]["uid"]}}


def test_a_container_that_fails_is_retried_one_job_per_attempt(
    release: Release, job_log: JobLog, test_images: ClusterImages
) -> None:
    cluster = release.cluster
    code = "import os, sys; print('failing attempt', os.environ['TICKWORK_ATTEMPT']); sys.exit(3)"
    job = _job(
        "flaky",
        _python(code, test_images.tickwork),
        runAt=seconds_from_now(0),
        retry={"maxAttempts": 3, "backoffSeconds": 1, "maxBackoffSeconds": 2},
    )
    apply_jobs(cluster, NAMESPACE, [job])
    wait_outcomes(cluster, NAMESPACE, {"flaky"}, "Failed", timeout=240)
    last = _status(cluster, "flaky")["lastRun"]
    assert last["attempts"] == 3, last
    assert last["error"].startswith("exit 3: failing attempt 3"), last
    # Three Jobs, one per attempt, each created once (one uid per name).
    created = job_log.created(job_names.run_digest(last["id"]))
    assert set(created) == {job_names.job_name("flaky", last["id"], n) for n in (1, 2, 3)}
    assert all(len(uids) == 1 for uids in created.values()), created


def test_a_container_that_runs_too_long_times_out(
    release: Release, job_log: JobLog, test_images: ClusterImages
) -> None:
    del job_log
    cluster = release.cluster
    code = "import time; print('working', flush=True); time.sleep(300)"
    job = _job(
        "slow",
        _python(code, test_images.tickwork),
        runAt=seconds_from_now(0),
        timeoutSeconds=15,
        retry={"maxAttempts": 1},
    )
    apply_jobs(cluster, NAMESPACE, [job])
    wait_outcomes(cluster, NAMESPACE, {"slow"}, "Failed", timeout=180)
    last = _status(cluster, "slow")["lastRun"]
    assert last["error"].startswith("timed out after 15s"), last
    # Its Job ended at the deadline or was deleted with the attempt; either way the
    # Pod stops.
    batch = _batch_job(cluster, job_names.job_name("slow", last["id"], 1))
    if batch is not None:
        assert batch["spec"]["activeDeadlineSeconds"] == 15
        assert any(
            c["type"] == "Failed" and c["reason"] == "DeadlineExceeded"
            for c in batch["status"].get("conditions") or []
        )
    wait_for(
        lambda: (
            not [
                p
                for p in _pods_of(cluster, last["id"])
                if p["status"].get("phase") in ("Pending", "Running")
            ]
        ),
        timeout=90,
        interval=2,
        what="the timed-out Pod stopped",
    )


def test_a_cancelled_run_deletes_its_job_and_its_pod_goes(release: Release, replaced: str) -> None:
    cluster = release.cluster

    def cancelled() -> list[dict[str, Any]]:
        runs = _status(cluster, replaced).get("runs") or []
        return [r for r in runs if r["outcome"] == "Cancelled"]

    wait_for(lambda: bool(cancelled()), timeout=180, interval=2, what="a run replaced")
    cluster.kubectl(
        "-n",
        NAMESPACE,
        "patch",
        "scheduledjob",
        replaced,
        "--type=merge",
        "-p",
        '{"spec": {"suspend": true}}',
    )
    run = cancelled()[0]
    # Replace is CancelOther under its Temporal name, which the record gives.
    assert "concurrencyPolicy CancelOther" in run["error"], run
    # Its Pod is stopped and deleted with it (the garbage collector, Background).
    _wait_job_and_pod_gone(cluster, replaced, run["id"])


def _create(cluster: Cluster, kind: str, name: str, **data: str) -> None:
    """A Secret (``kind`` "secret") or ConfigMap of the test namespace with ``data``."""
    what = ["secret", "generic"] if kind == "secret" else [kind]
    literals = [f"--from-literal={key}={value}" for key, value in data.items()]
    cluster.kubectl("-n", NAMESPACE, "create", *what, name, *literals)


def test_a_container_gets_secret_values_its_service_account_and_its_node(
    release: Release, test_images: ClusterImages
) -> None:
    """env from a Secret (the kubelet reads it: the worker passes only the reference),
    serviceAccountName (its token mounted) and nodeSelector, on a real Pod."""
    cluster = release.cluster
    secret = "s3cret-value"
    _create(cluster, "secret", "report-db", password=secret)
    cluster.kubectl("-n", NAMESPACE, "create", "serviceaccount", "reporter")
    # The worker keeps no log of a container that may hold Secrets (it may not read them
    # to redact them): the container's exit code says what it found.
    digest = hashlib.sha256(secret.encode()).hexdigest()
    code = (
        "import hashlib, os, sys; password = os.environ['DB_PASSWORD'].encode(); "
        f"same = hashlib.sha256(password).hexdigest() == '{digest}'; "
        "token = os.path.exists('/var/run/secrets/kubernetes.io/serviceaccount/token'); "
        "sys.exit(0 if same and token else 3 if token else 4)"
    )
    task = _python(
        code,
        test_images.tickwork,
        serviceAccountName="reporter",
        nodeSelector={"kubernetes.io/os": "linux"},
        env=[
            {
                "name": "DB_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": "report-db", "key": "password"}},
            }
        ],
    )
    job = _job(
        "wired", task, runAt=seconds_from_now(0), timeoutSeconds=120, retry={"maxAttempts": 1}
    )
    apply_jobs(cluster, NAMESPACE, [job])
    wait_for(
        lambda: (_status(cluster, "wired").get("lastRun") or {}).get("outcome"),
        timeout=180,
        interval=2,
        what="the run of wired ended",
    )
    last = _status(cluster, "wired")["lastRun"]
    assert last["outcome"] == "Succeeded", last  # exit 3: not the Secret's value; 4: no token
    assert last["result"].startswith("exit 0"), last
    assert secret not in json.dumps(_status(cluster, "wired"))
    batch = _batch_job(cluster, job_names.job_name("wired", last["id"], 1))
    assert batch is not None
    pod = batch["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "reporter"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    [variable] = [v for v in pod["containers"][0]["env"] if v["name"] == "DB_PASSWORD"]
    assert variable == {
        "name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "report-db", "key": "password"}},
    }


def test_a_run_cancelled_from_the_cli_deletes_its_job(
    release: Release, test_images: ClusterImages
) -> None:
    """kubectl tickwork cancel RUN on a running container run: recorded Cancelled, not
    retried, its Job deleted and its Pod gone."""
    cluster = release.cluster
    code = "import time; print('working', flush=True); time.sleep(600)"
    job = _job(
        "stopped",
        _python(code, test_images.tickwork),
        runAt=seconds_from_now(0),
        timeoutSeconds=600,
        retry={"maxAttempts": 3, "backoffSeconds": 1},
    )
    apply_jobs(cluster, NAMESPACE, [job])

    def running() -> str | None:
        active = _status(cluster, "stopped").get("activeRuns") or []
        if not active:
            return None
        run_id: str = active[0]["id"]
        pods = _pods_of(cluster, run_id)
        return run_id if any(p["status"].get("phase") == "Running" for p in pods) else None

    wait_for(lambda: running() is not None, timeout=180, interval=2, what="the container running")
    run_id = running()
    assert run_id is not None
    done = tickwork(cluster, NAMESPACE, "cancel", run_id)
    assert done.returncode == 0, done.stderr
    wait_outcomes(cluster, NAMESPACE, {"stopped"}, "Cancelled", timeout=120)
    last = _status(cluster, "stopped")["lastRun"]
    assert (last["id"], last["attempts"]) == (run_id, 1), last
    _wait_job_and_pod_gone(cluster, "stopped", run_id)
    # No second attempt followed the cancel.
    assert _batch_job(cluster, job_names.job_name("stopped", run_id, 2)) is None


def _cronjob(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    """A CronJob as a user would have it: due once a year (its own controller does not
    run it here), non-root, its Pod template given."""
    pod = {"restartPolicy": "OnFailure", "securityContext": {"runAsNonRoot": True}, **pod}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedule": "0 3 1 1 *",
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}},
        },
    }


def test_three_cronjobs_imported_run_as_scheduled_jobs(
    release: Release, test_images: ClusterImages
) -> None:
    """Issue 51, item 4: `kubectl tickwork import --all --apply --suspend-source` turns
    three CronJobs that use a ConfigMap volume, a whole Secret in envFrom, an init
    container with an emptyDir, fsGroup and affinity into ScheduledJobs with nothing
    left out; each triggered run succeeds on the node with what its Pod was given, and
    the CronJobs are suspended."""
    cluster = release.cluster
    image = test_images.tickwork
    _create(cluster, "configmap", "report-settings", greeting="hello from a ConfigMap")
    password = "imported-s3cret"
    _create(cluster, "secret", "ledger-db", PASSWORD=password)

    def python(code: str, **container: Any) -> dict[str, Any]:
        return {
            "name": "main",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-c", code],
            **container,
        }

    settings = _cronjob(
        "settings-reader",
        {
            "volumes": [{"name": "settings", "configMap": {"name": "report-settings"}}],
            "containers": [
                python(
                    "print(open('/etc/report/greeting').read())",
                    volumeMounts=[
                        {"name": "settings", "mountPath": "/etc/report", "readOnly": True}
                    ],
                )
            ],
        },
    )
    digest = hashlib.sha256(password.encode()).hexdigest()
    ledger = _cronjob(
        "ledger",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/os",
                                        "operator": "In",
                                        "values": ["linux"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [
                python(
                    "import hashlib, os, sys; password = os.environ['DB_PASSWORD']; "
                    "print('the password is', password); "
                    f"sys.exit(0 if hashlib.sha256(password.encode()).hexdigest() == '{digest}' "
                    "else 3)",
                    envFrom=[{"secretRef": {"name": "ledger-db"}, "prefix": "DB_"}],
                )
            ],
        },
    )
    warmed = _cronjob(
        "warmed",
        {
            "securityContext": {"runAsNonRoot": True, "fsGroup": 2000},
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "warm",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [
                        "python3",
                        "-c",
                        "open('/scratch/state', 'w').write('warmed by an init container')",
                    ],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
            "containers": [
                python(
                    "import os; print(open('/scratch/state').read(), 'groups', os.getgroups())",
                    volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}],
                )
            ],
        },
    )
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input_text=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [settings, ledger, warmed]}
        ),
    )
    done = tickwork(cluster, NAMESPACE, "import", "--all", "--apply", "--suspend-source")
    assert done.returncode == 0, done.stderr
    names = {"settings-reader", "ledger", "warmed"}
    assert "left out" not in done.stdout, done.stdout  # every field carried over
    for name in sorted(names):
        assert f"cronjob {NAMESPACE}/{name} suspended" in done.stdout, done.stdout
        triggered = tickwork(cluster, NAMESPACE, "trigger", name)
        assert triggered.returncode == 0, triggered.stderr
    wait_outcomes(cluster, NAMESPACE, names, "Succeeded", timeout=240)
    results = {name: _status(cluster, name)["lastRun"]["result"] for name in names}
    assert results["settings-reader"].startswith("exit 0: hello from a ConfigMap"), results
    # The whole Secret reached the container (exit 3: not its value); this release's
    # workers may not read Secrets to redact them, so the log that printed it is not kept.
    assert results["ledger"] == (
        "exit 0: (log not kept: the worker may not read the Secrets it could contain)"
    ), results
    assert password not in json.dumps(_status(cluster, "ledger"))
    assert "warmed by an init container groups" in results["warmed"], results
    assert "2000" in results["warmed"].partition("groups")[2], results  # fsGroup
    cronjobs = json.loads(cluster.kubectl("-n", NAMESPACE, "get", "cronjobs", "-o", "json").stdout)
    assert {
        c["metadata"]["name"]: c["spec"]["suspend"] for c in cronjobs["items"]
    } == dict.fromkeys(names, True)


def test_finished_jobs_are_deleted_by_the_ttl_controller(release: Release) -> None:
    cluster = release.cluster
    last = _status(cluster, "hello")["lastRun"]
    name = job_names.job_name("hello", last["id"], 1)
    # ttlSecondsAfterFinished (TTL_SECONDS) after it completed, kube-controller-manager's
    # TTL-after-finished controller deletes the Job, and its Pod with it.
    wait_for(
        lambda: _batch_job(cluster, name) is None,
        timeout=TTL_SECONDS + 90,
        interval=2,
        what=f"the Job {name} deleted after its TTL",
    )
    wait_for(
        lambda: not _pods_of(cluster, last["id"]), timeout=90, interval=2, what="its Pod deleted"
    )
