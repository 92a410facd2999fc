"""Greedy evaluation: epsilon 0, exactly the episodes asked, win rate from `battle_won`; `semzoo evaluate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import NO_ACTOR
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import AgentConfig, LearnerConfig, TrainConfig
from semzoo.run.evaluation import evaluate_run
from semzoo.run.trainer import Trainer, train

TESTS_DIR = str(Path(__file__).parent)
FAKE = "pz:fake_battle_env:parallel_env"


@pytest.fixture(autouse=True)
def tests_on_path(monkeypatch):
    monkeypatch.syspath_prepend(TESTS_DIR)


def fake_config(**kw) -> TrainConfig:
    base = dict(env=FAKE, algo="qmix", steps=60, n_envs=2, test_episodes=7, test_interval=30, log_interval=30,
                agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(batch_size=4, buffer_size=16), **NO_ACTOR)
    return TrainConfig(**{**base, **kw})


def test_evaluation_is_greedy_and_runs_exactly_the_episodes_asked():
    trainer = Trainer(fake_config())
    calls = []
    real_run = trainer.runner.run

    def spy(**kwargs):
        calls.append(kwargs["epsilon"])
        return real_run(**kwargs)

    trainer.runner.run = spy
    try:
        before = trainer.generator.get_state()
        result = trainer.evaluate()  # 7 episodes from batches of 2 envs: 4 batches, cut to 7
        assert result.episodes == 7 and calls == [0.0] * 4
        assert torch.equal(before, trainer.generator.get_state())  # greedy: no exploration draw
        assert trainer.evaluate(5).episodes == 5
    finally:
        trainer.close()


def test_win_rate_comes_from_battle_won():
    """The fake env pays 1 exactly in won episodes, so the win rate must equal the mean return."""
    trainer = Trainer(fake_config())
    try:
        result = trainer.evaluate(32, seed=11)
        assert result.win_rate is not None and 0.0 < result.win_rate < 1.0
        assert result.win_rate == result.return_mean
        assert trainer.evaluate(32, seed=11) == result  # a given seed replays the same episodes
    finally:
        trainer.close()


def test_no_win_rate_when_the_env_does_not_report_battle_won():
    trainer = Trainer(fake_config(env_args={"report_won": False}))
    try:
        result = trainer.evaluate(6)
        assert result.win_rate is None and "test_win_rate" not in result.as_metrics()
    finally:
        trainer.close()


@pytest.mark.parametrize("sequential", [True, False], ids=["sequential", "overlapped"])
def test_training_logs_test_win_rate_every_test_interval(tmp_path, sequential):
    """Overlapped, the last batch's updates come after the housekeeping at the last step: a closing row follows."""
    from semzoo.runfiles import read_metrics

    run_dir, result = train(fake_config(out=str(tmp_path), sequential=sequential), tensorboard=False)
    rows = [r for r in read_metrics(run_dir) if r["name"] == "test_win_rate"]
    assert [r["env_steps"] for r in rows] == ([30, 60] if sequential else [30, 60, 60]) and "test_win_rate" in result
    assert rows[-1]["updates"] == json.loads((run_dir / "final.json").read_text())["updates"] > rows[-2]["updates"]


def test_evaluate_command_replays_the_last_checkpoint(tmp_path):
    run_dir, _ = train(fake_config(out=str(tmp_path)), tensorboard=False)
    _config, expected, at_steps = evaluate_run(run_dir, episodes=9, seed=3)
    assert at_steps == 60 and expected.episodes == 9
    out = CliRunner().invoke(app, ["evaluate", str(run_dir), "--episodes", "9", "--seed", "3"])
    assert out.exit_code == 0, out.output
    assert f"return {expected.return_mean:.3f}" in out.output and f"win rate {expected.win_rate:.3f}" in out.output
    assert "9 greedy episodes" in out.output and "60 env steps" in out.output


@pytest.mark.smax
@pytest.mark.long  # ~25 s of JAX compilation on 2 cores
def test_smax_evaluation_reports_a_win_rate():
    pytest.importorskip("jaxmarl")
    trainer = Trainer(TrainConfig(env="smax:3m", algo="qmix", n_envs=2, test_episodes=2,
                                  agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(batch_size=2, buffer_size=4)))
    try:
        result = trainer.evaluate()
        assert result.episodes == 2 and result.win_rate in (0.0, 0.5, 1.0)
    finally:
        trainer.close()


@pytest.mark.parametrize("sequential", [True, False], ids=["sequential", "overlapped"])
def test_test_evaluations_are_scheduled_at_multiples_of_test_interval_without_drift(tmp_path, sequential):
    """6 env steps per iteration (3 envs x 2-step episodes), tests every 10: due at 10, 20, 30, ... and taken at
    the first iteration at or past each (12, 24, 30, 42, 54, 60, ...); a schedule that counted from the last
    test would slide to 12, 24, 36, 48, ... and take 8 tests where 10 were due."""
    from semzoo.runfiles import read_metrics

    config = TrainConfig(env="matrix:two_step", algo="qmix", steps=96, n_envs=3, test_interval=10, test_episodes=2,
                         log_interval=1000, save_interval=0, sequential=sequential, out=str(tmp_path),
                         run_name="run", agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(batch_size=4))
    run_dir, _ = train(config, progress=False, tensorboard=False)
    steps = [r["env_steps"] for r in read_metrics(run_dir) if r["name"] == "test_return_mean"]
    due = [-(-k * 10 // 6) * 6 for k in range(1, 10)]  # the first multiple of 6 at or past each multiple of 10
    assert due == [12, 24, 30, 42, 54, 60, 72, 84, 90]
    assert steps == [*due, 96]  # and the closing evaluation at the end
