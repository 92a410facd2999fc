"""Collect whole episodes from a vectorized CTDE env with epsilon-greedy agents over available actions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from semzoo.agents.rnn import RNNAgent
from semzoo.agents.selection import epsilon_greedy
from semzoo.types import NO_ACTION, EpisodeBatch, VecCTDEEnv


@dataclass
class RolloutStats:
    """Per-episode results of one collection: returns, lengths and (where reported) wins."""

    returns: np.ndarray
    lengths: np.ndarray
    battle_won: np.ndarray | None = None


class EpisodeRunner:
    """Runs the N envs of a ``VecCTDEEnv`` for one episode each, in lockstep, batching the agents' forward pass."""

    def __init__(self, env: VecCTDEEnv, agent: RNNAgent, *, device: torch.device, episode_limit: int | None = None) -> None:
        self.env, self.agent, self.device = env, agent, device
        self.max_t = int(episode_limit or env.episode_limit)

    @torch.no_grad()
    def run(self, *, epsilon: float, seed: int, generator: torch.Generator) -> tuple[EpisodeBatch, RolloutStats]:
        """One episode per env; returns the padded batch (on CPU) and per-episode stats."""
        env, n, a, t_max = self.env, self.env.n_envs, self.env.n_agents, self.max_t
        obs = np.zeros((n, t_max + 1, a, env.obs_dim), np.float32)
        state = np.zeros((n, t_max + 1, env.state_dim), np.float32)
        avail = np.zeros((n, t_max + 1, a, env.n_actions), bool)
        actions = np.zeros((n, t_max, a), np.int64)
        reward = np.zeros((n, t_max), np.float32)
        terminated = np.zeros((n, t_max), bool)
        filled = np.zeros((n, t_max), bool)
        length = np.zeros(n, np.int64)
        won = np.zeros(n, bool)
        reports_won = False

        arrays = env.reset(seed=seed)
        active = np.ones(n, bool)
        hidden = None
        last_action = torch.full((n, 1, a), NO_ACTION, dtype=torch.int64, device=self.device)
        for t in range(t_max):
            obs[:, t], state[:, t], avail[:, t] = arrays.obs, arrays.state, arrays.avail
            obs_t = torch.as_tensor(arrays.obs, device=self.device, dtype=torch.get_default_dtype()).unsqueeze(1)
            avail_t = torch.as_tensor(arrays.avail, device=self.device)
            q, hidden = self.agent(self.agent.build_inputs(obs_t, last_action), hidden)
            chosen = epsilon_greedy(q[:, 0], avail_t, epsilon, generator)
            last_action = chosen.unsqueeze(1)
            chosen_np = chosen.cpu().numpy()
            arrays, r, term, trunc, info = env.step(chosen_np)
            idx = np.flatnonzero(active)
            actions[idx, t] = chosen_np[idx]
            reward[idx, t] = r[idx]
            terminated[idx, t] = term[idx]
            filled[idx, t] = True
            length[idx] += 1
            if "battle_won" in info:
                reports_won = True
                won[idx] |= info["battle_won"][idx]
            done = active & (term | trunc | (t + 1 == t_max))
            for i in np.flatnonzero(done):  # the observation after the last step, for bootstrapping
                obs[i, t + 1], state[i, t + 1], avail[i, t + 1] = arrays.obs[i], arrays.state[i], arrays.avail[i]
            active &= ~done
            if not active.any():
                break
        batch = EpisodeBatch(
            obs=torch.from_numpy(obs), state=torch.from_numpy(state), avail=torch.from_numpy(avail),
            actions=torch.from_numpy(actions), reward=torch.from_numpy(reward),
            terminated=torch.from_numpy(terminated), filled=torch.from_numpy(filled), length=torch.from_numpy(length),
        )
        stats = RolloutStats(returns=reward.sum(axis=1), lengths=length, battle_won=won if reports_won else None)
        return batch, stats
