"""The run resolved once: ``semzoo.resolution`` applies a config's runtime and preset and parses its algorithm id, in one
explicit step that every run takes; a ``TrainConfig`` itself holds what was asked for."""

from __future__ import annotations

import dataclasses

import pytest

import semzoo
from semzoo.algos import parse_algorithm
from semzoo.config import TrainConfig
from semzoo.resolution import resolve


def test_a_config_holds_what_was_asked_and_resolve_fills_what_its_runtime_sets():
    asked = TrainConfig(env="matrix:climbing", algo="qmix", runtime="semzoo-0.2")
    assert (asked.n_envs, asked.sequential) == (1, True)  # as asked: nothing applied at construction
    run = semzoo.resolve(asked)
    assert isinstance(run, semzoo.ResolvedRun)
    assert (run.config.n_envs, run.config.sequential, run.config.learner.target_count) == (8, False, "collected")
    assert run.algo == parse_algorithm("qmix") and run.algo.mixer == "qmix" and not run.algo.has_memory


def test_resolving_is_idempotent_so_a_stored_config_reads_back_as_it_ran():
    run = resolve(TrainConfig(env="smax:3s5z", algo="sem-qplex", preset="authors-smac"))
    assert run.config.settings("qplex").qplex_transformation == "qatten" and run.config.learner.updates_per_episode == 2.0
    stored = TrainConfig.from_dict(run.config.to_dict())
    assert stored == run.config and resolve(stored).config == run.config
    assert resolve(run) is run  # a resolved run is not resolved again


def test_a_pinned_field_keeps_its_value_against_the_runtime():
    run = resolve(TrainConfig(runtime="semzoo-0.2", n_envs=1, pinned=("n_envs",)))
    assert run.config.n_envs == 1 and run.config.sequential is False


def test_resolve_judges_the_id_and_the_presets_map_in_one_line():
    with pytest.raises(ValueError, match=r"^unknown algorithm 'qmixx': expected <base> or <memory>-<base>"):
        resolve(TrainConfig(algo="qmixx"))
    with pytest.raises(ValueError, match=r"^--preset authors-smac with qplex on smax:MMM2: on MMM2 "):
        resolve(TrainConfig(env="smax:MMM2", algo="qplex", preset="authors-smac"))
    with pytest.raises(TypeError, match=r"expected a semzoo\.TrainConfig"):
        resolve({"algo": "qmix"})  # type: ignore[arg-type]


def test_a_resolved_runs_config_changes_keep_its_parsed_id_and_refuse_another():
    run = resolve(TrainConfig(algo="sem-qmix"))
    smaller = run.replace(learner=dataclasses.replace(run.config.learner, buffer_size=64, batch_size=8))
    assert smaller.algo is run.algo and smaller.config.learner.buffer_size == 64
    with pytest.raises(ValueError, match="resolve it anew"):
        run.with_config(dataclasses.replace(run.config, algo="qmix"))


def test_every_run_stores_its_resolved_config(tmp_path):
    from semzoo.runfiles import read_run_config

    config = TrainConfig(env="matrix:climbing", algo="qmix", runtime="semzoo-0.2", steps=16, n_envs=2,
                         pinned=("n_envs",), test_interval=16, test_episodes=2, learner=dataclasses.replace(
                             TrainConfig().learner, batch_size=2, buffer_size=8), out=str(tmp_path), device="cpu")
    run_dir, _ = semzoo.train(config, progress=False, tensorboard=False)
    stored = read_run_config(run_dir)
    assert stored == resolve(config).config and stored.learner.timeout_as_terminal is False


def test_a_seeds_group_of_the_overlapped_runtime_takes_the_sequential_loop_with_the_runtimes_other_fields(tmp_path):
    config = TrainConfig(env="matrix:climbing", algo="qmix", runtime="semzoo-0.2", steps=16, test_interval=16,
                         test_episodes=2, learner=dataclasses.replace(TrainConfig().learner, batch_size=2,
                                                                      buffer_size=8), out=str(tmp_path), device="cpu")
    results = semzoo.train_seeds(config, [0, 1], progress=False, tensorboard=False)
    from semzoo.runfiles import read_run_config

    stored = [read_run_config(run_dir) for run_dir, _ in results]
    assert [c.seed for c in stored] == [0, 1]
    assert all(c.sequential and c.n_envs == 8 and c.learner.target_count == "collected" for c in stored)
