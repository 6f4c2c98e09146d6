"""`make demo` stops cleanly whichever way it is stopped (issue 47): SIGTERM and
SIGHUP — `timeout`, CI, a closed terminal — go through the clean-up Ctrl-C runs,
and a leftover of an earlier run that cannot be removed is named in one line."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.components import console_script, wait_for

pytestmark = pytest.mark.timeout(180)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_demo_through_its_clean_up(
    tmp_path: Path, signum: signal.Signals
) -> None:
    log = tmp_path / "demo.out"
    with log.open("w") as out:
        demo = subprocess.Popen(
            [
                console_script("tickwork-demo"),
                "--queue",
                "redis",
                "--workdir",
                str(tmp_path / "demo"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: "kubectl get scheduledjobs" in log.read_text() or demo.poll() is not None,
            timeout=120,
            interval=0.2,
            what="the demo's first table",
        )
        assert demo.poll() is None, log.read_text()
        started = process.descendants(demo.pid)  # control plane, Redis, operator, worker
        assert len(started) >= 4, started
        demo.send_signal(signum)
        assert demo.wait(timeout=60) == 0, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    printed = log.read_text()
    # The watch loop's own way out, not the signal's default action (which would
    # leave the exit status -15 / -1 and print nothing).
    assert "Stopping ..." in printed, printed
    assert not [pid for pid in started if _alive(pid)], printed


def test_what_an_earlier_demo_left_and_cannot_be_removed_is_named_in_one_line(
    tmp_path: Path,
) -> None:
    """Needs root (a mount), as the node's tests do."""
    workdir = tmp_path / "demo"
    mount = workdir / "node" / "left"  # as a killed node leaves its mounts
    mount.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mount)], check=True)
    try:
        result = subprocess.run(
            [console_script("tickwork-demo"), "--queue", "memory", "--workdir", str(workdir)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    [line] = [text for text in result.stdout.splitlines() if text.startswith("error:")]
    assert str(workdir) in line
    assert "tickwork-devcluster down" in line
