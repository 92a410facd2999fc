"""Every id that `semzoo algos` lists trains on a matrix game with its defaults (only the run's length shortened)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semzoo.algos import algorithm_ids
from semzoo.cli import app

runner = CliRunner()
SHORT = ["--env", "matrix:two_step", "--steps", "200", "--test-interval", "200", "--test-episodes", "2",
         "--no-tensorboard"]
"""The run's length and evaluation only: every setting of the algorithm keeps its default."""


def train(tmp_path, algo: str, *flags: str):
    result = runner.invoke(app, ["train", *SHORT, "--algo", algo, "--out", str(tmp_path), "--run-name", "run", *flags])
    assert result.exit_code == 0, f"{algo}: {result.output[-2000:]}"
    return result, json.loads((tmp_path / "run" / "config.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("algo", algorithm_ids())
def test_every_listed_id_trains_on_a_matrix_game_with_its_defaults(tmp_path, algo):
    train(tmp_path, algo)


def test_lagma_caps_its_default_latent_size_by_the_state_size_and_says_so(tmp_path):
    result, config = train(tmp_path, "lagma-qmix")
    assert config["lagma"]["lagma_latent_dim"] == 4  # two_step's state size, below LAGMA's 8
    (line,) = [line for line in result.stderr.splitlines() if "lagma_latent_dim" in line]
    assert line.startswith("Warning: lagma_latent_dim=8 (LAGMA's) is above the state size 4 of matrix:two_step")


def test_a_latent_size_given_above_the_state_size_is_still_refused(tmp_path):
    result = runner.invoke(app, ["train", *SHORT, "--algo", "lagma-qmix", "--lagma-latent-dim", "8",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "lagma_latent_dim=8: expected an integer in [1, 4]" in result.stderr
