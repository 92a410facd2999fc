"""The best checkpoint (best.ckpt) kept during training, its exact resume, and the absolute metric.

The fake battle env draws each episode's win from its reset seed alone, so a run's test win rates jump
from one evaluation to the next whatever the agent learns: a cheap source of improvements and ties.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from semzoo import evaluate_run, train, train_seeds
from semzoo.cli import app
from semzoo.config import AgentConfig, ExplorationConfig, LearnerConfig, TrainConfig
from semzoo.run.checkpoint import CheckpointManager, load_checkpoint, save_checkpoint
from semzoo.run.evaluation import absolute_metric
from semzoo.run.trainer import Trainer
from semzoo.runfiles import ABSOLUTE_FILE, BEST_FILE, read_metrics

TESTS_DIR = str(Path(__file__).parent)
FAKE = "pz:fake_battle_env:parallel_env"


@pytest.fixture(autouse=True)
def tests_on_path(monkeypatch):
    monkeypatch.syspath_prepend(TESTS_DIR)


def fake_config(out, *, seed: int, steps: int = 120, **kw) -> TrainConfig:
    """Episodes of 3 steps, 2 envs: 6 env steps per iteration; tests at 24, 48, 72, ...; checkpoints at 30, 60, ..."""
    base = dict(env=FAKE, algo="qmix", seed=seed, steps=steps, n_envs=2, test_episodes=5, test_interval=24,
                log_interval=24, save_interval=30, sequential=True, out=str(out), run_name="run",
                agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(batch_size=4, buffer_size=16))
    return TrainConfig(**{**base, **kw})


def two_step_config(out, **kw) -> TrainConfig:
    base = dict(env="matrix:two_step", algo="qmix", steps=160, n_envs=4, test_episodes=4, test_interval=40,
                log_interval=40, save_interval=0, sequential=True, out=str(out), run_name="run",
                agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(lr=5e-3, batch_size=8, buffer_size=64),
                exploration=ExplorationConfig(epsilon_anneal_steps=80))
    return TrainConfig(**{**base, **kw})


def evaluations(run_dir, metric: str) -> list[tuple[int, float]]:
    return [(r["env_steps"], r["value"]) for r in read_metrics(run_dir) if r["name"] == metric]


def first_best(evals: list[tuple[int, float]]) -> tuple[int, float]:
    """(step, score) of the best evaluation, the earliest of equal ones."""
    top = max(value for _, value in evals)
    return next((step, value) for step, value in evals if value == top)


def assert_same_best(a: dict, b: dict) -> None:
    """The same best agent, step, score and metric (the runs' folders differ: config.out is left out)."""
    def plain(best):
        return {**{k: v for k, v in best.items() if k != "agent"},
                **({"config": {**best["config"], "out": None}} if "config" in best else {})}

    assert a.keys() == b.keys() and plain(a) == plain(b)
    assert a["agent"].keys() == b["agent"].keys()
    assert all(torch.equal(a["agent"][name], b["agent"][name]) for name in a["agent"])


def train_keeping_agents(config: TrainConfig, run_dir) -> dict[int, dict[str, torch.Tensor]]:
    """Train ``config`` into ``run_dir``; the agent's parameters after each iteration, by env step."""
    agents = {}

    def keep_agent(info):
        agents[info["env_steps"]] = {k: v.clone() for k, v in trainer.agent.state_dict().items()}

    trainer = Trainer(config, run_dir=run_dir, progress=keep_agent, tensorboard=False)
    try:
        trainer.run()
    finally:
        trainer.close()
    return agents


def test_best_checkpoint_holds_the_agent_of_the_best_test_win_rate_and_full_ties_keep_the_earlier(tmp_path):
    agents = train_keeping_agents(fake_config(tmp_path, seed=4), tmp_path / "run")
    wins = evaluations(tmp_path / "run", "test_win_rate")
    step, score = first_best(wins)
    # A tie (win rate and return: this env's return is its win rate), which must keep the earlier evaluation.
    assert sum(value == score for _, value in wins) > 1
    best = load_checkpoint(tmp_path / "run" / BEST_FILE)
    assert (best["step"], best["score"], best["metric"]) == (step, score, "test_win_rate")
    assert "buffer" not in best and "learner" not in best  # the agent only, not the replay buffer
    assert all(torch.equal(best["agent"][k], v) for k, v in agents[step].items())


def test_a_run_that_never_wins_keeps_the_agent_of_its_best_test_return_not_its_first(tmp_path):
    """Every evaluation ties at win rate 0: the test return breaks the tie (a run that never wins must not
    keep its first, untrained agent)."""
    config = fake_config(tmp_path, seed=4, env_args={"win_probability": 0.0, "lost_pays": True})
    agents = train_keeping_agents(config, tmp_path / "run")
    wins = evaluations(tmp_path / "run", "test_win_rate")
    assert {value for _, value in wins} == {0.0}
    step, top = first_best(evaluations(tmp_path / "run", "test_return_mean"))
    assert step != wins[0][0]  # the best return is not the first evaluation's, so the rules differ
    best = load_checkpoint(tmp_path / "run" / BEST_FILE)
    assert (best["step"], best["score"], best["tiebreak"], best["metric"]) == (step, 0.0, top, "test_win_rate")
    assert all(torch.equal(best["agent"][k], v) for k, v in agents[step].items())


def test_a_run_without_wins_keeps_the_best_test_return_and_the_absolute_metric_replays_it_on_10x_episodes(tmp_path):
    run_dir, _ = train(two_step_config(tmp_path), progress=False, tensorboard=False)
    step, score = first_best(evaluations(run_dir, "test_return_mean"))
    best = load_checkpoint(run_dir / BEST_FILE)
    assert (best["step"], best["score"], best["metric"]) == (step, score, "test_return_mean")

    record = absolute_metric(run_dir)
    assert record == json.loads((run_dir / ABSOLUTE_FILE).read_text())
    assert record["step"] == step and record["episodes"] == 10 * 4 and record["test_win_rate"] is None
    assert (record["best_metric"], record["best_score"]) == ("test_return_mean", score)
    _, result, at_step = evaluate_run(run_dir, episodes=40, best=True)
    assert at_step == step and record["test_return_mean"] == result.return_mean
    assert record["test_return_std"] == result.return_std

    # The cache answers for the same best checkpoint and episode count, and only then.
    (run_dir / ABSOLUTE_FILE).write_text(json.dumps({**record, "test_return_mean": -123.0}))
    assert absolute_metric(run_dir)["test_return_mean"] == -123.0
    again = absolute_metric(run_dir, factor=2)
    assert again["episodes"] == 8 and again["test_return_mean"] != -123.0
    assert json.loads((run_dir / ABSOLUTE_FILE).read_text()) == again


def test_absolute_metric_of_a_run_without_best_checkpoint_says_how_to_evaluate_it(tmp_path):
    run_dir, _ = train(two_step_config(tmp_path, steps=40), progress=False, tensorboard=False)
    (run_dir / BEST_FILE).unlink()
    with pytest.raises(ValueError, match=r"has no best\.ckpt \(a run writes it at its first test evaluation\); "
                                         r"evaluate its last checkpoint with `semzoo evaluate "):
        absolute_metric(run_dir)
    out = CliRunner().invoke(app, ["evaluate", str(run_dir), "--best"])
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert out.output.count("\n") == 1 and "no best.ckpt" in out.output
    with pytest.raises(ValueError, match="positive integer"):
        absolute_metric(run_dir, factor=0)


def test_evaluate_command_with_best_replays_the_best_checkpoint(tmp_path):
    run_dir, _ = train(fake_config(tmp_path, seed=4), progress=False, tensorboard=False)
    step, _ = first_best(evaluations(run_dir, "test_win_rate"))
    assert step != 120  # the best is not the last checkpoint, so the two commands must differ
    _, expected, at_step = evaluate_run(run_dir, episodes=9, seed=3, best=True)
    assert at_step == step
    out = CliRunner().invoke(app, ["evaluate", str(run_dir), "--best", "--episodes", "9", "--seed", "3"])
    assert out.exit_code == 0, out.output
    assert f"best checkpoint at {step:,} env steps, 9 greedy episodes" in out.output
    assert f"return {expected.return_mean:.3f}" in out.output
    bad = CliRunner().invoke(app, ["evaluate", str(run_dir), "--best", "--episodes", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


class Interrupt(Exception):
    pass


@pytest.mark.parametrize(("seed", "stop_at"), [(3, 84), (4, 72)], ids=["best-before-checkpoint", "best-after-it"])
def test_an_interrupted_and_resumed_run_ends_with_the_best_checkpoint_of_an_uninterrupted_one(tmp_path, seed,
                                                                                               stop_at):
    """Stopped after the test at ``stop_at``, the run resumes from its checkpoint at 60.

    Seed 3's best evaluation comes before that checkpoint (the resumed run must know it: it is in the
    checkpoint state); seed 4's comes after it, and the stopped run has already written it: best.ckpt goes
    back to the checkpoint's best on resume, then the resumed run writes it again.
    """
    straight_dir, _ = train(fake_config(tmp_path / "straight", seed=seed), progress=False, tensorboard=False)
    straight = load_checkpoint(straight_dir / BEST_FILE)

    def stop(info):
        if info["env_steps"] >= stop_at:
            raise Interrupt

    run_dir = tmp_path / "split" / "run"
    trainer = Trainer(fake_config(tmp_path / "split", seed=seed), run_dir=run_dir, progress=stop, tensorboard=False)
    with pytest.raises(Interrupt):
        trainer.run()
    trainer.close()
    _, checkpoint = CheckpointManager(run_dir).load_latest()
    assert checkpoint["counters"]["env_steps"] == 60
    assert (straight["step"] < 60) if seed == 3 else (load_checkpoint(run_dir / BEST_FILE)["step"] > 60)

    resumed = Trainer.resume(run_dir, tensorboard=False)
    try:
        assert load_checkpoint(run_dir / BEST_FILE)["step"] == checkpoint["best"]["step"] < 60
        resumed.run()
    finally:
        resumed.close()
    assert_same_best(load_checkpoint(run_dir / BEST_FILE), straight)


def test_a_run_extended_with_more_steps_ends_with_the_best_checkpoint_of_the_longer_run(tmp_path):
    """The closing test of the shorter run comes after its final checkpoint: the longer run never saw it."""
    from semzoo import resume

    straight_dir, _ = train(fake_config(tmp_path / "straight", seed=4), progress=False, tensorboard=False)
    half_dir, _ = train(fake_config(tmp_path / "half", seed=4, steps=60), progress=False, tensorboard=False)
    resume(half_dir, steps=120, progress=False, tensorboard=False)
    assert_same_best(load_checkpoint(half_dir / BEST_FILE), load_checkpoint(straight_dir / BEST_FILE))
    _, straight_state = CheckpointManager(straight_dir).load_latest()
    _, split_state = CheckpointManager(half_dir).load_latest()
    assert_same_best(split_state["best"], straight_state["best"])


def test_a_checkpoint_from_before_best_checkpoints_resumes_with_no_best_yet(tmp_path):
    from semzoo import resume

    run_dir, _ = train(fake_config(tmp_path, seed=3, steps=60), progress=False, tensorboard=False)
    path, payload = CheckpointManager(run_dir).load_latest()
    del payload["best"]
    save_checkpoint(path, payload)
    resume(run_dir, steps=120, progress=False, tensorboard=False)
    step, score = first_best([(s, v) for s, v in evaluations(run_dir, "test_win_rate") if s > 60])
    best = load_checkpoint(run_dir / BEST_FILE)
    assert (best["step"], best["score"]) == (step, score)  # the best of the evaluations after the resume


def test_each_run_of_a_group_keeps_its_own_best_checkpoint(tmp_path):
    config = fake_config(tmp_path, seed=0, steps=72, run_name="")
    for run_dir, _ in train_seeds(config, [3, 4], progress=False, tensorboard=False):
        step, score = first_best(evaluations(run_dir, "test_win_rate"))
        best = load_checkpoint(run_dir / BEST_FILE)
        assert (best["step"], best["score"]) == (step, score)
        assert best["config"] == dataclasses.replace(config, seed=best["config"]["seed"], team_reward="mean").to_dict()
