"""Keep a study's finished runs as docs/results keeps them: config, metrics, final result and absolute metric.

For each run directory under STUDY that has finished (``final.json``), computes its absolute metric when it has
none yet (its best checkpoint on 10x the test episodes, ``semzoo.absolute_metric``), then copies
``config.json``, ``metrics.csv``, ``final.json`` and ``absolute.json`` into DEST/<run name>/. Checkpoints,
TensorBoard events and the replay buffer stay behind (gigabytes); what is kept is what ``semzoo report``,
``semzoo table`` and ``semzoo plot`` read, so the study's tables and figures can be derived again from DEST.
Unfinished runs are listed and left alone.

    python scripts/keep_runs.py /work/study/smax-2s3z-grid docs/results/smax-2s3z-grid
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
from pathlib import Path

from semzoo import absolute_metric
from semzoo.run.rundir import ABSOLUTE_FILE, CONFIG_FILE, FINAL_FILE, METRICS_FILE, run_finished

KEPT = (CONFIG_FILE, METRICS_FILE, FINAL_FILE, ABSOLUTE_FILE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="folder of run directories (a sweep's --out)")
    parser.add_argument("dest", type=Path, help="where to keep them (e.g. docs/results/<study>)")
    parser.add_argument("--device", default="cpu", help="device of the absolute metric's evaluation")
    args = parser.parse_args()
    if not args.study.is_dir():
        parser.error(f"study folder {str(args.study)!r} does not exist; give a sweep's --out folder")
    runs = sorted(p.parent for p in args.study.glob(f"*/{CONFIG_FILE}"))
    if not runs:
        parser.error(f"no run directories under {args.study} (none holds {CONFIG_FILE})")
    for run in runs:
        if not run_finished(run):
            print(f"{run.name}: not finished, left alone")
            continue
        if not (run / ABSOLUTE_FILE).exists():
            record = absolute_metric(run, device=args.device)
            print(f"{run.name}: absolute metric {record['test_win_rate']:.3f} win rate over {record['episodes']} "
                  f"episodes (agent of {record['step']:,} env steps)")
        target = args.dest / run.name
        target.mkdir(parents=True, exist_ok=True)
        copied = [name for name in KEPT
                  if not (target / name).exists() or not filecmp.cmp(run / name, target / name, shallow=False)]
        for name in copied:
            shutil.copy2(run / name, target / name)
        print(f"{run.name}: {'kept ' + ', '.join(copied) if copied else 'already kept'} in {target}")


if __name__ == "__main__":
    main()
