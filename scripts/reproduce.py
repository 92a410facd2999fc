"""Reproduce the paper's SMAC experiments on the maps semzoo runs without StarCraft II (SMAX).

Protocol (paper section 6): VDN and QMIX, each with and without SEM, on 2s3z, 3s5z and
27m_vs_30m; several seeds; greedy test win rate every 10k env steps over 32 episodes. The
script runs the grid with `semzoo.run.sweep` (embedded local Ray, or a cluster with --address),
then writes the curves (`semzoo.analysis.report`) and the score table at the requested steps.

Small version (2 cores, minutes):
    python scripts/reproduce.py --maps 2s3z --algos qmix,sem-qmix --seeds 2 --steps 20000 \
        --set test_interval=5000 --set test_episodes=16 --out runs/reproduce-small
Full version (a cluster; the paper uses 2M steps and 5 seeds per map):
    python scripts/reproduce.py --steps 2000000 --seeds 5 --address auto --out /shared/runs/reproduce

Running the same command again continues an interrupted sweep: finished runs are skipped. Runs go
seed-major (every cell's seed 0, then seed 1, ...), so a study cut short has balanced cells. At the
end the script writes the curves, the paper's table and, with the semzoo[report] extra, the
evaluation protocol's report (`semzoo report`: IQM with CIs, probability of improvement, profiles).
The lambda sweep (paper's sensitivity figure) adds an axis; lambda 0.1's runs are the main grid's:
    python scripts/reproduce.py --maps 2s3z --algos qmix,sem-qmix --grid memory.lam=0,0.05,0.1,0.3,0.5,1 ...
--pack-seeds trains each (map, algo)'s seeds together in one Ray trial (one process, the sequential
loop; `semzoo sweep --pack-seeds`), in the same run directories.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from semzoo.analysis.report import load_runs, plot_runs, score_table, table_markdown, write_table_csv
from semzoo.run.stopping import signal_exit_code
from semzoo.run.sweep import pack_seeds, parse_grid, plan_trials, run_sweep

PAPER_MAPS = ("2s3z", "3s5z", "27m_vs_30m")
PAPER_ALGOS = ("vdn", "sem-vdn", "qmix", "sem-qmix")
TABLE_STEPS = (250_000, 500_000)
METRIC = "test_win_rate"


def parse_overrides(items: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE, e.g. --set test_interval=5000")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def table_steps(requested: str | None, steps: int) -> list[int]:
    """The requested steps, or the paper's 250k/500k that the run reaches, or half and all of the run."""
    if requested:
        return [int(s) for s in requested.split(",")]
    reached = [s for s in TABLE_STEPS if s <= steps]
    return reached or [steps // 2, steps]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maps", default=",".join(PAPER_MAPS), help="comma-separated SMAX maps")
    parser.add_argument("--algos", default=",".join(PAPER_ALGOS), help="comma-separated algorithm ids")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per (map, algo)")
    parser.add_argument("--steps", type=int, default=500_000, help="env steps per run")
    parser.add_argument("--out", default="runs/reproduce", help="folder of the run directories")
    parser.add_argument("--address", default=None, help="Ray cluster address; default: a local Ray")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0)
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--pack-seeds", action="store_true",
                        help="train each (map, algo)'s seeds together in one Ray trial (one process)")
    parser.add_argument("--at", default=None, help="comma-separated steps of the score table")
    parser.add_argument("--grid", action="append", default=[],
                        help="config axis KEY=V1,V2,... (the lambda sweep: memory.lam=0,0.05,0.1,0.3,0.5,1); "
                             "memory axes skip algorithms without memory; repeatable")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="config override KEY=VALUE (JSON), e.g. learner.batch_size=16; repeatable")
    args = parser.parse_args(argv)

    envs = [f"smax:{m.strip()}" for m in args.maps.split(",") if m.strip()]
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    try:
        grid = parse_grid(args.grid)
    except ValueError as err:
        parser.error(str(err))
    trials = plan_trials(envs=envs, algos=algos, seeds=range(args.seeds), steps=args.steps, out=args.out,
                         overrides=parse_overrides(args.overrides), grid=grid)
    cells = len(trials) // args.seeds
    print(f"{len(trials)} runs: {cells} cells ({len(envs)} maps x {len(algos)} algorithms"
          f"{''.join(f' x {len(v)} {k}' for k, v in grid.items())}, memory axes for memory algorithms only) x "
          f"{args.seeds} seeds, {args.steps:,} env steps each, in {args.out}")
    # Seed-major: a study cut short (interrupted, or out of budget) leaves every cell with the same seeds.
    trials.sort(key=lambda t: (t.config.seed, t.config.env, t.config.algo, t.name))
    tasks = pack_seeds(trials) if args.pack_seeds else trials
    report = run_sweep(tasks, address=args.address, max_retries=args.max_retries, cpus_per_trial=args.cpus_per_trial,
                       num_cpus=args.num_cpus)
    print(f"finished now {len(report.finished)}, already finished {len(report.skipped)}, failed {len(report.failed)}")
    if report.stopped_by is not None:  # checkpointed; the same command continues the study
        print(f"stopped: {len(report.stopped)} runs unfinished; run the same command again to continue them")
        return signal_exit_code(report.stopped_by)

    out = Path(args.out)
    for path in plot_runs(out, metric=METRIC, out=out / "plots"):
        print(f"wrote {path}")
    rows = score_table(load_runs(out), table_steps(args.at, args.steps), METRIC)
    print(table_markdown(rows, METRIC))
    print(f"wrote {write_table_csv(rows, out / 'table.csv')}")
    try:
        from semzoo.analysis.protocol import report as protocol_report

        done = protocol_report(out, table_steps(args.at, args.steps), METRIC, out=out / "report", echo=print)
    except ImportError as err:  # rliable is the semzoo[report] extra
        print(f"no protocol report: {err}")
    else:
        print(done.markdown)
        for path in done.files:
            print(f"wrote {path}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
