"""The leave-one-out table of docs/studies/smac-profile.md ("Why are the levels lower? SMAC's rules on SMAX"), recomputed from the kept runs.

Each row "without SMAC's X (`part=value`)" is the kept run of QMIX on 2s3z with the profile and that part set back
to SMAX's, seed 0 (", seed N" after it: that seed); the row "whole profile (seeds 0-4)" gives each figure's range over the profile's QMIX seeds.
The figures are those of ``scripts/curves.py`` (the win rate of the evaluation at 100k, 250k and 500k, the curve's
mean and best to 500k, the first evaluation at 0.9 or more), the absolute metric (absolute.json) and the training
win rate from 100k (``scripts/check_results_numbers.py``).
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from script_modules import load_script

from semzoo.runfiles import read_metrics

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "results" / "smax-smac-profile"
HEADER = "| QMIX, 2s3z, seed 0 | at 100k | at 250k | at 500k |"


def _curves():
    return load_script("curves")


def figures(run: Path) -> list[str]:
    """The cells of a run's row, as the table prints them."""
    curves = _curves()
    points = curves.curve(run, "test_win_rate", 500_000)
    values = [value for _, value in points]
    first = next((step for step, value in points if value >= 0.9), None)
    wins = [row["value"] for row in read_metrics(run) if row["name"] == "win_rate" and row["env_steps"] > 100_000]
    absolute = json.loads((run / "absolute.json").read_text())["test_win_rate"]
    return [*(f"{curves.at(points, step):.2f}" for step in (100_000, 250_000, 500_000)),
            f"{statistics.mean(values):.2f}", f"{max(values):.2f}", "never" if first is None else f"{first // 1000}k",
            f"{absolute:.2f}", f"{100 * statistics.fmean(wins):.1f} %"]


def spread(cells: list[str]) -> str:
    """Cells of several runs as one: the value they share, else 'lowest-highest' (``0.25-0.53``, ``80k-120k``,
    ``26.4-50.5 %``)."""
    if len(set(cells)) == 1:
        return cells[0]
    if cells[0].endswith(" %"):
        low, high = sorted(cells, key=lambda cell: float(cell.removesuffix(" %")))[::len(cells) - 1]
        return f"{low.removesuffix(' %')}-{high}"
    low, high = sorted(cells, key=lambda cell: float(cell.removesuffix("k")))[::len(cells) - 1]
    return f"{low}-{high}"


def table_rows(header: str) -> list[list[str]]:
    """The cells of each row of the study page's table whose header line starts with ``header``."""
    lines = (ROOT / "docs" / "studies" / "smac-profile.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


ROWS = table_rows(HEADER)


@pytest.mark.parametrize("row", ROWS, ids=[row[0] for row in ROWS])
def test_each_row_of_the_leave_one_out_table_is_what_its_runs_give(row):
    label, cells = row[0], row[1:]
    if label.startswith("whole profile"):
        low, high = map(int, re.fullmatch(r"whole profile \(seeds (\d)-(\d)\)", label).groups())  # type: ignore[union-attr]
        runs = [RUNS / f"smax_2s3z_qmix_profile-smac_seed{seed}" for seed in range(low, high + 1)]
        assert [spread(list(column)) for column in zip(*map(figures, runs), strict=True)] == cells
        return
    part, value, seed = re.fullmatch(r"without .* \(`(\w+)=(\w+)`\)(?:, seed (\d))?", label).groups()  # type: ignore[union-attr]
    seed = seed or "0"
    run = RUNS / f"smax_2s3z_qmix_profile-smac_no-{part}_seed{seed}"
    config = json.loads((run / "config.json").read_text())
    assert {key: json.dumps(v).strip('"') for key, v in config["env_args"].items()} == {"profile": "smac", part: value}
    assert config["algo"] == "qmix"
    assert config["steps"] == 500_000 and config["seed"] == int(seed)
    assert figures(run) == cells


def test_the_table_has_a_row_for_every_kept_part():
    kept = sorted(path.name for path in RUNS.glob("smax_2s3z_qmix_profile-smac_no-*_seed*"))
    rows = [re.search(r"`(\w+)=\w+`\)(?:, seed (\d))?", row[0]).groups() for row in ROWS[1:]]  # type: ignore[union-attr]
    assert sorted(f"smax_2s3z_qmix_profile-smac_no-{part}_seed{seed or 0}" for part, seed in rows) == kept


CORE_HEADER = "| run | at 100k | at 250k | at 500k | curve mean | best | first >= 0.9 | absolute (320 episodes) |"


CORE = table_rows(CORE_HEADER)


@pytest.mark.parametrize("row", CORE, ids=[row[0] for row in CORE])
def test_each_row_of_the_core_2s3z_table_is_what_its_run_gives(row):
    run = RUNS / row[0]
    config = json.loads((run / "config.json").read_text())
    assert config["env"] == "smax:2s3z" and config["env_args"] == {"profile": "smac"} and config["steps"] == 500_000
    absolute = json.loads((run / "absolute.json").read_text())
    cells = figures(run)[:7]
    cells[-1] += f" (agent of {absolute['step'] // 1000}k)"
    assert cells == row[1:]


def test_the_core_table_has_every_kept_core_run_of_2s3z():
    kept = sorted(path.name for path in RUNS.glob("smax_2s3z_*_profile-smac_seed*"))
    assert [row[0] for row in CORE] == kept


S3Z5_HEADER = ("| 3s5z run | at 100k | at 250k | at 500k | curve mean | best | first >= 0.9 | absolute (320 episodes) "
               "| training win rate from 100k |")


S3Z5 = table_rows(S3Z5_HEADER)


TD_HEADER = S3Z5_HEADER.replace("| 3s5z run |", "| TD(lambda) run |")
TD = table_rows(TD_HEADER)


@pytest.mark.parametrize("row", S3Z5 + TD, ids=[row[0] for row in S3Z5 + TD])
def test_each_row_of_the_core_3s5z_and_td_lambda_tables_is_what_its_run_gives(row):
    run = RUNS / row[0]
    config = json.loads((run / "config.json").read_text())
    env = "smax:" + row[0].split("_")[1]  # smax_3s5z_qmix_... -> smax:3s5z
    assert config["env"] == env and config["env_args"] == {"profile": "smac"} and config["steps"] == 500_000
    assert config["learner"]["td_lambda"] == (0.6 if "td_lambda=0.6" in row[0] else 0.0)
    absolute = json.loads((run / "absolute.json").read_text())
    cells = figures(run)
    cells[6] += f" (agent of {absolute['step'] // 1000}k)"
    assert cells == row[1:]


def test_the_core_3s5z_table_has_every_kept_core_run_of_3s5z():
    kept = sorted(path.name for path in RUNS.glob("smax_3s5z_*_profile-smac_seed*"))
    assert [row[0] for row in S3Z5] == kept


def test_the_td_lambda_table_has_every_kept_td_lambda_run():
    kept = sorted(path.name for path in RUNS.glob("smax_*_qmix_profile-smac_td_lambda=*_seed*"))
    assert [row[0] for row in TD] == kept
