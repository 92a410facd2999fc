"""WQMIX's central mixer Q* (Rashid et al., NeurIPS 2020).

The factored Q_tot of CW-QMIX and OW-QMIX is the monotonic QMIX mixer (their rows in ``semzoo.algos``);
the weighting lives in ``semzoo.learners.wqmix.WQMIXLearner``. ``CentralMixer`` is not registered: it does
not factor, so agents cannot act greedily on it.
"""

from __future__ import annotations

import torch
from torch import nn

from semzoo.mixers.base import Mixer

CENTRAL_HIDDEN_LAYERS = 3
"""Hidden layers of Q*'s feed-forward network (the authors' ``QMixerCentralFF``, central_mixer "ff")."""


class CentralMixer(Mixer):
    """Q*(s, u) = MLP([s, Q*_1(tau_1, u_1), ..., Q*_n(tau_n, u_n)]) + V(s): no monotonicity constraint.

    agent_qs [B,T,A] (the central agents' utilities of the chosen actions), state [B,T,S] -> [B,T,1].
    As in the authors' code (oxwhirl/wqmix, modules/mixers/qmix_central_no_hyper.py): 3 hidden ReLU layers of
    ``embed_dim`` (256) over the state and every agent's utility, plus a state value V(s) = Linear-ReLU-Linear.
    """

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, embed_dim: int = 256) -> None:
        super().__init__(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)
        layers: list[nn.Module] = [nn.Linear(state_dim + n_agents, embed_dim), nn.ReLU()]
        for _ in range(CENTRAL_HIDDEN_LAYERS - 1):
            layers += [nn.Linear(embed_dim, embed_dim), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(embed_dim, 1))
        self.value = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([state_BTS, agent_qs_BTA], dim=-1)) + self.value(state_BTS)
