"""QPLEX and weighted QMIX (CW, OW), with and without episodic memory."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from conftest import NO_ACTOR, NO_ACTOR_FLAGS, record_losses
from typer.testing import CliRunner

from semzoo.agents.rnn import RNNAgent
from semzoo.config import ExplorationConfig, LearnerConfig, MemoryConfig, TrainConfig, registered_components
from semzoo.episodic.sem import SEMTable
from semzoo.learners.wqmix import WQMIXLearner
from semzoo.mixers.base import make_mixer
from semzoo.mixers.central import CentralMixer
from semzoo.mixers.qplex import QPLEXMixer
from semzoo.mixers.settings import QMIXSettings, QPLEXSettings, WQMIXSettings
from semzoo.run.trainer import Trainer
from semzoo.types import CleanBatch, EpisodeBatch

NEW_MIXERS = ("qplex", "cw-qmix", "ow-qmix")
ALL_MIXERS = ("vdn", "qmix", *NEW_MIXERS)


# ----- QPLEX: positivity, IGM, finiteness -----------------------------------------------------------------------

def qplex(n_agents: int = 3, state_dim: int = 5, n_actions: int = 4, seed: int = 0, heads: int = 4) -> QPLEXMixer:
    torch.manual_seed(seed)
    mixer = make_mixer("qplex", n_agents=n_agents, state_dim=state_dim, n_actions=n_actions,
                       settings=QPLEXSettings(qplex_heads=heads))
    assert isinstance(mixer, QPLEXMixer)
    return mixer


@pytest.mark.parametrize("scale", [0.0, 1.0, 1e4, -1e4])
def test_qplex_weights_are_strictly_positive(scale):
    mixer = qplex()
    state = torch.randn(4, 6, 5) * 3 if scale == 1.0 else torch.full((4, 6, 5), scale)
    actions = torch.nn.functional.one_hot(torch.randint(0, 4, (4, 6, 3)), 4).float()
    w, _ = mixer.transform_weights(state)
    lam = mixer.advantage_weights(state, actions)
    assert (w > 0).all() and (lam > 0).all()


def all_joint_actions(n_agents: int, n_actions: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(n_actions), repeat=n_agents)))  # [U^A, A]


@pytest.mark.parametrize("seed", range(5))
def test_qplex_joint_argmax_is_the_per_agent_argmaxes(seed):
    """IGM, brute force: over all U^A joint actions, Q_tot peaks at the agents' own greedy actions."""
    n_agents, n_actions, state_dim = 3, 4, 5
    mixer = qplex(n_agents, state_dim, n_actions, seed=seed)
    with torch.no_grad():  # larger, varied weights so lambda differs a lot between joint actions
        for p in mixer.parameters():
            p.mul_(3.0)
    g = torch.Generator().manual_seed(100 + seed)
    joint = all_joint_actions(n_agents, n_actions)  # [J,A]
    for _ in range(4):
        utilities = torch.randn(n_agents, n_actions, generator=g) * 5  # Q_i(u) of one state
        state = torch.randn(1, 1, state_dim, generator=g).expand(1, len(joint), state_dim)
        chosen = utilities[torch.arange(n_agents), joint].unsqueeze(0)  # [1,J,A]
        max_qs = utilities.max(dim=-1).values.expand(1, len(joint), n_agents)
        onehot = torch.nn.functional.one_hot(joint, n_actions).float().unsqueeze(0)
        q_tot = mixer(chosen, state, actions_onehot=onehot, max_qs=max_qs).view(-1)
        best = joint[q_tot.argmax()]
        assert torch.equal(best, utilities.argmax(dim=-1))


@pytest.mark.parametrize("scale", [0.0, 1e4])
def test_qplex_output_and_gradients_are_finite_on_zero_and_extreme_inputs(scale):
    mixer = qplex()
    qs = torch.full((2, 3, 3), scale, requires_grad=True)
    actions = torch.nn.functional.one_hot(torch.zeros(2, 3, 3, dtype=torch.long), 4).float()
    out = mixer(qs, torch.full((2, 3, 5), scale), actions_onehot=actions, max_qs=qs.detach() + abs(scale))
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(qs.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mixer.parameters() if p.grad is not None)


def test_qplex_without_its_extra_inputs_says_what_it_needs():
    with pytest.raises(ValueError, match="actions_onehot"):
        qplex()(torch.randn(2, 3, 3), torch.randn(2, 3, 5))


def test_qplex_greedy_joint_action_has_q_tot_equal_to_the_sum_of_values():
    """At the greedy joint action every A_i = 0, so Q_tot = V_tot = sum_i (w_i max Q_i + v_i)."""
    mixer = qplex()
    qs = torch.randn(2, 3, 3)
    state = torch.randn(2, 3, 5)
    onehot = torch.nn.functional.one_hot(torch.randint(0, 4, (2, 3, 3)), 4).float()
    w, v = mixer.transform_weights(state)
    out = mixer(qs, state, actions_onehot=onehot, max_qs=qs).squeeze(-1)
    assert torch.allclose(out, (w * qs + v).sum(-1), atol=1e-5)


# ----- WQMIX learner: weights, targets, central networks ------------------------------------------------------------

A, O, S, U, T = 2, 3, 4, 3, 4


def wqmix_learner(weighting: str = "cw", alpha: float = 0.5, mixer_name: str = "qmix", **learner_kw) -> WQMIXLearner:
    torch.manual_seed(0)
    agent = RNNAgent(obs_dim=O, n_agents=A, n_actions=U, hidden_dim=8)
    sizes = QMIXSettings(embed_dim=4, hypernet_dim=8) if mixer_name == "qmix" else None
    mixer = make_mixer(mixer_name, n_agents=A, state_dim=S, n_actions=U, settings=sizes)
    return WQMIXLearner(agent=agent, mixer=mixer, config=LearnerConfig(**learner_kw), memory_config=MemoryConfig(),
                        weighting=weighting, settings=WQMIXSettings(central_embed_dim=16, wqmix_alpha=alpha))


def random_batch(b: int = 3, seed: int = 1) -> EpisodeBatch:
    g = torch.Generator().manual_seed(seed)
    return EpisodeBatch(obs=torch.randn(b, T + 1, A, O, generator=g), state=torch.randn(b, T + 1, S, generator=g),
                        avail=torch.ones(b, T + 1, A, U, dtype=torch.bool),
                        actions=torch.randint(0, U, (b, T, A), generator=g), reward=torch.randn(b, T, generator=g),
                        terminated=torch.zeros(b, T, dtype=torch.bool), filled=torch.ones(b, T, dtype=torch.bool),
                        length=torch.full((b,), T))


def test_cw_weight_is_one_on_greedy_actions_or_targets_above_q_star_of_greedy():
    learner = wqmix_learner("cw", alpha=0.25)
    y = torch.tensor([[1.0, 1.0, 3.0, 3.0]])
    q_star_greedy = torch.full((1, 4), 2.0)
    is_greedy = torch.tensor([[True, False, True, False]])
    w = learner.weights(y, torch.zeros(1, 4), is_greedy, q_star_greedy)
    assert w.tolist() == [[1.0, 0.25, 1.0, 1.0]]


def test_ow_weight_is_one_where_q_tot_underestimates_the_target():
    learner = wqmix_learner("ow", alpha=0.25)
    w = learner.weights(torch.tensor([[1.0, 1.0]]), torch.tensor([[0.5, 1.5]]), torch.tensor([[True, True]]),
                        torch.zeros(1, 2))
    assert w.tolist() == [[1.0, 0.25]]


def test_wqmix_target_comes_from_the_central_target_network():
    learner = wqmix_learner("cw", gamma=0.9)
    batch = random_batch()
    y = learner.td_targets(batch)
    with torch.no_grad():  # changing the QMIX target mixer leaves y alone ...
        for p in learner.target_mixer.parameters():
            p.add_(1.0)
    assert torch.equal(learner.td_targets(batch), y)
    with torch.no_grad():  # ... changing Q*'s target mixer does not
        for p in learner.target_central_mixer.parameters():
            p.add_(1.0)
    assert not torch.equal(learner.td_targets(batch), y)


def test_cw_threshold_reads_the_target_central_networks_not_the_online_ones():
    """CW's Q*(s, u^) is the target Q*^- (oxwhirl/wqmix max_q_learner.py): moving the online Q* leaves it alone."""
    learner = wqmix_learner("cw")
    clean = CleanBatch.from_batch(random_batch())
    with torch.no_grad():
        threshold = learner.online_values(clean).q_star_greedy_BT
        for net in (learner.central_agent, learner.central_mixer):  # target != online from here on
            for p in net.parameters():
                p.add_(0.5)
        assert torch.equal(learner.online_values(clean).q_star_greedy_BT, threshold)
        for p in learner.target_central_mixer.parameters():
            p.add_(0.5)
        moved = learner.online_values(clean).q_star_greedy_BT
    assert not torch.allclose(moved, threshold)


def test_central_mixer_has_three_hidden_layers_of_its_width_and_a_state_value():
    mixer = CentralMixer(n_agents=A, state_dim=S, n_actions=U, embed_dim=16)
    widths = [m.out_features for m in mixer.net if isinstance(m, torch.nn.Linear)]
    assert widths == [16, 16, 16, 1]
    qs, state = torch.randn(2, 3, A), torch.randn(2, 3, S)
    with torch.no_grad():
        without_value = mixer.net(torch.cat([state, qs], dim=-1))
    assert torch.allclose(mixer(qs, state), without_value + mixer.value(state))


def test_wqmix_train_step_updates_all_four_networks_in_one_optimizer():
    learner = wqmix_learner("ow")
    nets = (learner.agent, learner.mixer, learner.central_agent, learner.central_mixer)
    before = [[p.clone() for p in net.parameters()] for net in nets]
    stats = learner.train(random_batch())
    assert {"loss_qmix", "loss_central", "wqmix_weight"} <= set(stats) and np.isfinite(stats["loss"])
    for net, old in zip(nets, before):
        assert any(not torch.equal(p, q) for p, q in zip(net.parameters(), old))


def test_wqmix_update_target_and_state_dict_include_the_central_networks():
    learner = wqmix_learner("cw")
    learner.train(random_batch())
    learner.update_target()
    for online, target in ((learner.central_agent, learner.target_central_agent),
                           (learner.central_mixer, learner.target_central_mixer)):
        assert all(torch.equal(p, q) for p, q in zip(online.parameters(), target.parameters()))
    state = learner.state_dict()
    other = wqmix_learner("cw")
    torch.manual_seed(123)
    for p in other.central_mixer.parameters():
        torch.nn.init.normal_(p)
    other.load_state_dict(state)
    assert all(torch.equal(p, q) for p, q in zip(other.central_mixer.parameters(), learner.central_mixer.parameters()))
    assert all(torch.equal(p, q) for p, q in zip(other.central_agent.parameters(), learner.central_agent.parameters()))
    with pytest.raises(ValueError, match="weighting"):
        wqmix_learner("ow").load_state_dict(state)


@pytest.mark.parametrize("name", ["cw-qmix", "ow-qmix"])
def test_weighted_qmix_ids_build_the_monotonic_qmix_mixer_and_the_wqmix_learner(name):
    from semzoo import algos
    from semzoo.envs.registry import make_vec_env
    from semzoo.mixers.qmix import QMixer

    config = TrainConfig(env="matrix:climbing", algo=name, n_envs=1,
                         components={"wqmix": WQMIXSettings(wqmix_alpha=0.3, central_embed_dim=8)})
    env = make_vec_env(config)
    try:
        parts = algos.build(config, algos.parse_algorithm(name), env, torch.device("cpu"))
    finally:
        env.close()
    assert type(parts.mixer) is QMixer
    assert type(parts.learner) is WQMIXLearner and parts.learner.weighting == name[:2]
    assert parts.learner.alpha == 0.3 and parts.learner.central_mixer.value[0].out_features == 8  # its own section


def test_a_learner_without_settings_of_its_own_refuses_some():
    from semzoo.learners.q_learner import QLearner

    with pytest.raises(TypeError, match="no settings of its own"):
        QLearner.from_config(LearnerConfig(), memory_config=MemoryConfig(), settings=WQMIXSettings(), agent=None,
                             mixer=None)


def test_wqmix_rejects_an_unknown_weighting():
    with pytest.raises(ValueError, match=r"'cw'.*'ow'"):
        wqmix_learner("xw")


def test_sem_wqmix_adds_the_memory_terms_with_their_own_weights():
    """With every memory read a hit of E = y + 1, the four-term loss differs from plain WQMIX's."""
    learner = wqmix_learner("cw", alpha=0.5)

    batch = random_batch()
    plain, _ = learner.compute_loss(batch)
    memory = SEMTable(state_dim=batch.state.shape[-1], n_agents=batch.actions.shape[-1], capacity=10)
    # every key a hit of 5: the table's batched probe, which the learner's lookup reads
    memory._table.lookup_merged = lambda keys: (np.full(len(keys), 5.0, np.float32), np.ones(len(keys), bool),
                                                 np.zeros(len(keys), bool))
    learner.memory = memory
    learner.memory_config = MemoryConfig(lam=0.5)
    blended, stats = learner.compute_loss(batch)
    assert stats["memory_hit_rate"] == 1.0 and not torch.isclose(blended, plain)
    learner.memory_config = MemoryConfig(lam=0.0)
    assert torch.equal(learner.compute_loss(batch)[0], plain)


# ----- end to end ------------------------------------------------------------------------------------------------

def matrix_config(game: str, algo: str, *, seed: int, steps: int = 640, **kw) -> TrainConfig:
    """The protocol of scripts/matrix_games.py: uniform exploration, 32 envs, 80 updates of 128 episodes."""
    return TrainConfig(**NO_ACTOR, env=f"matrix:{game}", algo=algo, steps=steps, seed=seed, n_envs=32, test_episodes=32,
                       test_interval=10**9, log_interval=10**9, save_interval=0, device="cpu",
                       exploration=ExplorationConfig(epsilon_start=1.0, epsilon_finish=1.0),
                       learner=LearnerConfig(lr=1e-2, batch_size=128, buffer_size=max(steps, 128),
                                             updates_per_episode=0.125),
                       components=matrix_settings(algo), **kw)


def matrix_settings(algo: str) -> dict:
    """scripts/matrix_games.py's alpha and QPLEX heads, in the sections the algorithm trains with."""
    wanted = {"wqmix": WQMIXSettings(wqmix_alpha=0.1), "qplex": QPLEXSettings(qplex_heads=10)}
    return {name: settings for name, settings in wanted.items() if registered_components()[name].used_by(algo)}


def optimal_seeds(game: str, algo: str, seeds: range, **kw) -> int:
    from semzoo import make_env

    optimum = make_env(f"matrix:{game}").optimal_return
    hits = 0
    for seed in seeds:
        trainer = Trainer(matrix_config(game, algo, seed=seed, **kw))
        try:
            hits += int(np.isclose(trainer.run()["test_return_mean"], optimum))
        finally:
            trainer.close()
    return hits


@pytest.mark.parametrize("algo", ["cw-qmix", "ow-qmix"])
def test_weighted_qmix_reaches_the_qtran_optimum_in_most_seeds(algo):
    assert optimal_seeds("qtran", algo, range(5)) >= 4


def test_qmix_misses_the_qtran_optimum_in_most_seeds():
    assert optimal_seeds("qtran", "qmix", range(5)) <= 1


@pytest.mark.long
def test_qplex_reaches_the_qtran_optimum_in_most_seeds_with_more_updates():
    """512 updates (4096 episodes); at the table's 80 updates QPLEX has not yet left the 0-payoff block."""
    assert optimal_seeds("qtran", "qplex", range(5), steps=4096) >= 4


@pytest.mark.long
@pytest.mark.parametrize("algo", ["sem-cw-qmix", "saem-ow-qmix"])
def test_memory_variants_of_weighted_qmix_reach_the_qtran_optimum(algo):
    assert optimal_seeds("qtran", algo, range(5)) >= 4


def loss_history_and_params(algo: str, **memory_kw) -> tuple[list[float], list[torch.Tensor]]:
    config = TrainConfig(**NO_ACTOR, env="matrix:two_step", algo=algo, steps=96, seed=7, n_envs=4, test_episodes=4,
                         test_interval=10**9, log_interval=10**9, save_interval=0, device="cpu",
                         memory=MemoryConfig(pending_size=8, **memory_kw),
                         learner=LearnerConfig(lr=5e-3, batch_size=8, buffer_size=100, target_update_episodes=16))
    trainer = Trainer(config)
    losses = record_losses(trainer)
    try:
        trainer.run()
        params = [p.detach().clone() for p in trainer.learner.params]
        return losses, params
    finally:
        trainer.close()


@pytest.mark.parametrize("mixer", NEW_MIXERS)
def test_sem_with_lambda_zero_reproduces_the_plain_method_bit_for_bit(mixer):
    plain_losses, plain_params = loss_history_and_params(mixer)
    sem_losses, sem_params = loss_history_and_params(f"sem-{mixer}", lam=0.0)
    blended_losses, _ = loss_history_and_params(f"sem-{mixer}", lam=0.5)
    assert len(plain_losses) > 10 and sem_losses == plain_losses
    assert all(torch.equal(p, q) for p, q in zip(sem_params, plain_params))
    assert blended_losses != plain_losses  # the memory term is live at lam > 0


CLI_COMMON = ["--steps", "40", "--n-envs", "2", "--batch-size", "2", "--buffer-size", "20", "--test-episodes", "2",
              "--test-interval", "1000000", "--log-interval", "20", "--save-interval", "0", "--pending-size", "10",
              "--device", "cpu", *NO_ACTOR_FLAGS]


@pytest.mark.parametrize("mixer", ALL_MIXERS)
@pytest.mark.parametrize("env_args", [["--env", "matrix:two_step"],
                                      ["--env", "pz:mpe2.simple_spread_v3:parallel_env", "--env-arg", "max_cycles=10"]],
                         ids=["matrix", "mpe2"])
def test_sem_variant_trains_end_to_end_from_the_cli(mixer, env_args, tmp_path):
    if "mpe2" in env_args[1]:
        pytest.importorskip("mpe2")
    from semzoo.cli import app

    result = CliRunner().invoke(app, ["train", *env_args, "--algo", f"sem-{mixer}", "--out", str(tmp_path), *CLI_COMMON])
    assert result.exit_code == 0, result.output
    assert "greedy return" in result.output
    assert list(tmp_path.glob("*/metrics.csv"))
