"""scripts/curiosity_matrix.py, the curiosity study of docs/matrix_games.md: its main runs and prints the table."""

from __future__ import annotations

from types import ModuleType

import pytest
from script_modules import load_script

TINY = ["--seeds", "2", "--m", "3", "--steps", "48", "--epsilon-anneal-steps", "24", "--workers", "1",
        "--set", "learner.batch_size=4"]
"""Two seeds of 48 env steps of the 3-step game: a few updates each, seconds in all."""


def curiosity_matrix() -> ModuleType:
    return load_script("curiosity_matrix")


def table_rows(output: str) -> list[list[str]]:
    """The cells of the markdown table's body rows."""
    lines = [line for line in output.splitlines() if line.startswith("| ") and not line.startswith("| algorithm")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_main_prints_one_row_per_algorithm_with_each_seeds_greedy_return(capsys: pytest.CaptureFixture[str]) -> None:
    curiosity_matrix().main(["--algos", "qmix,emu-qmix", *TINY])
    output = capsys.readouterr().out
    assert "| algorithm | greedy return per seed | reach 6 | mean |" in output  # m + 3 = 6
    rows = table_rows(output)
    assert [row[0] for row in rows] == ["qmix", "emu-qmix"]
    for _, per_seed, reached, mean, branches, seconds in rows:
        returns = [float(r) for r in per_seed.split()]
        assert len(returns) == 2 and all(0 <= r <= 6 for r in returns)
        assert reached == f"{sum(r == 6 for r in returns)}/2"
        assert float(mean) == pytest.approx(sum(returns) / 2, abs=0.005)
        assert sum(int(n) for n in branches.split(" / ")) == 2  # every seed's greedy path counted once
        assert float(seconds) >= 0  # printed to 0.1 s: a fast machine runs these tiny runs in under 0.05 s
    assert "4 runs, 1 workers" in output


def test_grid_gives_one_row_per_value(capsys: pytest.CaptureFixture[str]) -> None:
    curiosity_matrix().main(["--algos", "emc-qmix", "--grid", "curiosity.curiosity_scale=0.001,1", *TINY])
    rows = table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["emc-qmix curiosity_scale=0.001", "emc-qmix curiosity_scale=1"]


@pytest.mark.parametrize("bad", [["--set", "curiosity.no_such_field=1"], ["--set", "learner.lr"],
                                 ["--algos", "qmixx"], ["--grid", "learner.lr"]])
def test_bad_arguments_stop_before_any_run(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        curiosity_matrix().main([*TINY, *bad])
    assert stopped.value.code == 2
    assert "greedy return per seed" not in capsys.readouterr().out


def test_setting_reaches_the_config_and_overrides_win() -> None:
    script = curiosity_matrix()
    overrides = {"learner.lr": 1e-3, "curiosity.curiosity_scale": 0.1}
    config = script.run_config("emc-qmix", 3, script.Setting(m=5), overrides)
    assert config.env == "matrix:m_step" and config.env_args == {"m": 5} and config.seed == 3
    assert config.learner.lr == 1e-3 and config.settings("curiosity").curiosity_scale == 0.1
    plain = script.run_config("qmix", 3, script.Setting(m=5), overrides)  # QMIX has no curiosity to set
    assert plain.learner.lr == 1e-3 and set(plain.components) == {"qmix"}  # its mixer's own, no curiosity
    assert config.exploration.epsilon_anneal_steps == script.Setting().epsilon_anneal_steps
