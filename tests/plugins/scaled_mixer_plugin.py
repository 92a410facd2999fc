"""A plugin module as a user writes one: a mixer with a setting of its own, in one file.

Importing it (``semzoo --plugin scaled_mixer_plugin``) makes the ids ``scaled`` and ``<memory>-scaled`` trainable;
``--set scaled.scale=0.5`` sets its one setting, which config.json stores in the section "scaled".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from semzoo import Mixer, register_mixer
from semzoo.config import POSITIVE, ranged


@dataclass(frozen=True, kw_only=True)
class ScaledSettings:
    """The mixer's own settings: the section "scaled" of a run's config."""

    scale: float = ranged(1.0, POSITIVE, "1 is VDN")
    """Q_tot = scale * sum_a Q_a."""


@register_mixer("scaled", settings=ScaledSettings)
class ScaledVDN(Mixer):
    """VDN times a constant: Q_tot(tau, u) = scale * sum_a Q_a(tau_a, u_a)."""

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, scale: float) -> None:
        super().__init__(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)
        self.scale = scale

    @classmethod
    def from_config(cls, *, n_agents: int, state_dim: int, n_actions: int, settings: ScaledSettings) -> ScaledVDN:
        return cls(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, scale=settings.scale)

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        return self.scale * agent_qs_BTA.sum(dim=-1, keepdim=True)
