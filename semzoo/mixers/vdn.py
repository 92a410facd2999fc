"""VDN (Sunehag et al. 2018): Q_tot is the sum of the agents' utilities."""

from __future__ import annotations

import torch

from semzoo.mixers.base import Mixer
from semzoo.mixers.registry import register_mixer


@register_mixer("vdn")
class VDNMixer(Mixer):
    """Q_tot(tau, u) = sum_a Q_a(tau_a, u_a)."""

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        return agent_qs_BTA.sum(dim=-1, keepdim=True)
