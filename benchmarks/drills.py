"""Resilience drills at full scale; JSON results in benchmarks/results/drills.json.

    python benchmarks/drills.py [--only worker-kills redis-restart ...] [--scale 1.0]

worker-kills: 100 SIGKILLs of workers during 1,000 runs; redis-restart: Redis
killed and restarted from its AOF mid-stream; leader-kill: the leading
operator killed; apiserver-restart: kube-apiserver restarted, etcd kept;
apiserver-outage: kube-apiserver away for 25 s while runs end. Each reports runs
lost (the goal: 0), duplicate executions, executions beyond the run's attempts
(the goal: 0) and recovery time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tickwork_dev.devcluster import drills
from tickwork_dev.devcluster.measure import save_report

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="+", choices=sorted(drills.DRILLS))
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the runs and kills")
    parser.add_argument("--out", type=Path, default=RESULTS / "drills.json")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    for name in args.only or list(drills.DRILLS):
        kwargs: dict[str, Any] = {}
        if name == "worker-kills":
            kwargs = {"runs": int(1000 * args.scale), "kills": max(1, int(100 * args.scale))}
        elif args.scale != 1.0:
            kwargs = {"runs": max(10, int(200 * args.scale))}
        with tempfile.TemporaryDirectory(prefix=f"drill-{name}-") as workdir:
            result = drills.DRILLS[name](Path(workdir), **kwargs)
        print(json.dumps(result.to_json()), flush=True)
        results.append(result.to_json())
    save_report({"benchmark": "drills", "results": results}, args.out, args)
    return 0 if all(r["lost"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
