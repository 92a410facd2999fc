"""keep_checkpoints: how many checkpoints a run keeps, 0 removing them when it finishes; changed on resume.

A study's checkpoints hold each run's replay buffer (about 1.6 GB per file on SMAX 2s3z), so twenty runs
with the default two files each outgrow a disk; these tests pin what a smaller setting keeps and what it
still lets a user do (resume, evaluate the best agent) through the API and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import NO_ACTOR_FLAGS
from typer.testing import CliRunner

from semzoo import evaluate_run, resume, train
from semzoo.cli import app
from semzoo.config import AgentConfig, LearnerConfig, TrainConfig
from semzoo.run.checkpoint import CheckpointError, CheckpointManager
from semzoo.run.sweep import plan_trials, run_trial
from semzoo.runfiles import BEST_FILE, CONFIG_FILE, FINAL_FILE, read_metrics


def tiny(out, **kw) -> TrainConfig:
    """Two-step game, checkpoints every 40 env steps (2 per episode x 4 envs: one per 5 iterations)."""
    base = dict(env="matrix:two_step", algo="qmix", steps=160, n_envs=4, test_episodes=4, test_interval=40,
                log_interval=40, save_interval=40, sequential=True, out=str(out), run_name="run",
                agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(batch_size=8, buffer_size=64))
    return TrainConfig(**{**base, **kw})


def steps_of(run_dir: Path) -> list[int]:
    return [int(p.stem.split("_")[1]) for p in CheckpointManager(run_dir).paths()]


def test_the_default_keeps_two_and_one_keeps_the_newest(tmp_path):
    two, _ = train(tiny(tmp_path, run_name="two"), progress=False, tensorboard=False)
    one, _ = train(tiny(tmp_path, run_name="one", keep_checkpoints=1), progress=False, tensorboard=False)
    assert steps_of(two) == [160, 120]
    assert steps_of(one) == [160]


def test_zero_removes_the_checkpoints_at_the_end_and_keeps_results_and_the_best_agent(tmp_path):
    run_dir, result = train(tiny(tmp_path, keep_checkpoints=0), progress=False, tensorboard=False)
    assert not (run_dir / "checkpoints").exists()
    assert (run_dir / BEST_FILE).is_file()
    final = json.loads((run_dir / FINAL_FILE).read_text())
    assert final["env_steps"] == 160 and final["result"] == result
    assert any(r["name"] == "test_return_mean" for r in read_metrics(run_dir))
    _, evaluation, at_step = evaluate_run(run_dir, episodes=2, best=True)
    assert 0 < at_step <= 160 and evaluation.episodes == 2
    with pytest.raises(CheckpointError, match=r"keep_checkpoints=0.*--best"):
        evaluate_run(run_dir, episodes=2)
    with pytest.raises(ValueError, match=r"finished and cannot be continued: no checkpoint files in .*keep_checkpoints=0.*evaluate --best"):
        resume(run_dir, steps=200, progress=False, tensorboard=False)


def test_zero_keeps_one_checkpoint_while_the_run_trains(tmp_path):
    seen: list[list[int]] = []
    config = tiny(tmp_path, keep_checkpoints=0)
    from semzoo.run.trainer import Trainer

    run_dir = tmp_path / "run"
    trainer = Trainer(config, run_dir=run_dir, tensorboard=False,
                      progress=lambda info: seen.append(steps_of(run_dir)))
    try:
        trainer.run()
    finally:
        trainer.close()
    assert [40] in seen and [120] in seen and max(len(s) for s in seen) == 1


def test_resume_changes_keep_checkpoints_and_records_it(tmp_path):
    run_dir, _ = train(tiny(tmp_path, steps=120), progress=False, tensorboard=False)
    assert steps_of(run_dir) == [120, 80]
    resume(run_dir, steps=200, keep_checkpoints=1, progress=False, tensorboard=False)
    assert steps_of(run_dir) == [200]
    assert json.loads((run_dir / CONFIG_FILE).read_text())["keep_checkpoints"] == 1


def test_a_run_resumed_with_another_keep_checkpoints_continues_exactly(tmp_path):
    straight, _ = train(tiny(tmp_path, run_name="straight", steps=200), progress=False, tensorboard=False)
    cut, _ = train(tiny(tmp_path, run_name="cut", steps=120), progress=False, tensorboard=False)
    resume(cut, steps=200, keep_checkpoints=1, progress=False, tensorboard=False)
    (_, a), (_, b) = (CheckpointManager(d).load_latest() for d in (straight, cut))
    assert a["counters"]["env_steps"] == b["counters"]["env_steps"] == 200
    params_a, params_b = a["learner"]["agent"], b["learner"]["agent"]
    assert params_a.keys() == params_b.keys()
    assert all(torch.equal(params_a[k], params_b[k]) for k in params_a)


def test_cli_resume_takes_keep_checkpoints_and_still_ignores_other_flags(tmp_path):
    runner = CliRunner()
    flags = ["--env", "matrix:two_step", "--algo", "qmix", "--steps", "120", "--n-envs", "4", "--test-episodes", "4",
             "--test-interval", "40", "--log-interval", "40", "--save-interval", "40", "--hidden-dim", "8",
             "--batch-size", "8", "--buffer-size", "64", "--out", str(tmp_path), "--run-name", "run",
             "--no-tensorboard", *NO_ACTOR_FLAGS]
    assert runner.invoke(app, ["train", *flags]).exit_code == 0
    run_dir = tmp_path / "run"
    out = runner.invoke(app, ["train", "--resume", str(run_dir), "--steps", "160", "--keep-checkpoints", "0",
                              "--lr", "0.1", "--no-tensorboard"])
    assert out.exit_code == 0, out.output
    assert "ignoring --lr" in out.output and "--keep-checkpoints" not in out.output.split("ignoring")[-1]
    assert not (run_dir / "checkpoints").exists() and (run_dir / FINAL_FILE).is_file()
    again = runner.invoke(app, ["train", "--resume", str(run_dir), "--steps", "200", "--no-tensorboard"])
    assert again.exit_code == 1
    assert "cannot be continued" in again.output and "Traceback" not in again.output


def test_a_negative_keep_checkpoints_is_a_usage_error(tmp_path):
    out = CliRunner().invoke(app, ["train", "--keep-checkpoints", "-1", "--out", str(tmp_path)])
    assert out.exit_code == 2
    assert "keep_checkpoints" in out.output or "--keep-checkpoints" in out.output


def test_a_sweep_passes_keep_checkpoints_to_runs_it_resumes(tmp_path):
    (trial,) = plan_trials(envs=["matrix:two_step"], algos=["qmix"], seeds=[0], steps=120, out=tmp_path,
                           overrides=_grid_free(tiny(tmp_path)))
    assert run_trial(trial.config.to_dict())["status"] == "finished"
    assert steps_of(trial.run_dir) == [120, 80]
    (longer,) = plan_trials(envs=["matrix:two_step"], algos=["qmix"], seeds=[0], steps=160, out=tmp_path,
                            overrides={**_grid_free(tiny(tmp_path)), "keep_checkpoints": 1})
    assert longer.run_dir == trial.run_dir
    assert run_trial(longer.config.to_dict())["status"] == "finished"
    assert steps_of(trial.run_dir) == [160]


def _grid_free(config: TrainConfig) -> dict:
    """A config as sweep overrides: without the grid's own keys (env, algo, seed, steps, out, run_name)."""
    out = {}
    for key, value in config.to_dict().items():
        if isinstance(value, dict):
            out.update({f"{key}.{name}": item for name, item in value.items()})
        elif key not in ("env", "algo", "seed", "steps", "out", "run_name"):
            out[key] = value
    return out


def test_a_run_whose_checkpoints_were_deleted_says_what_is_missing_and_what_is_left(tmp_path):
    import shutil

    runner = CliRunner()
    run_dir, _ = train(tiny(tmp_path), progress=False, tensorboard=False)  # keep_checkpoints 2
    shutil.rmtree(run_dir / "checkpoints")
    evaluated = runner.invoke(app, ["evaluate", str(run_dir)])
    assert evaluated.exit_code == 1 and evaluated.stderr.count("\n") == 1, evaluated.output
    assert f"no checkpoint files in {run_dir / 'checkpoints'}" in evaluated.stderr
    assert f"semzoo evaluate --best {run_dir}" in evaluated.stderr and "keep_checkpoints=0" not in evaluated.stderr
    assert runner.invoke(app, ["evaluate", str(run_dir), "--best"]).exit_code == 0
    resumed = runner.invoke(app, ["train", "--resume", str(run_dir), "--steps", "200", "--no-tensorboard"])
    assert resumed.exit_code == 1 and "cannot be continued: no checkpoint files in" in resumed.stderr
    assert "keep_checkpoints=0" not in resumed.stderr
    (run_dir / BEST_FILE).unlink()
    best = runner.invoke(app, ["evaluate", str(run_dir), "--best"])
    assert best.exit_code == 1 and best.stderr.count("\n") == 1, best.output
    assert "no checkpoint either" in best.stderr and f"semzoo table {run_dir}" in best.stderr
    assert "semzoo evaluate" not in best.stderr  # no pointer back to the command that just failed
    last = runner.invoke(app, ["evaluate", str(run_dir)])
    assert "--best" not in last.stderr and f"no {BEST_FILE} either" in last.stderr, last.stderr
