"""A memory's part of a run: what every memory hook receives in place of the whole ``TrainConfig``.

A memory is built, planned and checked against the env from a ``MemorySetup``: the env's sizes, the memory section
every memory shares (lambda, D, capacity, |M|, the miss rule), the sections of its own settings (EMC's ``emc`` and
``curiosity``, a plugin's ``best``), and the few facts of the run a memory reads (gamma, the seed, the device, the env
id for messages). The agent's and the learner's sections come along for a memory that trains a second agent learner
of its own (the curiosity of EMC and EMU copies the agent network, RMSprop and the target period); no memory sees the
mixer's settings, the exploration schedule, the runtime or the loop's settings.

Torch-free: the memory plan and `semzoo memory-cost` build setups without importing a memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semzoo.config import AgentConfig, LearnerConfig, MemoryConfig, TrainConfig


@dataclass(frozen=True)
class MemorySetup:
    """The env's sizes, the shared memory section, the memory's own sections and the run facts it reads."""

    state_dim: int
    """S, the size of the global state."""
    n_agents: int
    n_actions: int
    obs_dim: int
    """One agent's observation size (the networks of the curiosity read it)."""
    memory: MemoryConfig
    """The section every memory shares: lambda of eq. (6), D, capacity, |M|, the miss rule."""
    own: Mapping[str, Any]
    """Its own settings by section: the components the run's memory trains with (``{"emc": ..., "curiosity": ...}``)."""
    given: frozenset[str]
    """The keys of ``own`` the user gave (``lagma.lagma_latent_dim``): ``fit_env`` keeps those."""
    seed: int
    """The run's seed: a memory draws its projection and networks from it."""
    device: str
    """The run's device setting ('auto', 'cpu', 'cuda:N'), for a memory with networks of its own."""
    env: str
    """The env id, for messages."""
    agent: AgentConfig
    """The agents' architecture, for a memory that trains agent networks of its own (the curiosity)."""
    learner: LearnerConfig
    """The learner's section: gamma, and the optimiser and target period a second learner copies (the curiosity)."""

    @classmethod
    def of(cls, config: TrainConfig, *, state_dim: int, n_agents: int, n_actions: int, obs_dim: int) -> MemorySetup:
        """The memory's part of a run of ``config`` on an env of these sizes (its own sections: the memory components
        in ``config.components``, which holds only those the run's algorithm trains with)."""
        from semzoo.config import registered_components

        components = registered_components()
        own = {name: settings for name, settings in config.components.items()
               if components[name].kind == "memory"}
        given = frozenset(key for key in config.pinned if key.partition(".")[0] in own)
        return cls(state_dim=int(state_dim), n_agents=int(n_agents), n_actions=int(n_actions), obs_dim=int(obs_dim),
                   memory=config.memory, own=own, given=given, seed=config.seed, device=config.device,
                   env=config.env, agent=config.agent, learner=config.learner)

    @property
    def gamma(self) -> float:
        """The run's discount (``learner.gamma``): the returns a memory writes are discounted by it."""
        return self.learner.gamma

    @property
    def sizes(self) -> dict[str, int]:
        """The env's sizes as keywords (``state_dim``, ``n_agents``, ``n_actions``, ``obs_dim``)."""
        return {"state_dim": self.state_dim, "n_agents": self.n_agents, "n_actions": self.n_actions,
                "obs_dim": self.obs_dim}

    def settings(self, section: str) -> Any:
        """One of its own sections by name (``setup.settings('lagma')``); KeyError naming those it has."""
        if section not in self.own:
            raise KeyError(f"no settings section {section!r} in this memory's setup: expected one of "
                           f"{sorted(self.own) or 'none (the memory declares no settings)'}")
        return self.own[section]

    def with_settings(self, section: str, **changes: Any) -> MemorySetup:
        """This setup with fields of one of its own sections changed (what ``fit_env`` returns)."""
        changed = dataclasses.replace(self.settings(section), **changes)
        return dataclasses.replace(self, own={**self.own, section: changed})

    def applied_to(self, config: TrainConfig) -> TrainConfig:
        """``config`` with this setup's memory section and own sections (a fitted setup's), ``config`` itself when
        they are the config's already."""
        if self.memory == config.memory and all(config.components.get(k) == v for k, v in self.own.items()):
            return config
        return dataclasses.replace(config, memory=self.memory, components={**config.components, **self.own})


__all__ = ["MemorySetup"]
