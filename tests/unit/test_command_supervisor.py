"""A command's supervisor (issue 46, item 3): nothing a command starts outlives it,
its status is the program's, and a confined command writes in its own directory
only. Real processes (no cluster): the supervisor as the runner starts it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import sleeping, unique_sleep
from tickwork_worker.command_runner import SUPERVISOR, answered, refusal
from tickwork_worker.command_supervisor import REQUIRED_ABI, landlock_abi

pytestmark = pytest.mark.timeout(30)


def supervise(script: str, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", SUPERVISOR, *options, "--", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={"PATH": os.environ["PATH"]},  # as the worker sends it: no HOME, no TMPDIR
    )


def test_the_programs_exit_status_and_output_are_the_supervisors() -> None:
    process = supervise("echo out; echo err >&2; exit 3")
    assert process.communicate(timeout=10) == ("out\nerr\n", None)
    assert process.returncode == 3


def test_a_program_killed_by_a_signal_ends_its_supervisor_with_the_same_signal() -> None:
    process = supervise("kill -TERM $$")
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGTERM


def test_nothing_the_program_started_outlives_it_not_even_in_a_session_of_its_own() -> None:
    sleep, other = unique_sleep(), unique_sleep()
    process = supervise(
        f"setsid {sleep} </dev/null >/dev/null 2>&1 & "
        f"({other} </dev/null >/dev/null 2>&1 &); echo left"
    )
    assert process.communicate(timeout=10)[0] == "left\n"
    assert process.returncode == 0
    assert sleeping(sleep) == []  # gone by the time the supervisor has exited
    assert sleeping(other) == []


def test_sigterm_reaches_what_left_the_group_and_sigusr1_kills_all_at_once(
    tmp_path: Path,
) -> None:
    """The program traps TERM and goes on, as does what it started in a session of its
    own: both get the SIGTERM (a cancel's grace); SIGUSR1 then ends them all."""
    marker, sleep = tmp_path / "term", unique_sleep()
    stubborn = f"trap 'echo term >> {marker}' TERM; while :; do {sleep}; done"
    left = f'setsid sh -c "{stubborn}" </dev/null >/dev/null 2>&1'
    script = f"{left} & trap : TERM; while :; do {sleep}; done"
    process = supervise(script)
    _wait(lambda: len(sleeping(sleep)) == 2)
    process.send_signal(signal.SIGTERM)  # the runner's grace: to everything below
    _wait(marker.exists)  # the trap of the one that left the group ran
    assert process.poll() is None
    process.send_signal(signal.SIGUSR1)  # after the grace: SIGKILL to all of it
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    assert sleeping(sleep) == []


def test_a_program_that_cannot_start_is_126_with_the_reason() -> None:
    process = subprocess.run(
        [sys.executable, "-I", "-S", SUPERVISOR, "--", "/nonexistent"],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert process.returncode == 126
    assert "cannot start '/nonexistent'" in process.stderr


def test_a_confined_program_writes_in_its_own_directory_only(tmp_path: Path) -> None:
    assert landlock_abi() >= REQUIRED_ABI  # this machine's kernel, as CI's: no skip
    outside = tmp_path / "outside"
    process = supervise(
        (
            f'echo x > "$TMPDIR/mine" && cat "$TMPDIR/mine" && echo "$HOME"; '
            f"echo y > {outside}; ls {tmp_path}"
        ),
        "--confine",
    )
    output = process.communicate(timeout=10)[0]
    lines = output.splitlines()
    assert lines[0] == "x", output
    own = Path(lines[1])
    assert own.name.startswith("command-")
    assert f"cannot create {outside}: Permission denied" in output
    assert f"cannot open directory '{tmp_path}': Permission denied" in output
    assert not outside.exists()
    assert not own.exists()  # removed when the program ended


def test_commands_lacking_needed_isolation_are_refused_unless_the_installer_accepts_less() -> None:
    assert refusal("required", REQUIRED_ABI) == ""
    assert refusal("bestEffort", 0) == ""
    weaker = refusal("required", REQUIRED_ABI - 1)
    assert f"offers Landlock ABI {REQUIRED_ABI - 1}" in weaker
    assert "worker.commandTasks.isolation=bestEffort" in weaker
    assert "offers no Landlock" in refusal("required", 0)


def test_the_runner_answers_its_worker_or_any_user_but_its_own() -> None:
    assert answered(10001, worker_uid=10001)
    assert not answered(10002, worker_uid=10001)
    assert not answered(os.getuid(), worker_uid=None)
    assert answered(os.getuid() + 1, worker_uid=None)


def _wait(condition: Callable[[], object]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
