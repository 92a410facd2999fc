"""scripts/value_diagnose.py: a run's Q_tot against the returns its stored episodes reached, and QMIX's parts."""

from __future__ import annotations

import json

import pytest
import torch
from script_modules import load_script

from semzoo import TrainConfig, train

value_diagnose = load_script("value_diagnose")


def test_discounted_returns_sum_each_episodes_rewards_to_its_end():
    reward = torch.tensor([[0.0, 1.0, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    out = value_diagnose.discounted_returns(reward, mask, 0.5)
    assert out.tolist() == [[0.5 * 1 + 0.25 * 2, 1 + 0.5 * 2, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0]]


@pytest.fixture(scope="module")
def qmix_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    config = TrainConfig(env="matrix:two_step", algo="qmix", steps=400, out=str(out), save_interval=200,
                         keep_checkpoints=5, test_episodes=2, test_interval=400)
    run_dir, _ = train(config, progress=False, tensorboard=False)
    return run_dir


def test_each_checkpoint_gives_q_tot_the_returns_reached_and_the_mixers_parts(qmix_run, tmp_path, capsys):
    dump = tmp_path / "diag.json"
    assert value_diagnose.main([str(qmix_run), "--json", str(dump)]) == 0
    printed = capsys.readouterr().out
    assert "| env steps | Q_tot | y | G reached (max)" in printed and "By step of the episode at 400" in printed
    (rows,) = json.loads(dump.read_text()).values()
    assert [row["env_steps"] for row in rows] == [200, 400]
    for row in rows:
        # two_step pays at its second step only, at most 8: every discounted return reached lies in [0, 8]
        assert 0.0 <= row["reached"] <= row["reached_max"] <= 8.0
        assert row["v"] is not None and row["gain"] > 0.0  # QMIX's weights are non-negative
        assert row["q_tot"] == pytest.approx(row["v"] + row["mixing"], abs=1e-5)


def test_a_run_without_checkpoints_is_one_line_and_exit_1(tmp_path, capsys):
    run_dir, _ = train(TrainConfig(env="matrix:climbing", algo="vdn", steps=50, out=str(tmp_path), keep_checkpoints=0,
                                   test_episodes=1), progress=False, tensorboard=False)
    assert value_diagnose.main([str(run_dir)]) == 1
    assert "no checkpoint" in capsys.readouterr().err
