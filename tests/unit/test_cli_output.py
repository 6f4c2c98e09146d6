"""``kubectl tickwork runs``: the table for people, JSON and YAML for scripts."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml

from tickwork.cli import parser, render_runs

pytestmark = pytest.mark.unit
NOW = dt.datetime(2026, 12, 1, 9, 5, tzinfo=dt.UTC)
STATUS = {
    "activeRuns": [{"id": "u.20261201T090400Z", "scheduledAt": "2026-12-01T09:04:00Z",
                    "state": "Running", "attempt": 2, "worker": "w-1"}],
    "runs": [  # as status keeps them: oldest first
        {"id": "u.20261201T090200Z", "scheduledAt": "2026-12-01T09:02:00Z",
         "outcome": "Failed", "finishedAt": "2026-12-01T09:02:09Z", "error": "HTTP 500"},
        {"id": "u.20261201T090300Z", "scheduledAt": "2026-12-01T09:03:00Z",
         "outcome": "Succeeded", "finishedAt": "2026-12-01T09:03:01Z", "result": "ok"},
    ],
}  # fmt: skip


def test_the_table_shows_the_running_run_then_the_newest_first() -> None:
    lines = render_runs("j", STATUS, output="table", now=NOW).splitlines()
    assert [line.split()[0] for line in lines] == [
        "RUN", "20261201T090400Z", "20261201T090300Z", "20261201T090200Z",
    ]  # fmt: skip
    assert "on w-1" in lines[1]


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_json_and_yaml_carry_every_field_newest_first(output: str) -> None:
    text = render_runs("j", STATUS, output=output, now=NOW)
    document = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert document["activeRuns"] == STATUS["activeRuns"]
    assert document["runs"] == list(reversed(STATUS["runs"]))


def test_no_runs_yet_is_said_in_words_and_output_is_checked() -> None:
    assert render_runs("j", {}, output="table", now=NOW) == 'no runs of scheduledjob "j" yet'
    assert render_runs("j", {}, output="json", now=NOW) == json.dumps(
        {"activeRuns": [], "runs": []}, indent=2
    )
    with pytest.raises(SystemExit):
        parser().parse_args(["runs", "j", "-o", "xml"])
