"""Run every benchmark and write its JSON (and plots) to benchmarks/results/.

python benchmarks/run.py            # what `make bench` runs
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

BENCHMARKS = [
    ["core.py", "--out", str(RESULTS / "core.json"), "--plot", str(RESULTS / "core_ticks.png")],
    ["shards.py", "--out", str(RESULTS / "shards.json"), "--plot", str(RESULTS / "shards.png")],
    ["cron_libraries.py", "--out", str(RESULTS / "cron_libraries.json")],
    [
        "runqueue.py",
        "--out",
        str(RESULTS / "runqueue.json"),
        "--plot",
        str(RESULTS / "runqueue.png"),
    ],
]


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    for script, *args in BENCHMARKS:
        print(f"== {script}", flush=True)
        result = subprocess.run(
            [sys.executable, str(HERE / script), *args],
            stdout=subprocess.DEVNULL,
            check=False,
        )
        if result.returncode != 0:
            print(f"{script} failed with exit code {result.returncode}", file=sys.stderr)
            return result.returncode
    print(f"results in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
