"""The collection of K runs (a ``--seeds`` group) in lockstep: one agent forward per step for all K runs' envs.

    reset each run's N envs with its own seed: one call where their class resets envs together
        (``reset_together``, SMAX: one jitted reset of K x N envs), else run by run
    for t < max_t, while some run has an episode going on:
        the agents' inputs: the envs' own device tensors where they hand them over (``agent_inputs``, SMAX:
            JAX's buffers through DLPack), else the host arrays converted
        the agents of the runs still collecting, their parameters stacked: one step   (agents/rnn.StackedAgents)
        per run: epsilon-greedy with its own epsilon and generator                      (as EpisodeRunner.run)
        the runs' env steps: one call for all K runs' envs where their class steps envs together
            (``step_together``, SMAX: one jitted step of K x N envs), else run by run
    a run whose N episodes have all ended leaves the stack; each run's EpisodeRecord gives its batch and stats

Run k draws the same random numbers in the same order as its own ``EpisodeRunner.run`` (its generator, its envs'
seeds), so it gets the same episodes up to the float rounding of the stacked forward.

An env class steps envs together when it has ``why_not_together(envs) -> str | None`` and
``step_together(envs, actions) -> results``: ``actions[k]`` is env k's [N, A] actions or None (env k left as it
is, result None), and result k is what ``envs[k].step(actions[k])`` returns. A run that left the stack passes
None, so the env call keeps one shape (K) for the whole collection. It resets them together when it also has
``reset_together(envs, seeds) -> arrays``, result k what ``envs[k].reset(seed=seeds[k])`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from semzoo.agents.rnn import StackedAgents
from semzoo.agents.selection import epsilon_greedy
from semzoo.run.runner import EpisodeRecord, EpisodeRunner, RolloutStats, handed_inputs
from semzoo.types import NO_ACTION, CTDEArrays, EpisodeBatch, VecCTDEEnv, VecStep


def _env_together(envs: Sequence[VecCTDEEnv], name: str) -> Callable[..., Any] | None:
    """The env class's method ``name`` for all ``envs`` in one call, when it has it and ``why_not_together`` and
    these envs pass (``why_not_together`` is None); else None."""
    kind = type(envs[0])
    together = getattr(kind, name, None)
    why_not = getattr(kind, "why_not_together", None)
    if together is None or why_not is None or why_not(envs) is not None:
        return None
    return together


def env_step_together(envs: Sequence[VecCTDEEnv]) -> Callable[..., list[VecStep | None]] | None:
    """The env class's step of all ``envs`` in one call (``step_together``), when it has one and these envs can
    step together (``why_not_together`` is None); else None (the envs step one by one)."""
    return _env_together(envs, "step_together")


def env_reset_together(envs: Sequence[VecCTDEEnv]) -> Callable[..., list[CTDEArrays]] | None:
    """The env class's reset of all ``envs`` in one call (``reset_together(envs, seeds)``, result k what
    ``envs[k].reset(seeds[k])`` returns), as for ``env_step_together``; else None (the envs reset one by one)."""
    return _env_together(envs, "reset_together")


class GroupRunner:
    """Collects one batch of N episodes for each of K ``EpisodeRunner``s (one per run) in lockstep."""

    def __init__(self, runners: Sequence[EpisodeRunner]) -> None:
        problem = self.why_not(runners)
        if problem is not None:
            raise ValueError(f"GroupRunner: {problem}; collect run by run (EpisodeRunner.run) instead")
        self.runners = list(runners)
        self.envs = [runner.env for runner in runners]
        self.step_together = env_step_together(self.envs)
        """One env call for all runs' steps, or None (each run's env steps on its own)."""
        self.reset_together = env_reset_together(self.envs)
        """One env call for all runs' resets, or None (each run's env resets on its own)."""

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
        if self.reset_together is None:
            arrays = [r.env.reset(seed=seed) for r, seed in zip(runners, seeds)]
        else:
            arrays = self.reset_together(self.envs, list(seeds))
        live = list(range(len(runners)))  # the runs with an episode going on, in the order of the stack
        agents = StackedAgents([r.agent for r in runners])
        hidden_KNAH = torch.zeros(len(runners), n, a, agents.hidden_dim, device=device, dtype=dtype)  # nn.GRU's h0=None
        last_action_KN1A = torch.full((len(runners), n, 1, a), NO_ACTION, dtype=torch.int64, device=device)
        for t in range(first.max_t):
            for k in live:
                records[k].observe(t, arrays[k])
            handed = [handed_inputs(self.envs[k], device) for k in live]  # the envs' own tensors, or None
            if all(inputs is not None for inputs in handed):  # converted to the run's dtype after the hand-over
                obs_KNAO = torch.stack([inputs[0] for inputs in handed if inputs is not None]).to(dtype)
                avail_K = [inputs[1] for inputs in handed if inputs is not None]
            else:
                obs_KNAO = torch.as_tensor(np.stack([arrays[k].obs for k in live]), device=device, dtype=dtype)
                avail_K = [torch.as_tensor(arrays[k].avail, device=device) for k in live]
            inputs = first.agent.build_inputs(obs_KNAO.reshape(len(live) * n, 1, a, -1),
                                              last_action_KN1A.reshape(len(live) * n, 1, a))
            q_KN1AU, hidden_KNAH = agents(inputs.reshape(len(live), n, *inputs.shape[1:]), hidden_KNAH)
            chosen = [epsilon_greedy(q_KN1AU[j, :, 0], avail_K[j], epsilons[k], generators[k])
                      for j, k in enumerate(live)]  # each run's own draws
            chosen_np = [actions.cpu().numpy() for actions in chosen]
            going = []
            for k, actions_NA, (arrays_k, reward, terminated, truncated, info) in zip(
                    live, chosen_np, self._step(live, chosen_np)):
                arrays[k] = arrays_k
                going.append(records[k].step(t, actions_NA, arrays_k, reward, terminated, truncated, info))
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

    def _step(self, live: list[int], actions: list[np.ndarray]) -> list[VecStep]:
        """The env steps of the runs ``live`` with their ``actions`` [N, A] (in the order of ``live``)."""
        if self.step_together is None:
            return [self.envs[k].step(act) for k, act in zip(live, actions)]
        all_actions: list[np.ndarray | None] = [None] * len(self.runners)  # a run that left: its envs stay as they are
        for k, act in zip(live, actions):
            all_actions[k] = act
        results = self.step_together(self.envs, all_actions)
        stepped = [results[k] for k in live]
        assert all(result is not None for result in stepped), "a run given actions gets its step's result"
        return [result for result in stepped if result is not None]
