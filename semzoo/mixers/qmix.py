"""QMIX (Rashid et al. 2018): a monotonic mixing network whose weights come from hypernetworks of the state."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semzoo.mixers.base import Mixer
from semzoo.mixers.registry import register_mixer
from semzoo.mixers.settings import QMIXSettings


@register_mixer("qmix", settings=QMIXSettings)
class QMixer(Mixer):
    """Q_tot = w2(s)^T elu(W1(s)^T Q + b1(s)) + V(s) with |W1|, |w2| >= 0, so dQ_tot/dQ_a >= 0."""

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, embed_dim: int = 32, hypernet_dim: int = 64) -> None:
        super().__init__(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)
        self.embed_dim = embed_dim
        self.hyper_w1 = nn.Sequential(nn.Linear(state_dim, hypernet_dim), nn.ReLU(), nn.Linear(hypernet_dim, n_agents * embed_dim))
        self.hyper_w2 = nn.Sequential(nn.Linear(state_dim, hypernet_dim), nn.ReLU(), nn.Linear(hypernet_dim, embed_dim))
        self.hyper_b1 = nn.Linear(state_dim, embed_dim)
        self.hyper_v = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    @classmethod
    def from_config(cls, *, n_agents: int, state_dim: int, n_actions: int,
                    settings: QMIXSettings | None = None) -> QMixer:
        settings = settings or QMIXSettings()
        return cls(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions,
                   embed_dim=settings.embed_dim, hypernet_dim=settings.hypernet_dim)

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        b, t, a = agent_qs_BTA.shape
        w1 = torch.abs(self.hyper_w1(state_BTS)).view(b, t, a, self.embed_dim)
        b1 = self.hyper_b1(state_BTS)
        # Broadcast-and-sum instead of B*T tiny matmuls: one elementwise kernel, not B*T calls, for a handful of agents.
        hidden_BTE = F.elu((agent_qs_BTA.unsqueeze(-1) * w1).sum(dim=-2) + b1)
        w2_BTE = torch.abs(self.hyper_w2(state_BTS))
        return (hidden_BTE * w2_BTE).sum(dim=-1, keepdim=True) + self.hyper_v(state_BTS)
