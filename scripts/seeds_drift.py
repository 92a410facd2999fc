"""How far does a run of a `--seeds` group drift from the single `--seed N --sequential` run of its seed?

    python scripts/seeds_drift.py                                   # matrix:two_step, qmix, 1600 steps, seed 2 of 0-3
    python scripts/seeds_drift.py --env matrix:climbing --algo sem-qmix --steps 3000 --seed 1

Trains the group and the single run with the CLI into a temporary folder, logging a metric row every
iteration, then prints for the chosen seed, per logged step, the largest relative difference over the
learning metrics (timings left out) and the first step at which it passes 1e-6, 1e-3 and 1e-2.
docs/seeds.md ("Many runs in one process", Exactness) quotes its output.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

TIMING_METRICS = {"steps_per_s", "time_collect_s", "time_learn_s", "test_time_s"}
THRESHOLDS = (1e-6, 1e-3, 1e-2)
EPS = 1e-12


def train(out: Path, extra: list[str], args: argparse.Namespace) -> None:
    command = [sys.executable, "-m", "semzoo.cli", "train", "--env", args.env, "--algo", args.algo,
               "--steps", str(args.steps), "--log-interval", str(args.log_interval), "--save-interval", "0",
               "--out", str(out), *extra]
    subprocess.run(command, check=True, capture_output=True, text=True)


def rows(run_dir: Path) -> dict[tuple[int, str], float]:
    """(env_steps, metric) -> value of a run's metrics.csv, timings left out."""
    with open(run_dir / "metrics.csv", newline="") as f:
        return {(int(r["env_steps"]), r["name"]): float(r["value"])
                for r in csv.DictReader(f) if r["name"] not in TIMING_METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="matrix:two_step")
    parser.add_argument("--algo", default="qmix")
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--log-interval", type=int, default=16, help="env steps between rows (one iteration: 8 envs x 2)")
    parser.add_argument("--group", default="0-3", help="the --seeds group")
    parser.add_argument("--seed", type=int, default=2, help="the seed compared (one of the group)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        train(Path(tmp, "group"), ["--seeds", args.group], args)
        train(Path(tmp, "single"), ["--seed", str(args.seed), "--sequential"], args)
        name = f"{args.env.replace(':', '_')}_{args.algo}_seed{args.seed}"
        group, single = rows(Path(tmp, "group", name)), rows(Path(tmp, "single", name))
    if set(group) != set(single):
        raise SystemExit(f"the runs logged different rows: {sorted(set(group) ^ set(single))[:5]} ...")
    worst: dict[int, tuple[float, str]] = defaultdict(lambda: (0.0, ""))
    for (step, metric), value in group.items():
        other = single[step, metric]
        rel = abs(value - other) / max(abs(value), abs(other), EPS)
        worst[step] = max(worst[step], (rel, metric))
    print(f"{args.env} {args.algo}: seed {args.seed} of --seeds {args.group} against --seed {args.seed} --sequential")
    print("env_steps  max relative difference  (metric)")
    for step in sorted(worst):
        rel, metric = worst[step]
        print(f"{step:9d}  {rel:.2e}  ({metric})")
    for threshold in THRESHOLDS:
        first = next((step for step in sorted(worst) if worst[step][0] > threshold), None)
        print(f"first step above {threshold:g}: {first}")


if __name__ == "__main__":
    main()
