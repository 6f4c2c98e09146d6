"""``kubectl tickwork runs``: the table for people, JSON and YAML for scripts."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml

from tickwork.cli import completion, parser, render, render_jobs, render_runs
from tickwork.cli.commands import pending_runs
from tickwork.core.annotations import CANCEL_IDS_LIMIT, cancel_ids, with_cancel

pytestmark = pytest.mark.unit
NOW = dt.datetime(2026, 12, 1, 9, 5, tzinfo=dt.UTC)
STATUS = {
    "activeRuns": [
        {
            "id": "u.20261201T090400Z",
            "scheduledAt": "2026-12-01T09:04:00Z",
            "state": "Running",
            "attempt": 2,
            "worker": "w-1",
        }
    ],
    "runs": [  # as status keeps them: oldest first
        {
            "id": "u.20261201T090200Z",
            "scheduledAt": "2026-12-01T09:02:00Z",
            "outcome": "Failed",
            "finishedAt": "2026-12-01T09:02:09Z",
            "error": "HTTP 500",
        },
        {
            "id": "u.20261201T090300Z",
            "scheduledAt": "2026-12-01T09:03:00Z",
            "outcome": "Succeeded",
            "finishedAt": "2026-12-01T09:03:01Z",
            "result": "ok",
        },
    ],
}


def test_the_table_shows_the_running_run_then_the_newest_first() -> None:
    lines = render_runs("j", STATUS, output="table", now=NOW).splitlines()
    assert [line.split()[0] for line in lines] == [
        "RUN",
        "20261201T090400Z",
        "20261201T090300Z",
        "20261201T090200Z",
    ]
    assert "on w-1" in lines[1]


def test_a_run_waiting_for_its_concurrency_key_says_which() -> None:
    waiting = {
        "id": "u.20261201T090430Z",
        "scheduledAt": "2026-12-01T09:04:30Z",
        "state": "Waiting",
        "attempt": 1,
        "waitingFor": "nightly-db",
    }
    status = {**STATUS, "activeRuns": [*STATUS["activeRuns"], waiting]}
    lines = render_runs("j", status, output="table", now=NOW).splitlines()
    assert lines[2].split()[:3] == ["20261201T090430Z", "30s", "Waiting"]
    assert lines[2].endswith("for concurrency key nightly-db")


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


JOB = {
    "metadata": {
        "name": "nightly",
        "namespace": "prod",
        "uid": "u",
        "creationTimestamp": "2026-11-28T09:05:00Z",
    },
    "spec": {"schedule": "0 2 * * *", "timeZone": "Europe/Berlin", "task": {"http": {}}},
    "status": {
        **STATUS,
        "phase": "Scheduled",
        "nextRunAt": "2026-12-01T09:10:00Z",
        "nextRuns": [
            "2026-12-01T09:10:00Z",
            "2026-12-02T09:10:00Z",
            "2026-12-03T09:10:00Z",
            "2026-12-04T09:10:00Z",
        ],
        "missedRuns": 2,
        "lastRun": STATUS["runs"][1],
        "conditions": [{"type": "Ready", "status": "False", "reason": "LastRunFailed"}],
    },
}


def test_get_shows_a_row_per_job_with_readiness_and_times_relative_to_now() -> None:
    header, row = render_jobs([JOB], output="table", all_namespaces=False, now=NOW).splitlines()
    columns = " ".join(header.split())
    assert columns == "NAME SCHEDULE SUSPEND PHASE READY ACTIVE LAST LAST RUN NEXT RUN AGE"
    cells = [cell.strip() for cell in row.split("   ") if cell.strip()]
    assert cells == [
        "nightly",
        "0 2 * * *",
        "false",
        "Scheduled",
        "False",
        "Running",
        "Succeeded",
        "2m",
        "in 5m",
        "3d",
    ]


def test_get_wide_and_all_namespaces_add_columns() -> None:
    header, row = render_jobs([JOB], output="wide", all_namespaces=True, now=NOW).splitlines()
    assert header.split()[0] == "NAMESPACE"
    assert header.split()[-8:] == ["ZONE", "REASON", "MISSED", "LAST", "RUN", "ID", "NEXT", "RUNS"]
    assert row.split()[0] == "prod"
    assert row.split("   ")[-1].strip() == "in 5m, in 1d, in 2d"  # the first three of four
    assert row.split()[-10:-6] == ["Europe/Berlin", "LastRunFailed", "2", "u.20261201T090300Z"]
    assert (header.split()[-9], row.split()[-11]) == ("PRIORITY", "Normal")  # the default
    high = {**JOB, "spec": {**JOB["spec"], "priority": "High"}}
    assert render_jobs([high], output="wide", all_namespaces=False, now=NOW).split()[-11] == "High"
    bare = {**JOB, "status": {"phase": "Scheduled"}}
    assert render_jobs([bare], output="wide", all_namespaces=False, now=NOW).endswith("-")


def test_get_names_and_documents_are_for_scripts() -> None:
    assert render_jobs([JOB], output="name", all_namespaces=False, now=NOW) == (
        "scheduledjob.tickwork.dev/nightly"
    )
    assert json.loads(render_jobs([JOB], output="json", all_namespaces=False, now=NOW)) == JOB
    listed = yaml.safe_load(render_jobs([JOB, JOB], output="yaml", all_namespaces=False, now=NOW))
    assert (listed["kind"], len(listed["items"])) == ("List", 2)


def test_runs_wide_adds_the_whole_id_when_it_finished_and_the_worker() -> None:
    lines = render_runs("j", STATUS, output="wide", now=NOW).splitlines()
    assert lines[0].split()[-4:] == ["FINISHED", "WORKER", "RUN", "ID"]
    assert lines[1].split()[-2:] == ["w-1", "u.20261201T090400Z"]
    assert lines[2].split()[-2:] == ["1m", "u.20261201T090300Z"]


def test_describe_lays_out_one_run_and_says_where_it_was_found() -> None:
    assert render.find_run(JOB, "u.nothing") is None
    where, run = render.find_run(JOB, "u.20261201T090400Z") or ("", {})
    assert where == "active"
    text = render.describe_run(JOB, where, run, now=NOW)
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines())}
    assert fields["Job"] == "prod/nightly"
    assert (fields["State"], fields["Attempts"], fields["Worker"]) == ("Running", "2 of 3", "w-1")
    assert fields["Trigger"] == "schedule"
    where, run = render.find_run(JOB, "u.20261201T090200Z") or ("", {})
    failed = render.describe_run(JOB, where, run, now=NOW)
    assert "Error:" in failed
    assert "HTTP 500" in failed


def test_describe_lays_out_a_job_its_conditions_and_its_runs() -> None:
    text = render.describe_job(JOB, now=NOW)
    head, conditions = text.split("\nConditions:\n")
    conditions, runs = conditions.split("\nRuns:\n")
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in head.splitlines())}
    assert (fields["Name"], fields["Namespace"]) == ("nightly", "prod")
    assert (fields["Schedule"], fields["Time Zone"], fields["Task"]) == (
        "0 2 * * *",
        "Europe/Berlin",
        "http",
    )
    assert fields["Last Run"] == "u.20261201T090300Z Succeeded (2m ago)"
    assert fields["Next Runs"].split(", ")[0] == "2026-12-01T09:10:00Z"
    assert (fields["Missed Runs"], fields["Created"]) == ("2", "2026-11-28T09:05:00Z (3d ago)")
    assert conditions.split("\n")[1].split() == ["Ready", "False", "LastRunFailed", "-"]
    # The runs as `runs` shows them, indented: the running one, then the newest first.
    assert [line.split()[0] for line in runs.splitlines()] == [
        "RUN",
        "20261201T090400Z",
        "20261201T090300Z",
        "20261201T090200Z",
    ]
    bare = render.describe_job({"metadata": {"name": "new"}, "spec": {"runAt": "x"}}, now=NOW)
    assert "Conditions:\n  <none>\nRuns:\n  no runs of" in bare


@pytest.mark.parametrize(
    ("words", "current", "offered"),
    [
        ([], "r", ["resume", "runs"]),
        (["runs"], "", ["alpha", "beta"]),  # job names come from the cluster
        (["-n", "prod", "trigger"], "b", ["beta"]),
        (["runs", "alpha"], "", []),  # one name only
        (["get", "-o"], "w", ["wide"]),
        (["runs"], "--o", ["--output"]),
        (["describe"], "", ["alpha", "beta", "u.1"]),
        (["cancel"], "", ["u.1"]),
        ([], "c", ["cancel", "completion"]),
        (["completion"], "", ["bash", "fish", "zsh"]),
        (["dlq"], "re", ["requeue"]),
        ([], "b", ["backfill"]),
        (["backfill"], "a", ["alpha"]),
        (["backfill", "alpha"], "--f", ["--from"]),
        (
            ["--context", "kind", "get"],
            "-",
            [
                "--all-namespaces",
                "--context",
                "--help",
                "--kubeconfig",
                "--namespace",
                "--output",
                "--redis-url",
                "--selector",
                "--watch",
                "-A",
                "-h",
                "-l",
                "-n",
                "-o",
                "-w",
            ],
        ),
    ],
)
def test_completion_offers_what_fits_where_the_cursor_is(
    words: list[str], current: str, offered: list[str]
) -> None:
    got = completion.candidates(
        parser(), words, current, names=lambda: ["alpha", "beta"], run_ids=lambda: ["u.1"]
    )
    assert sorted(got) == sorted(offered)


def test_completion_asks_the_cluster_only_where_a_name_fits() -> None:
    def boom() -> list[str]:
        raise AssertionError("the cluster was asked")

    assert completion.candidates(parser(), [], "g", names=boom, run_ids=boom) == ["get"]


def test_cancel_keeps_the_pending_ids_of_earlier_cancels_and_drops_the_rest() -> None:
    assert cancel_ids(" a, b,,a ") == ["a", "b"]
    assert with_cancel(None, "c", pending=["c"]) == "c"
    assert with_cancel("a,b", "c", pending=["b", "c"]) == "b,c"  # a finished meanwhile
    assert with_cancel("b,c", "c", pending=["b", "c"]) == "b,c"  # once each
    many = ",".join(f"r{i}" for i in range(40))
    kept = with_cancel(many, "new", pending=[f"r{i}" for i in range(40)]).split(",")
    assert len(kept) == CANCEL_IDS_LIMIT
    assert kept[-1] == "new"


def test_pending_runs_are_active_queued_and_buffered_but_not_finished() -> None:
    status = {
        "activeRuns": [{"id": "u.a"}],
        "queuedRun": {"id": "u.q"},
        "bufferedRuns": [{"id": "u.b"}],
        "lastRun": {"id": "u.done"},
    }
    assert pending_runs(status) == ["u.a", "u.q", "u.b"]
    assert pending_runs({**status, "queuedRun": {"id": "u.done"}}) == ["u.a", "u.b"]
    assert pending_runs({}) == []


def test_get_works_the_next_runs_out_when_status_keeps_no_schedule() -> None:
    """No nextRunAt in status (a status written by an older version with the operator's
    scheduleInStatus off): the table shows the next runs of the spec (02:00 in Berlin is
    01:00 UTC), and none while suspended."""
    spec = {**JOB["spec"], "task": {"echo": {"message": "hi"}}}
    status = {k: v for k, v in JOB["status"].items() if k not in ("nextRunAt", "nextRuns")}
    job = {**JOB, "spec": spec, "status": status}
    row = render_jobs([job], output="wide", all_namespaces=False, now=NOW).splitlines()[1]
    assert row.split("   ")[-1].strip() == "in 15h, in 1d, in 2d"
    assert render.next_runs(job, NOW)[0] == "2026-12-02T01:00:00Z"
    suspended = {**job, "spec": {**spec, "suspend": True}}
    assert render.next_runs(suspended, NOW) == []


def test_a_job_that_runs_after_others_names_them_in_the_schedule_column() -> None:
    def row(after: dict[str, object]) -> str:
        spec = {"after": after, "task": {"echo": {"message": "hi"}}}
        job = {"metadata": {"name": "report", "creationTimestamp": "2026-12-01T00:00:00Z"}}
        table = render_jobs([{**job, "spec": spec}], output="table", all_namespaces=False, now=NOW)
        return table.splitlines()[1]

    both = {"jobs": [{"job": "extract"}, {"job": "load"}]}
    assert row(both).split()[1:3] == ["after", "extract,load"]
    assert row({**both, "require": "Any"}).split()[1:3] == ["after", "extract|load"]
