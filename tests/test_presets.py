"""Baselines as their authors ran them on SMAC: ``--preset authors-smac``, the env's state layout, the burn-in."""

from __future__ import annotations

import json

import pytest
from conftest import NO_ACTOR, NO_ACTOR_FLAGS, error_lines, resolved_config
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.config import LearnerConfig, TrainConfig
from semzoo.episodic.settings import LAGMASettings
from semzoo.presets import preset_fields, unused_preset
from semzoo.run.trainer import Trainer
from semzoo.types import StateLayout

QPLEX_SMAC = {"qplex_transformation": "qatten", "qplex_lambda_layers": 1, "qplex_attend_dim": 64, "qatten_heads": 4,
              "qatten_reg": 0.001}


@pytest.mark.parametrize("algo", ["qplex", "sem-qplex", "saem-qplex"])
def test_authors_smac_preset_gives_qplex_and_its_memory_variants_the_qplex_papers_setup(algo):
    config = resolved_config(env="smax:3s5z", algo=algo, preset="authors-smac")
    assert {k: getattr(config.settings("qplex"), k) for k in QPLEX_SMAC} == QPLEX_SMAC
    learner = config.learner
    assert (learner.updates_per_episode, learner.target_update_episodes, learner.learn_start_episodes) == (2.0, 100, 100)
    assert TrainConfig.from_dict(config.to_dict()) == config  # a resumed run reads the same setup


def test_authors_smac_preset_gives_emc_two_updates_per_episode_and_its_own_burn_in():
    emc_qmix = resolved_config(algo="emc-qmix", preset="authors-smac")
    assert (emc_qmix.learner.updates_per_episode, emc_qmix.learner.target_update_episodes) == (2.0, 100)
    assert emc_qmix.learner.learn_start_episodes is None and emc_qmix.settings("qmix") == TrainConfig(algo="qmix").settings("qmix")
    emc_qplex = resolved_config(algo="emc-qplex", preset="authors-smac")  # EMC's SMAC base: QPLEX-Qatten, burn-in 32
    assert emc_qplex.settings("qplex").qplex_transformation == "qatten" and emc_qplex.learner.learn_start_episodes is None


@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "vdn", "cw-qmix", "sem-ow-qmix", "emu-qmix"])
def test_authors_smac_preset_leaves_the_other_baselines_at_the_defaults(algo):
    assert preset_fields("authors-smac", algo) == {}
    assert resolved_config(algo=algo, preset="authors-smac").to_dict() == {**TrainConfig(algo=algo).to_dict(),
                                                                       "preset": "authors-smac",
                                                                       "env_args": {"profile": "smac"},  # on 3m
                                                                       "team_reward": "mean"}


def test_a_field_given_another_value_keeps_it_under_the_preset():
    config = resolved_config(algo="qplex", preset="authors-smac", learner=LearnerConfig(updates_per_episode=3.0))
    assert config.learner.updates_per_episode == 3.0 and config.learner.learn_start_episodes == 100


def algos_entries() -> list[str]:
    """The entries of `semzoo algos`, each wrapped entry joined back into one line (its later lines are indented)."""
    result = CliRunner().invoke(app, ["algos"])
    assert result.exit_code == 0, result.output
    entries: list[str] = []
    for line in result.output.splitlines():
        if line.startswith("    ") and entries:
            entries[-1] += " " + line.strip()
        else:
            entries.append(line)
    return entries


def test_semzoo_algos_says_what_the_preset_sets():
    lines = [line for line in algos_entries() if "--preset authors-smac" in line]
    assert any("qplex" in line and "qplex_transformation=qatten" in line and "updates_per_episode=2.0" in line
               and "learn_start_episodes=100" in line and "wjh720/QPLEX" in line for line in lines)
    assert any("emc-" in line and "updates_per_episode=2.0" in line and "kikojay/EMC" in line for line in lines)


def test_qatten_on_an_env_without_a_state_layout_is_one_line_naming_the_env(tmp_path):
    result = CliRunner().invoke(app, ["train", "--env", "matrix:climbing", "--algo", "qplex", "--preset",
                                      "authors-smac", "--steps", "100", "--out", str(tmp_path), *NO_ACTOR_FLAGS])
    assert result.exit_code == 2, result.output
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "'matrix:climbing'" in lines[0] and "state_layout" in lines[0] and "--preset authors-smac" in lines[0]


def test_smax_declares_its_allies_blocks_as_the_state_layout():
    pytest.importorskip("jaxmarl")
    from semzoo.envs.registry import make_env
    from semzoo.envs.smax import SMAXVecEnv
    from semzoo.wrappers.ctde import CTDEEnv

    vec = SMAXVecEnv("2s3z", n_envs=1)
    n_types = vec.state_layout.unit_dim - 4
    assert vec.state_layout == StateLayout(n_units=5, unit_dim=4 + n_types)
    arrays = vec.reset(seed=0)
    blocks = arrays.state[0, :vec.state_layout.end].reshape(5, -1)
    assert (blocks[:, 0] == 1.0).all()  # each ally's block opens with its health fraction: full at the start
    assert (blocks[:, 4:].sum(-1) == 1.0).all()  # and ends with its type one-hot
    ctde = CTDEEnv(make_env("smax:2s3z"))
    assert ctde.state_layout == vec.state_layout
    ctde.close()


def test_trainer_waits_for_the_burn_in_then_takes_updates_per_episode(tmp_path):
    config = TrainConfig(env="matrix:climbing", algo="qmix", steps=80, n_envs=8, test_interval=80, test_episodes=2,
                         out=str(tmp_path), learner=LearnerConfig(batch_size=8, updates_per_episode=2.0,
                                                                  learn_start_episodes=40), **NO_ACTOR)
    trainer = Trainer(config, run_dir=tmp_path / "run", tensorboard=False)
    updates_by_episodes = {}
    while trainer.counters.env_steps < config.steps:  # Algorithm 1's loop, one iteration at a time
        trainer.learn(len(trainer.collect().returns))
        updates_by_episodes[trainer.counters.episodes] = trainer.counters.updates
    trainer.close()
    assert updates_by_episodes[32] == 0  # under the burn-in of 40 episodes: no update, no credit piled up
    assert updates_by_episodes[40] == 16 and updates_by_episodes[80] == 2 * (80 - 32)


def test_learn_start_beyond_the_buffer_is_refused():
    with pytest.raises(ValueError, match="learn_start_episodes=100 is larger than buffer_size=50"):
        LearnerConfig(buffer_size=50, learn_start_episodes=100)


def test_run_config_records_the_preset_and_what_it_set(tmp_path):
    result = CliRunner().invoke(app, ["train", "--env", "matrix:climbing", "--algo", "emc-qmix", "--preset",
                                      "authors-smac", "--steps", "64", "--test-interval", "64", "--test-episodes", "2",
                                      "--out", str(tmp_path), "--run-name", "r", *NO_ACTOR_FLAGS])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["preset"] == "authors-smac" and saved["learner"]["updates_per_episode"] == 2.0


@pytest.mark.parametrize(("env", "options"), [
    ("smax:MMM2", "weighted_head: True, nonlinear: True"), ("smac:MMM2", "weighted_head: True, nonlinear: True"),
    ("smax:3s5z_vs_3s6z", "weighted_head: True"), ("smac:3s5z_vs_3s6z", "weighted_head: True"),
])
@pytest.mark.parametrize("algo", ["qplex", "sem-qplex"])
def test_authors_smac_qplex_refuses_the_maps_where_its_authors_used_options_semzoo_lacks(env, options, algo):
    with pytest.raises(ValueError, match=r"^--preset authors-smac") as refused:
        resolved_config(env=env, algo=algo, preset="authors-smac")
    message = str(refused.value)
    assert "\n" not in message and options in message and env in message
    TrainConfig(env=env, algo=algo)  # without the preset: the default QPLEX
    resolved_config(env=env, algo="qmix", preset="authors-smac")  # the preset sets nothing for QMIX


def test_train_refuses_them_as_a_usage_error_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["train", "--env", "smax:3s5z_vs_3s6z", "--algo", "qplex", "--preset",
                                      "authors-smac", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: --preset authors-smac") and "weighted_head" in line


LAGMA_SPARSE = {"lagma_n_codes": 256, "lagma_vq_coef": 2.0, "lagma_commit_coef": 1.0, "lagma_coverage_coef": 1.0,
                "lagma_vqvae_interval": 40, "lagma_codebook_interval": 10}


@pytest.mark.parametrize("env", ["smax:3m", "smax:2s3z", "smac:3m"])
def test_authors_sparse_gives_lagma_its_sparse_config_of_3m_and_2s3z(env):
    config = resolved_config(env=env, algo="lagma-qmix", preset="authors-sparse")
    assert {k: getattr(config.settings("lagma"), k) for k in LAGMA_SPARSE} == LAGMA_SPARSE
    assert config.exploration.epsilon_anneal_steps == 50_000 and config.settings("lagma").lagma_top_k == 30
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_authors_sparse_takes_2m_vs_1z_intervals_and_epsilon_from_its_own_file():
    config = resolved_config(env="smax:2m_vs_1z", algo="lagma-vdn", preset="authors-sparse")
    assert (config.settings("lagma").lagma_vqvae_interval, config.settings("lagma").lagma_codebook_interval) == (10, 20)
    assert config.settings("lagma").lagma_n_codes == 256 and config.exploration.epsilon_anneal_steps == 500_000


@pytest.mark.parametrize("algo", ["qmix", "sem-qmix", "emu-qmix", "emc-qmix", "mc-qmix"])
def test_authors_sparse_sets_nothing_for_ids_whose_authors_have_no_sparse_config(algo):
    assert preset_fields("authors-sparse", algo, "smax:3m") == {}
    config = resolved_config(env="smax:3m", algo=algo, preset="authors-sparse")
    assert unused_preset(config) is not None and "lagma-<base>" in unused_preset(config)


def test_authors_sparse_keeps_a_typed_interval_and_refuses_8m_whose_file_does_not_say():
    typed = resolved_config(env="smax:3m", algo="lagma-qmix", preset="authors-sparse",
                        components={"lagma": LAGMASettings(lagma_vqvae_interval=10)}, pinned=("lagma.lagma_vqvae_interval",))
    assert typed.settings("lagma").lagma_vqvae_interval == 10 and typed.settings("lagma").lagma_codebook_interval == 10
    with pytest.raises(ValueError, match=r"^--preset authors-sparse with lagma-qmix on smax:8m") as refused:
        resolved_config(env="smax:8m", algo="lagma-qmix", preset="authors-sparse")
    assert "merge conflict" in str(refused.value) and "lagma_sc2_sparse_8m.yaml" in str(refused.value)
    resolved_config(env="smax:8m", algo="qmix", preset="authors-sparse")  # it sets nothing for QMIX there


def test_train_runs_lagma_with_the_sparse_preset_and_records_it(tmp_path):
    result = CliRunner().invoke(app, ["train", "--env", "matrix:climbing", "--algo", "lagma-qmix", "--preset",
                                      "authors-sparse", "--lagma-latent-dim", "2", "--steps", "64",
                                      "--test-interval", "64", "--test-episodes", "2", "--out", str(tmp_path), "--run-name", "r",
                                      *NO_ACTOR_FLAGS])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["preset"] == "authors-sparse" and saved["lagma"]["lagma_n_codes"] == 256
    [line] = [line for line in algos_entries() if line.strip().startswith("--preset authors-sparse")]
    assert "lagma_n_codes=256" in line and "on 2m_vs_1z: lagma_vqvae_interval=10" in line and "8m" in line


def test_lagmas_sparse_preset_on_the_dense_reward_says_so_in_one_line():
    from semzoo.presets import preset_reward_mismatch

    dense = resolved_config(env="smax:3m", algo="lagma-qmix", preset="authors-sparse")
    assert preset_reward_mismatch(dense) == (
        "--preset authors-sparse is made for LAGMA's sparse SMAC reward (aailabkaist/LAGMA config/envs/sc2_sparse.yaml); "
        "smax:3m runs on reward=dense: add --env-arg reward=deaths for the reward it was made for")
    assert preset_reward_mismatch(resolved_config(env="smax:3m", algo="lagma-qmix", preset="authors-sparse",
                                              env_args={"reward": "deaths"})) is None
    assert preset_reward_mismatch(resolved_config(env="smax:3m", algo="qmix", preset="authors-sparse")) is None


def test_a_run_of_the_sparse_preset_on_another_reward_says_so_when_it_starts(tmp_path):
    result = CliRunner().invoke(app, ["train", "--env", "matrix:two_step", "--algo", "lagma-qmix", "--preset",
                                      "authors-sparse", "--steps", "40", "--test-interval", "40", "--test-episodes",
                                      "2", "--no-tensorboard", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    (note,) = [i for i, line in enumerate(lines) if "--preset authors-sparse is made for" in line]
    assert lines[note].startswith("Warning: ") and "matrix:two_step pays its own reward" in lines[note]
    assert not any(line.startswith("[train]") for line in lines[:note])  # said before the run's progress
