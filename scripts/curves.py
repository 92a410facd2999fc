"""Print each run's evaluation curve in numbers: the metric at given steps, its mean over the curve, its best and the
first evaluation that reached a level, so a results page quotes a running or kept study without retyping a log.

    python scripts/curves.py runs/smac --upto 250000 --at 150000,250000
    python scripts/curves.py docs/results/smax-2s3z-paper-runtime --upto 250000 --metric test_win_rate

A run directory is any folder under FOLDER with a metrics.csv; runs still training are read as far as they got.
"At a step" is the last evaluation at or before it (evaluations land a few steps past each interval).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from semzoo.runfiles import METRICS_FILE, read_metrics

SLACK = 5_000
"""An evaluation logged up to this many env steps past a step counts as the one at that step."""


def curve(run: Path, metric: str, upto: int) -> list[tuple[int, float]]:
    """(env steps, value) of ``metric`` up to ``upto`` (+ ``SLACK``) env steps."""
    return [(row["env_steps"], row["value"]) for row in read_metrics(run)
            if row["name"] == metric and row["env_steps"] <= upto + SLACK]


def at(points: list[tuple[int, float]], step: int) -> float | None:
    """The value of the last evaluation at or before ``step`` (+ ``SLACK``), None if the run has none yet."""
    before = [value for steps, value in points if steps <= step + SLACK]
    return before[-1] if before and points[-1][0] + SLACK >= step else None


def summary(run: Path, metric: str, upto: int, steps: list[int], level: float) -> str:
    points = curve(run, metric, upto)
    if not points:
        return f"| {run.name} | no {metric} yet |"
    values = [value for _, value in points]
    first = next((s for s, v in points if v >= level), None)
    cells = [f"{v:.2f}" if (v := at(points, s)) is not None else "-" for s in steps]
    return (f"| {run.name} | {points[-1][0]:,} | " + " | ".join(cells) + f" | {statistics.mean(values):.2f} | "
            f"{max(values):.2f} | {'never' if first is None else f'{first / 1000:.0f}k'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--upto", type=int, default=500_000, help="Read each curve up to this many env steps.")
    parser.add_argument("--at", default="250000,500000", help="Comma-separated env steps to print the metric at.")
    parser.add_argument("--metric", default="test_win_rate")
    parser.add_argument("--level", type=float, default=0.9, help="Print the first evaluation at or above this.")
    args = parser.parse_args()
    try:
        steps = [int(s) for s in args.at.split(",")]
    except ValueError:
        parser.error(f"--at {args.at!r}: expected comma-separated env steps, e.g. 150000,250000")
    runs = sorted(path.parent for path in args.folder.rglob(METRICS_FILE))
    if not runs:
        parser.error(f"{args.folder}: no run directory (a folder with {METRICS_FILE}) under it")
    header = " | ".join(f"at {s / 1000:.0f}k" for s in steps)
    print(f"| run | env steps read | {header} | curve mean | best | first >= {args.level} |")
    print("|---|---|" + "---|" * len(steps) + "---|---|---|")
    for run in runs:
        print(summary(run, args.metric, args.upto, steps, args.level))


if __name__ == "__main__":
    main()
