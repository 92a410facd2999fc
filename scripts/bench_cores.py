"""How a study gets the most env steps per hour out of the machine's cores: which way to lay runs out.

Launches short `semzoo train` runs of one config as separate processes, one layout after another, and
prints each layout's steady env steps/s summed over its runs (construction, JIT compilation and the
first `--warmup` env steps left out: the rate is read from each run's metrics.csv between the first row
at or past the warm-up and its last row) and the peak resident memory of its largest process (from the
runs' final.json). Layouts:

  sequential x1     one run, collect then learn (`--sequential`)
  sequential x2     two such runs side by side (seeds 0 and 1)
  overlapped x1     one run with acting in an actor process (the default loop)
  overlapped x2     two such runs side by side (four processes)
  group of 2        seeds 0 and 1 trained together in one process (`--seeds 0-1`, sequential)
  group of 2 x2     two such groups side by side (seeds 0-1 and 2-3)

Ratios are against "sequential x2", what `scripts/reproduce.py --num-cpus 1 --set sequential=true` does on
two cores. Other jobs on the machine slow every layout: run it on an idle machine, or beside niced jobs
(`nice -n 19`), which a process at the default priority pre-empts almost entirely.

    python scripts/bench_cores.py [--env smax:2s3z] [--algo qmix] [--steps 15000] [--warmup 5000]
                                  [--layouts "sequential x2,overlapped x2"]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYOUTS: dict[str, list[list[str]]] = {
    # each layout: one argument list per process (the seed arguments; the loop flag is added below)
    "sequential x1": [["--seed", "0", "--sequential"]],
    "sequential x2": [["--seed", "0", "--sequential"], ["--seed", "1", "--sequential"]],
    "overlapped x1": [["--seed", "0"]],
    "overlapped x2": [["--seed", "0"], ["--seed", "1"]],
    "group of 2": [["--seeds", "0-1"]],
    "group of 2 x2": [["--seeds", "0-1"], ["--seeds", "2-3"]],
}
BASELINE = "sequential x2"


def steady_rate(metrics_csv: Path, warmup: int) -> tuple[float, int]:
    """(env steps/s, env steps measured) between the first metrics row at or past `warmup` and the last row."""
    points: dict[int, float] = {}
    with metrics_csv.open() as handle:
        for row in csv.DictReader(handle):
            points.setdefault(int(row["env_steps"]), float(row["wall_time"]))
    steps = sorted(s for s in points if s >= warmup)
    if len(steps) < 2:
        raise SystemExit(f"{metrics_csv}: fewer than two metric rows past {warmup} env steps; raise --steps")
    first, last = steps[0], steps[-1]
    return (last - first) / (points[last] - points[first]), last - first


def peak_rss_gb(run_dir: Path) -> float:
    """The run's peak resident memory from its final.json (a group's runs share one process: each reports it)."""
    return float(json.loads((run_dir / "final.json").read_text()).get("peak_rss_bytes", 0)) / 1e9


def run_layout(name: str, args: argparse.Namespace, root: Path) -> tuple[float, float, int, float]:
    """Start the layout's processes together, wait for them; (env steps/s summed, wall s, runs, peak RSS GB of one)."""
    out = root / name.replace(" ", "_")
    base = [sys.executable, "-c", "from semzoo.cli import main; main()", "train", "--env", args.env,
            "--algo", args.algo, "--steps", str(args.steps), "--threads", "1", "--log-interval", "1000",
            "--test-interval", str(10 * args.steps), "--save-interval", "0", "--out", str(out)]
    start = time.perf_counter()
    procs = [subprocess.Popen(base + extra, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for extra in LAYOUTS[name]]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"layout {name!r}: a run failed (exit {proc.returncode}):\n{err[-2000:]}")
    wall = time.perf_counter() - start
    paths = sorted(out.glob("*/metrics.csv"))
    rates = [steady_rate(path, args.warmup)[0] for path in paths]
    return sum(rates), wall, len(rates), max(peak_rss_gb(path.parent) for path in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="smax:2s3z")
    parser.add_argument("--algo", default="qmix")
    parser.add_argument("--steps", type=int, default=15_000, help="env steps per run")
    parser.add_argument("--warmup", type=int, default=5_000, help="env steps left out of each run's rate")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, of: {', '.join(LAYOUTS)}")
    args = parser.parse_args()
    names = [n.strip() for n in args.layouts.split(",") if n.strip()]
    names.sort(key=lambda n: n != BASELINE)  # the baseline first, so every later row has its ratio
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown:
        parser.error(f"--layouts {unknown[0]!r} is not a layout; expected some of: {', '.join(LAYOUTS)}")
    if args.warmup >= args.steps:
        parser.error(f"--warmup {args.warmup} must be below --steps {args.steps}")
    print(f"{args.algo} on {args.env}, {args.steps:,} env steps per run, rate from {args.warmup:,} on; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print(f"{'layout':16s} {'processes':>9s} {'runs':>5s} {'env steps/s':>12s} {'wall s':>8s} {'peak RSS GB':>12s} "
          f"{'vs ' + BASELINE:>18s}")
    root = Path(tempfile.mkdtemp(prefix="bench_cores_"))
    results: dict[str, float] = {}
    try:
        for name in names:
            rate, wall, runs, rss = run_layout(name, args, root)
            results[name] = rate
            ratio = f"{rate / results[BASELINE]:.2f}x" if BASELINE in results else "-"
            n_procs = len(LAYOUTS[name]) * (1 if "sequential" in name or "group" in name else 2)
            print(f"{name:16s} {n_procs:9d} {runs:5d} {rate:12.1f} {wall:8.0f} {rss:12.2f} {ratio:>18s}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if BASELINE in results:
        best = max(results, key=results.__getitem__)
        print(f"most env steps per hour: {best} ({results[best] * 3600 / 1e6:.2f}M/h, "
              f"{results[best] / results[BASELINE]:.2f}x {BASELINE}); load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
