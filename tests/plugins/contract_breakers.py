"""A plugin module of user extensions that break semzoo's contracts, for the CLI tests of their one-line errors.

Importing it (``semzoo --plugin contract_breakers``) registers:

- the mixer ``badshape``: VDN whose ``mix`` forgets ``keepdim`` and returns [B, T] instead of [B, T, 1];
- the env ``state_grows``: its ``state()`` has the declared 3 numbers at reset and 4 from step 2 on;
- the env ``state_text``: its ``state()`` is an array of strings of the declared shape.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

import semzoo
from semzoo import Mixer, register_mixer


@register_mixer("badshape")
class ForgotKeepdimMixer(Mixer):
    """Q_tot = sum_a Q_a, but summed without keepdim: [B, T]."""

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        return agent_qs_BTA.sum(dim=-1)


class CountingEnv(ParallelEnv):
    """Two agents, three steps, reward 1 when both pick action 1; the state is (t, 0, 0) / 3."""

    metadata = {"name": "counting_v0"}
    STATE_SIZE = 3
    episode_limit = 3  # published, so a run needs no fallback limit (and says nothing of one)

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        self.state_space = spaces.Box(0.0, 1.0, (self.STATE_SIZE,), np.float32)
        self._t = 0

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), np.float32)

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(2)

    def state(self):
        state = np.zeros(self.STATE_SIZE, np.float32)
        state[0] = self._t / 3
        return state

    def reset(self, seed=None, options=None):
        self._t = 0
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self._t += 1
        reward = float(all(actions[a] == 1 for a in self.agents))
        done = self._t >= 3
        out = ({a: np.full(1, self._t / 3, np.float32) for a in self.agents}, {a: reward for a in self.agents},
               {a: False for a in self.agents}, {a: done for a in self.agents}, {a: {} for a in self.agents})
        if done:
            self.agents = []
        return out


class StateGrowsEnv(CountingEnv):
    def state(self):
        state = super().state()
        return np.append(state, 1.0) if self._t >= 2 else state


class StateTextEnv(CountingEnv):
    def state(self):
        return np.array(["x"] * self.STATE_SIZE)


semzoo.register_env("state_grows", StateGrowsEnv)
semzoo.register_env("state_text", StateTextEnv)
