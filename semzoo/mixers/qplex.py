"""QPLEX (Wang et al., ICLR 2021): duplex dueling mixing that keeps IGM for every weight it can learn.

Per-agent transformation (the "transformation" network, paper eq. 6):
    Q_i' = w_i(s) Q_i + v_i(s),   V_i = w_i(s) max_u Q_i + v_i(s),   A_i = Q_i' - V_i <= 0,   w_i > 0
Dueling mixing (paper eqs. 7-9):
    Q_tot = V_tot + A_tot,   V_tot = sum_i V_i,   A_tot = sum_i lambda_i(s, u) A_i,   lambda_i > 0
computed, as in the authors' implementation, as sum_i Q_i' + sum_i (lambda_i - 1) A_i (the same number).
Since every A_i <= 0 with equality exactly at agent i's greedy action and lambda_i > 0, Q_tot is maximised by the
joint action of the per-agent argmaxes: IGM holds whatever the networks output.
"""

from __future__ import annotations

import torch
from torch import nn

from semzoo.config import MixerConfig
from semzoo.mixers.base import Mixer, register_mixer

POSITIVE_EPS = 1e-10
"""Added to |w_i| and to lambda_i so both stay strictly positive (IGM needs > 0, not >= 0)."""


class DuplexAttention(nn.Module):
    """lambda_i(s, u) = eps + sum_k key_k(s) * agent_ik(s) * action_ik(s, u), every factor positive.

    state [N,S], joint action one-hot [N,A*U] -> lambda [N,A]. The multi-head form of QPLEX eq. 9: head k's
    positive key |f_k(s)| scales its per-agent attention sigmoid(g_k(s)) and action gate sigmoid(h_k(s, u)).
    """

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, heads: int, attend_dim: int) -> None:
        super().__init__()
        self.heads, self.n_agents = heads, n_agents
        joint_dim = state_dim + n_agents * n_actions
        self.key = nn.Sequential(nn.Linear(state_dim, attend_dim), nn.ReLU(), nn.Linear(attend_dim, heads))
        self.agent = nn.Sequential(nn.Linear(state_dim, attend_dim), nn.ReLU(), nn.Linear(attend_dim, heads * n_agents))
        # Nonlinear in the joint action: a single linear layer would make each head's gate additive in the agents'
        # actions (in logit space), too weak to single out one joint action.
        self.action = nn.Sequential(nn.Linear(joint_dim, attend_dim), nn.ReLU(), nn.Linear(attend_dim, heads * n_agents))

    def forward(self, state_NS: torch.Tensor, joint_action_NX: torch.Tensor) -> torch.Tensor:
        n = state_NS.shape[0]
        key_NK1 = (torch.abs(self.key(state_NS)) + POSITIVE_EPS).unsqueeze(-1)
        agent_NKA = torch.sigmoid(self.agent(state_NS)).view(n, self.heads, self.n_agents)
        action_NKA = torch.sigmoid(self.action(torch.cat([state_NS, joint_action_NX], dim=-1))).view(n, self.heads, self.n_agents)
        return (key_NK1 * agent_NKA * action_NKA).sum(dim=1) + POSITIVE_EPS


@register_mixer("qplex")
class QPLEXMixer(Mixer):
    """Q_tot = sum_i V_i + sum_i lambda_i(s, u) A_i with positive w_i(s) and lambda_i(s, u).

    forward(agent_qs [B,T,A], state [B,T,S], actions_onehot=[B,T,A,U], max_qs=[B,T,A]) -> [B,T,1];
    ``max_qs`` is each agent's max utility over its available actions (for a target, the target net's).
    """

    uses_actions = True
    """The learner passes ``actions_onehot`` and ``max_qs`` (see ``QLearner.mixer_extra``)."""
    stop_advantage_gradient = True

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, embed_dim: int = 32, heads: int = 4,
                 attend_dim: int = 32) -> None:
        super().__init__(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)
        self.hyper_w = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, n_agents))
        self.hyper_v = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, n_agents))
        self.attention = DuplexAttention(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, heads=heads,
                                         attend_dim=attend_dim)

    @classmethod
    def from_config(cls, *, n_agents: int, state_dim: int, n_actions: int, config: MixerConfig) -> QPLEXMixer:
        return cls(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, embed_dim=config.embed_dim,
                   heads=config.qplex_heads, attend_dim=config.qplex_attend_dim)

    def transform_weights(self, state_BTS: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(w_i(s) > 0, v_i(s)) of the per-agent transformation: [B,T,A] each."""
        return torch.abs(self.hyper_w(state_BTS)) + POSITIVE_EPS, self.hyper_v(state_BTS)

    def advantage_weights(self, state_BTS: torch.Tensor, actions_onehot_BTAU: torch.Tensor) -> torch.Tensor:
        """lambda_i(s, u) > 0: [B,T,A]."""
        b, t, a, u = actions_onehot_BTAU.shape
        lam = self.attention(state_BTS.reshape(b * t, -1), actions_onehot_BTAU.reshape(b * t, a * u))
        return lam.view(b, t, a)

    def mix(self, agent_qs_BTA: torch.Tensor, state_BTS: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        actions_onehot, max_qs = extra.get("actions_onehot"), extra.get("max_qs")
        if actions_onehot is None or max_qs is None:
            raise ValueError("QPLEX needs the extra inputs actions_onehot [B,T,A,U] and max_qs [B,T,A]: "
                             "call it through QLearner, which passes them for mixers with uses_actions = True")
        expected = (*agent_qs_BTA.shape, self.n_actions)
        if tuple(actions_onehot.shape) != expected or max_qs.shape != agent_qs_BTA.shape:
            raise ValueError(f"actions_onehot {tuple(actions_onehot.shape)} / max_qs {tuple(max_qs.shape)}: "
                             f"expected {expected} and {tuple(agent_qs_BTA.shape)}")
        w_BTA, v_BTA = self.transform_weights(state_BTS)
        q_BTA = w_BTA * agent_qs_BTA + v_BTA  # Q_i'
        value_BTA = w_BTA * max_qs + v_BTA  # V_i
        # The authors' implementation stops the gradient through A_i inside the lambda term: the agents' utilities
        # then receive dQ_tot/dQ_i = w_i > 0 (monotone, stable), while lambda still learns from the advantages.
        advantage_BTA = q_BTA - value_BTA
        if self.stop_advantage_gradient:
            advantage_BTA = advantage_BTA.detach()
        lam_BTA = self.advantage_weights(state_BTS, actions_onehot)
        return (q_BTA + (lam_BTA - 1.0) * advantage_BTA).sum(dim=-1, keepdim=True)
