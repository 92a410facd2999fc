"""Recompute, from the kept runs under docs/results/, the figures of docs/results.md and docs/studies/ that were once misread.

    python scripts/check_results_numbers.py

Each line names the figure, the runs it reads and the value they give; the study pages quote these values.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from scipy.stats import trim_mean

from semzoo.runfiles import read_metrics

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
SPARSE = RESULTS / "smax-3m-sparse"
IQM_TRIM = 0.25
"""rliable's interquartile mean: the mean of the middle half (scipy's trim_mean at 25 % each side)."""


def series(run_dir: Path, name: str) -> list[tuple[int, float]]:
    """(env_steps, value) of every row of ``name`` in a run's metrics.csv, in order."""
    return [(row["env_steps"], row["value"]) for row in read_metrics(run_dir) if row["name"] == name]


def main() -> None:
    # 2s3z, the paper's runtime: each run's timeout_rate averaged over its rows
    runtime = RESULTS / "smax-2s3z-paper-runtime"
    means = {}
    for run in sorted(runtime.iterdir()):
        values = [v for _, v in series(run, "timeout_rate")]
        if not values:  # seed 0 ran before the rate was logged
            print(f"timeout_rate, {run.name}: not logged")
            continue
        means[run.name] = statistics.fmean(values)
        print(f"timeout_rate mean over rows, {run.name}: {100 * means[run.name]:.2f} %")
    print(f"2s3z timeout_rate range over the {len(means)} runs: {100 * min(means.values()):.2f}-"
          f"{100 * max(means.values()):.2f} %")

    # EMU-QMIX, fixed starts, seed 0: the incentive late in the run
    emu0 = SPARSE / "smax_3m_reward=deaths_fixed_emu-qmix_seed0"
    late = [(s, v) for s, v in series(emu0, "reward_incentive") if s > 325_000]
    above = [(s, v) for s, v in late if v >= 0.001]
    print(f"EMU-QMIX fixed seed 0, reward_incentive after 325k: max {max(v for _, v in late):.4f}; rows >= 0.001: "
          + ", ".join(f"{v:.4f} at {s:,}" for s, v in above))

    # EMU-QMIX, fixed starts, seed 2: the desirable share at its last row
    emu2 = SPARSE / "smax_3m_reward=deaths_fixed_emu-qmix_seed2"
    step, share = series(emu2, "memory_desirable")[-1]
    print(f"EMU-QMIX fixed seed 2, memory_desirable at its last row ({step:,}): {100 * share:.2f} %")

    # EMC-QMIX, fixed starts: the absolute metric's IQM over 3 seeds
    absolute = [json.loads((SPARSE / f"smax_3m_reward=deaths_fixed_emc-qmix_seed{seed}" / "absolute.json").read_text())
                ["test_win_rate"] for seed in range(3)]
    print(f"EMC-QMIX fixed absolute test_win_rate {absolute}: IQM {trim_mean(absolute, IQM_TRIM):.4f}")

    # LAGMA-QMIX on 2s3z, seed 2: VQ-VAE steps and codes in use
    lagma = RESULTS / "smax-2s3z-lagma" / "smax_2s3z_lagma-qmix_seed2"
    trainings = series(lagma, "lagma_trainings")
    print("LAGMA-QMIX 2s3z seed 2, lagma_trainings in the last rows: "
          + ", ".join(f"{v:,.0f} at {s:,}" for s, v in trainings[-3:]))
    codes = series(lagma, "lagma_codes_used")
    first = next(s for s, v in codes if v > 1)
    for after in (44_000, 100_000):
        used = [v for s, v in codes if s > after]
        print(f"LAGMA-QMIX 2s3z seed 2, lagma_codes_used after {after:,}: {min(used):.0f}-{max(used):.0f} "
              f"(median {statistics.median(used):.0f}; first above 1 at {first:,})")

    # SMAC's rules on SMAX (profile=smac): training win rate, return and episode length from 100k, Q_tot between
    # 250k and 500k
    profile = RESULTS / "smax-smac-profile"
    for run in sorted(profile.iterdir()):
        wins = [v for s, v in series(run, "win_rate") if s > 100_000]
        q_tot = [v for s, v in series(run, "q_tot") if 250_000 < s <= 500_000]
        returns = [v for s, v in series(run, "return_mean") if s > 100_000]
        lengths = [v for s, v in series(run, "ep_length_mean") if s > 100_000]
        print(f"{run.name}: win_rate mean after 100k {100 * statistics.fmean(wins):.1f} %, return_mean "
              f"{statistics.fmean(returns):.2f}, ep_length_mean {statistics.fmean(lengths):.1f}; q_tot 250k-500k "
              f"mean {statistics.fmean(q_tot):.2f} (range {min(q_tot):.2f}-{max(q_tot):.2f})")


if __name__ == "__main__":
    main()
