"""The test harness ends a Tickwork process as a container's end would: with every
process it started, also the commands a worker runs in sessions of their own (one
left behind once spun a core for an hour and starved a CI run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support import alive
from tickwork_dev.devcluster import process
from tickwork_dev.devcluster.components import wait_for

pytestmark = pytest.mark.unit

#: A parent that starts a child in a new session (as the worker starts a command),
#: which starts a grandchild, then writes both PIDs and waits.
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen(["sh", "-c", "sleep 300 & echo $! > " + sys.argv[1] + ".grand; wait"],
                         start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(300)
"""


@pytest.mark.parametrize("tree", [True, False])
def test_killing_a_process_tree_ends_the_sessions_it_started(tmp_path: Path, tree: bool) -> None:
    pids = tmp_path / "pids"
    proc = process.spawn([sys.executable, "-c", PARENT, str(pids)], log_path=tmp_path / "log")
    grand = Path(f"{pids}.grand")
    wait_for(
        lambda: pids.exists() and grand.exists() and grand.read_text().strip(),
        timeout=10,
        what="the command started",
    )
    child, grandchild = int(pids.read_text()), int(grand.read_text())
    assert set(process.descendants(proc.pid)) >= {child, grandchild}
    try:
        process.kill(proc, tree=tree)
        if tree:
            wait_for(
                lambda: not alive(child) and not alive(grandchild),
                timeout=5,
                what="the command's session killed",
            )
        else:  # the plain kill reaches the process group only, as before
            assert alive(child)
            assert alive(grandchild)
    finally:
        for pid in (child, grandchild):
            if alive(pid):
                os.kill(pid, 9)
    assert proc.returncode is not None
    assert os.getpgid(0) != child  # our own group was never a target
