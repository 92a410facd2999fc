"""EMC's curiosity (semzoo.episodic.curiosity): the decay schedule, the reward, its training and its state."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_memory_learner import A, O, U, make_batch

from semzoo.config import AgentConfig, LearnerConfig, TrainConfig
from semzoo.episodic.curiosity import Curiosity
from semzoo.episodic.settings import CuriositySettings
from semzoo.episodic.setup import MemorySetup
from semzoo.types import CleanBatch


def sized(config: TrainConfig, *, obs_dim: int = O) -> MemorySetup:
    """The memory's part of a run of ``config`` on the batches' sizes (the curiosity reads no state)."""
    return MemorySetup.of(config, state_dim=1, n_agents=A, n_actions=U, obs_dim=obs_dim)


def make_config(**curiosity) -> TrainConfig:
    return TrainConfig(env="matrix:two_step", algo="emc-qmix", seed=3, agent=AgentConfig(hidden_dim=8),
                       components={"curiosity": CuriositySettings(**curiosity)})


def make_curiosity(**curiosity) -> Curiosity:
    made = Curiosity.from_config(sized(make_config(**curiosity)))
    assert made is not None
    return made


def clean_batch(**kw) -> CleanBatch:
    return CleanBatch.from_batch(make_batch(**kw))


def test_curiosity_off_builds_nothing():
    assert Curiosity.from_config(sized(make_config(curiosity=False))) is None
    assert Curiosity.planned_nbytes(sized(make_config(curiosity=False))) == 0


# ----- the decay schedule ----------------------------------------------------------------------------------

def test_scale_decays_by_the_rate_at_each_multiple_of_the_decay_steps():
    curiosity = make_curiosity()  # EMC: 0.001, x0.9 every 100k env steps, floor 0
    assert curiosity.scale == 0.001
    scales = []
    for env_steps in (0, 99_999, 100_000, 250_000):  # 250k passes two multiples in one call
        curiosity.on_env_steps(env_steps)
        scales.append(curiosity.scale)
    assert scales == pytest.approx([0.001, 0.001, 0.0009, 0.001 * 0.9 ** 2], rel=1e-12)
    assert curiosity.metrics()["curiosity_scale"] == scales[-1]


def test_scale_never_decays_below_the_floor():
    curiosity = make_curiosity(curiosity_scale=0.01, curiosity_decay_rate=0.5, curiosity_floor=0.004,
                               curiosity_decay_steps=10)
    curiosity.on_env_steps(10)
    assert curiosity.scale == pytest.approx(0.005)
    curiosity.on_env_steps(20)  # 0.0025 without the floor
    assert curiosity.scale == 0.004
    curiosity.on_env_steps(10_000)
    assert curiosity.scale == 0.004


# ----- the reward --------------------------------------------------------------------------------------------

def test_reward_is_zero_on_padding_and_positive_where_the_predictor_is_wrong():
    clean = clean_batch(lengths=(5, 3, 2))
    reward = make_curiosity().reward(clean)
    assert reward.shape == clean.reward.shape and reward.dtype == clean.reward.dtype
    assert (reward[clean.mask == 0] == 0).all()
    assert (reward[clean.mask == 1] > 0).all()  # a fresh predictor is wrong everywhere


def test_reward_is_the_scale_times_the_agents_mean_prediction_error_before_the_update():
    curiosity = make_curiosity(curiosity_scale=0.5)
    clean = clean_batch()
    with torch.no_grad():  # what the module docstring says r^i is, from the networks as they are now
        inputs = curiosity.q_net.build_inputs(clean.obs, clean.last_actions)
        goal = 10.0 * curiosity.soft_q_net(inputs)[0][:, 1:]
        error = (curiosity.predictor(inputs)[0][:, 1:] - goal).pow(2).sum(-1).sqrt().mean(-1)
    before = [p.clone() for p in curiosity.predictor.parameters()]
    reward = curiosity.reward(clean)
    torch.testing.assert_close(reward, 0.5 * error * clean.mask)
    assert any(not torch.equal(a, b) for a, b in zip(before, curiosity.predictor.parameters()))  # then it stepped


def test_reward_trains_its_networks_under_the_learners_no_grad():
    curiosity = make_curiosity(curiosity_lr=0.01)  # a faster predictor than EMC's 5e-4: a test of seconds
    clean = clean_batch()
    with torch.no_grad():  # the learner's phase 1
        first = curiosity.reward(clean)
    losses = curiosity.metrics()
    for _ in range(60):
        last = curiosity.reward(clean)
    assert curiosity.metrics()["curiosity_loss_predictor"] < 0.5 * losses["curiosity_loss_predictor"]
    assert curiosity.metrics()["curiosity_loss_td"] < losses["curiosity_loss_td"]
    assert last[clean.mask == 1].mean() < first[clean.mask == 1].mean()
    assert not last.requires_grad


def test_soft_copy_follows_the_vdn_net_by_tau_and_the_target_syncs_at_the_learners_period():
    config = dataclasses.replace(make_config(), learner=LearnerConfig(target_update_episodes=3))
    curiosity = Curiosity.from_config(sized(config))
    assert curiosity is not None
    clean = clean_batch()
    start = [p.clone() for p in curiosity.q_net.parameters()]
    curiosity.reward(clean)
    tau = curiosity.config.curiosity_tau
    for soft, online, was in zip(curiosity.soft_q_net.parameters(), curiosity.q_net.parameters(), start):
        torch.testing.assert_close(soft, (1 - tau) * was + tau * online)
    for target, was in zip(curiosity.target_q_net.parameters(), start):
        assert torch.equal(target, was)
    curiosity.reward(clean)
    curiosity.reward(clean)  # the third update syncs the hard target
    for target, online in zip(curiosity.target_q_net.parameters(), curiosity.q_net.parameters()):
        assert torch.equal(target, online)


def test_a_batch_of_another_env_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"clean\.obs has shape .* expected \[B, T\+1, 2, 5\]"):
        Curiosity.from_config(sized(make_config(), obs_dim=5)).reward(clean_batch())  # type: ignore[union-attr]


# ----- determinism and state -------------------------------------------------------------------------------

def test_networks_come_from_the_run_seed_and_leave_the_global_stream_untouched():
    before = torch.get_rng_state()
    a, b = make_curiosity(), make_curiosity()
    assert torch.equal(torch.get_rng_state(), before)
    for p, q in zip(a.q_net.parameters(), b.q_net.parameters()):
        assert torch.equal(p, q)
    other = Curiosity.from_config(sized(dataclasses.replace(make_config(), seed=4)))
    assert other is not None and not torch.equal(next(other.q_net.parameters()), next(a.q_net.parameters()))


def test_a_restored_curiosity_continues_bit_for_bit():
    clean = clean_batch()
    straight, split = make_curiosity(), make_curiosity()
    for _ in range(3):
        straight.reward(clean)
        split.reward(clean)
    straight.on_env_steps(200_000)
    split.on_env_steps(200_000)
    resumed = make_curiosity()
    resumed.load_state_dict(split.state_dict())
    assert resumed.metrics() == straight.metrics()
    for _ in range(2):
        torch.testing.assert_close(resumed.reward(clean), straight.reward(clean), rtol=0, atol=0)
    assert resumed.metrics() == straight.metrics() and resumed.updates == straight.updates == 5


def test_planned_bytes_are_the_bytes_held_after_an_update():
    curiosity = make_curiosity()
    curiosity.reward(clean_batch())
    assert Curiosity.planned_nbytes(sized(make_config())) == curiosity.nbytes > 0
