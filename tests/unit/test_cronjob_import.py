"""``tickwork import``: a CronJob, as the API server returns it (defaults filled in),
becomes a ScheduledJob with a container task; what does not carry over is named, and a
CronJob whose result the schema refuses is not imported. (Against the real API server:
tests/integration/test_cli.py::test_import_turns_cronjobs_into_scheduledjobs_and_suspends_them.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tickwork.api.models import ScheduledJob
from tickwork.cli.importing import IMPORTED_FROM, from_cronjob

pytestmark = pytest.mark.unit

REPORT: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "report", "namespace": "team-a", "labels": {"app": "report"}},
    "spec": {
        "schedule": "30 2 * * *",
        "timeZone": "Europe/Berlin",
        "concurrencyPolicy": "Forbid",
        "suspend": False,
        "startingDeadlineSeconds": 300,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {
            "spec": {
                "backoffLimit": 2,
                "activeDeadlineSeconds": 1800,
                "completions": 1,
                "parallelism": 1,
                "completionMode": "NonIndexed",
                "suspend": False,
                "podReplacementPolicy": "TerminatingOrFailed",
                "template": {
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "dnsPolicy": "ClusterFirst",
                        "schedulerName": "default-scheduler",
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
                        "terminationGracePeriodSeconds": 30,
                        "serviceAccountName": "reporter",
                        "containers": [
                            {
                                "name": "report",
                                "image": "registry.example.com/report:1.4",
                                "command": ["/report"],
                                "args": ["--day", "yesterday"],
                                "env": [
                                    {"name": "MODE", "value": "full"},
                                    {
                                        "name": "TOKEN",
                                        "valueFrom": {
                                            "secretKeyRef": {"name": "report", "key": "token"}
                                        },
                                    },
                                ],
                                "resources": {"limits": {"memory": "256Mi", "cpu": "500m"}},
                                "imagePullPolicy": "IfNotPresent",
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File",
                            }
                        ],
                    }
                },
            }
        },
    },
}


def test_a_cronjob_with_one_container_carries_over_whole() -> None:
    imported = from_cronjob(REPORT)
    assert imported.left_out == []
    assert imported.job is not None
    job = ScheduledJob.model_validate(imported.job)  # what the CRD's twin accepts
    assert imported.job["metadata"] == {
        "name": "report",
        "namespace": "team-a",
        "annotations": {IMPORTED_FROM: "cronjob/report"},
        "labels": {"app": "report"},
    }
    spec = imported.job["spec"]
    assert (spec["schedule"], spec["timeZone"], spec["concurrencyPolicy"]) == (
        "30 2 * * *",
        "Europe/Berlin",
        "Forbid",
    )
    assert spec["startingDeadlineSeconds"] == 300
    assert spec["history"] == {"successfulRuns": 3, "failedRuns": 1}
    assert spec["retry"] == {"maxAttempts": 3}  # backoffLimit 2: two retries
    assert spec["timeoutSeconds"] == 1800
    task = spec["task"]["container"]
    assert task["image"] == "registry.example.com/report:1.4"
    assert (task["command"], task["args"]) == (["/report"], ["--day", "yesterday"])
    assert task["env"][1] == {
        "name": "TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "report", "key": "token"}},
    }
    assert task["serviceAccountName"] == "reporter"
    assert task["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000}
    assert job.spec.task.kind == "container"


def test_the_pod_templates_volumes_mounts_sources_and_init_containers_carry_over() -> None:
    cron = copy.deepcopy(REPORT)
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    pod["securityContext"].update({"fsGroup": 2000, "supplementalGroups": [3000]})
    pod["volumes"] = [
        {"name": "config", "configMap": {"name": "report", "defaultMode": 420}},
        {
            "name": "keys",
            "secret": {
                "secretName": "report-keys",
                "items": [{"key": "tls.key", "path": "tls/key"}],
            },
        },
        {"name": "archive", "persistentVolumeClaim": {"claimName": "reports"}},
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
    ]
    pod["imagePullSecrets"] = [{"name": "registry"}]
    pod["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disktype", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "report"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        },
    }
    mounts = [
        {"name": "config", "mountPath": "/etc/report", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    pod["initContainers"] = [
        {
            "name": "fetch",
            "image": "busybox:1.36",
            "command": ["sh", "-c", "echo ready > /scratch/state"],
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
    ]
    container = pod["containers"][0]
    container["volumeMounts"] = [
        *mounts,
        {"name": "archive", "mountPath": "/archive", "subPath": "2026"},
    ]
    container["envFrom"] = [
        {"configMapRef": {"name": "report"}, "prefix": "REPORT_"},
        {"secretRef": {"name": "report-db", "optional": True}},
    ]
    imported = from_cronjob(cron)
    assert imported.left_out == []
    assert imported.job is not None
    task = ScheduledJob.model_validate(imported.job).spec.task.container
    assert task is not None
    assert [v.name for v in task.volumes] == ["config", "keys", "archive", "scratch"]
    assert task.volumes[1].secret is not None
    assert task.volumes[1].secret.items[0].path == "tls/key"
    assert [m.mount_path for m in task.volume_mounts] == ["/etc/report", "/scratch", "/archive"]
    assert task.volume_mounts[2].sub_path == "2026"
    assert [s.prefix for s in task.env_from] == ["REPORT_", ""]
    assert [s.name for s in task.image_pull_secrets] == ["registry"]
    assert task.affinity is not None
    assert task.affinity.node_affinity is not None
    required = task.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    assert required.node_selector_terms[0].match_expressions[0].values == ["ssd"]
    assert task.affinity.pod_anti_affinity is not None
    [preferred] = (
        task.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
    )
    assert (preferred.weight, preferred.pod_affinity_term.topology_key) == (
        50,
        "kubernetes.io/hostname",
    )
    [init] = task.init_containers
    assert (init.name, init.image, init.volume_mounts[0].mount_path) == (
        "fetch",
        "busybox:1.36",
        "/scratch",
    )
    assert task.security_context is not None
    assert (task.security_context.fs_group, task.security_context.supplemental_groups) == (
        2000,
        [3000],
    )


def test_what_does_not_carry_over_is_named() -> None:
    cron = copy.deepcopy(REPORT)
    spec = cron["spec"]
    del spec["concurrencyPolicy"]  # CronJob's default: Allow
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    del pod["securityContext"]
    pod["volumes"] = [
        {"name": "config", "configMap": {"name": "report"}},
        {"name": "host", "hostPath": {"path": "/var/log"}},
    ]
    pod["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaces": ["databases"],
                }
            ]
        }
    }
    pod["initContainers"] = [
        {"name": "warm", "image": "busybox", "securityContext": {"runAsUser": 0}}
    ]
    container = pod["containers"][0]
    container["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/report"},
        {"name": "host", "mountPath": "/host-logs"},
    ]
    container["env"].append(
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    )
    pod["containers"].append({"name": "sidecar", "image": "envoy"})
    spec["jobTemplate"]["spec"]["parallelism"] = 3
    spec["startingDeadlineSeconds"] = 5
    imported = from_cronjob(cron)
    assert imported.job is not None
    assert imported.job["spec"]["concurrencyPolicy"] == "Allow"
    assert imported.job["spec"]["startingDeadlineSeconds"] == 10
    task = imported.job["spec"]["task"]["container"]
    assert [v["name"] for v in task["volumes"]] == ["config"]
    assert [m["name"] for m in task["volumeMounts"]] == ["config"]
    assert "affinity" not in task
    assert [c["name"] for c in task["initContainers"]] == ["warm"]
    assert imported.left_out == [
        "containers after the first (sidecar): one container per task",
        "volume host: hostPath: the container task has no such field",
        (
            "affinity: podAffinity.requiredDuringSchedulingIgnoredDuringExecution.0.namespaces: "
            "the container task has no such field"
        ),
        "env POD: valueFrom fieldRef",
        "container report: mount /host-logs: its volume host is left out",
        "init container warm: securityContext (the task's apply)",
        (
            "the task runs as non-root by default: set securityContext.runAsNonRoot: false "
            "if the image needs root"
        ),
        "startingDeadlineSeconds 5: raised to 10",
        "the Job's parallelism",
    ]


def test_a_cronjob_the_schema_refuses_is_not_imported() -> None:
    cron = copy.deepcopy(REPORT)
    cron["spec"]["schedule"] = "61 * * * *"
    imported = from_cronjob(cron)
    assert imported.job is None
    assert imported.left_out[-1].startswith("not imported: spec.schedule")
    empty = copy.deepcopy(REPORT)
    empty["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"] = []
    assert from_cronjob(empty).job is None


def test_a_zone_prefix_in_the_schedule_becomes_the_time_zone() -> None:
    cron = copy.deepcopy(REPORT)
    del cron["spec"]["timeZone"]
    cron["spec"]["schedule"] = "CRON_TZ=America/New_York 0 9 * * 1-5"
    imported = from_cronjob(cron)
    assert imported.job is not None
    spec = imported.job["spec"]
    assert (spec["schedule"], spec["timeZone"]) == ("0 9 * * 1-5", "America/New_York")
