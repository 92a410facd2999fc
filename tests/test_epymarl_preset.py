"""EPyMARL's QMIX and VDN setup for Level-Based Foraging by one name: ``--preset epymarl-lbf``, each value pinned to
the file and key of uoe-agents/epymarl it comes from."""

from __future__ import annotations

import pytest
from conftest import resolved_config

from semzoo.config import TrainConfig
from semzoo.presets import preset_departures, preset_fields
from semzoo.resolution import resolve

EPYMARL = "uoe-agents/epymarl src/config/"
SOURCES = {
    # semzoo field: (EPyMARL file, key, value there)
    "learner.lr": ("default.yaml", "lr", 0.0005),
    "learner.batch_size": ("default.yaml", "batch_size", 32),
    "agent.hidden_dim": ("default.yaml", "hidden_dim", 64),
    "learner.gamma": ("default.yaml", "gamma", 0.99),
    "learner.rms_alpha": ("default.yaml", "optim_alpha", 0.99),
    "learner.rms_eps": ("default.yaml", "optim_eps", 0.00001),
    "learner.grad_clip": ("default.yaml", "grad_norm_clip", 10.0),
    "team_reward": ("default.yaml", "reward_scalarisation (with common_reward: True)", "sum"),
    "learner.buffer_size": ("algs/qmix.yaml, algs/vdn.yaml", "buffer_size", 5000),
    "learner.target_update_episodes": ("algs/qmix.yaml, algs/vdn.yaml",
                                       "target_update_interval_or_tau (updates; one per episode in the episode runner)",
                                       200),
    "exploration.epsilon_start": ("algs/qmix.yaml, algs/vdn.yaml", "epsilon_start", 1.0),
    "exploration.epsilon_finish": ("algs/qmix.yaml, algs/vdn.yaml", "epsilon_finish", 0.05),
    "exploration.epsilon_anneal_steps": ("algs/qmix.yaml, algs/vdn.yaml", "epsilon_anneal_time", 50_000),
    "agent.obs_agent_id": ("algs/qmix.yaml, algs/vdn.yaml", "obs_agent_id", True),
    "agent.obs_last_action": ("algs/qmix.yaml, algs/vdn.yaml", "obs_last_action", False),
    "learner.double_q": ("algs/qmix.yaml, algs/vdn.yaml", "double_q", True),
    "test_episodes": ("envs/gymma.yaml", "test_nepisode", 100),
    "test_interval": ("envs/gymma.yaml", "test_interval", 50_000),
    "episode_limit": ("README.md's LBF command", "env_args.time_limit=50", 50),
}
QMIX_ONLY = {
    "qmix.embed_dim": ("algs/qmix.yaml", "mixing_embed_dim", 32),
    "qmix.hypernet_dim": ("algs/qmix.yaml", "hypernet_embed (hypernet_layers: 2)", 64),
}
NOT_BUILT = {("algs/qmix.yaml, algs/vdn.yaml", "standardise_rewards", True), ("algs/qmix.yaml, algs/vdn.yaml",
                                                                             "use_rnn", False)}
"""What EPyMARL's files set that semzoo does not build: a run of the preset names them when it starts."""

TASK = "lbf:Foraging-8x8-2p-2f-coop-v3"


@pytest.mark.parametrize("algo", ["qmix", "sem-qmix"])
def test_epymarl_lbf_gives_qmix_epymarls_values_each_from_its_file(algo):
    expected = {key: value for key, (_, _, value) in {**SOURCES, **QMIX_ONLY}.items()}
    assert preset_fields("epymarl-lbf", algo) == expected


@pytest.mark.parametrize("algo", ["vdn", "sem-vdn"])
def test_epymarl_lbf_gives_vdn_epymarls_values_each_from_its_file(algo):
    assert preset_fields("epymarl-lbf", algo) == {key: value for key, (_, _, value) in SOURCES.items()}


def test_epymarl_lbf_sets_nothing_for_other_bases():
    assert preset_fields("epymarl-lbf", "qplex") == {}


def test_a_run_of_epymarl_lbf_resolves_to_epymarls_setup_and_stays_so_when_stored():
    config = resolved_config(env=TASK, algo="qmix", preset="epymarl-lbf")
    assert (config.agent.obs_last_action, config.test_episodes, config.test_interval, config.team_reward,
            config.episode_limit) == (False, 100, 50_000, "sum", 50)
    assert resolve(TrainConfig.from_dict(config.to_dict())).config == config


def test_a_flag_typed_keeps_its_value_under_epymarl_lbf():
    config = resolve(TrainConfig(env=TASK, algo="vdn", preset="epymarl-lbf", test_episodes=32,
                                 pinned=("test_episodes",))).config
    assert config.test_episodes == 32 and config.test_interval == 50_000


def test_epymarl_lbf_names_what_it_does_not_build():
    note = preset_departures(TrainConfig(env=TASK, algo="qmix", preset="epymarl-lbf"))
    assert note is not None
    for _, key, value in NOT_BUILT:
        assert f"{key}: {value}" in note
    assert preset_departures(TrainConfig(env=TASK, algo="qmix")) is None
