"""The defaults are the paper's: every default that a source fixes, stated here with that source.

Sources: the SEM paper (Ma & Li, 2021), its experiments section and its appendix ("Experimental settings" and the
table of SEM's hyper-parameters); PyMARL's configs (oxwhirl/pymarl, src/config/default.yaml and algs/qmix.yaml),
which the paper adopts for every common hyper-parameter; and the configs of the authors of QPLEX (wjh720/QPLEX),
WQMIX (oxwhirl/wqmix), EMC (kikojay/EMC), EMU (HyunghoNa/EMU) and LAGMA (aailabkaist/LAGMA). A changed default fails
``test_default_is_its_sources_value[<key>]``. Every leaf of the config tree is either in ``PINNED`` or in
``NOT_FIXED`` (with why no source fixes it), so a new field fails until it is classified. The golden runs
(tests/golden_runs.py) are the defaults plus named overrides, pinned here too: a default cannot change unseen by
both the golden rows and this file.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from golden_runs import ALGOS, ENVS, GOLDEN_OVERRIDES, SAEM_OVERRIDES, SMAX_OVERRIDES, golden_config, golden_overrides

from semzoo.config import BUILTIN_COMPONENTS, TrainConfig, component_fields, config_fields

PAPER = "SEM paper (shared/paper/sem.tex)"
PAPER_APPENDIX = f"{PAPER}, appendix, experimental settings"
PAPER_TABLE = f"{PAPER}, appendix table 'The hyper-parameters in SEM on SMAC'"
PYMARL = "PyMARL oxwhirl/pymarl src/config/default.yaml"
PYMARL_QMIX = "PyMARL oxwhirl/pymarl src/config/algs/qmix.yaml"
QPLEX = "QPLEX wjh720/QPLEX pymarl-master/src/config/algs/qplex_sc2.yaml"
WQMIX = "WQMIX oxwhirl/wqmix src/config/algs/cw_qmix.yaml"
EMC = "EMC kikojay/EMC pymarl/src/config/algs/EMC_sc2.yaml"
EMC_CODE = "EMC kikojay/EMC code"
EMU = "EMU HyunghoNa/EMU EMU_release_pymarl/src/config/algs/EMU_sc2.yaml"
EMU_CODE = "EMU HyunghoNa/EMU code (EMU_release_pymarl)"
LAGMA = "LAGMA aailabkaist/LAGMA LAGMA_v0_release/src/config/algs/lagma_sc2.yaml"
LAGMA_CODE = "LAGMA aailabkaist/LAGMA code (LAGMA_v0_release/src)"

PINNED: dict[str, tuple[Any, str]] = {
    # the test schedule
    "test_interval": (10_000, f"{PAPER}, experiments: 32 evaluation episodes every 10000 time-steps"),
    "test_episodes": (32, f"{PAPER}, experiments: 32 evaluation episodes every 10000 time-steps"),
    # the agent network
    "agent.hidden_dim": (64, f"{PYMARL}: rnn_hidden_dim 64"),
    "agent.obs_agent_id": (True, f"{PYMARL}: obs_agent_id True"),
    "agent.obs_last_action": (True, f"{PYMARL}: obs_last_action True"),
    # the mixers
    "qmix.embed_dim": (32, f"{PYMARL_QMIX}: mixing_embed_dim 32 (QMIX's as the paper's appendix adopts)"),
    "qmix.hypernet_dim": (64, f"{PYMARL_QMIX}: hypernet_layers 2, hypernet_embed 64"),
    "qplex.qplex_embed_dim": (32, f"{QPLEX}: mixing_embed_dim 32"),
    "qplex.qplex_hypernet_dim": (64, f"{QPLEX}: hypernet_embed 64"),
    "qplex.qplex_heads": (4, f"{QPLEX}: num_kernel 4"),
    "wqmix.central_embed_dim": (256, f"{WQMIX}: central_mixing_embed_dim 256"),
    "wqmix.wqmix_alpha": (0.75, f"{PAPER}, appendix (SEM-WQMIX): alpha is set to 0.75"),
    # SEM's memory
    "memory.lam": (0.1, f"{PAPER_TABLE}: lambda 0.1"),
    "memory.proj_dim": (4, f"{PAPER_TABLE}: D 4 (EMC's emdqn_latent_dim is 4 too)"),
    "memory.capacity": (1_000_000, f"{PAPER_TABLE}: |Q^S| 10^6 (EMC's emdqn_buffer_size is 1000000 too)"),
    "memory.pending_size": (5000, f"{PAPER_TABLE}: |M| 5000"),
    "memory.miss_rule": ("target", f"{PAPER}, sec. 'Training Procedure' of SEM: a missing Q^S(s_{{t+1}}) is "
                                   "replaced by max_u Q_tot(tau_{t+1}, u; theta^-)"),
    # the loss and its optimiser
    "learner.gamma": (0.99, f"{PAPER_APPENDIX}: gamma 0.99; {PYMARL}: gamma 0.99"),
    "learner.lr": (5e-4, f"{PAPER_APPENDIX}: RMSprop, learning rate 5e-4; {PYMARL}: lr 0.0005"),
    "learner.rms_alpha": (0.99, f"{PYMARL}: optim_alpha 0.99"),
    "learner.rms_eps": (1e-5, f"{PYMARL}: optim_eps 0.00001"),
    "learner.grad_clip": (10.0, f"{PYMARL}: grad_norm_clip 10"),
    "learner.batch_size": (32, f"{PAPER_APPENDIX}: B = 32 episodes; {PYMARL}: batch_size 32"),
    "learner.buffer_size": (5000, f"{PAPER_APPENDIX}: replay buffer of 5000 episodes; {PYMARL_QMIX}: buffer_size 5000"),
    "learner.target_update_episodes": (200, f"{PAPER_APPENDIX}: target networks updated every 200 training episodes; "
                                            f"{PYMARL_QMIX}: target_update_interval 200"),
    "learner.double_q": (True, f"{PYMARL_QMIX}: double_q True"),
    "learner.updates_per_episode": (1.0, f"{PAPER}, Algorithm 1: one update per collected episode"),
    "learner.replay_dtype": ("float32", "PyMARL oxwhirl/pymarl src/components/episode_buffer.py: float32 by default"),
    # the epsilon schedule
    "exploration.epsilon_start": (1.0, f"{PAPER_APPENDIX}: epsilon annealed from 1.0; {PYMARL_QMIX}: epsilon_start 1.0"),
    "exploration.epsilon_finish": (0.05, f"{PAPER_APPENDIX}: to 0.05; {PYMARL_QMIX}: epsilon_finish 0.05"),
    "exploration.epsilon_anneal_steps": (50_000, f"{PAPER_APPENDIX}: over 50K time steps; "
                                                 f"{PYMARL_QMIX}: epsilon_anneal_time 50000"),
    # EMC's (and EMU's) curiosity
    "curiosity.curiosity": (True, f"{EMC}: the curiosity reward is on (curiosity_scale 0.001); {EMU} too"),
    "curiosity.curiosity_scale": (0.001, f"{EMC}: curiosity_scale 0.001; {EMU}: the same"),
    "curiosity.curiosity_decay_rate": (0.9, f"{EMC}: curiosity_decay_rate 0.9"),
    "curiosity.curiosity_decay_steps": (100_000, f"{EMC}: curiosity_decay_cycle 100000"),
    "curiosity.curiosity_floor": (0.0, f"{EMC}: curiosity_decay_stop 0.0"),
    "curiosity.curiosity_tau": (0.005, f"{EMC}: soft_update_tau 0.005"),
    "curiosity.curiosity_lr": (5e-4, f"{EMC_CODE}: the predictor's Adam at the learner's lr, PyMARL's 0.0005"),
    "curiosity.curiosity_target_scale": (10.0, f"{EMC_CODE}: learners/vdn_Qlearner.py predicts 10 x the "
                                               "soft copy's Q-values"),
    # EMC's memory
    "emc.emc_loss_weight": (0.1, f"{EMC}: emdqn_loss_weight 0.1"),
    "emc.emc_atol": (1e-8, f"{EMC_CODE}: modules/agents/LRN_KNN.py, np.allclose(atol=1e-8)"),
    "emc.emc_rtol": (1e-5, f"{EMC_CODE}: modules/agents/LRN_KNN.py, np.allclose with numpy's default rtol 1e-5"),
    # EMU's memory
    "emu.emu_delta": (1.3e-5, f"{EMU}: atol_memory 0.000013 (fixed_delta True)"),
    "emu.emu_hidden_dim": (64, f"{EMU_CODE}: the embedder's hidden layers of 64"),
    "emu.emu_lr": (5e-4, f"{EMU_CODE}: the embedder's Adam at lr 0.0005"),
    "emu.emu_grad_clip": (10.0, f"{EMU_CODE}: the embedder's gradient clipped at grad_norm_clip 10"),
    "emu.emu_state_loss_weight": (0.1, f"{EMU}: lambda_s 0.1"),
    "emu.emu_train_interval": (10_000, f"{EMU}: ec_buffer_embedder_update_interval 10000"),
    "emu.emu_train_samples": (102_400, f"{EMU}: emb_training_batch 102400"),
    "emu.emu_train_batch": (1024, f"{EMU}: emb_training_mini_batch 1024"),
    "emu.emu_norm_interval": (200, f"{EMU}: ec_buffer_stats_update_interval 200"),
    "emu.emu_incentive": (True, f"{EMU}: optimality_incentive True"),
    "emu.emu_flag_init_desirability": (False, f"{EMU}: flag_init_desirability False"),
    "qplex.qatten_heads": (4, f"{EMU}: n_head 4 (its Qatten coefficients)"),
    "qplex.qatten_reg": (0.001, f"{EMU}: attend_reg_coef 0.001 (its Qatten coefficients)"),
    # LAGMA's memory (its dense-reward SMAC config; the sparse ones, lagma_sc2_sparse_*.yaml, are named in each field's note)
    "lagma.lagma_n_codes": (64, f"{LAGMA}: n_codes 64"),
    "lagma.lagma_latent_dim": (8, f"{LAGMA}: latent_dim 8"),
    "lagma.lagma_hidden_dim": (64, f"{LAGMA}: vae_hidden_dim 64"),
    "lagma.lagma_lr": (5e-4, f"{LAGMA_CODE}: learners/lagma_learner.py, the VQ-VAE's Adam at args.lr, 0.0005 "
                             "(src/config/default.yaml)"),
    "lagma.lagma_vq_coef": (1.0, f"{LAGMA}: vq_coef 1.0"),
    "lagma.lagma_commit_coef": (0.5, f"{LAGMA}: commit_coef 0.5"),
    "lagma.lagma_coverage_coef": (0.5, f"{LAGMA}: coverage_coef 0.5"),
    "lagma.lagma_vqvae_interval": (10, f"{LAGMA}: vqvae_update_interval 10"),
    "lagma.lagma_codebook_interval": (40, f"{LAGMA}: codebook_update_interval 40"),
    "lagma.lagma_start_steps": (50_000, f"{LAGMA}: buffer_update_time 50000"),
    "lagma.lagma_sequence_interval": (5, f"{LAGMA}: trj_update_freq 5"),
    "lagma.lagma_value_window": (100, f"{LAGMA}: n_max_code 100"),
    "lagma.lagma_top_k": (30, f"{LAGMA}: k_top_seq 30"),
    "lagma.lagma_incentive": (True, f"{LAGMA}: goal_reward True"),
    # the runtime: PyMARL's episode runner, as the paper ran it (its appendix adopts PyMARL's defaults)
    "n_envs": (1, f"{PYMARL}: runner episode, batch_size_run 1 (one env, one episode at a time)"),
    "sequential": (True, "PyMARL oxwhirl/pymarl src/run.py: collect an episode, then train, one after the other"),
    "learner.timeout_as_terminal": (True, "SMAC oxwhirl/smac starcraft2.py and PyMARL src/config/envs/sc2.yaml: "
                                          "continuing_episode False, so a time limit is stored as terminal"),
    "learner.target_count": ("pymarl", "PyMARL oxwhirl/pymarl src/learners/q_learner.py: the target syncs in train() "
                                       "once episode_num is target_update_interval past the last sync"),
    "runtime": ("pymarl", f"{PAPER_APPENDIX}: the default implementation of PyMARL (its episode runner)"),
    "learner.td_lambda": (0.0, f"{PAPER}, eq. 2 and 7: the one-step target; {PYMARL_QMIX}: no td_lambda"),
}
"""Config key -> (the default, where that value comes from)."""

NOT_FIXED: dict[str, str] = {
    "env": "semzoo's default job (README): SMAX 3m",
    "env_args": "the env factory's own defaults",
    "team_reward": "the env family's own ('env'): the sum of the agents' rewards on lbf: as EPyMARL's gymma wrapper "
                   "forms it, the mean elsewhere (SMAX and the matrix games have one team reward)",
    "algo": "semzoo's default job (README): SEM-QMIX",
    "steps": "semzoo's default job: 20k env steps, under 2 minutes on 2 cores, by which SEM-QMIX wins SMAX 3m "
             "(the paper trains 0.5M-2M)",
    "seed": "a seed",
    "out": "where run directories go",
    "run_name": "derived from env, algo and seed",
    "device": "the machine's",
    "threads": "semzoo's performance setting (docs/design.md, Threads)",
    "episode_limit": "the env's own limit",
    "log_interval": "logging only",
    "save_interval": "checkpointing only",
    "keep_checkpoints": "disk use only",
    "qplex.qplex_attend_dim": "semzoo's width: QPLEX's SMAC config has one linear layer per head (adv_hypernet_layers 1)",
    "emu.emu_desirable_return": "semzoo's rule for envs that report no wins (EMU marks won episodes)",
    "compile_update": "a speed setting of semzoo's (CUDA only), no learning change",
    "learner.replay_device": "a speed setting of semzoo's (where the replay buffer lives), no learning change",
    "group_collect": "a speed setting of semzoo's (--seeds groups), the same episodes up to float rounding",
    "pinned": "which fields were given explicitly: none by default",
    "preset": "semzoo's switch: none keeps the paper's defaults; authors-smac and authors-sparse set the "
              "authors' SMAC setups",
    "qplex.qplex_transformation": "semzoo's general QPLEX by default; Qatten is the authors' SMAC setup (the preset)",
    "qplex.qplex_lambda_layers": "semzoo's two-layer lambda heads (docs/matrix_games.md); the preset sets the authors' 1",
    "learner.learn_start_episodes": "unset: learning starts once a batch is stored (PyMARL); the preset sets QPLEX's 100",
}
"""Config key -> why no paper or authors' config fixes its default (semzoo's choice, a path, the machine)."""

DEFAULTS = {f.key: f.default for f in [*config_fields(), *(f for f in component_fields() if f.section in BUILTIN_COMPONENTS)]}
"""Every field's default: the config's and the built-in memories' own settings (a plugin's, registered by a test, aside)."""


def test_every_config_field_is_pinned_to_a_source_or_named_as_not_fixed():
    unclassified = sorted(DEFAULTS.keys() - PINNED.keys() - NOT_FIXED.keys())
    assert not unclassified, (f"config fields {unclassified} are new: classify each in tests/test_defaults.py, "
                              "in PINNED with its source or in NOT_FIXED with why no source fixes it")
    assert not PINNED.keys() & NOT_FIXED.keys(), sorted(PINNED.keys() & NOT_FIXED.keys())
    gone = sorted((PINNED.keys() | NOT_FIXED.keys()) - DEFAULTS.keys())
    assert not gone, f"{gone} are no config fields any more: remove them from tests/test_defaults.py"


@pytest.mark.parametrize("key", sorted(PINNED))
def test_default_is_its_sources_value(key):
    expected, source = PINNED[key]
    actual = DEFAULTS[key]
    assert actual == expected and type(actual) is type(expected), (
        f"default {key} = {actual!r}, expected {expected!r} ({source})")


def test_the_golden_overrides_are_the_recorded_ones():
    assert GOLDEN_OVERRIDES == {
        "seed": 7, "steps": 240, "n_envs": 4, "test_interval": 120, "test_episodes": 4, "log_interval": 40,
        "save_interval": 0, "threads": 1, "device": "cpu", "sequential": True,
        "learner.batch_size": 4, "learner.buffer_size": 16, "learner.target_update_episodes": 8, "learner.lr": 5e-3,
        "memory.lam": 0.5, "memory.pending_size": 30, "memory.capacity": 1000,
        "wqmix.central_embed_dim": 32, "qplex.qplex_heads": 2,
        "exploration.epsilon_anneal_steps": 200,
    }
    assert SMAX_OVERRIDES == {"steps": 300, "test_interval": 150, "log_interval": 60, "env_args": {"profile": "smax"}}
    assert SAEM_OVERRIDES == {"memory.miss_rule": "zero"}


def flat(config: dict[str, Any]) -> dict[str, Any]:
    """A config dict (sections nested) by config key: ``{'learner.lr': ..., 'seed': ...}``."""
    return {f.key: config[f.section][f.name] if f.section else config[f.name]
            for f in [*config_fields(), *component_fields()] if f.section is None or f.section in config}


@pytest.mark.parametrize(("env", "algo"), list(itertools.product(ENVS, ALGOS)))
def test_a_golden_config_is_the_defaults_but_its_overrides(env, algo):
    overrides = {**golden_overrides(env, algo), "out": "out"}
    config = flat(golden_config(env, algo, "out"))
    used = TrainConfig(algo=algo).components  # the own sections of its mixer and memory, where they have settings
    assert {key: value for key, value in config.items() if key not in overrides} == {
        key: value for key, value in DEFAULTS.items() if key not in overrides
        and (key.partition(".")[0] not in BUILTIN_COMPONENTS or key.partition(".")[0] in used)}
    assert {key: config[key] for key in overrides} == overrides
