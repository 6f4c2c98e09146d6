"""The API server enforces the ScheduledJob schema: examples are accepted, bad specs are
refused at `kubectl apply` with a message that says what to fix, and defaults and
printer columns are what the models say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tickwork.api import models
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import wait_for

ROOT = Path(__file__).resolve().parents[2]
ALL_EXAMPLES = sorted((ROOT / "manifests" / "examples").rglob("*.yaml"))
EXAMPLES = [p for p in ALL_EXAMPLES if yaml.safe_load(p.read_text())["kind"] == "ScheduledJob"]
CALENDAR_EXAMPLES = [p for p in ALL_EXAMPLES if p not in EXAMPLES]
CORPUS = yaml.safe_load((ROOT / "tests" / "data" / "bad_specs.yaml").read_text())


def _job(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": models.API_VERSION,
        "kind": models.KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def _create(api_client: k8s.ApiClient, namespace: str, body: dict[str, Any], **kw: Any) -> Any:
    return k8s.CustomObjectsApi(api_client).create_namespaced_custom_object(
        models.GROUP,
        models.VERSION,
        namespace,
        models.PLURAL,
        body,
        field_validation="Strict",
        **kw,
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_are_accepted(
    cluster: Cluster, crd: None, api_client: k8s.ApiClient, namespace: str, path: Path
) -> None:
    dry = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path))
    assert "(server dry run)" in dry.stdout
    created = _create(api_client, namespace, yaml.safe_load(path.read_text()))
    # What the API server stored parses back into the models unchanged.
    stored = models.ScheduledJob.model_validate(created)
    assert stored.spec == models.ScheduledJob.model_validate(yaml.safe_load(path.read_text())).spec


@pytest.mark.parametrize("path", CALENDAR_EXAMPLES, ids=[p.stem for p in CALENDAR_EXAMPLES])
def test_calendar_examples_are_accepted(
    cluster: Cluster, crd: None, namespace: str, path: Path
) -> None:
    dry = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path))
    assert "(server dry run)" in dry.stdout


def test_a_calendar_the_schema_refuses_says_what_to_fix(
    cluster: Cluster, crd: None, api_client: k8s.ApiClient, namespace: str
) -> None:
    body = {
        "apiVersion": models.API_VERSION,
        "kind": "Calendar",
        "metadata": {"name": "bad"},
        "spec": {"dates": ["2026-13-01"], "timeZone": "UTC"},
    }
    with pytest.raises(ApiException) as refused:
        k8s.CustomObjectsApi(api_client).create_namespaced_custom_object(
            models.GROUP, models.VERSION, namespace, "calendars", body, field_validation="Strict"
        )
    assert refused.value.status == 422
    assert "spec.dates[0]" in str(refused.value.body)


@pytest.mark.parametrize("entry", CORPUS["refused"], ids=[e["name"] for e in CORPUS["refused"]])
def test_bad_specs_are_refused_with_a_message_that_says_what_to_fix(
    cluster: Cluster, crd: None, api_client: k8s.ApiClient, namespace: str, entry: dict[str, Any]
) -> None:
    body = _job(entry["name"], entry["spec"])
    applied = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        input_text=json.dumps(body),
        check=False,
    )
    assert applied.returncode != 0, f"kubectl apply accepted {entry['name']}"
    assert entry["expect"] in applied.stderr

    with pytest.raises(ApiException) as excinfo:
        _create(api_client, namespace, body)
    assert excinfo.value.status in (400, 422)
    assert entry["expect"] in json.loads(excinfo.value.body)["message"]


#: Edits of a valid job that the rules must refuse, with what the message says.
_BAD_EDITS = {
    "cron": ({"schedule": "61 * * * *"}, "schedule must be five cron fields"),
    "interval": ({"schedule": "@every 1s"}, "an @every interval must be at least"),
    "url": ({"task": {"http": {"url": "ftp://example.com/x"}}}, "url must be an absolute"),
    "template": ({"task": {"http": {"bodyTemplate": "{{ nope }}"}}}, "placeholders are"),
}


@pytest.mark.parametrize("edit", sorted(_BAD_EDITS))
def test_an_update_is_checked_by_the_same_rules_as_a_create(
    cluster: Cluster, crd: None, api_client: k8s.ApiClient, namespace: str, edit: str
) -> None:
    """``kubectl patch`` of one field is refused as a create with that value would be
    (the rules hold for every write, not only the first, whatever a later change of
    how they run, e.g. skipping unchanged values, would do); an update of another
    field leaves the job valid and is accepted."""
    name = f"edit-{edit}"
    _create(
        api_client,
        namespace,
        _job(
            name,
            {
                "schedule": "*/5 * * * *",
                "task": {"http": {"url": "https://example.com/x", "bodyTemplate": "{{ runId }}"}},
            },
        ),
    )
    patch, expect = _BAD_EDITS[edit]

    def edit_spec(change: dict[str, Any], *, check: bool = True) -> Any:
        merge = json.dumps({"spec": change})
        return cluster.kubectl(
            "patch", "sj", name, "-n", namespace, "--type=merge", "-p", merge, check=check
        )

    refused = edit_spec(patch, check=False)
    assert refused.returncode != 0, f"the {edit} edit was accepted"
    assert expect in refused.stderr, refused.stderr
    other = edit_spec({"suspend": True})
    assert "patched" in other.stdout


@pytest.mark.parametrize(
    "entry", CORPUS["operatorOnly"], ids=[e["name"] for e in CORPUS["operatorOnly"]]
)
def test_what_the_schema_cannot_tell_is_left_to_the_operator(
    crd: None, api_client: k8s.ApiClient, namespace: str, entry: dict[str, Any]
) -> None:
    created = _create(api_client, namespace, _job(entry["name"], entry["spec"]))
    assert created["metadata"]["name"] == entry["name"]


@pytest.mark.parametrize(
    "entry", CORPUS["atTheLimits"], ids=[e["name"] for e in CORPUS["atTheLimits"]]
)
def test_specs_exactly_at_the_size_limits_are_accepted(
    crd: None, api_client: k8s.ApiClient, namespace: str, entry: dict[str, Any]
) -> None:
    created = _create(api_client, namespace, _job(entry["name"], entry["spec"]))
    # Stored whole: what the API server kept parses back into the same spec.
    stored = models.ScheduledJob.model_validate(created).spec
    assert stored == models.ScheduledJobSpec.model_validate(entry["spec"])


def test_the_api_server_applies_the_models_defaults(
    crd: None, api_client: k8s.ApiClient, namespace: str
) -> None:
    created = _create(
        api_client, namespace, _job("minimal", {"schedule": "@daily", "task": {"echo": {}}})
    )
    expected = models.ScheduledJobSpec.model_validate(
        {"schedule": "@daily", "task": {"echo": {}}}
    ).to_wire()
    assert created["spec"] == expected


def test_a_job_that_runs_after_itself_is_refused_at_admission(
    cluster: Cluster, crd: None, namespace: str
) -> None:
    """The one cycle the API server can see (a job names only itself); longer ones are
    the operator's to find (tests/unit/test_run_after.py)."""
    after = {"jobs": [{"job": "extract"}, {"job": "loop"}]}
    body = _job("loop", {"after": after, "task": {"echo": {"message": "hi"}}})
    applied = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input_text=json.dumps(body), check=False
    )
    assert applied.returncode != 0
    assert "spec.after names the job itself" in applied.stderr
    body["metadata"]["name"] = "not-a-loop"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))


def test_kubectl_get_shows_the_printer_columns(cluster: Cluster, crd: None, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", str(ROOT / "manifests/examples/job.yaml"))
    cluster.kubectl("apply", "-n", namespace, "-f", str(ROOT / "manifests/examples/suspended.yaml"))
    table = cluster.kubectl("get", "sj", "-n", namespace).stdout.splitlines()
    header = " ".join(table[0].split())
    assert header == "NAME SCHEDULE RUN AT SUSPEND PHASE ACTIVE LAST LAST RUN NEXT RUN AGE"
    rows = {line.split()[0]: line for line in table[1:]}
    assert "2026-01-01T00:00:00Z" in rows["hello-once"]  # manifests/examples/job.yaml
    assert "0 3 1 jan,apr,jul,oct *" in rows["quarterly-cleanup"]
    assert " true " in rows["quarterly-cleanup"]
    wide = cluster.kubectl("get", "scheduledjobs", "-n", namespace, "-o", "wide").stdout
    assert "ZONE" in wide  # only with -o wide
    assert "ZONE" not in table[0]


def test_kubectl_explain_describes_the_fields(cluster: Cluster, crd: None) -> None:
    # The API server publishes a new CRD's OpenAPI a moment after it is established.
    wait_for(
        lambda: cluster.kubectl("explain", "scheduledjob.spec", check=False).returncode == 0,
        timeout=60,
        what="the ScheduledJob's OpenAPI published",
    )
    explained = cluster.kubectl("explain", "scheduledjob.spec.retry").stdout
    assert "Attempts per run and the backoff between them." in explained
    for field in ("maxAttempts", "backoffSeconds", "maxBackoffSeconds"):
        assert field in explained
    assert "doubles with each further attempt" in explained
    status = cluster.kubectl("explain", "scheduledjob.status.activeRuns.state").stdout
    assert "Running, Retrying between attempts, or Waiting for a place" in status
