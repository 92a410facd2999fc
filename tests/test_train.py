"""End-to-end training through the public Python interface."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import NO_ACTOR, record_losses

from semzoo.config import ExplorationConfig, LearnerConfig, TrainConfig
from semzoo.run.trainer import Trainer, train
from semzoo.runfiles import read_metrics


def matrix_config(game: str, algo: str, *, steps: int = 3000, uniform: bool = False, seed: int = 0,
                  test_interval: int = 10**9, **kw) -> TrainConfig:
    """One-step games: target network and discount do not matter; a larger learning rate converges fast."""
    exploration = (ExplorationConfig(epsilon_start=1.0, epsilon_finish=1.0) if uniform
                   else ExplorationConfig(epsilon_anneal_steps=steps // 2))
    return TrainConfig(env=f"matrix:{game}", algo=algo, steps=steps, seed=seed, n_envs=8, test_episodes=8,
                       test_interval=test_interval, log_interval=500, exploration=exploration,
                       learner=LearnerConfig(lr=5e-3, batch_size=32, buffer_size=500), **{**NO_ACTOR, **kw})


def greedy_return(config: TrainConfig) -> float:
    trainer = Trainer(config)
    try:
        return trainer.run()["test_return_mean"]
    finally:
        trainer.close()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["vdn", "qmix"])
def test_vdn_and_qmix_reach_the_optimum_of_the_additive_game(algo):
    from semzoo import make_env

    optimum = make_env("matrix:additive").optimal_return
    assert greedy_return(matrix_config("additive", algo)) == optimum


@pytest.mark.slow
@pytest.mark.parametrize(("game", "closed_form"), [("climbing", 5.0), ("qtran", 0.0)])
def test_vdn_misses_the_optimum_under_uniform_exploration(game, closed_form):
    """Under uniform exploration VDN's least-squares fit is Q(i,j) = row mean + column mean - overall mean.

    climbing: row/column means (-6.33, -5.67, 1.67) -> greedy (2, 2), payoff 5 (optimum 11).
    qtran: row/column means (-5.33, -4, -4) -> greedy in {1,2}x{1,2}, payoff 0 (optimum 8).
    """
    from semzoo import make_env

    payoff = np.asarray(make_env(f"matrix:{game}").payoff, float)
    rows, cols = payoff.mean(axis=1), payoff.mean(axis=0)
    fit = rows[:, None] + cols[None, :] - payoff.mean()
    best = np.argwhere(np.isclose(fit, fit.max()))
    assert {payoff[i, j] for i, j in best} == {closed_form}  # the closed form, computed
    assert greedy_return(matrix_config(game, "vdn", steps=4000, uniform=True)) == closed_form


def test_same_seed_gives_identical_loss_curves():
    def losses(seed):
        trainer = Trainer(matrix_config("climbing", "qmix", steps=400, seed=seed))
        recorded = record_losses(trainer)
        try:
            trainer.run()
            return recorded
        finally:
            trainer.close()

    first, second, other = losses(3), losses(3), losses(4)
    assert len(first) > 10 and first == second
    assert first != other


def test_train_writes_config_and_metrics(tmp_path):
    config = matrix_config("two_step", "qmix", steps=600, out=str(tmp_path), test_interval=300)
    run_dir, _result = train(config)
    assert (run_dir / "config.json").exists()
    rows = read_metrics(run_dir)
    names = {r["name"] for r in rows}
    assert {"loss", "return_mean", "epsilon", "test_return_mean", "steps_per_s"} <= names
    assert rows[-1]["env_steps"] >= 600
    assert np.isfinite([r["value"] for r in rows]).all()
    stored = TrainConfig.from_dict(__import__("json").loads((run_dir / "config.json").read_text()))
    assert stored == dataclasses.replace(config, team_reward="mean")  # 'env' stored as what it resolved to


def test_mpe_simple_spread_trains_through_its_pz_id():
    pytest.importorskip("mpe2")
    config = TrainConfig(env="pz:mpe2.simple_spread_v3:parallel_env", env_args={"max_cycles": 10}, algo="qmix",
                         steps=400, n_envs=4, test_episodes=4, test_interval=10**9, log_interval=200,
                         learner=LearnerConfig(batch_size=8, buffer_size=50), **NO_ACTOR)
    trainer = Trainer(config)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    assert trainer.counters.updates > 0 and np.isfinite(result["test_return_mean"])
