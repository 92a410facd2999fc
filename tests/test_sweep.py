"""Sweeps on a local Ray: a 2 x 2 x 2 grid with one trial failing once; re-running does nothing new.

Packed sweeps (``--pack-seeds``) train each (env, algo) cell's seeds in one task: the same run
directories, each run within float tolerance of its unpacked ``sequential`` trial, and an interrupted
cell continues from its checkpoints.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from config_values import non_default_value
from conftest import NO_ACTOR
from flaky_env import FlakyEnvError
from test_multi import TRAINING_ABS, TRAINING_REL
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import TrainConfig, config_fields
from semzoo.run.evaluation import SEED_STRIDE, TEST_SEED_OFFSET
from semzoo.run.rundir import run_finished
from semzoo.run.sweep import GRID_KEYS, apply_overrides, pack_seeds, plan_trials, run_packed_trial, run_trial
from semzoo.runfiles import TIMING_METRICS, read_metrics

ENVS = ["matrix:climbing", "matrix:penalty"]
FLAKY_ENVS = ["pz:flaky_env:climbing", "pz:flaky_env:penalty"]
"""The same games from tests/flaky_env.py: the first env of the sweep to take 30 steps raises once."""
TESTS_DIR = Path(__file__).resolve().parent
ALGOS = ["vdn", "sem-qmix"]
STEPS = 200
OVERRIDES = {"n_envs": 4, "test_interval": 50, "test_episodes": 4, "log_interval": 20, "save_interval": 40,
             "learner.batch_size": 8, "learner.buffer_size": 32, "memory.capacity": 1000, "memory.pending_size": 20,
             "agent.hidden_dim": 8, **NO_ACTOR}


def sweep_args(out, envs=ENVS, overrides=OVERRIDES, *extra: str, steps: int = STEPS) -> list[str]:
    args = ["sweep", *extra, "--envs", ",".join(envs), "--algos", ",".join(ALGOS), "--seeds", "2", "--steps", str(steps),
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
    with pytest.raises(ValueError, match=rf"config key '{key}': expected <field> .* sections agent, memory, learner"):
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


def test_a_memorys_own_setting_reaches_the_trials_of_the_algorithms_on_that_memory_only():
    trials = plan_trials(envs=["matrix:climbing"], algos=["vdn", "emc-vdn", "emu-vdn"], seeds=[0], steps=10,
                         out="runs", overrides={"curiosity.curiosity_scale": 0.1, "emc.emc_loss_weight": 0.2})
    plain, emc, emu = (trial.config for trial in trials)
    assert plain.components == {} and "curiosity.curiosity_scale" not in plain.pinned
    assert emc.settings("curiosity").curiosity_scale == 0.1 and emc.settings("emc").emc_loss_weight == 0.2
    assert emu.settings("curiosity").curiosity_scale == 0.1 and "emc" not in emu.components
    with pytest.raises(ValueError, match=r"config key 'emc.nope'"):
        plan_trials(envs=["matrix:climbing"], algos=["vdn"], seeds=[0], steps=10, out="runs",
                    overrides={"emc.nope": 1})


def test_plan_is_the_full_grid_with_one_run_directory_per_trial(tmp_path):
    trials = plan_trials(envs=ENVS, algos=ALGOS, seeds=range(2), steps=STEPS, out=tmp_path, overrides=OVERRIDES)
    assert len(trials) == 8 and len({t.run_dir for t in trials}) == 8
    assert all(t.config.learner.batch_size == 8 and t.config.steps == STEPS for t in trials)


@pytest.mark.slow
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


def test_packing_makes_one_task_per_cell_in_the_unpacked_run_directories(tmp_path):
    trials = plan_trials(envs=ENVS, algos=ALGOS, seeds=range(3), steps=STEPS, out=tmp_path, overrides=OVERRIDES)
    cells = pack_seeds(trials)
    assert [c.name for c in cells] == [f"{env.replace(':', '_')}_{algo}_seeds0,1,2" for env in ENVS for algo in ALGOS]
    assert [t.run_dir for c in cells for t in c.trials] == [t.run_dir for t in trials]
    # A cell of several seeds takes the sequential loop, as every group of runs does; nothing else changes.
    for packed, trial in zip((t for c in cells for t in c.trials), trials):
        assert packed.config == dataclasses.replace(trial.config, sequential=True)
    [plain] = plan_trials(envs=ENVS[:1], algos=ALGOS[:1], seeds=[4], steps=STEPS, out=tmp_path,
                          overrides={"sequential": False})
    [alone] = pack_seeds([plain])
    assert alone.trials[0].config == plain.config and not plain.config.sequential  # one seed is the plain trial


CELL_SEEDS, CELL_STEPS = range(2), 100
"""A packed cell of the tests below: two seeds, 100 env steps (100 updates, two checkpoints, two evaluations)."""


def packed_cell(out, env="matrix:climbing", overrides=OVERRIDES) -> list[dict]:
    [cell] = pack_seeds(plan_trials(envs=[env], algos=["sem-qmix"], seeds=CELL_SEEDS, steps=CELL_STEPS, out=out,
                                    overrides=overrides))
    return [t.config.to_dict() for t in cell.trials]


def test_a_packed_cell_matches_its_unpacked_trials_and_is_skipped_once_finished(tmp_path):
    results = run_packed_trial(packed_cell(tmp_path / "packed"))
    assert [r["status"] for r in results] == ["finished"] * 2
    unpacked = plan_trials(envs=["matrix:climbing"], algos=["sem-qmix"], seeds=CELL_SEEDS, steps=CELL_STEPS,
                           out=tmp_path / "unpacked", overrides={**OVERRIDES, "sequential": True})
    assert sorted(p.name for p in (tmp_path / "packed").iterdir()) == [t.name for t in unpacked]
    for trial, result in zip(unpacked, results):
        assert run_trial(trial.config.to_dict())["result"] == pytest.approx(result["result"], rel=TRAINING_REL,
                                                                           abs=TRAINING_ABS)
        rows, expected = comparable_rows(tmp_path / "packed" / trial.name), comparable_rows(trial.run_dir)
        assert [r[:2] for r in rows] == [r[:2] for r in expected]  # same names at the same steps
        for row, want in zip(rows, expected):
            assert row[2] == pytest.approx(want[2], rel=TRAINING_REL, abs=TRAINING_ABS), (trial.name, row)

    run_dirs = sorted((tmp_path / "packed").iterdir())
    before = {d: (d / "metrics.csv").stat().st_mtime_ns for d in run_dirs}
    again = run_packed_trial(packed_cell(tmp_path / "packed"))
    assert [r["status"] for r in again] == ["skipped"] * 2
    assert before == {d: (d / "metrics.csv").stat().st_mtime_ns for d in run_dirs}


def test_an_interrupted_packed_cell_continues_from_its_checkpoints(tmp_path):
    """The flaky env raises once in the middle of the cell; running the cell again ends as if it never had."""
    marker = tmp_path / "failed_once"
    env = "pz:flaky_env:climbing"
    # One env of the cell's 2 x 4 raises at its 15th step: about env step 60 of 100, after the first checkpoint.
    overrides = {**OVERRIDES, "env_args": {"marker": str(marker), "fail_after": 15}}
    with pytest.raises(FlakyEnvError):
        run_packed_trial(packed_cell(tmp_path / "cell", env, overrides=overrides))
    interrupted = sorted((tmp_path / "cell").iterdir())
    assert len(interrupted) == 2 and not any(run_finished(d) for d in interrupted)
    assert all(list((d / "checkpoints").glob("*")) for d in interrupted), "no checkpoint before the failure"
    assert [r["status"] for r in run_packed_trial(packed_cell(tmp_path / "cell", env, overrides=overrides))] == \
        ["finished"] * 2
    run_packed_trial(packed_cell(tmp_path / "twin", env, overrides=overrides))  # the marker exists: never fails
    for run_dir in interrupted:
        assert comparable_rows(run_dir) == comparable_rows(tmp_path / "twin" / run_dir.name), run_dir.name


@pytest.mark.slow
@pytest.mark.ray
def test_a_packed_sweep_runs_each_cell_as_one_trial_and_skips_finished_runs(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    runner = CliRunner()
    args = sweep_args(out, ENVS[:1], OVERRIDES, "--pack-seeds", steps=CELL_STEPS)
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "sweep: 4 trials to run in 2 Ray tasks, 0 already finished" in first.output
    assert "4 finished now, 0 already finished, 0 failed" in first.output
    names = [t.name for t in plan_trials(envs=ENVS[:1], algos=ALGOS, seeds=range(2), steps=CELL_STEPS, out=out)]
    assert sorted(p.parent.name for p in out.glob("*/final.json")) == sorted(names)
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "0 finished now, 4 already finished, 0 failed" in second.output
