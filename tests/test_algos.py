"""The algorithm table: every id, listing, and user mixers trainable from Python and from the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import NO_ACTOR, NO_ACTOR_FLAGS, error_lines, plugin_process_env
from typer.testing import CliRunner

from semzoo import TrainConfig, algorithm_ids, train
from semzoo.algos import Algorithm, parse_algorithm, register_algorithm
from semzoo.cli import app
from semzoo.config import ExplorationConfig, LearnerConfig
from semzoo.runfiles import read_metrics

PLUGINS = Path(__file__).parent / "plugins"
BUILTIN = ("vdn", "qmix", "qplex", "cw-qmix", "ow-qmix")


def test_table_lists_every_builtin_row_with_its_memory_variants():
    ids = algorithm_ids()
    for base in BUILTIN:
        assert {base, f"sem-{base}", f"saem-{base}"} <= set(ids)


@pytest.mark.parametrize(("algo", "mixer", "memory", "learner"), [
    ("qmix", "qmix", "none", "QLearner"),
    ("sem-vdn", "vdn", "sem", "QLearner"),
    ("saem-qplex", "qplex", "saem", "QLearner"),
    ("cw-qmix", "qmix", "none", "WQMIXLearner"),
    ("sem-ow-qmix", "qmix", "sem", "WQMIXLearner"),
])
def test_an_id_names_its_mixer_learner_and_memory(algo, mixer, memory, learner):
    parsed = parse_algorithm(algo)
    assert (parsed.mixer, parsed.memory, parsed.algorithm.learner_class().__name__) == (mixer, memory, learner)


def test_unknown_id_lists_the_rows_and_how_to_add_one(tmp_path):
    with pytest.raises(ValueError, match=r"unknown algorithm 'sem-nope'.*vdn, qmix.*register_mixer"):
        parse_algorithm("sem-nope")
    # TrainConfig is the ground floor and knows no algorithm table: train() judges the id, before any file is written
    with pytest.raises(ValueError, match="unknown algorithm 'qmix2'"):
        train(TrainConfig(algo="qmix2", env="matrix:climbing", steps=10, out=str(tmp_path)), progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_row_cannot_take_a_memory_prefix_as_its_name():
    with pytest.raises(ValueError, match="sem-"):
        register_algorithm(Algorithm("sem-thing", "qmix"))


def _toy_config(algo: str, out: Path) -> TrainConfig:
    return TrainConfig(**NO_ACTOR, env="matrix:additive", algo=algo, steps=600, seed=1, n_envs=8, test_episodes=8,
                       test_interval=10**9, log_interval=200, out=str(out), device="cpu",
                       exploration=ExplorationConfig(epsilon_anneal_steps=300),
                       learner=LearnerConfig(lr=5e-3, batch_size=32, buffer_size=500))


def test_a_mixer_registered_outside_the_package_trains_from_python(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    import toy_mixer_plugin  # noqa: F401  (registers "toy-sum")

    assert {"toy-sum", "sem-toy-sum", "saem-toy-sum"} <= set(algorithm_ids())
    run_dir, result = train(_toy_config("sem-toy-sum", tmp_path))
    losses = [r["value"] for r in read_metrics(run_dir) if r["name"] == "loss"]
    assert losses and all(torch.isfinite(torch.tensor(losses)))
    assert result["test_return_mean"] == 10.0  # the additive game's optimum: a weighted sum represents it


def test_a_mixer_registered_by_a_plugin_module_trains_from_the_cli(tmp_path):
    env = plugin_process_env()
    cli = [sys.executable, "-m", "semzoo.cli", "--plugin", "toy_mixer_plugin"]
    listing = subprocess.run([*cli, "algos"], capture_output=True, text=True, env=env, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "toy-sum" in listing.stdout
    done = subprocess.run([*cli, "train", "--env", "matrix:additive", "--algo", "toy-sum", "--steps", "300",
                           "--n-envs", "8", "--out", str(tmp_path), "--device", "cpu", "--log-interval", "100",
                           "--batch-size", "32", "--buffer-size", "500", *NO_ACTOR_FLAGS],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "toy-sum on matrix:additive" in done.stdout


def test_a_plugin_that_cannot_be_imported_is_a_one_line_error_of_the_environment(tmp_path):
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "--plugin", "no_such_plugin_module", "algos"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1  # a missing optional part, like a missing extra: exit 1
    assert done.stderr.strip().count("\n") == 0 and "no_such_plugin_module" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_registered_mixer_returning_b_t_is_one_line_from_the_cli(tmp_path, fresh_registries):
    """Without the Mixer's output check this trained on matrix:climbing with a [B, B] broadcast loss, exit 0."""
    result = CliRunner().invoke(app, ["--plugin", "contract_breakers", "train", "--env", "matrix:climbing",
                                      "--algo", "badshape", "--steps", "100", "--batch-size", "8", "--buffer-size",
                                      "64", "--test-episodes", "4", "--out", str(tmp_path), *NO_ACTOR_FLAGS])
    assert result.exit_code == 1, result.output
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith("Error: mixer ForgotKeepdimMixer (registered as 'badshape'): mix() returned a tensor "
                               "of shape (8, 1) and dtype torch.float32; expected a floating-point tensor of shape "
                               "[B, T, 1] = (8, 1, 1)"), lines[0]


def test_register_algorithm_checks_the_row_when_it_is_registered(fresh_registries):
    with pytest.raises(ValueError, match=r"algorithm 'mine': mixer 'nomixer' is not registered: expected one of "
                                         r".*qmix.*register_mixer"):
        register_algorithm(Algorithm("mine", "nomixer"))
    with pytest.raises(ValueError, match=r"learner 'QLearner': expected 'module:Class'"):
        register_algorithm(Algorithm("mine", "qmix", learner="QLearner"))
    with pytest.raises(ValueError, match=r"learner module 'no_such_learners' cannot be imported"):
        register_algorithm(Algorithm("mine", "qmix", learner="no_such_learners:Mine"))
    with pytest.raises(ValueError, match=r"module 'semzoo.learners.wqmix' has no 'Nope'"):
        register_algorithm(Algorithm("mine", "qmix", learner="semzoo.learners.wqmix:Nope"))
    with pytest.raises(TypeError, match=r"learner 'torch.nn:Linear' is .*expected a subclass of .*QLearner"):
        register_algorithm(Algorithm("mine", "qmix", learner="torch.nn:Linear"))
    assert "mine" not in algorithm_ids()


def test_registering_an_algorithm_again_is_a_no_op_and_another_under_its_name_an_error(fresh_registries):
    row = Algorithm("mine", "qmix", learner="semzoo.learners.wqmix:WQMIXLearner", learner_args={"weighting": "cw"})
    register_algorithm(row)
    register_algorithm(Algorithm("mine", "qmix", learner="semzoo.learners.wqmix:WQMIXLearner",
                                 learner_args={"weighting": "cw"}))  # an equal row: a plugin imported twice
    with pytest.raises(ValueError, match=r"algorithm name 'mine' is already registered to .*pass replace=True"):
        register_algorithm(Algorithm("mine", "qmix"))
    with pytest.raises(ValueError, match="algorithm name 'qmix' is already registered"):
        register_algorithm(Algorithm("qmix", "vdn"))
    register_algorithm(Algorithm("mine", "vdn"), replace=True)
    assert parse_algorithm("sem-mine").mixer == "vdn"


def test_a_plugin_whose_registration_is_refused_is_one_line_naming_it(fresh_registries):
    result = CliRunner().invoke(app, ["--plugin", "unknown_mixer_algorithm", "algos"])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith("Error: plugin module 'unknown_mixer_algorithm': algorithm 'my-wqmix': mixer "
                               "'my-mixer' is not registered: expected one of qmix, qplex"), lines[0]
