"""The demo's working directory, emptied for each run."""

from __future__ import annotations

import shutil
from pathlib import Path

from tickwork_dev.devcluster.errors import StartError


def fresh_workdir(workdir: Path) -> None:
    """Empty ``workdir`` for this run. What an earlier run left and cannot be removed
    (a mount of a node that was killed, a file of another user) is named in one line
    that says what to do."""
    shutil.rmtree(workdir, ignore_errors=True)
    if workdir.exists():
        raise StartError(
            f"{workdir} is left from an earlier demo and cannot be removed: stop what "
            "still uses it (tickwork-devcluster down) or remove it, then run the demo again"
        )
    workdir.mkdir(parents=True)
