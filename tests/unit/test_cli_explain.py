"""``tickwork explain -f FILE``: a job file's next runs offline, in the job's zone and
in UTC, each run a clock change moved or repeated marked; bad files are refused in
words (issue 50)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tickwork.cli import explain
from tickwork.cli.commands import main

pytestmark = pytest.mark.unit

BERLIN = """
apiVersion: tickwork.dev/v1alpha1
kind: ScheduledJob
metadata: {name: nightly}
spec:
  schedule: "30 2 * * *"
  timeZone: Europe/Berlin
  task: {echo: {message: hi}}
"""


def runs(text: str, start: str, count: int = 3) -> list[explain.Run]:
    [job] = explain.jobs_in(text)
    return explain.next_runs(
        explain.spec_of(job), after=dt.datetime.fromisoformat(start), count=count
    )


def test_a_run_whose_wall_time_the_clock_skips_is_marked_moved() -> None:
    found = runs(BERLIN, "2026-03-27T00:00:00Z")
    assert [r.at.strftime("%m-%dT%H:%M") for r in found] == [
        "03-27T01:30",
        "03-28T01:30",
        "03-29T01:00",
    ]
    assert [bool(r.note) for r in found] == [False, False, True]
    assert found[2].note.startswith("moved")
    assert f"{found[2].local:%H:%M %Z}" == "03:00 CEST"


def test_a_wall_time_that_occurs_twice_is_marked_with_its_pass() -> None:
    [once] = [r for r in runs(BERLIN, "2026-10-25T00:00:00Z", 2) if r.note]
    assert once.note.endswith("the first 02:30")  # Debian's rule: the first pass only
    both = BERLIN.replace(
        "timeZone: Europe/Berlin",
        "timeZone: Europe/Berlin\n  daylightSaving: {repeated: Both, skipped: Shift}",
    )
    found = runs(both, "2026-10-25T00:00:00Z")
    assert [r.note.rsplit(" ", 2)[-2] for r in found[:2]] == ["first", "second"]
    assert [r.at.strftime("%H:%M") for r in found[:2]] == ["00:30", "01:30"]
    assert found[2].note == ""


def test_utc_and_intervals_are_never_marked_and_bounds_end_the_list() -> None:
    every = BERLIN.replace('"30 2 * * *"', '"@every 90m"').replace(
        "timeZone: Europe/Berlin", "notAfter: '2026-03-29T04:00:00Z'"
    )
    found = runs(every, "2026-03-29T00:00:00Z", 10)
    assert [r.at.strftime("%H:%M") for r in found] == ["01:30", "03:00"]  # from the start
    assert all(r.note == "" for r in found)


def test_the_command_reads_a_file_offline_and_prints_every_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    job = tmp_path / "job.yaml"
    other = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    job.write_text(BERLIN + other + BERLIN.replace("nightly", "second"))
    code = main(["explain", "-f", str(job), "--from", "2026-03-28T12:00:00Z", "--count", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("Europe/Berlin") == 4  # two jobs: a title and a header each
    assert "2026-03-29 Sun 03:00:00 CEST    2026-03-29T01:00:00Z  moved" in out
    assert "nightly: 30 2 * * *" in out
    assert "second: 30 2 * * *" in out


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a: [", "not YAML"),
        ("kind: ConfigMap\nspec: {}\n", "no ScheduledJob in the file"),
        (BERLIN.replace('"30 2 * * *"', '"61 * * * *"'), "nightly: spec.schedule:"),
        (BERLIN.replace("Europe/Berlin", "Mars/Olympus"), "nightly: spec.timeZone"),
    ],
)
def test_a_bad_file_is_refused_in_words(
    text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(text)
    assert main(["explain", "-f", str(job)]) == 1
    assert says in capsys.readouterr().err


def test_the_count_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(BERLIN)
    assert main(["explain", "-f", str(job), "--count", "0"]) == 1
    assert "--count must be 1 to 1000" in capsys.readouterr().err
    assert main(["explain", "-f", str(tmp_path / "missing.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().err


SEVERAL = """
apiVersion: tickwork.dev/v1alpha1
kind: ScheduledJob
metadata: {name: twice-a-day}
spec:
  timeZone: America/New_York
  schedules:
  - {schedule: "30 2 * * *", timeZone: Europe/Berlin}
  - {schedule: "0 12 * * *"}
  task: {echo: {message: hi}}
"""


def test_several_schedules_list_every_entrys_runs_each_marked_on_its_own_clock() -> None:
    found = runs(SEVERAL, "2026-03-28T12:00:00Z", 4)
    # Berlin's 02:30 of Mar 29 does not occur (moved to 03:00 CEST, 01:00 UTC); New York
    # is already on daylight time: noon EDT is 16:00 UTC, unmarked.
    assert [r.at.strftime("%m-%dT%H:%M") for r in found] == [
        "03-28T16:00",
        "03-29T01:00",
        "03-29T16:00",
        "03-30T00:30",
    ]
    assert [r.note.split(":")[0] for r in found] == ["", "moved", "", ""]
    assert f"{found[0].local:%H:%M %Z}" == "12:00 EDT"  # shown in the job's zone
    [job] = explain.jobs_in(SEVERAL)
    text = explain.render(job, explain.spec_of(job), found)
    assert text.splitlines()[0] == "twice-a-day: 30 2 * * *; 0 12 * * * (America/New_York)"


def test_a_job_that_runs_after_others_says_so_and_lists_its_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    job = tmp_path / "job.yaml"
    after = "  after: {jobs: [{job: extract}, {job: load, outcome: Finished}], require: Any}\n"
    alone = BERLIN.replace('  schedule: "30 2 * * *"\n', after).replace("nightly", "alone")
    windows = BERLIN.replace("  task:", after + "  task:")
    job.write_text(alone + "---\n" + windows)
    code = main(["explain", "-f", str(job), "--from", "2026-12-01T00:00:00Z", "--count", "1"])
    out = [line for line in capsys.readouterr().out.splitlines() if line]
    assert code == 0
    assert out[0] == "alone: after any of extract (Succeeded), load (Finished)"
    assert out[1] == "   (runs when those jobs' runs end: no instant of its own)"
    assert out[2] == (
        "nightly: after any of extract (Succeeded), load (Finished), "
        "within windows opening at: 30 2 * * * (Europe/Berlin)"
    )
    assert "2026-12-01T01:30:00Z" in out[4]
