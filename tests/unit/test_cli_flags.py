"""kubectl's flags go anywhere on the line, as users of kubectl plugins expect."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from tickwork.cli import main, parser
from tickwork.cli.commands import trigger_params

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("argv", "namespace"),
    [
        (["runs", "nightly", "-n", "prod"], "prod"),  # kubectl tickwork runs nightly -n prod
        (["-n", "prod", "runs", "nightly"], "prod"),
        (["--namespace=prod", "trigger", "nightly", "--token", "t"], "prod"),
        (["-n", "a", "runs", "nightly", "-n", "b"], "b"),  # the last one wins, as in kubectl
        (["runs", "nightly"], None),  # the kubeconfig's namespace then
        (["dlq", "list", "-n", "prod"], "prod"),
    ],
)
def test_the_namespace_flag_counts_before_and_after_the_command(
    argv: list[str], namespace: str | None
) -> None:
    assert parser().parse_args(argv).namespace == namespace


def test_every_global_flag_works_after_the_command() -> None:
    args = parser().parse_args(
        [
            "dlq",
            "requeue",
            "--all",
            "--kubeconfig",
            "/k",
            "--context",
            "c",
            "--redis-url",
            "redis://r",
        ]
    )
    assert (args.kubeconfig, args.context, args.redis_url) == ("/k", "c", "redis://r")


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"tickwork {importlib.metadata.version('tickwork')}"


def test_trigger_parameters_are_checked_before_the_cluster_is_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert trigger_params(["region=eu", "note=a=b", "region=us"]) == {"note": "a=b", "region": "us"}
    absent = str(tmp_path / "no-kubeconfig")
    assert main(["trigger", "nightly", "--param", "2fast=x", "--kubeconfig", absent]) == 1
    assert capsys.readouterr().err.startswith("error: parameter name '2fast' must be a letter")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--from", "yesterday", "--to", "2026-11-02T00:00:00Z"], "--from must be an RFC 3339"),
        (["--from", "2026-11-01T00:00:00", "--to", "2026-11-02T00:00:00Z"], "with an offset"),
        (["--from", "2026-11-01T00:00:00Z", "--to", "soon"], "--to must be an RFC 3339"),
    ],
)
def test_backfill_times_are_checked_before_the_cluster_is_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], said: str
) -> None:
    absent = str(tmp_path / "no-kubeconfig")
    assert main(["backfill", "nightly", *flags, "--kubeconfig", absent]) == 1
    assert said in capsys.readouterr().err


def test_a_backfill_that_lost_to_a_status_write_reads_the_job_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs write status every minute: a backfill's conditional patch that finds a newer
    version (409) reads the job again and patches that one, instead of failing."""
    from tickwork.cli import commands  # noqa: PLC0415
    from tickwork.cli.access import ConflictError  # noqa: PLC0415

    class Jobs:
        def __init__(self) -> None:
            self.version = 7
            self.patched: list[str] = []

        def get(self, name: str) -> dict[str, object]:
            assert name == "nightly"
            self.version += 1  # a run's record came in since the last read
            return {
                "metadata": {
                    "resourceVersion": str(self.version),
                    "creationTimestamp": "2026-11-01T00:00:00Z",
                },
                "spec": {"schedule": "0 2 * * *", "task": {"echo": {"message": "x"}}},
            }

        def patch(self, name: str, body: dict[str, dict[str, str]]) -> None:
            assert name == "nightly"
            self.patched.append(body["metadata"]["resourceVersion"])
            if len(self.patched) == 1:
                raise ConflictError('scheduledjob "nightly" changed meanwhile')

    jobs = Jobs()
    monkeypatch.setattr(commands, "connect", lambda _args: jobs)
    flags = ["--from", "2026-11-20T00:00:00Z", "--to", "2026-11-22T00:00:00Z", "--name", "redo"]
    assert main(["backfill", "nightly", *flags]) == 0
    assert jobs.patched == ["8", "9"]
    assert "backfill redo: 2 run(s)" in capsys.readouterr().out
