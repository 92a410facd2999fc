"""Weighted QMIX (Rashid et al., NeurIPS 2020) and SEM-WQMIX (paper appendix, eq. EM_WQMIX_loss), as hooks of QLearner's loss.

    y_t   = r_t + gamma (1 - term_t) Q*^-(s_{t+1}, tau_{t+1}, argmax_u Q_tot(tau_{t+1}, u))   (the QMIX agents' argmax)
    w     = 1 if u_t = u^ or y_t > Q*^-(s_t, tau_t, u^) else alpha        (CW; u^ = the QMIX agents' greedy joint action)
    w     = 1 if Q_tot(tau_t, u_t) < y_t else alpha                         (OW)
    L     = (1 - lam) sum_t m_t  [w (Q_tot - y)^2 + (Q* - y)^2] / sum_t m_t
          +      lam  sum_t m'_t [w_e (Q_tot - E)^2 + (Q* - E)^2] / sum_t m_t

with w_e the same rule as w with E in place of y, m_t the real steps and m'_t the steps the memory term
applies to (``WQMIXLearner.loss_against`` writes the sums). Q* is unrestricted: its own recurrent agents (same
architecture as the acting agents) and a feed-forward mixer over the state and every chosen utility
(``semzoo.mixers.central``). Q*^- is its target copy: as in the authors' code (oxwhirl/wqmix,
learners/max_q_learner.py), both the bootstrap and CW's threshold Q*^-(s_t, tau_t, u^) read the target central
agents and mixer, so the threshold moves only at a target sync.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from semzoo.agents.rnn import MASKED_Q, RNNAgent, flatten_rnns
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.episodic.memory import Memory
from semzoo.learners.q_learner import OnlineValues, QLearner, TargetLoss, masked_mean
from semzoo.mixers.base import Mixer
from semzoo.mixers.central import CentralMixer
from semzoo.mixers.settings import WQMIXSettings
from semzoo.types import CleanBatch

WEIGHTINGS = ("cw", "ow")


@dataclass(frozen=True)
class CentralValues(OnlineValues):
    """OnlineValues plus what the weights and the central loss read from Q*."""

    q_star_BT: torch.Tensor
    """Q*(s_t, tau_t, u_t) of the taken joint actions, [B,T], with gradient."""
    is_greedy_BT: torch.Tensor
    """u_t = u^, the QMIX agents' greedy joint action (bool [B,T])."""
    q_star_greedy_BT: torch.Tensor
    """Q*^-(s_t, tau_t, u^), CW's threshold from the target central networks, [B,T], without gradient."""


def _central(values: OnlineValues) -> CentralValues:
    assert isinstance(values, CentralValues), "WQMIXLearner hooks read the values of its own online_values"
    return values


class WQMIXLearner(QLearner):
    """CW-/OW-QMIX: a QMIX learner whose TD loss is weighted by w and whose targets come from a central Q*.

    One RMSprop optimiser holds all four networks (QMIX agents and mixer, central agents and mixer) and one
    global gradient-norm clip covers them, as in the authors' PyMARL code: the two losses share no parameters,
    so a single optimiser only couples them through the shared clip, which keeps one ``grad_clip`` meaning one
    thing for every algorithm.
    """

    def __init__(
        self, *, agent: RNNAgent, mixer: Mixer, config: LearnerConfig, memory_config: MemoryConfig,
        memory: Memory | None = None, weighting: Literal["cw", "ow"] = "cw",
        settings: WQMIXSettings | None = None,
    ) -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting={weighting!r}: expected 'cw' (centrally weighted) or 'ow' (optimistically weighted)")
        super().__init__(agent=agent, mixer=mixer, config=config, memory_config=memory_config, memory=memory)
        settings = settings or WQMIXSettings()
        self.weighting, self.alpha = weighting, float(settings.wqmix_alpha)
        device = next(agent.parameters()).device
        self.central_agent = RNNAgent(obs_dim=agent.obs_dim, n_agents=agent.n_agents, n_actions=agent.n_actions,
                                      hidden_dim=agent.hidden_dim, obs_agent_id=agent.obs_agent_id,
                                      obs_last_action=agent.obs_last_action).to(device)
        self.central_mixer = CentralMixer(n_agents=agent.n_agents, state_dim=mixer.state_dim, n_actions=agent.n_actions,
                                          embed_dim=settings.central_embed_dim).to(device)
        self.target_central_agent = flatten_rnns(copy.deepcopy(self.central_agent).requires_grad_(False))
        self.target_central_mixer = copy.deepcopy(self.central_mixer).requires_grad_(False)
        self.params = self.params + list(self.central_agent.parameters()) + list(self.central_mixer.parameters())
        self.optimizer = torch.optim.RMSprop(self.params, lr=config.lr, alpha=config.rms_alpha, eps=config.rms_eps,
                                             foreach=True)

    settings_section: ClassVar[str | None] = "wqmix"
    """alpha and Q*'s size (``WQMIXSettings``; their defaults where the run holds no ``wqmix`` section: a plugin row
    on this learner)."""

    # ----- Q* and the weights --------------------------------------------------------------------------------

    def central_q(self, clean: CleanBatch, actions_BTA: torch.Tensor, *, slots: slice, target: bool = False) -> torch.Tensor:
        """Q*(s_t, tau_t, u_t) for the joint actions ``actions_BTA`` at state slots ``slots``: [B,T]."""
        agent = self.target_central_agent if target else self.central_agent
        mixer = self.target_central_mixer if target else self.central_mixer
        q = self.agent_q(agent, clean)
        chosen = q[:, slots].gather(-1, actions_BTA.unsqueeze(-1)).squeeze(-1)
        return mixer(chosen, clean.state[:, slots]).squeeze(-1)

    def weights(self, target_BT: torch.Tensor, q_tot_BT: torch.Tensor, is_greedy_BT: torch.Tensor,
                q_star_greedy_BT: torch.Tensor) -> torch.Tensor:
        """w (or w_e, given E as the target): 1 on joint actions believed optimal, alpha elsewhere. [B,T]"""
        if self.weighting == "cw":
            full = is_greedy_BT | (target_BT > q_star_greedy_BT)
        else:
            full = q_tot_BT < target_BT
        return torch.where(full, torch.ones_like(target_BT), torch.full_like(target_BT, self.alpha))

    # ----- QLearner's hooks --------------------------------------------------------------------------------

    def online_values(self, clean: CleanBatch) -> CentralValues:
        """QLearner's values plus Q* of the taken joint actions and the target Q*^- of the greedy ones."""
        values = super().online_values(clean)
        q_star = self.central_q(clean, clean.actions, slots=slice(None, -1))
        with torch.no_grad():
            greedy = values.q_BTAU[:, :-1].masked_fill(~clean.avail[:, :-1], MASKED_Q).argmax(dim=-1)  # u^ [B,T,A]
            q_star_greedy = self.central_q(clean, greedy, slots=slice(None, -1), target=True)
        return CentralValues(clean=clean, q_BTAU=values.q_BTAU, q_tot_BT=values.q_tot_BT, q_star_BT=q_star,
                             is_greedy_BT=(greedy == clean.actions).all(dim=-1), q_star_greedy_BT=q_star_greedy,
                             logged={"q_star": q_star.detach()})

    @torch.no_grad()
    def next_value(self, clean: CleanBatch, q_BTAU: torch.Tensor) -> torch.Tensor:
        """Q*^-(s_{t+1}, tau_{t+1}, u') with u' the QMIX agents' greedy joint action (online with double Q): [B,T].

        A memory miss falls back to it too: E = y.
        """
        chooser = q_BTAU[:, 1:].detach() if self.config.double_q else self.agent_q(self.target_agent, clean)[:, 1:]
        best_next = chooser.masked_fill(~clean.avail[:, 1:], MASKED_Q).argmax(dim=-1)  # u' [B,T,A]
        return self.central_q(clean, best_next, slots=slice(1, None), target=True)

    def step_weights(self, values: OnlineValues, target_BT: torch.Tensor) -> torch.Tensor:
        """w against y, w_e against E: [B,T], without gradient (a weight is a constant of the step, like the target)."""
        central = _central(values)
        with torch.no_grad():
            return self.weights(target_BT, central.q_tot_BT.detach(), central.is_greedy_BT, central.q_star_greedy_BT)

    def loss_against(self, values: OnlineValues, target_BT: torch.Tensor, applies_BT: torch.Tensor) -> TargetLoss:
        """sum_t applies_t [w_t (Q_tot - target_t)^2 + (Q* - target_t)^2] / sum_t m_t, and its pieces: loss_qmix,
        loss_central (they sum to loss_td) and the mean weight w over real steps."""
        central, mask = _central(values), values.clean.mask
        n_real = mask.sum().clamp(min=1.0)
        w = self.step_weights(values, target_BT)
        qmix = (w * (values.q_tot_BT - target_BT) ** 2 * applies_BT).sum() / n_real
        central_loss = ((central.q_star_BT - target_BT) ** 2 * applies_BT).sum() / n_real
        return TargetLoss(total=qmix + central_loss,
                          stats={"loss_qmix": qmix.detach(), "loss_central": central_loss.detach(),
                                 "wqmix_weight": masked_mean(w, mask)})

    def networks(self) -> dict[str, nn.Module]:
        """QLearner's networks plus the central agent and mixer Q* and their targets."""
        return {**super().networks(), "central_agent": self.central_agent, "central_mixer": self.central_mixer,
                "target_central_agent": self.target_central_agent, "target_central_mixer": self.target_central_mixer}

    # ----- targets and checkpoints ---------------------------------------------------------------------------

    def update_target(self) -> None:
        """theta^- <- theta for the QMIX and the central networks."""
        super().update_target()
        self.target_central_agent.load_state_dict(self.central_agent.state_dict())
        self.target_central_mixer.load_state_dict(self.central_mixer.state_dict())

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(central_agent=self.central_agent.state_dict(), central_mixer=self.central_mixer.state_dict(),
                     target_central_agent=self.target_central_agent.state_dict(),
                     target_central_mixer=self.target_central_mixer.state_dict(), weighting=self.weighting)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("weighting", self.weighting) != self.weighting:
            raise ValueError(f"checkpoint was trained with weighting {state['weighting']!r}, this learner uses "
                             f"{self.weighting!r}: resume with the same algorithm id")
        super().load_state_dict(state)
        self.central_agent.load_state_dict(state["central_agent"])
        self.central_mixer.load_state_dict(state["central_mixer"])
        self.target_central_agent.load_state_dict(state["target_central_agent"])
        self.target_central_mixer.load_state_dict(state["target_central_mixer"])
        flatten_rnns(self.central_agent)
        flatten_rnns(self.target_central_agent)


__all__ = ["WEIGHTINGS", "CentralValues", "WQMIXLearner"]
