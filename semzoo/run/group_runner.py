"""The collection of K runs (a ``--seeds`` group) in lockstep: one agent forward per step for all K runs' envs.

    reset each run's N envs with its own seed
    for t < max_t, while some run has an episode going on:
        the agents of the runs still collecting, their parameters stacked: one step   (agents/rnn.StackedAgents)
        per run: epsilon-greedy with its own epsilon and generator, then its env step    (as EpisodeRunner.run)
    a run whose N episodes have all ended leaves the stack; each run's EpisodeRecord gives its batch and stats

Run k draws the same random numbers in the same order as its own ``EpisodeRunner.run`` (its generator, its envs'
seeds), so it gets the same episodes up to the float rounding of the stacked forward.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from semzoo.agents.rnn import StackedAgents
from semzoo.agents.selection import epsilon_greedy
from semzoo.run.runner import EpisodeRecord, EpisodeRunner, RolloutStats
from semzoo.types import NO_ACTION, EpisodeBatch


class GroupRunner:
    """Collects one batch of N episodes for each of K ``EpisodeRunner``s (one per run) in lockstep."""

    def __init__(self, runners: Sequence[EpisodeRunner]) -> None:
        problem = self.why_not(runners)
        if problem is not None:
            raise ValueError(f"GroupRunner: {problem}; collect run by run (EpisodeRunner.run) instead")
        self.runners = list(runners)

    @staticmethod
    def why_not(runners: Sequence[EpisodeRunner]) -> str | None:
        """Why ``runners`` cannot collect together (agents that do not stack, other devices or env shapes), or None."""
        if not runners:
            return "no runners given"
        problem = StackedAgents.why_not([runner.agent for runner in runners])
        if problem is not None:
            return problem
        first = runners[0]
        shape = (first.device, first.max_t, first.env.n_envs, first.env.n_agents, first.env.obs_dim, first.env.n_actions)
        if any((r.device, r.max_t, r.env.n_envs, r.env.n_agents, r.env.obs_dim, r.env.n_actions) != shape
               for r in runners):
            return "the runs differ in device, episode limit or env shapes"
        inputs = (first.agent.obs_agent_id, first.agent.obs_last_action)
        if any((r.agent.obs_agent_id, r.agent.obs_last_action) != inputs for r in runners):
            return "the runs' agents take different inputs"
        return None

    @torch.no_grad()
    def run(self, *, epsilons: Sequence[float], seeds: Sequence[int],
            generators: Sequence[torch.Generator]) -> list[tuple[EpisodeBatch, RolloutStats]]:
        """One episode per env of every run, run k with ``epsilons[k]``, ``seeds[k]`` and ``generators[k]``.

        Returns each run's padded batch (on CPU) and stats, as its ``EpisodeRunner.run`` would.
        """
        runners = self.runners
        if not len(epsilons) == len(seeds) == len(generators) == len(runners):
            raise ValueError(f"{len(runners)} runners with {len(epsilons)} epsilons, {len(seeds)} seeds and "
                             f"{len(generators)} generators: give one of each per runner")
        first, device, dtype = runners[0], runners[0].device, torch.get_default_dtype()
        n, a = first.env.n_envs, first.env.n_agents
        records = [EpisodeRecord(r.env, r.max_t) for r in runners]
        arrays = [r.env.reset(seed=seed) for r, seed in zip(runners, seeds)]
        live = list(range(len(runners)))  # the runs with an episode going on, in the order of the stack
        agents = StackedAgents([r.agent for r in runners])
        hidden_KNAH = torch.zeros(len(runners), n, a, agents.hidden_dim, device=device, dtype=dtype)  # nn.GRU's h0=None
        last_action_KN1A = torch.full((len(runners), n, 1, a), NO_ACTION, dtype=torch.int64, device=device)
        for t in range(first.max_t):
            for k in live:
                records[k].observe(t, arrays[k])
            obs_KNAO = torch.as_tensor(np.stack([arrays[k].obs for k in live]), device=device, dtype=dtype)
            inputs = first.agent.build_inputs(obs_KNAO.reshape(len(live) * n, 1, a, -1),
                                              last_action_KN1A.reshape(len(live) * n, 1, a))
            q_KN1AU, hidden_KNAH = agents(inputs.reshape(len(live), n, *inputs.shape[1:]), hidden_KNAH)
            chosen, going = [], []
            for j, k in enumerate(live):  # each run's own draws and env step, as in its EpisodeRunner.run
                avail_t = torch.as_tensor(arrays[k].avail, device=device)
                chosen.append(epsilon_greedy(q_KN1AU[j, :, 0], avail_t, epsilons[k], generators[k]))
                chosen_np = chosen[-1].cpu().numpy()
                arrays[k], reward, terminated, truncated, info = runners[k].env.step(chosen_np)
                going.append(records[k].step(t, chosen_np, arrays[k], reward, terminated, truncated, info))
            last_action_KN1A = torch.stack(chosen).unsqueeze(2)
            if not all(going):  # runs whose N episodes all ended leave the stack
                keep = [j for j, still in enumerate(going) if still]
                if not keep:
                    break
                live = [live[j] for j in keep]
                agents = agents.select(keep)
                index = torch.tensor(keep, device=device)
                hidden_KNAH, last_action_KN1A = hidden_KNAH.index_select(0, index), last_action_KN1A.index_select(0, index)
        return [record.result() for record in records]
