"""A tiny PettingZoo ParallelEnv with state() that reports ``battle_won``, for evaluation tests.

Whether an episode is won is drawn from the reset seed alone (the agents cannot change it), and a
won episode pays a reward of 1 at its last step: so the win rate must equal the mean return. With
``lost_pays=True`` a lost episode pays a reward drawn from the reset seed too, uniform in [0, 1), at its
last step (and ``win_probability=0`` gives a run that never wins but whose test returns differ).
Imported by id ``pz:fake_battle_env:parallel_env`` with ``tests/`` on the path.
"""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

EPISODE_STEPS = 3
WIN_PROBABILITY = 0.5
OBS_DIM = 2
N_ACTIONS = 2


class FakeBattleEnv(ParallelEnv):
    metadata = {"name": "fake_battle_v0"}

    def __init__(self, n_agents: int = 2, report_won: bool = True, win_probability: float = WIN_PROBABILITY,
                 lost_pays: bool = False) -> None:
        self.possible_agents = [f"agent_{i}" for i in range(n_agents)]
        self.agents: list[str] = []
        self.report_won = report_won
        self.win_probability = win_probability
        self.lost_pays = lost_pays
        self._payout = 1.0
        self.episode_limit = EPISODE_STEPS
        self._rng = np.random.default_rng(0)
        self._t = 0
        self._won = False

    @functools.cache
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32)

    @functools.cache
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(N_ACTIONS)

    def state(self) -> np.ndarray:
        return np.array([self._t / EPISODE_STEPS, float(self._won)], np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self._t / EPISODE_STEPS, i], np.float32) for i, a in enumerate(self.agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._t = 0
        self._won = bool(self._rng.random() < self.win_probability)
        # Only lost_pays draws a second number: the default env's stream is what it always was.
        self._payout = 1.0 if self._won else (float(self._rng.random()) if self.lost_pays else 0.0)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]):
        self._t += 1
        last = self._t >= EPISODE_STEPS
        reward = self._payout if last else 0.0
        agents = list(self.agents)
        obs = self._obs()
        rewards = {a: reward for a in agents}
        terms = {a: last for a in agents}
        truncs = {a: False for a in agents}
        infos = {a: ({"battle_won": self._won} if last and self.report_won else {}) for a in agents}
        if last:
            self.agents = []
        return obs, rewards, terms, truncs, infos


def parallel_env(**kwargs) -> FakeBattleEnv:
    return FakeBattleEnv(**kwargs)
