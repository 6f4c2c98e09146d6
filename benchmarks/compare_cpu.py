"""Two trees' `make bench-cpu` runs side by side: runs started, writes and CPU per run.

python benchmarks/compare_cpu.py --before B.json --after A.json [--before ... --after ...] \\
    --out benchmarks/results/X.json

Each ``--before``/``--after`` pair is one ``benchmarks/cronjob.py --tickwork-only``
report of each tree at the same N, run one after the other on the same machine.
When the machine is saturated (runs due in the window that had not started by its
end), CPU per scheduled run is only the machine's capacity divided by the schedule,
and the window's CPU also went to the backlog of earlier minutes: a cheaper run then
shows as more runs started and fewer writes per run, not as less CPU. CPU per run
compares only where neither side is saturated.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tickwork_dev.devcluster.measure import save_figure, save_report

_BYSTANDERS = ("kube-controller-manager", "kube-scheduler")


def side(report: dict[str, Any]) -> dict[str, Any]:
    """One tree's figures at one N."""
    [row] = report["results"]
    tickwork = row["tickwork"]
    expected, started = tickwork["expected_runs"], tickwork["runs"]
    cpu_ms = sum(ms for name, ms in tickwork["cpu_ms_per_run"].items() if name not in _BYSTANDERS)
    settings = (
        "minutes_measured",
        "warmup_minutes",
        "worker_job_cache",
        "history",
        "schedule_in_status",
    )
    return {
        "n": row["n"],
        "commit": report.get("commit"),
        "settings": {
            **{key: report.get(key) for key in settings},
            "env": (report.get("settings") or {}).get("env") or [],
        },
        "expected_runs": expected,
        "runs_started": started,
        "api_writes_per_run": tickwork["api_writes_per_run"],
        "scheduledjob_reads_per_run": tickwork.get("scheduledjob_reads_per_run"),
        "lag_p50_seconds": tickwork["lag_p50_lower_bound_seconds"],
        "lag_p99_seconds": tickwork["lag_p99_lower_bound_seconds"],
        "saturated": started < 0.99 * expected,
        "cpu_ms_per_scheduled_run": round(cpu_ms, 2),
        "cpu_ms_per_scheduled_run_by_process": tickwork["cpu_ms_per_run"],
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    a, b = side(after), side(before)
    if a["n"] != b["n"]:
        raise SystemExit(f"different N: {b['n']} before, {a['n']} after")
    keys = ["runs_started", "api_writes_per_run", "lag_p99_seconds"]
    if not (a["saturated"] or b["saturated"]):
        keys.append("cpu_ms_per_scheduled_run")
    ratios = {key: round(a[key] / b[key], 2) for key in keys if a[key] and b[key]}
    return {"n": a["n"], "before": b, "after": a, "after_over_before": ratios}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - optional

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    panels = [
        ("runs_started", "runs started of those due"),
        ("api_writes_per_run", "API writes per started run"),
        ("cpu_ms_per_scheduled_run", "CPU ms per run, all processes\n(hatched: saturated)"),
        ("lag_p99_seconds", "p99 schedule lag, s"),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(16, 4))
    labels = [f"N = {row['n']:,}" for row in rows]
    width = 0.38
    for axis, (key, title) in zip(axes, panels, strict=True):
        for offset, which in ((-width / 2, "before"), (width / 2, "after")):
            values = [row[which][key] or 0 for row in rows]
            bars = axis.bar([i + offset for i in range(len(rows))], values, width, label=which)
            for bar, row in zip(bars, rows, strict=True):
                if key.startswith("cpu") and row[which]["saturated"]:
                    bar.set_hatch("//")
        if key == "runs_started":
            for index, row in enumerate(rows):
                due = row["after"]["expected_runs"]
                axis.hlines(
                    due,
                    index - width,
                    index + width,
                    colors="black",
                    linestyles="--",
                    label=None if index else "due",
                )
        axis.set_xticks(range(len(rows)), labels)
        axis.set_title(title, fontsize=10)
        axis.grid(visible=True, axis="y", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle("Tickwork at N schedules a minute, every history full, two sides in turn")
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, action="append", required=True)
    parser.add_argument("--after", type=Path, action="append", required=True)
    parser.add_argument("--label", default="", help="what changed between the two trees")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--before-commit", default=None, help="the before tree's commit, if its report does not say"
    )
    args = parser.parse_args(argv)
    if len(args.before) != len(args.after):
        parser.error("give one --after for each --before")
    rows = [
        compare(json.loads(b.read_text()), json.loads(a.read_text()))
        for b, a in zip(args.before, args.after, strict=True)
    ]
    for row in rows:
        row["before"]["commit"] = row["before"]["commit"] or args.before_commit
    report = {"benchmark": "compare_cpu", "change": args.label, "results": rows}
    save_report(report, args.out, args)
    plot(rows, args.out.with_suffix(".png"))
    print(json.dumps(report["results"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
