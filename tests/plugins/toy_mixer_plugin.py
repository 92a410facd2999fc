"""A plugin module as a user writes one: it registers a mixer from outside the semzoo package.

Importing it (``semzoo --plugin toy_mixer_plugin``, ``SEMZOO_PLUGINS=toy_mixer_plugin`` or an entry point)
makes the ids ``toy-sum``, ``sem-toy-sum`` and ``saem-toy-sum`` trainable.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semzoo import Mixer, register_mixer


@register_mixer("toy-sum")
class ToyWeightedSum(Mixer):
    """Q_tot = sum_a softplus(w_a) Q_a: VDN with one learnable positive weight per agent (monotonic)."""

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int) -> None:
        super().__init__(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)
        self.w = nn.Parameter(torch.zeros(n_agents))

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        return (agent_qs_BTA * F.softplus(self.w)).sum(dim=-1, keepdim=True)
