"""The pydantic models: examples parse, bad specs are refused with the same messages
the API server gives, and the committed CRD is exactly what the models generate."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tickwork.api import crd, rules
from tickwork.api.calendar import CalendarSpec
from tickwork.api.models import ScheduledJob, ScheduledJobSpec

ROOT = Path(__file__).resolve().parents[2]
ALL_EXAMPLES = sorted((ROOT / "manifests" / "examples").rglob("*.yaml"))
EXAMPLES = [p for p in ALL_EXAMPLES if yaml.safe_load(p.read_text())["kind"] == "ScheduledJob"]
CALENDAR_EXAMPLES = [p for p in ALL_EXAMPLES if p not in EXAMPLES]
CORPUS = yaml.safe_load((ROOT / "tests" / "data" / "bad_specs.yaml").read_text())


CEL_MESSAGES = [
    rule.message for rule in vars(rules).values() if isinstance(rule, rules.CelRule)
] + [rules.CRON_MESSAGE]


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["name"] for entry in entries]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_parses(path: Path) -> None:
    job = ScheduledJob.model_validate(yaml.safe_load(path.read_text()))
    assert job.spec.task.kind in {"http", "command", "container", "python", "echo"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_no_example_runs_out_of_time(path: Path) -> None:
    """Applied today or in ten years, an example does what its comment says: a
    recurring one runs within a year of being applied (no window that has passed or
    is years away); a one-shot runs (a runAt that has passed runs at once, unless a
    starting deadline makes it missed)."""
    spec = ScheduledJob.model_validate(yaml.safe_load(path.read_text())).spec
    if spec.run_at is not None:
        assert spec.starting_deadline_seconds is None, "a past runAt would be missed"
        return
    if spec.after is not None:  # runs after other jobs' runs: none of its own schedule
        assert spec.starting_deadline_seconds is None, "a late upstream would miss its run"
        return
    today = dt.datetime.now(dt.UTC)  # the day a reader applies it: the real one
    for applied in (today, today + dt.timedelta(days=3653)):
        following = spec.schedule_of(applied).next_run_after(applied)
        assert following is not None, f"no run after {applied:%Y-%m-%d}"
        assert following - applied <= dt.timedelta(days=366), following


@pytest.mark.parametrize("path", CALENDAR_EXAMPLES, ids=[p.stem for p in CALENDAR_EXAMPLES])
def test_every_calendar_example_parses_and_holds_days(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    assert body["kind"] == "Calendar"
    days = CalendarSpec.model_validate(body["spec"]).day_set(body["metadata"]["name"])
    assert days.dates or days.ranges or days.patterns


def test_there_are_at_least_five_examples_and_twenty_five_bad_specs() -> None:
    assert len(EXAMPLES) >= 5
    assert len(CORPUS["refused"]) >= 25


@pytest.mark.parametrize("entry", CORPUS["refused"], ids=_ids(CORPUS["refused"]))
def test_specs_the_api_server_refuses_are_refused_by_the_models(entry: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as excinfo:
        ScheduledJobSpec.model_validate(entry["spec"])
    # CEL rules share their message with the Python check, word for word.
    if any(message.startswith(entry["expect"]) for message in CEL_MESSAGES):
        assert entry["expect"] in str(excinfo.value)


@pytest.mark.parametrize("entry", CORPUS["atTheLimits"], ids=_ids(CORPUS["atTheLimits"]))
def test_specs_exactly_at_the_size_limits_are_accepted(entry: dict[str, Any]) -> None:
    spec = ScheduledJobSpec.model_validate(entry["spec"])
    assert spec.task.kind in {"http", "command", "python", "container"}


def test_a_maximal_spec_stays_within_32_kib() -> None:
    """What every operator and worker may have to hold per job, at the limits (the
    figure docs/operations.md gives for sizing)."""
    for entry in CORPUS["atTheLimits"]:
        spec = ScheduledJobSpec.model_validate(entry["spec"])
        assert len(json.dumps(spec.to_wire())) < 32 * 1024


@pytest.mark.parametrize("entry", CORPUS["operatorOnly"], ids=_ids(CORPUS["operatorOnly"]))
def test_what_the_schema_cannot_tell_the_models_refuse(entry: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=entry["expect"]):
        ScheduledJobSpec.model_validate(entry["spec"])


def test_defaults_fill_in_a_minimal_spec() -> None:
    spec = ScheduledJobSpec.model_validate({"schedule": "@daily", "task": {"echo": {}}})
    wire = spec.to_wire()
    assert wire["timeZone"] == "UTC"
    assert wire["concurrencyPolicy"] == "Skip"
    assert wire["retry"] == {"maxAttempts": 3, "backoffSeconds": 10, "maxBackoffSeconds": 600}
    assert wire["history"] == {"successfulRuns": 3, "failedRuns": 3}
    assert "runAt" not in wire
    assert "startingDeadlineSeconds" not in wire


@pytest.mark.parametrize(("relative", "kind"), crd.OUTPUTS, ids=[str(p) for p, _ in crd.OUTPUTS])
def test_committed_crd_is_generated_from_the_models(relative: Path, kind: crd.Kind) -> None:
    committed = (ROOT / relative).read_text()
    assert committed == crd.render(kind), f"{relative} drifted from the models: run `make crd`"


@pytest.mark.parametrize("kind", crd.KINDS, ids=[k.kind for k in crd.KINDS])
def test_crd_schema_is_structural(kind: crd.Kind) -> None:
    """No refs, unions or `additionalProperties: false`: what the API server insists on."""
    text = yaml.safe_dump(crd.build_crd(kind))
    for forbidden in ("$ref", "anyOf", "oneOf", "allOf", "additionalProperties: false", "title:"):
        assert forbidden not in text
