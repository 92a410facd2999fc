"""scripts/curves.py prints a study's curves in numbers, read from the runs' own metrics.csv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "docs" / "results" / "smax-2s3z-ablation"


def curves(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "curves.py"), *args], capture_output=True,
                          text=True, timeout=120)


def test_curves_prints_each_runs_value_at_a_step_its_mean_best_and_first_level():
    done = curves(str(KEPT), "--upto", "250000", "--at", "100000,150000,250000")
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in done.stdout.splitlines()[2:]}
    # fixed starts, QMIX seed 0: 0.84 at 100k, 0.06 at 150k, 0.69 at 250k, first at 0.9 or more at 120k
    assert rows["smax_2s3z_fixed_qmix_seed0"].startswith("| smax_2s3z_fixed_qmix_seed0 | 250,149 | 0.84 | 0.06 | 0.69 |")
    assert rows["smax_2s3z_fixed_qmix_seed0"].endswith("| 1.00 | 120k |")
    assert rows["smax_2s3z_fixed_qmix_seed1"].endswith("| never |")


def test_curves_refuses_a_bad_step_list_and_an_empty_folder(tmp_path):
    bad = curves(str(KEPT), "--at", "250k")
    assert bad.returncode == 2 and "--at '250k': expected comma-separated env steps" in bad.stderr
    empty = curves(str(tmp_path))
    assert empty.returncode == 2 and "no run directory" in empty.stderr
