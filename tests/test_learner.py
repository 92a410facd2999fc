"""The TD loss: masking of padding, truncation versus termination, the episodic blend."""

from __future__ import annotations

import pytest
import torch

from semzoo.agents.rnn import RNNAgent
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.learners.q_learner import QLearner
from semzoo.mixers.base import make_mixer
from semzoo.mixers.settings import QMIXSettings
from semzoo.types import EpisodeBatch

A, O, S, U, T = 2, 3, 4, 3, 5


def make_learner(mixer: str = "qmix", **learner_kw) -> QLearner:
    torch.manual_seed(0)
    agent = RNNAgent(obs_dim=O, n_agents=A, n_actions=U, hidden_dim=8)
    mix = make_mixer(mixer, n_agents=A, state_dim=S, n_actions=U, settings=QMIXSettings(embed_dim=4, hypernet_dim=8) if mixer == "qmix" else None)
    learner = QLearner(agent=agent, mixer=mix, config=LearnerConfig(**learner_kw), memory_config=MemoryConfig())
    # A target network that differs from the online one, so double-Q paths are exercised.
    with torch.no_grad():
        for p in learner.target_agent.parameters():
            p.add_(0.1)
    return learner


def make_batch(lengths=(5, 3, 1), pad_value: float = 0.0, terminated_last=(True, False, False)) -> EpisodeBatch:
    g = torch.Generator().manual_seed(1)
    b = len(lengths)
    length = torch.tensor(lengths)
    filled = torch.arange(T)[None] < length[:, None]
    slot = torch.arange(T + 1)[None] <= length[:, None]
    obs = torch.randn(b, T + 1, A, O, generator=g)
    state = torch.randn(b, T + 1, S, generator=g)
    avail = torch.ones(b, T + 1, A, U, dtype=torch.bool)
    actions = torch.randint(0, U, (b, T, A), generator=g)
    reward = torch.randn(b, T, generator=g)
    terminated = torch.zeros(b, T, dtype=torch.bool)
    for i, (n, term) in enumerate(zip(lengths, terminated_last)):
        terminated[i, n - 1] = term
    obs = torch.where(slot[..., None, None], obs, pad_value)
    state = torch.where(slot[..., None], state, pad_value)
    reward = torch.where(filled, reward, pad_value)
    actions = torch.where(filled[..., None], actions, 1_000_000 if pad_value != 0 else 0)
    if pad_value != 0:  # padding may also claim random availability
        avail = torch.where(slot[..., None, None], avail, torch.rand(b, T + 1, A, U, generator=g) > 0.5)
    return EpisodeBatch(obs=obs, state=state, avail=avail, actions=actions, reward=reward,
                        terminated=terminated, filled=filled, length=length)


def loss_and_grads(learner: QLearner, batch: EpisodeBatch):
    loss, _ = learner.compute_loss(batch)
    learner.optimizer.zero_grad()
    loss.backward()
    return loss.detach().clone(), [p.grad.clone() for p in learner.params]


@pytest.mark.parametrize("pad_value", [float("nan"), 1e9])
def test_padding_values_do_not_change_loss_or_gradients(pad_value):
    learner = make_learner()
    ref_loss, ref_grads = loss_and_grads(learner, make_batch(pad_value=0.0))
    loss, grads = loss_and_grads(learner, make_batch(pad_value=pad_value))
    assert torch.equal(loss, ref_loss)
    assert all(torch.equal(g, r) for g, r in zip(grads, ref_grads))


def test_truncated_step_bootstraps_and_terminated_step_does_not():
    learner = make_learner("vdn", gamma=0.9)
    term = make_batch(lengths=(2,), terminated_last=(True,))
    trunc = make_batch(lengths=(2,), terminated_last=(False,))
    y_term, y_trunc = learner.td_targets(term), learner.td_targets(trunc)
    assert y_term[0, 1] == term.reward[0, 1]  # E_T = r_T: no bootstrap after a real end
    assert y_trunc[0, 1] != trunc.reward[0, 1]  # the time limit bootstraps from the final observation
    assert torch.equal(y_term[0, 0], y_trunc[0, 0])  # earlier steps are identical
    assert (y_term[0, 2:] == 0).all()


def test_train_step_changes_parameters_and_reports_finite_stats():
    learner = make_learner()
    before = [p.clone() for p in learner.params]
    stats = learner.train(make_batch())
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert any(not torch.equal(b, p) for b, p in zip(before, learner.params))


def test_gradients_are_clipped_to_the_configured_norm():
    learner = make_learner(grad_clip=1e-3)
    stats = learner.train(make_batch())
    clipped = torch.sqrt(sum((p.grad ** 2).sum() for p in learner.params))
    assert stats["grad_norm"] > 1e-3  # the raw norm is reported ...
    assert clipped <= 1e-3 * (1 + 1e-5)  # ... and the step used the clipped gradient


def test_update_target_copies_the_online_network():
    learner = make_learner()
    learner.update_target()
    for p, q in zip(learner.agent.parameters(), learner.target_agent.parameters()):
        assert torch.equal(p, q)
