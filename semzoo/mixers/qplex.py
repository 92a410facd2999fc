"""QPLEX (Wang et al., ICLR 2021): duplex dueling mixing that keeps IGM for every weight it can learn.

Per-agent transformation (the "transformation" network, paper eq. 6):
    Q_i' = w_i(s) Q_i + v_i(s),   V_i = w_i(s) max_u Q_i + v_i(s),   A_i = Q_i' - V_i <= 0,   w_i > 0
Dueling mixing (paper eqs. 7-9):
    Q_tot = V_tot + A_tot,   V_tot = sum_i V_i,   A_tot = sum_i lambda_i(s, u) A_i,   lambda_i > 0
computed, as in the authors' implementation, as sum_i Q_i' + sum_i (lambda_i - 1) A_i (the same number).
Since every A_i <= 0 with equality exactly at agent i's greedy action and lambda_i > 0, Q_tot is maximised by the
joint action of the per-agent argmaxes: IGM holds whatever the networks output.

Two transformations, as in the authors' code (wjh720/QPLEX, pymarl-master/src/modules/mixers):
    general ("dmaq")         w_i = |hypernet(s)_i| + eps,   v_i = hypernet'(s)_i
    qatten  ("dmaq_qatten")  w_i = sum_h softmax_i(q_h(s) . k_h(x_i) / sqrt(d)) + eps,   v_i = V(s) / n
with x_i agent i's block of the state (the env's ``StateLayout``), so sum_i w_i = heads. The Qatten form adds the
regulariser ``qatten_reg * sum_h mean(logit_h^2)`` (the unscaled logits) to the loss. The authors ran it on SMAC
with one linear layer per lambda head (``--qplex-lambda-layers 1``); ``--preset authors-smac`` sets both.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from semzoo.mixers.base import Mixer
from semzoo.mixers.registry import register_mixer
from semzoo.mixers.settings import QPLEXSettings
from semzoo.types import StateLayout

POSITIVE_EPS = 1e-10
"""Added to |w_i| and to lambda_i so both stay strictly positive (IGM needs > 0, not >= 0)."""
TRANSFORMATIONS = ("general", "qatten")


class MissingStateLayout(ValueError):
    """A mixer that attends over units was built for an env that declares no ``state_layout``."""


class DuplexAttention(nn.Module):
    """lambda_i(s, u) = eps + sum_k key_k(s) * agent_ik(s) * action_ik(s, u), every factor positive.

    state [N,S], joint action one-hot [N,A*U] -> lambda [N,A]. The multi-head form of QPLEX eq. 9: head k's
    positive key |f_k(s)| scales its per-agent attention sigmoid(g_k(s)) and action gate sigmoid(h_k(s, u)).
    ``layers`` 2: each of key, agent and action is Linear-ReLU-Linear with one hidden layer of ``attend_dim`` shared
    by the heads; 1: one linear layer (per head, stacked: the authors' ``adv_hypernet_layers: 1``).
    """

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, heads: int, attend_dim: int,
                 layers: int = 2) -> None:
        super().__init__()
        if layers not in (1, 2):
            raise ValueError(f"lambda layers={layers!r}: expected 1 or 2")
        self.heads, self.n_agents = heads, n_agents
        joint_dim = state_dim + n_agents * n_actions

        def head(in_dim: int, out_dim: int) -> nn.Module:
            if layers == 1:
                return nn.Linear(in_dim, out_dim)
            return nn.Sequential(nn.Linear(in_dim, attend_dim), nn.ReLU(), nn.Linear(attend_dim, out_dim))

        self.key = head(state_dim, heads)
        self.agent = head(state_dim, heads * n_agents)
        # Nonlinear in the joint action with two layers: one linear layer makes each head's gate additive in the
        # agents' actions (in logit space), too weak to single out one joint action on the matrix games.
        self.action = head(joint_dim, heads * n_agents)

    def forward(self, state_NS: torch.Tensor, joint_action_NX: torch.Tensor) -> torch.Tensor:
        n = state_NS.shape[0]
        key_NK1 = (torch.abs(self.key(state_NS)) + POSITIVE_EPS).unsqueeze(-1)
        agent_NKA = torch.sigmoid(self.agent(state_NS)).view(n, self.heads, self.n_agents)
        action_NKA = torch.sigmoid(self.action(torch.cat([state_NS, joint_action_NX], dim=-1))).view(n, self.heads, self.n_agents)
        return (key_NK1 * agent_NKA * action_NKA).sum(dim=1) + POSITIVE_EPS


class QattenWeights(nn.Module):
    """Qatten's transformation (Yang et al. 2020, as QPLEX's "dmaq_qatten"): w_i(s) and v(s) from attention over units.

    state [N,S] -> (w [N,A] with sum_i w_i = heads, v [N] = V(s), logits [N,H,A]). Head h: query q_h(s) =
    Linear-ReLU-Linear (hidden ``hypernet_dim``, no bias at the end), key k_h(x_i) = Linear(x_i) without bias on
    agent i's ``unit_dim`` state features x_i, logit q_h . k_h; the weights are softmax_i(logit / sqrt(embed_dim)).
    """

    def __init__(self, *, n_agents: int, state_dim: int, layout: StateLayout, heads: int, embed_dim: int,
                 hypernet_dim: int) -> None:
        super().__init__()
        if layout.n_units != n_agents or layout.end > state_dim:
            raise ValueError(f"{layout}: expected {n_agents} units (one per agent) inside the state of {state_dim} "
                             "features; fix the env's state_layout")
        self.layout, self.heads, self.embed_dim, self.n_agents = layout, heads, embed_dim, n_agents
        self.query = nn.ModuleList(
            nn.Sequential(nn.Linear(state_dim, hypernet_dim), nn.ReLU(), nn.Linear(hypernet_dim, embed_dim, bias=False))
            for _ in range(heads))
        self.key = nn.Linear(layout.unit_dim, heads * embed_dim, bias=False)  # the heads' keys, stacked
        self.value = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def logits(self, state_NS: torch.Tensor) -> torch.Tensor:
        """q_h(s) . k_h(x_i), unscaled: [N,H,A]."""
        n, layout = state_NS.shape[0], self.layout
        units_NAX = state_NS[:, layout.offset:layout.end].reshape(n, self.n_agents, layout.unit_dim)
        keys_NAHE = self.key(units_NAX).view(n, self.n_agents, self.heads, self.embed_dim)
        query_NHE = torch.stack([q(state_NS) for q in self.query], dim=1)
        return torch.einsum("nhe,nahe->nha", query_NHE, keys_NAHE)

    def forward(self, state_NS: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits_NHA = self.logits(state_NS)
        w_NA = torch.softmax(logits_NHA / math.sqrt(self.embed_dim), dim=-1).sum(dim=1)
        return w_NA, self.value(state_NS).squeeze(-1), logits_NHA


@register_mixer("qplex", settings=QPLEXSettings)
class QPLEXMixer(Mixer):
    """Q_tot = sum_i V_i + sum_i lambda_i(s, u) A_i with positive w_i(s) and lambda_i(s, u).

    forward(agent_qs [B,T,A], state [B,T,S], actions_onehot=[B,T,A,U], max_qs=[B,T,A]) -> [B,T,1];
    ``max_qs`` is each agent's max utility over its available actions (for a target, the target net's).
    """

    uses_actions = True
    """The learner passes ``actions_onehot`` and ``max_qs`` (see ``QLearner.mixer_extra``)."""
    reads_state_layout = True
    """``make_mixer`` passes the env's ``state_layout`` (the Qatten transformation reads it)."""
    stop_advantage_gradient = True

    def __init__(self, *, n_agents: int, state_dim: int, n_actions: int, embed_dim: int = 32, heads: int = 4,
                 attend_dim: int = 32, lambda_layers: int = 2, transformation: str = "general",
                 state_layout: StateLayout | None = None, qatten_heads: int = 4, hypernet_dim: int = 64,
                 qatten_reg: float = 0.001) -> None:
        super().__init__(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions)
        if transformation not in TRANSFORMATIONS:
            raise ValueError(f"transformation={transformation!r}: expected one of {', '.join(TRANSFORMATIONS)}")
        self.transformation, self.qatten_reg = transformation, qatten_reg
        self.qatten: QattenWeights | None = None
        if transformation == "qatten":
            if state_layout is None:
                raise MissingStateLayout(
                    "declares no state_layout (per-unit state features), which QPLEX's Qatten transformation needs: "
                    "run QPLEX there without it (no --preset authors-smac, --qplex-transformation general), or declare "
                    "env.state_layout = semzoo.types.StateLayout(...) in the env")
            self.qatten = QattenWeights(n_agents=n_agents, state_dim=state_dim, layout=state_layout,
                                        heads=qatten_heads, embed_dim=embed_dim, hypernet_dim=hypernet_dim)
        else:
            self.hyper_w = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, n_agents))
            self.hyper_v = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, n_agents))
        self.attention = DuplexAttention(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, heads=heads,
                                         attend_dim=attend_dim, layers=lambda_layers)

    @classmethod
    def from_config(cls, *, n_agents: int, state_dim: int, n_actions: int, settings: QPLEXSettings | None = None,
                    state_layout: StateLayout | None = None) -> QPLEXMixer:
        settings = settings or QPLEXSettings()
        return cls(n_agents=n_agents, state_dim=state_dim, n_actions=n_actions, embed_dim=settings.qplex_embed_dim,
                   heads=settings.qplex_heads, attend_dim=settings.qplex_attend_dim,
                   lambda_layers=settings.qplex_lambda_layers, transformation=settings.qplex_transformation,
                   state_layout=state_layout, qatten_heads=settings.qatten_heads,
                   hypernet_dim=settings.qplex_hypernet_dim, qatten_reg=settings.qatten_reg)

    def transform_weights(self, state_BTS: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(w_i(s) > 0, v_i(s)) of the per-agent transformation: [B,T,A] each."""
        if self.qatten is None:
            return torch.abs(self.hyper_w(state_BTS)) + POSITIVE_EPS, self.hyper_v(state_BTS)
        b, t, _ = state_BTS.shape
        w_NA, value_N, _ = self.qatten(state_BTS.reshape(b * t, -1))
        v_BTA = (value_N / self.n_agents).view(b, t, 1).expand(b, t, self.n_agents)
        return w_NA.view(b, t, self.n_agents) + POSITIVE_EPS, v_BTA

    def regularizer(self, state_BTS: torch.Tensor, rows_T: torch.Tensor) -> torch.Tensor | None:
        """Qatten's attention regulariser, qatten_reg * sum_h mean_{b,t,i}(logit_h^2) over the rows ``rows_T``; None
        for the general transformation. The authors average over every row of the batch (padding included) up to its
        longest episode: ``rows_T`` marks those, so padding added past it (the K-run update) changes nothing."""
        if self.qatten is None:
            return None
        b, t, _ = state_BTS.shape
        squares_BTHA = self.qatten.logits(state_BTS.reshape(b * t, -1)).pow(2).view(b, t, -1, self.n_agents)
        rows = rows_T.to(squares_BTHA.dtype).view(1, t, 1, 1)
        per_head = (squares_BTHA * rows).sum(dim=(0, 1, 3)) / (b * self.n_agents * rows.sum().clamp(min=1.0))
        return self.qatten_reg * per_head.sum()

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
