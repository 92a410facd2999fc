"""Collect whole episodes from a vectorized CTDE env with epsilon-greedy agents over available actions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from semzoo.agents.rnn import RNNAgent
from semzoo.agents.selection import epsilon_greedy
from semzoo.types import NO_ACTION, CTDEArrays, EpisodeBatch, VecCTDEEnv


@dataclass
class RolloutStats:
    """Per-episode results of one collection: returns, lengths and (where reported) wins."""

    returns: np.ndarray
    lengths: np.ndarray
    battle_won: np.ndarray | None = None
    timed_out: np.ndarray | None = None
    """True where the episode ended at a time limit (truncated, not terminated); None where not recorded."""


class EpisodeRecord:
    """The N episodes of one collection from a ``VecCTDEEnv``, written step by step; ``result()`` pads them.

    ``observe(t, arrays)`` stores what the agents saw at step t, ``step(t, ...)`` what the envs returned for the
    actions taken; an env's episode ends at its first ``terminated or truncated`` or at ``max_t`` steps, and its
    later outputs are ignored (the env protocol lets a finished env be stepped on).
    """

    def __init__(self, env: VecCTDEEnv, max_t: int) -> None:
        n, a, self.max_t = env.n_envs, env.n_agents, max_t
        self.obs = np.zeros((n, max_t + 1, a, env.obs_dim), np.float32)
        self.state = np.zeros((n, max_t + 1, env.state_dim), np.float32)
        self.avail = np.zeros((n, max_t + 1, a, env.n_actions), bool)
        self.actions = np.zeros((n, max_t, a), np.int64)
        self.reward = np.zeros((n, max_t), np.float32)
        self.terminated = np.zeros((n, max_t), bool)
        self.filled = np.zeros((n, max_t), bool)
        self.length = np.zeros(n, np.int64)
        self.won = np.zeros(n, bool)
        self.reports_won = False
        self.active = np.ones(n, bool)
        """The envs whose episode has not ended yet."""

    def observe(self, t: int, arrays: CTDEArrays) -> None:
        """What the agents act on at step t (every env's; a finished env's slot is overwritten by nothing real)."""
        self.obs[:, t], self.state[:, t], self.avail[:, t] = arrays.obs, arrays.state, arrays.avail

    def step(self, t: int, actions_NA: np.ndarray, arrays: CTDEArrays, reward_N: np.ndarray,
             terminated_N: np.ndarray, truncated_N: np.ndarray, info: dict[str, np.ndarray]) -> bool:
        """The actions of step t and what the envs returned; True while some env's episode goes on."""
        active = self.active
        idx = np.flatnonzero(active)
        self.actions[idx, t] = actions_NA[idx]
        self.reward[idx, t] = reward_N[idx]
        self.terminated[idx, t] = terminated_N[idx]
        self.filled[idx, t] = True
        self.length[idx] += 1
        if "battle_won" in info:
            self.reports_won = True
            self.won[idx] |= info["battle_won"][idx]
        done = active & (terminated_N | truncated_N | (t + 1 == self.max_t))
        for i in np.flatnonzero(done):  # the observation after the last step, for bootstrapping
            self.obs[i, t + 1], self.state[i, t + 1], self.avail[i, t + 1] = arrays.obs[i], arrays.state[i], arrays.avail[i]
        active &= ~done
        return bool(active.any())

    def result(self) -> tuple[EpisodeBatch, RolloutStats]:
        """The padded batch (on CPU) and per-episode stats."""
        batch = EpisodeBatch(
            obs=torch.from_numpy(self.obs), state=torch.from_numpy(self.state), avail=torch.from_numpy(self.avail),
            actions=torch.from_numpy(self.actions), reward=torch.from_numpy(self.reward),
            terminated=torch.from_numpy(self.terminated), filled=torch.from_numpy(self.filled),
            length=torch.from_numpy(self.length),
        )
        last = np.maximum(self.length - 1, 0)
        stats = RolloutStats(returns=self.reward.sum(axis=1), lengths=self.length,
                             battle_won=self.won if self.reports_won else None,
                             timed_out=~self.terminated[np.arange(len(last)), last])
        return batch, stats


def handed_inputs(env: VecCTDEEnv, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The agents' inputs of the env's last reset or step, obs [N, A, O] and avail [N, A, U], as tensors on ``device``
    that the env hands over itself (``agent_inputs(device)``, SMAX: JAX's buffers through DLPack, no copy through
    the host); None where the env has no such method or cannot hand them to ``device``: convert its arrays then.

    The tensors may be the env's own buffers: read them, never write into them.
    """
    agent_inputs = getattr(env, "agent_inputs", None)
    return None if agent_inputs is None else agent_inputs(device)


class EpisodeRunner:
    """Runs the N envs of a ``VecCTDEEnv`` for one episode each, in lockstep, batching the agents' forward pass."""

    def __init__(self, env: VecCTDEEnv, agent: RNNAgent, *, device: torch.device, episode_limit: int | None = None) -> None:
        self.env, self.agent, self.device = env, agent, device
        self.max_t = int(episode_limit or env.episode_limit)

    @torch.no_grad()
    def run(self, *, epsilon: float, seed: int, generator: torch.Generator) -> tuple[EpisodeBatch, RolloutStats]:
        """One episode per env; returns the padded batch (on CPU) and per-episode stats."""
        env, n, a = self.env, self.env.n_envs, self.env.n_agents
        record = EpisodeRecord(env, self.max_t)
        arrays = env.reset(seed=seed)
        hidden = None
        last_action = torch.full((n, 1, a), NO_ACTION, dtype=torch.int64, device=self.device)
        for t in range(self.max_t):
            record.observe(t, arrays)  # the host arrays go into the episode
            handed = handed_inputs(env, self.device)
            if handed is None:
                obs_NAO = torch.as_tensor(arrays.obs, device=self.device, dtype=torch.get_default_dtype())
                avail_t = torch.as_tensor(arrays.avail, device=self.device)
            else:  # converted to the run's dtype after the hand-over (float32 to float64 is exact)
                obs_NAO, avail_t = handed[0].to(torch.get_default_dtype()), handed[1]
            obs_t = obs_NAO.unsqueeze(1)
            q, hidden = self.agent(self.agent.build_inputs(obs_t, last_action), hidden)
            chosen = epsilon_greedy(q[:, 0], avail_t, epsilon, generator)
            last_action = chosen.unsqueeze(1)
            chosen_np = chosen.cpu().numpy()
            arrays, reward, terminated, truncated, info = env.step(chosen_np)
            if not record.step(t, chosen_np, arrays, reward, terminated, truncated, info):
                break
        return record.result()
