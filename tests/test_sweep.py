"""Sweeps on a local Ray: a 2 x 2 x 2 grid with one trial failing once; re-running does nothing new."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from config_values import non_default_value
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import TrainConfig, config_fields
from semzoo.run.evaluation import SEED_STRIDE, TEST_SEED_OFFSET
from semzoo.run.rundir import TIMING_METRICS, read_metrics, run_finished
from semzoo.run.sweep import GRID_KEYS, apply_overrides, plan_trials, run_trial

ENVS = ["matrix:climbing", "matrix:penalty"]
FLAKY_ENVS = ["pz:flaky_env:climbing", "pz:flaky_env:penalty"]
"""The same games from tests/flaky_env.py: the first env of the sweep to take 30 steps raises once."""
TESTS_DIR = Path(__file__).resolve().parent
ALGOS = ["vdn", "sem-qmix"]
STEPS = 200
OVERRIDES = {"n_envs": 4, "test_interval": 50, "test_episodes": 4, "log_interval": 20, "save_interval": 40,
             "learner.batch_size": 8, "learner.buffer_size": 32, "memory.capacity": 1000, "memory.pending_size": 20,
             "agent.hidden_dim": 8}


def sweep_args(out, envs=ENVS, overrides=OVERRIDES) -> list[str]:
    args = ["sweep", "--envs", ",".join(envs), "--algos", ",".join(ALGOS), "--seeds", "2", "--steps", str(STEPS),
            "--out", str(out), "--num-cpus", "2", "--max-retries", "2"]
    for key, value in overrides.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    return args


def comparable_rows(run_dir):
    return [(r["env_steps"], r["name"], r["value"]) for r in read_metrics(run_dir) if r["name"] not in TIMING_METRICS]


def test_overrides_reach_nested_config_fields():
    data = apply_overrides({"test_interval": 1, "learner": {"batch_size": 32}}, {"learner.batch_size": 8})
    assert data == {"test_interval": 1, "learner": {"batch_size": 8}}
    with pytest.raises(ValueError, match=r"learner\.nope"):
        apply_overrides({"learner": {"batch_size": 32}}, {"learner.nope": 1})


@pytest.mark.parametrize("key", ["nope", "learner", "agent.lr", "learner.nope", "batch_size", "x.y.z"])
def test_an_override_that_names_no_config_field_is_refused(key):
    with pytest.raises(ValueError, match=rf"config key '{key}': expected <field> .* sections agent, mixer, memory"):
        apply_overrides(TrainConfig().to_dict(), {key: 1})


@pytest.mark.parametrize("f", config_fields(), ids=lambda f: f.key)
def test_every_config_field_is_settable_with_set(f):
    value = non_default_value(f)
    if f.key in GRID_KEYS:  # the grid's own axes: `--set` would be overwritten, so it is refused
        with pytest.raises(ValueError, match=rf"config key '{f.key}': the sweep sets it per trial"):
            plan_trials(envs=["matrix:climbing"], algos=["vdn"], seeds=[0], steps=10, out="runs",
                        overrides={f.key: value})
        return
    [trial] = plan_trials(envs=["matrix:climbing"], algos=["vdn"], seeds=[0], steps=10, out="runs",
                          overrides={f.key: value})
    data = trial.config.to_dict()
    section, _, name = f.key.rpartition(".")
    assert (data[section] if section else data)[name] == value


def test_plan_is_the_full_grid_with_one_run_directory_per_trial(tmp_path):
    trials = plan_trials(envs=ENVS, algos=ALGOS, seeds=range(2), steps=STEPS, out=tmp_path, overrides=OVERRIDES)
    assert len(trials) == 8 and len({t.run_dir for t in trials}) == 8
    assert all(t.config.learner.batch_size == 8 and t.config.steps == STEPS for t in trials)


@pytest.mark.ray
def test_sweep_retries_a_failed_trial_from_its_checkpoint_and_skips_finished_runs(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    marker = tmp_path / "failed_once"
    # Ray's workers inherit the driver's environment: this is how they import tests/flaky_env.py.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
    overrides = {**OVERRIDES, "env_args": {"marker": str(marker)}}
    runner = CliRunner()
    first = runner.invoke(app, sweep_args(out, FLAKY_ENVS, overrides))
    assert first.exit_code == 0, first.output
    assert "8 finished now, 0 already finished, 0 failed" in first.output
    run_dirs = sorted(p.parent for p in out.glob("*/config.json"))
    assert len(run_dirs) == 8 and all(run_finished(d, STEPS) for d in run_dirs)
    assert marker.exists(), "no trial failed: the retry was not exercised"

    # The failing run is one of the two algorithms on the marker's game and seed. Each of them (the
    # retried one included) has the rows of a run that never failed: the retry continued from its checkpoint.
    failure = json.loads(marker.read_text())
    seed = failure["reset_seed"] % TEST_SEED_OFFSET // SEED_STRIDE  # a training or a test episode's env seed
    for algo in ALGOS:
        trial = plan_trials(envs=[f"pz:flaky_env:{failure['game']}"], algos=[algo], seeds=[seed], steps=STEPS,
                            out=out, overrides=overrides)[0]
        twin = plan_trials(envs=[f"pz:flaky_env:{failure['game']}"], algos=[algo], seeds=[seed], steps=STEPS,
                           out=tmp_path / "twin", overrides=overrides)[0]
        run_trial(twin.config.to_dict())  # the marker exists: this run never fails
        assert comparable_rows(trial.run_dir) == comparable_rows(twin.run_dir), trial.name

    before = {d: (d / "metrics.csv").stat().st_mtime_ns for d in run_dirs}
    second = runner.invoke(app, sweep_args(out, FLAKY_ENVS, overrides))
    assert second.exit_code == 0, second.output
    assert "0 finished now, 8 already finished, 0 failed" in second.output
    assert before == {d: (d / "metrics.csv").stat().st_mtime_ns for d in run_dirs}
