"""Keep a study's finished runs as docs/results keeps them: config, metrics, final result and absolute metric.

For each run directory under STUDY that has finished (``final.json``), computes its absolute metric when it has
none yet (its best checkpoint on 10x the test episodes, ``semzoo.absolute_metric``), then copies
``config.json``, ``metrics.csv``, ``final.json``, ``absolute.json`` and ``provenance.json`` (the code and machine
that made it; a run made before semzoo kept one has none) into DEST/<run name>/. Checkpoints,
TensorBoard events and the replay buffer stay behind (gigabytes); what is kept is what ``semzoo report``,
``semzoo table`` and ``semzoo plot`` read, so the study's tables and figures can be derived again from DEST.
Unfinished runs are listed and left alone. Each kept run gets a summary line, the figures a results page
tabulates per run: the metric at each ``--at`` step, the absolute metric and the run's wall time.

    python scripts/keep_runs.py /work/study/smax-2s3z-grid docs/results/smax-2s3z-grid
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
from pathlib import Path

import torch

from semzoo import absolute_metric
from semzoo.analysis.report import load_run, resolve_metric
from semzoo.analysis.statistics import read_absolute
from semzoo.run.rundir import run_finished
from semzoo.runfiles import ABSOLUTE_FILE, CONFIG_FILE, FINAL_FILE, METRICS_FILE, PROVENANCE_FILE

KEPT = (CONFIG_FILE, METRICS_FILE, FINAL_FILE, ABSOLUTE_FILE, PROVENANCE_FILE)


def _steps(step: int) -> str:
    """250000 -> '250k', 500226 -> '500k' (a checkpoint's step, to the thousand); below 10,000 as it is."""
    return f"{step / 1000:.0f}k" if step >= 10_000 else f"{step:,}"


def summary(run: Path, at: list[int]) -> str:
    """'test_win_rate 0.72 at 250k, 0.91 at 500k; test_return_mean 1.68 at 250k, 1.90 at 500k; absolute 0.87
    (agent of 500k); 79 min' for a finished run."""
    series = load_run(run)
    metric = resolve_metric([series], None)
    shown = dict.fromkeys(name for name in (metric, "test_return_mean") if name in series.metrics)
    scores = "; ".join(f"{name} " + ", ".join(f"{series.value_at(name, step):.2f} at {_steps(step)}" for step in at)
                       for name in shown)
    record = read_absolute(run)
    absolute = "" if record is None else f"; absolute {record[metric]:.2f} (agent of {_steps(record['step'])})"
    minutes = json.loads((run / FINAL_FILE).read_text())["wall_time"] / 60
    return f"{scores}{absolute}; {minutes:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="folder of run directories (a sweep's --out)")
    parser.add_argument("dest", type=Path, help="where to keep them (e.g. docs/results/<study>)")
    parser.add_argument("--device", default="cpu", help="device of the absolute metric's evaluation")
    parser.add_argument("--at", default="250000,500000", help="env steps of the summary lines (comma-separated)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the absolute metric's evaluation (default 1: its small batches gain "
                             "little from more, and on a machine busy with training runs more threads fight them)")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads {args.threads}: expected a positive number of threads, e.g. 1")
    torch.set_num_threads(args.threads)
    if not args.study.is_dir():
        parser.error(f"study folder {str(args.study)!r} does not exist; give a sweep's --out folder")
    try:
        at = [int(step) for step in args.at.split(",")]
    except ValueError:
        parser.error(f"--at {args.at!r}: expected comma-separated env-step counts, e.g. 250000,500000")
    runs = sorted(p.parent for p in args.study.glob(f"*/{CONFIG_FILE}"))
    if not runs:
        parser.error(f"no run directories under {args.study} (none holds {CONFIG_FILE})")
    for run in runs:
        if not run_finished(run):
            print(f"{run.name}: not finished, left alone")
            continue
        if not (run / ABSOLUTE_FILE).exists():
            record = absolute_metric(run, device=args.device)
            print(f"{run.name}: absolute metric computed over {record['episodes']} episodes (agent of "
                  f"{record['step']:,} env steps)")
        target = args.dest / run.name
        target.mkdir(parents=True, exist_ok=True)
        copied = [name for name in KEPT if (run / name).exists()
                  and (not (target / name).exists() or not filecmp.cmp(run / name, target / name, shallow=False))]
        for name in copied:
            shutil.copy2(run / name, target / name)
        print(f"{run.name}: {'kept ' + ', '.join(copied) if copied else 'already kept'} in {target}")
        print(f"  {summary(target, at)}")


if __name__ == "__main__":
    main()
