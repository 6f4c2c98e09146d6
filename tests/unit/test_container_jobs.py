"""The Job of a container task's attempt, and what a Job's state says: pure builders."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import pytest

from tickwork.api.models import ContainerTask, ScheduledJobSpec
from tickwork.core.errors import PermanentTaskError
from tickwork.kube.client import Connection, KubeClient
from tickwork_worker.tasks import jobs
from tickwork_worker.tasks.base import RunContext
from tickwork_worker.tasks.container import ContainerTask as Task

pytestmark = pytest.mark.unit

RUN_ID = "team-a.nightly.0f1e2d3c.1767225600"
UID = "0f1e2d3c-0000-4000-8000-000000000001"
OWNER = jobs.Owner(name="nightly", uid=UID)


def _run(attempt: int = 1, params: dict[str, str] | None = None) -> RunContext:
    return RunContext(
        run_id=RUN_ID,
        attempt=attempt,
        namespace="team-a",
        name="nightly",
        scheduled_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        params=params or {},
        job_uid=UID,
    )


def _task(**fields: Any) -> ContainerTask:
    return ContainerTask.model_validate({"image": "busybox:1.36", **fields})


def _build(task: ContainerTask, attempt: int = 1, **run: Any) -> dict[str, Any]:
    return jobs.build_job(
        task, _run(attempt, **run), owner=OWNER, timeout_seconds=120, ttl_seconds=600
    )


def test_the_name_is_the_same_for_an_attempt_and_differs_between_attempts() -> None:
    first = jobs.job_name("nightly", RUN_ID, 1)
    assert first == jobs.job_name("nightly", RUN_ID, 1)
    assert first != jobs.job_name("nightly", RUN_ID, 2)
    assert first != jobs.job_name("nightly", RUN_ID + ".manual.x", 1)
    assert first.startswith("nightly-")
    assert first.endswith("-1")


@pytest.mark.parametrize("owner", ["a" * 253, "Reports.Nightly.v2", "x", "-a-"])
def test_the_name_is_a_dns_label_of_at_most_63_characters(owner: str) -> None:
    name = jobs.job_name(owner, RUN_ID, 20)
    assert len(name) <= 63
    assert name[0].isalnum()
    assert name[-1].isalnum()
    assert all((c.isalnum() and c.islower()) or c.isdigit() or c == "-" for c in name)


def test_the_job_does_not_retry_and_ends_at_the_timeout() -> None:
    job = _build(_task())
    spec = job["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 120
    assert spec["ttlSecondsAfterFinished"] == 600
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_the_job_is_owned_by_the_scheduled_job_and_labelled_with_run_and_attempt() -> None:
    job = _build(_task(), attempt=3)
    meta = job["metadata"]
    assert meta["namespace"] == "team-a"
    [owner] = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "tickwork.dev/v1alpha1",
        "kind": "ScheduledJob",
        "name": "nightly",
        "uid": UID,
        "controller": True,
    }
    assert meta["labels"][jobs.ATTEMPT_LABEL] == "3"
    assert meta["labels"][jobs.RUN_LABEL] == jobs.run_digest(RUN_ID)
    assert meta["labels"][jobs.JOB_UID_LABEL] == UID
    assert meta["annotations"][jobs.RUN_ID_ANNOTATION] == RUN_ID
    assert job["spec"]["template"]["metadata"]["labels"] == meta["labels"]


def test_the_pod_is_restricted_by_default() -> None:
    pod = _build(_task())["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    [container] = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": False,
    }
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod


def test_the_spec_relaxes_only_what_it_offers() -> None:
    task = _task(
        securityContext={
            "runAsNonRoot": False,
            "runAsUser": 0,
            "runAsGroup": 0,
            "readOnlyRootFilesystem": True,
        },
        serviceAccountName="reports",
    )
    pod = _build(task)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is False
    assert pod["securityContext"]["runAsUser"] == 0
    assert pod["serviceAccountName"] == "reports"
    assert pod["automountServiceAccountToken"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_container_gets_the_spec_and_the_run() -> None:
    task = _task(
        command=["python3", "-c"],
        args=["print(1)"],
        imagePullPolicy="Never",
        env=[
            {"name": "MODE", "value": "full"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "lvl"}}},
            {"name": "TICKWORK_PARAM_DAY", "value": "default"},
        ],
        resources={"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}},
        nodeSelector={"kubernetes.io/arch": "amd64"},
        tolerations=[{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}],
    )
    pod = _build(task, params={"day": "monday"})["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "busybox:1.36"
    assert container["command"] == ["python3", "-c"]
    assert container["args"] == ["print(1)"]
    assert container["imagePullPolicy"] == "Never"
    assert container["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}
    env = {item["name"]: item for item in container["env"]}
    assert env["MODE"] == {"name": "MODE", "value": "full"}
    token = {"secretKeyRef": {"name": "api", "key": "token"}}
    assert env["TOKEN"] == {"name": "TOKEN", "valueFrom": token}
    assert env["LEVEL"]["valueFrom"] == {"configMapKeyRef": {"name": "cfg", "key": "lvl"}}
    assert env["TICKWORK_RUN_ID"]["value"] == RUN_ID
    assert env["TICKWORK_ATTEMPT"]["value"] == "1"
    # The run's parameter wins over the spec's default, and appears once.
    assert [e["value"] for e in container["env"] if e["name"] == "TICKWORK_PARAM_DAY"] == ["monday"]
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert pod["tolerations"] == [
        {"key": "batch", "operator": "Exists", "value": "", "effect": "NoSchedule"}
    ]


def test_the_pod_gets_the_volumes_sources_init_containers_and_placement() -> None:
    task = _task(
        volumes=[
            {"name": "config", "configMap": {"name": "report"}},
            {"name": "archive", "persistentVolumeClaim": {"claimName": "reports"}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
        volumeMounts=[{"name": "config", "mountPath": "/etc/report", "readOnly": True}],
        envFrom=[{"secretRef": {"name": "db"}, "prefix": "DB_"}],
        initContainers=[
            {
                "name": "fetch",
                "image": "busybox:1.36",
                "args": ["cp", "/etc/report/a", "/scratch/a"],
                "env": [{"name": "MODE", "value": "warm"}],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/report"},
                    {"name": "scratch", "mountPath": "/scratch"},
                ],
            }
        ],
        imagePullSecrets=[{"name": "registry"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                    ]
                }
            }
        },
        securityContext={"fsGroup": 2000, "supplementalGroups": [3000], "runAsUser": 1000},
        resources={"limits": {"memory": "64Mi"}},
    )
    pod = _build(task)["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["config", "archive", "scratch"]
    assert pod["volumes"][1]["persistentVolumeClaim"]["claimName"] == "reports"
    assert pod["volumes"][2]["emptyDir"]["sizeLimit"] == "64Mi"
    assert "hostPath" not in str(pod)
    container = pod["containers"][0]
    assert container["volumeMounts"] == [
        {"name": "config", "mountPath": "/etc/report", "readOnly": True}
    ]
    assert container["envFrom"] == [
        {"prefix": "DB_", "secretRef": {"name": "db", "optional": False}}
    ]
    [init] = pod["initContainers"]
    assert (init["name"], init["args"]) == ("fetch", ["cp", "/etc/report/a", "/scratch/a"])
    # An init container is as restricted as the task's, reserves as much, knows the run.
    assert init["securityContext"] == container["securityContext"]
    assert init["resources"] == container["resources"] == {"limits": {"memory": "64Mi"}}
    env = {item["name"]: item.get("value") for item in init["env"]}
    assert (env["MODE"], env["TICKWORK_RUN_ID"]) == ("warm", RUN_ID)
    assert [m["mountPath"] for m in init["volumeMounts"]] == ["/etc/report", "/scratch"]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["ssd"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": 1000,
        "fsGroup": 2000,
        "supplementalGroups": [3000],
    }


def test_without_pod_fields_the_pod_has_none_of_them() -> None:
    pod = _build(_task())["spec"]["template"]["spec"]
    absent = {"volumes", "initContainers", "imagePullSecrets", "affinity", "nodeSelector"}
    assert not absent & set(pod)
    assert not {"volumeMounts", "envFrom"} & set(pod["containers"][0])


def _job(
    conditions: list[dict[str, str]],
    *,
    attempt: int = 1,
    run_id: str = RUN_ID,
    uid: str = UID,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"j{attempt}",
        "labels": {jobs.ATTEMPT_LABEL: str(attempt)},
        "annotations": {jobs.RUN_ID_ANNOTATION: run_id},
        "ownerReferences": [{"uid": uid}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": conditions}}


COMPLETE = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
DEADLINE = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}
INTERIM = {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"}


@pytest.mark.parametrize(
    ("conditions", "ended", "succeeded", "timed_out"),
    [
        ([], False, None, False),
        ([INTERIM], False, None, False),  # the Pods may not have stopped yet
        ([COMPLETE], True, True, False),
        ([INTERIM, FAILED], True, False, False),
        ([DEADLINE], True, False, True),
        ([{**COMPLETE, "status": "False"}], False, None, False),
    ],
)
def test_a_job_ends_with_complete_or_failed(
    conditions: list[dict[str, str]], ended: bool, succeeded: bool | None, timed_out: bool
) -> None:
    end = jobs.job_end(_job(conditions))
    assert (end is not None) == ended
    if end is not None:
        assert end.succeeded == succeeded
        assert jobs.timed_out(end) == timed_out


def test_the_exit_code_is_the_task_containers() -> None:
    pod = {
        "status": {
            "containerStatuses": [
                {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}},
                {"name": "task", "state": {"terminated": {"exitCode": 3}}},
            ]
        }
    }
    assert jobs.exit_code(pod) == 3
    assert (
        jobs.exit_code(
            {"status": {"containerStatuses": [{"name": "task", "state": {"running": {}}}]}}
        )
        is None
    )


def test_an_attempt_takes_over_a_running_or_succeeded_job_of_its_run_only() -> None:
    running_1 = _job([], attempt=1)
    assert jobs.to_adopt([running_1], RUN_ID, UID) is running_1
    succeeded_2 = _job([COMPLETE], attempt=2)
    assert jobs.to_adopt([running_1, succeeded_2], RUN_ID, UID) is succeeded_2
    # A failed attempt is not taken over: this attempt makes its own Job.
    assert jobs.to_adopt([_job([FAILED]), _job([DEADLINE], attempt=2)], RUN_ID, UID) is None
    assert jobs.to_adopt([_job([], deleting=True)], RUN_ID, UID) is None
    # Another run's (the digest shared) or another object's (same name, new uid).
    assert jobs.to_adopt([_job([], run_id=RUN_ID + "x")], RUN_ID, UID) is None
    assert jobs.to_adopt([_job([], uid="other")], RUN_ID, UID) is None


def _spec(container: dict[str, Any]) -> dict[str, Any]:
    return {"schedule": "@daily", "task": {"container": container}}


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"image": "busybox", "env": [{"name": "A", "valueFrom": {}}]}, "exactly one of"),
        (
            {
                "image": "busybox",
                "env": [
                    {
                        "name": "A",
                        "value": "x",
                        "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}},
                    }
                ],
            },
            "value or valueFrom",
        ),
        ({"image": "busybox", "resources": {"limits": {"cpu": "lots"}}}, "pattern"),
        ({"image": "busybox", "resources": {"limits": {"bad name!": "1"}}}, "resources name"),
        ({"image": "busybox", "nodeSelector": {"bad key!": "x"}}, "label keys"),
        (
            {"image": "busybox", "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
            "Exists takes no value",
        ),
        (
            {"image": "busybox", "tolerations": [{"key": "k", "tolerationSeconds": 5}]},
            "NoExecute only",
        ),
        ({"image": "Not An Image"}, "pattern"),
        ({"image": "busybox", "args": ["x" * 4096] * 5}, "16 KiB"),
        (
            {"image": "busybox", "volumeMounts": [{"name": "nowhere", "mountPath": "/data"}]},
            "names a volume",
        ),
        (
            {"image": "busybox", "volumes": [{"name": "v", "hostPath": {"path": "/"}}]},
            "Extra inputs",
        ),
        (
            {"image": "busybox", "volumes": [{"name": "v"}]},
            "exactly one of configMap, secret",
        ),
        (
            {
                "image": "busybox",
                "volumes": [{"name": "v", "emptyDir": {}}],
                "volumeMounts": [{"name": "v", "mountPath": "/d", "subPath": "../etc"}],
            },
            "no '..'",
        ),
        ({"image": "busybox", "envFrom": [{"prefix": "X"}]}, "configMapRef or secretRef"),
        ({"image": "busybox", "initContainers": [{"name": "task", "image": "b"}]}, "named 'task'"),
        (
            {
                "image": "busybox",
                "initContainers": [
                    {"name": "i", "image": "b", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}
                ],
            },
            "names a volume",
        ),
        (
            {
                "image": "busybox",
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {},
                                "topologyKey": "kubernetes.io/hostname",
                                "namespaceSelector": {},
                            }
                        ]
                    }
                },
            },
            "Extra inputs",
        ),
    ],
)
def test_bad_container_specs_are_refused_by_the_models(
    container: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ScheduledJobSpec.model_validate(_spec(container))


def test_a_container_task_is_a_kind_of_its_own() -> None:
    spec = ScheduledJobSpec.model_validate(_spec({"image": "busybox"}))
    assert spec.task.kind == "container"


def test_a_worker_with_the_kind_off_refuses_container_tasks() -> None:
    spec = ScheduledJobSpec.model_validate(_spec({"image": "busybox"}))
    kube = KubeClient(Connection(host="https://127.0.0.1:1"))
    task = Task(kube=kube, enabled=False, ttl_seconds=60, log_bytes=4096)
    with pytest.raises(PermanentTaskError, match=r"worker\.containerTasks\.enabled=true"):
        asyncio.run(task.execute(spec, _run()))


class _Secrets:
    """A SecretSource that notes what the container task asked it to read."""

    def __init__(self, binary: frozenset[str] = frozenset()) -> None:
        self.keys: list[tuple[str, str]] = []
        self.whole: list[str] = []
        self.binary = binary

    async def read(self, ref: Any) -> str:
        self.keys.append((ref.name, ref.key))
        return "value"

    async def read_whole(self, name: str) -> bool:
        self.whole.append(name)
        return name not in self.binary

    def redact_edges(self, text: str, *, start: bool = False, end: bool = False) -> str:
        del start, end
        return text


def _learn(task: ContainerTask, secrets: _Secrets | None) -> bool:
    executor = Task(kube=None, enabled=True, ttl_seconds=60, log_bytes=1024)  # type: ignore[arg-type]
    run = dataclasses.replace(_run(), secrets=secrets)
    return asyncio.run(executor._learn_secrets(run, task))


def test_every_secret_the_containers_may_see_is_read_before_the_log_is_kept() -> None:
    task = _task(
        env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}}],
        envFrom=[{"secretRef": {"name": "db"}}, {"configMapRef": {"name": "settings"}}],
        volumes=[
            {"name": "tls", "secret": {"secretName": "tls"}},
            {"name": "cfg", "configMap": {"name": "settings"}},
        ],
        initContainers=[
            {
                "name": "fetch",
                "image": "busybox:1.36",
                "env": [{"name": "B", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "init-db"}}],
            }
        ],
    )
    secrets = _Secrets()
    assert _learn(task, secrets) is True
    assert secrets.keys == [("api", "token"), ("s3", "k")]
    assert secrets.whole == ["db", "init-db", "tls"]
    # A binary value cannot be looked for, and no Secret reader: no log kept.
    assert _learn(task, _Secrets(binary=frozenset({"tls"}))) is False
    assert _learn(task, None) is False
    # Nothing secret named: the log is kept without a reader.
    assert _learn(_task(envFrom=[{"configMapRef": {"name": "settings"}}]), None) is True
