"""kubectl's flags go anywhere on the line, as users of kubectl plugins expect."""

from __future__ import annotations

import importlib.metadata

import pytest

from tickwork.cli import main, parser

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
    args = parser().parse_args(["dlq", "requeue", "--all", "--kubeconfig", "/k", "--context",
                                "c", "--redis-url", "redis://r"])  # fmt: skip
    assert (args.kubeconfig, args.context, args.redis_url) == ("/k", "c", "redis://r")


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"tickwork {importlib.metadata.version('tickwork')}"
