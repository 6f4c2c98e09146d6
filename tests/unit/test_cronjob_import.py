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


def test_what_does_not_carry_over_is_named() -> None:
    cron = copy.deepcopy(REPORT)
    spec = cron["spec"]
    del spec["concurrencyPolicy"]  # CronJob's default: Allow
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    del pod["securityContext"]
    pod["volumes"] = [{"name": "config", "configMap": {"name": "report"}}]
    pod["initContainers"] = [{"name": "warm", "image": "busybox"}]
    container = pod["containers"][0]
    container["volumeMounts"] = [{"name": "config", "mountPath": "/etc/report"}]
    container["envFrom"] = [{"configMapRef": {"name": "report"}}]
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
    assert imported.left_out == [
        "the Pod's initContainers",
        "the Pod's volumes",
        "containers after the first (sidecar): one container per task",
        "container report: envFrom",
        "container report: volumeMounts",
        "env POD: valueFrom fieldRef",
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
