"""The CTDE adapter: fixed shapes, padding of dead agents, termination versus truncation."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

from semzoo import make_env
from semzoo.types import VecCTDEEnv
from semzoo.wrappers.ctde import CTDEEnv, CTDEVecEnv


class DyingAgentsEnv(ParallelEnv):
    """agent_1 dies after step 1; the episode terminates after step 3 (or truncates if ``truncate``)."""

    metadata = {"name": "dying_v0"}

    def __init__(self, truncate: bool = False):
        self.possible_agents = ["agent_0", "agent_1"]
        self.truncate = truncate
        self.state_space = spaces.Box(0, 10, (2,), np.float32)

    @functools.cache
    def observation_space(self, agent):
        size = 3 if agent == "agent_0" else 2  # unequal sizes get zero-padded
        return spaces.Dict({"observation": spaces.Box(0, 10, (size,), np.float32),
                            "action_mask": spaces.Box(0, 1, (4 if agent == "agent_0" else 3,), np.int8)})

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(4 if agent == "agent_0" else 3)

    def _obs(self):
        out = {}
        for a in self.agents:
            size, n = (3, 4) if a == "agent_0" else (2, 3)
            mask = np.ones(n, np.int8)
            mask[-1] = 0
            out[a] = {"observation": np.full(size, self.t + 1, np.float32), "action_mask": mask}
        return out

    def state(self):
        return np.array([self.t, len(self.agents)], np.float32)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        live = list(self.agents)
        end = self.t >= 3
        terms = {a: (end and not self.truncate) or (a == "agent_1" and self.t == 1) for a in live}
        truncs = {a: end and self.truncate for a in live}
        rewards = {a: float(self.t) for a in live}
        infos = {a: {"battle_won": end} for a in live}
        self.agents = [a for a in live if not (terms[a] or truncs[a])]
        return self._obs(), rewards, terms, truncs, infos


def test_dead_agent_is_padded_with_zero_obs_and_noop_only():
    env = CTDEEnv(DyingAgentsEnv())
    obs, _ = env.reset(seed=0)
    assert obs["obs"].shape == (2, 3) and obs["avail"].shape == (2, 4)
    assert obs["obs"][1].tolist() == [1.0, 1.0, 0.0]  # smaller observation zero-padded
    assert obs["avail"][1].tolist() == [1, 1, 0, 0]  # own mask, padded with unavailable actions
    obs, reward, term, trunc, _ = env.step(np.array([0, 0]))
    assert obs["alive"].tolist() == [1, 0]
    assert obs["obs"][1].tolist() == [0.0, 0.0, 0.0]
    assert obs["avail"][1].tolist() == [1, 0, 0, 0]
    assert (term, trunc) == (False, False)
    assert reward == 1.0


def test_real_end_is_terminated_and_time_limit_is_truncated():
    for truncate, expected in ((False, (True, False)), (True, (False, True))):
        env = CTDEEnv(DyingAgentsEnv(truncate=truncate))
        env.reset(seed=0)
        for _ in range(3):
            _, _, term, trunc, info = env.step(np.array([0, 0]))
        assert (term, trunc) == expected
        assert info["battle_won"] is True


def test_adapter_episode_limit_truncates():
    env = CTDEEnv(DyingAgentsEnv(), episode_limit=2)
    env.reset(seed=0)
    env.step(np.array([0, 0]))
    _, _, term, trunc, _ = env.step(np.array([0, 0]))
    assert (term, trunc) == (False, True)


def test_stepping_after_the_end_repeats_the_final_arrays():
    env = CTDEEnv(DyingAgentsEnv())
    env.reset(seed=0)
    for _ in range(3):
        final, *_ = env.step(np.array([0, 0]))
    again, reward, term, _, _ = env.step(np.array([0, 0]))
    assert reward == 0.0 and term
    assert all(np.array_equal(final[k], again[k]) for k in final)


def test_vec_env_implements_the_protocol_with_fixed_shapes():
    vec = CTDEVecEnv([DyingAgentsEnv, DyingAgentsEnv, DyingAgentsEnv])
    assert isinstance(vec, VecCTDEEnv)
    arrays = vec.reset(seed=3)
    assert arrays.obs.shape == (3, 2, 3) and arrays.state.shape == (3, 2)
    assert arrays.avail.dtype == bool and arrays.alive.all()
    for _ in range(3):
        arrays, _reward, term, trunc, info = vec.step(np.zeros((3, 2), np.int64))
    assert term.all() and not trunc.any() and info["battle_won"].all()
    vec.close()


@pytest.mark.parametrize("async_", [False, True], ids=["sync", "async"])
def test_vec_env_steps_on_while_one_episode_has_ended_and_another_goes_on(async_):
    # m-step game, m = 3: (0,1) ends env 0's episode at once with 0; (0,0) keeps env 1's going for 3 steps.
    vec = CTDEVecEnv([lambda: make_env("matrix:m_step", m=3)] * 2, async_=async_)
    vec.reset(seed=0)
    ends, rewards = [], []
    for joint_0 in ([0, 1], [0, 0], [0, 0]):
        _, reward, term, trunc, _ = vec.step(np.array([joint_0, [0, 0]]))
        ends.append(term.tolist())
        rewards.append(reward.tolist())
        assert not trunc.any()
    vec.close()
    assert ends == [[True, False], [True, False], [True, True]]  # an ended episode stays ended
    assert rewards == [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]  # the (0,0) branch's last step pays 1 for (0,0)


def test_mpe_simple_spread_through_pz_id():
    pytest.importorskip("mpe2")
    env = make_env("pz:mpe2.simple_spread_v3:parallel_env", max_cycles=5)
    vec = CTDEVecEnv([lambda: make_env("pz:mpe2.simple_spread_v3:parallel_env", max_cycles=5)] * 2)
    assert vec.episode_limit == 5 and vec.n_agents == 3 and vec.n_actions == 5
    assert vec.state_dim == int(np.prod(env.state_space.shape))
    vec.reset(seed=0)
    for _t in range(5):
        _, _, term, trunc, _ = vec.step(np.zeros((2, 3), np.int64))
    assert trunc.all() and not term.any()  # MPE's max_cycles is a time limit


def test_env_without_state_is_rejected():
    class NoState(DyingAgentsEnv):
        state = None

    with pytest.raises(TypeError, match="state"):
        CTDEEnv(NoState())


@pytest.mark.parametrize("env_id", ["nope:x", "matrix", "pz:json:nothing", "pz:json.no_such_module:f"])
def test_bad_env_ids_are_rejected(env_id):
    with pytest.raises(ValueError, match="env id"):
        make_env(env_id)


def test_a_pz_id_whose_package_is_not_installed_is_a_missing_dependency():
    from semzoo.errors import MissingDependency

    with pytest.raises(MissingDependency, match=r"env id 'pz:not_a_module_xyz:f'.*install it"):
        make_env("pz:not_a_module_xyz:f")
