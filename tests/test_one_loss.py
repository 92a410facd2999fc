"""One loss for every learner (paper eq. 6 and its WQMIX form): the memory term is divided by the real steps, lambda = 0 is the plain method.

Every learner (QLearner with VDN, QMIX, QPLEX; WQMIX with CW and OW weights) x memory kind (SEM, SAEM)
x miss rule (target, zero), on a padded batch whose table answers some steps and misses others.
"""

from __future__ import annotations

from typing import Literal

import pytest
import torch

from semzoo.agents.rnn import RNNAgent
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.episodic.memory import episodic_target
from semzoo.episodic.sem import EpisodicMemory, make_episodic_memory
from semzoo.episodic.target import EpisodicTarget
from semzoo.learners.q_learner import OnlineValues, QLearner
from semzoo.learners.wqmix import CentralValues, WQMIXLearner
from semzoo.mixers.base import make_mixer
from semzoo.mixers.settings import QMIXSettings, QPLEXSettings, WQMIXSettings
from semzoo.types import CleanBatch, EpisodeBatch

A, O, S, U, T = 2, 3, 4, 3, 5
GAMMA = 0.9
ALPHA = 0.5
TABLE_VALUE = 20.0
"""Far from the y of a small random network, so E != y wherever the table answers."""
LEARNERS = ("vdn", "qmix", "qplex", "cw-qmix", "ow-qmix")
KINDS = ("sem", "saem")
MISS_RULES = ("target", "zero")
WQMIX_STATS = ["loss_td", "loss_qmix", "loss_central", "wqmix_weight", "q_tot", "q_star", "target_y"]
Q_STATS = ["loss_td", "q_tot", "target_y"]
MEMORY_STATS = ["loss_em", "target_e", "memory_hit_rate"]

every_case = pytest.mark.parametrize(
    ("learner_name", "kind", "miss_rule"),
    [(name, kind, rule) for name in LEARNERS for kind in KINDS for rule in MISS_RULES])


def make_batch() -> EpisodeBatch:
    """Three padded episodes: one ends for real at t = 4, two are cut by the time limit at lengths 3 and 2."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([5, 3, 2])
    filled = torch.arange(T)[None] < lengths[:, None]
    slot = torch.arange(T + 1)[None] <= lengths[:, None]
    terminated = torch.zeros(3, T, dtype=torch.bool)
    terminated[0, 4] = True
    return EpisodeBatch(
        obs=torch.where(slot[..., None, None], torch.randn(3, T + 1, A, O, generator=g), 0.0),
        state=torch.where(slot[..., None], torch.randn(3, T + 1, S, generator=g), 0.0),
        avail=torch.ones(3, T + 1, A, U, dtype=torch.bool),
        actions=torch.randint(0, U, (3, T, A), generator=g),
        reward=torch.where(filled, torch.randn(3, T, generator=g), 0.0),
        terminated=terminated, filled=filled, length=lengths,
    )


def half_full_memory(kind: str, batch: EpisodeBatch) -> EpisodicMemory:
    """A table that answers the real steps t < 2 of ``batch`` and misses the others."""
    memory = make_episodic_memory(kind, state_dim=S, n_agents=A, capacity=1000, pending_size=10_000, gamma=GAMMA)
    stored = batch.filled & (torch.arange(T)[None] < 2)
    values = TABLE_VALUE + torch.arange(T, dtype=torch.float32).expand(batch.batch_size, T)
    if kind == "sem":  # Q^S(s_{t+1})
        memory.add(memory.keys(batch.state[:, 1:][stored]), values[stored])
    else:  # Q^SA(s_t, u_t)
        memory.add(memory.keys(batch.state[:, :-1][stored], batch.actions[stored]), values[stored])
    return memory


def make_learner(name: str, memory: EpisodicMemory | None, *, lam: float = 0.1,
                 miss_rule: Literal["target", "zero"] = "target") -> QLearner:
    """Same seed, same networks whatever the memory; the target agent differs from the online one, so y != Q_tot."""
    torch.manual_seed(0)
    agent = RNNAgent(obs_dim=O, n_agents=A, n_actions=U, hidden_dim=8)
    sizes = {"qmix": QMIXSettings(embed_dim=4, hypernet_dim=8),
             "qplex": QPLEXSettings(qplex_embed_dim=4, qplex_hypernet_dim=8, qplex_heads=2)}
    config, memory_config = LearnerConfig(gamma=GAMMA), MemoryConfig(lam=lam, miss_rule=miss_rule)
    learner: QLearner
    if name in ("cw-qmix", "ow-qmix"):
        mixer = make_mixer("qmix", n_agents=A, state_dim=S, n_actions=U, settings=sizes["qmix"])
        learner = WQMIXLearner(agent=agent, mixer=mixer, config=config, memory_config=memory_config, memory=memory,
                               weighting="cw" if name == "cw-qmix" else "ow",
                               settings=WQMIXSettings(central_embed_dim=16, wqmix_alpha=ALPHA))
    else:
        mixer = make_mixer(name, n_agents=A, state_dim=S, n_actions=U, settings=sizes.get(name))
        learner = QLearner(agent=agent, mixer=mixer, config=config, memory_config=memory_config, memory=memory)
    with torch.no_grad():
        for p in learner.target_agent.parameters():
            p.add_(0.1)
    return learner


def pieces(learner: QLearner, batch: EpisodeBatch) -> tuple[OnlineValues, EpisodicTarget]:
    """The online values and the episodic target of ``batch``, without gradient."""
    assert learner.memory is not None
    clean = CleanBatch.from_batch(batch)
    with torch.no_grad():
        values = learner.online_values(clean)
        next_value = learner.next_value(clean, values.q_BTAU)
        y = learner.td_target(clean, next_value)
    return values, episodic_target(learner.memory, clean, y, next_value, gamma=GAMMA,
                                   miss_rule=learner.memory_config.miss_rule)


def memory_step_loss(learner: QLearner, values: OnlineValues, e_BT: torch.Tensor) -> torch.Tensor:
    """Per-step memory loss [B,T], written from the equations: (Q_tot - E)^2, or for WQMIX
    w_e (Q_tot - E)^2 + (Q* - E)^2 with w_e = 1 on u_t = u^ or E > Q*(u^) (CW), on Q_tot < E (OW), alpha elsewhere."""
    q_tot = values.q_tot_BT
    if not isinstance(learner, WQMIXLearner):
        return (q_tot - e_BT) ** 2
    assert isinstance(values, CentralValues)
    if learner.weighting == "cw":
        full = values.is_greedy_BT | (e_BT > values.q_star_greedy_BT)
    else:
        full = q_tot < e_BT
    w_e = torch.where(full, 1.0, ALPHA)
    return w_e * (q_tot - e_BT) ** 2 + (values.q_star_BT - e_BT) ** 2


def loss_and_grads(learner: QLearner, batch: EpisodeBatch) -> tuple[torch.Tensor, dict[str, float], list[torch.Tensor]]:
    loss, stats = learner.compute_loss(batch)
    learner.optimizer.zero_grad()
    loss.backward()
    return loss.detach().clone(), stats, [p.grad.clone() for p in learner.params if p.grad is not None]


@every_case
def test_memory_term_is_divided_by_the_number_of_real_steps(learner_name, kind, miss_rule):
    batch = make_batch()
    learner = make_learner(learner_name, half_full_memory(kind, batch), lam=1.0, miss_rule=miss_rule)
    values, target = pieces(learner, batch)
    real = batch.filled
    answered = target.answered_BT.bool()
    assert answered.any() and (real & ~answered).any()  # the table answers some real steps and misses others
    assert torch.equal(target.applies_BT.bool(), real if miss_rule == "target" else answered)

    loss, stats = learner.compute_loss(batch)  # lambda = 1: the loss is the memory term alone
    per_step = memory_step_loss(learner, values, target.e_BT)
    n_real, n_applies = real.sum(), target.applies_BT.sum()
    expected = per_step[target.applies_BT.bool()].sum() / n_real
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert stats["loss_em"] == pytest.approx(expected.item(), rel=1e-6)
    if miss_rule == "zero":
        # Dividing by the answered steps instead (SEM-WQMIX before the fix) scales the term by n_real / n_answered.
        old = per_step[answered].sum() / n_applies
        assert n_applies < n_real
        assert old.item() == pytest.approx(loss.item() * (n_real / n_applies).item(), rel=1e-6)
        assert old.item() > loss.item() * 1.2


@every_case
def test_lambda_zero_is_the_plain_method_bit_for_bit(learner_name, kind, miss_rule):
    batch = make_batch()
    with_memory = make_learner(learner_name, half_full_memory(kind, batch), lam=0.0, miss_rule=miss_rule)
    plain = make_learner(learner_name, None)
    loss_m, stats_m, grads_m = loss_and_grads(with_memory, batch)
    loss_p, stats_p, grads_p = loss_and_grads(plain, batch)
    assert torch.equal(loss_m, loss_p)
    assert len(grads_m) == len(grads_p) and all(torch.equal(gm, gp) for gm, gp in zip(grads_m, grads_p))
    assert {k: v for k, v in stats_m.items() if k in stats_p} == stats_p
    assert stats_m["loss_em"] > 0  # the memory was read and its term computed, just not used


@every_case
def test_loss_blends_the_td_and_memory_terms_with_lambda(learner_name, kind, miss_rule):
    batch = make_batch()
    learner = make_learner(learner_name, half_full_memory(kind, batch), lam=0.3, miss_rule=miss_rule)
    loss, stats = learner.compute_loss(batch)
    assert loss.item() == pytest.approx(0.7 * stats["loss_td"] + 0.3 * stats["loss_em"], rel=1e-6)
    if isinstance(learner, WQMIXLearner):
        assert stats["loss_td"] == pytest.approx(stats["loss_qmix"] + stats["loss_central"], rel=1e-6)


@pytest.mark.parametrize("learner_name", LEARNERS)
@pytest.mark.parametrize("kind", ["none", *KINDS])
def test_diagnostics_keep_the_metric_names_and_their_order(learner_name, kind):
    """metrics.csv rows follow this order (every learner with memory logs target_e_hit where the table answers)."""
    batch = make_batch()
    learner = make_learner(learner_name, None if kind == "none" else half_full_memory(kind, batch))
    stats = learner.train(batch)
    weighted = isinstance(learner, WQMIXLearner)
    expected = WQMIX_STATS if weighted else Q_STATS
    if kind != "none":
        expected = [*expected, *MEMORY_STATS, "target_e_hit"]
    assert list(stats) == [*expected, "loss", "grad_norm"]
