"""Weighted QMIX (Rashid et al., NeurIPS 2020) and SEM-WQMIX (paper appendix, eq. EM_WQMIX_loss).

    y_t   = r_t + gamma (1 - term_t) Q*^-(s_{t+1}, tau_{t+1}, argmax_u Q_tot(tau_{t+1}, u))   (the QMIX agents' argmax)
    w     = 1 if u_t = u^ or y_t > Q*(s_t, tau_t, u^) else alpha          (CW; u^ = the QMIX agents' greedy joint action)
    w     = 1 if Q_tot(tau_t, u_t) < y_t else alpha                         (OW)
    L     = (1 - lam) [mean w (Q_tot - y)^2 + mean (Q* - y)^2] + lam [mean w_e (Q_tot - E)^2 + mean (Q* - E)^2]

with w_e the same rule as w with E in place of y. Q* is unrestricted: its own recurrent agents (same
architecture as the acting agents) and a feed-forward mixer over the state and every chosen utility.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import torch

from semzoo.config import LearnerConfig, MemoryConfig, MixerConfig, TrainConfig
from semzoo.learners.q_learner import CleanBatch, QLearner
from semzoo.mixers.base import Mixer
from semzoo.mixers.central import CentralMixer
from semzoo.agents.rnn import MASKED_Q, RNNAgent
from semzoo.types import EpisodeBatch

WEIGHTINGS = ("cw", "ow")


class WQMIXLearner(QLearner):
    """CW-/OW-QMIX: a QMIX learner whose TD loss is weighted by w and whose targets come from a central Q*.

    One RMSprop optimiser holds all four networks (QMIX agents and mixer, central agents and mixer) and one
    global gradient-norm clip covers them, as in the authors' PyMARL code: the two losses share no parameters,
    so a single optimiser only couples them through the shared clip, which keeps one ``grad_clip`` meaning one
    thing for every algorithm.
    """

    def __init__(
        self, *, agent: RNNAgent, mixer: Mixer, config: LearnerConfig, memory_config: MemoryConfig,
        memory: Any | None = None, memory_kind: str = "none", weighting: Literal["cw", "ow"] = "cw",
        mixer_config: MixerConfig | None = None,
    ) -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting={weighting!r}: expected 'cw' (centrally weighted) or 'ow' (optimistically weighted)")
        super().__init__(agent=agent, mixer=mixer, config=config, memory_config=memory_config, memory=memory,
                         memory_kind=memory_kind)
        mixer_config = mixer_config or MixerConfig()
        self.weighting, self.alpha = weighting, float(mixer_config.wqmix_alpha)
        device = next(agent.parameters()).device
        self.central_agent = RNNAgent(obs_dim=agent.obs_dim, n_agents=agent.n_agents, n_actions=agent.n_actions,
                                      hidden_dim=agent.hidden_dim, obs_agent_id=agent.obs_agent_id,
                                      obs_last_action=agent.obs_last_action).to(device)
        self.central_mixer = CentralMixer(n_agents=agent.n_agents, state_dim=mixer.state_dim, n_actions=agent.n_actions,
                                          embed_dim=mixer_config.central_embed_dim).to(device)
        self.target_central_agent = copy.deepcopy(self.central_agent).requires_grad_(False)
        self.target_central_mixer = copy.deepcopy(self.central_mixer).requires_grad_(False)
        self.params = self.params + list(self.central_agent.parameters()) + list(self.central_mixer.parameters())
        self.optimizer = torch.optim.RMSprop(self.params, lr=config.lr, alpha=config.rms_alpha, eps=config.rms_eps,
                                             foreach=True)

    @classmethod
    def from_config(cls, config: TrainConfig, *, agent: RNNAgent, mixer: Mixer, memory: Any | None = None,
                    memory_kind: str = "none", **learner_args: Any) -> "WQMIXLearner":
        """As QLearner's, plus the mixer section (alpha and Q*'s size)."""
        return cls(agent=agent, mixer=mixer, config=config.learner, memory_config=config.memory, memory=memory,
                   memory_kind=memory_kind, mixer_config=config.mixer, **learner_args)

    # ----- Q* and the weights --------------------------------------------------------------------------------

    def central_q(self, clean: CleanBatch, actions_BTA: torch.Tensor, *, slots: slice, target: bool = False,
                  central_agent_q: torch.Tensor | None = None) -> torch.Tensor:
        """Q*(s_t, tau_t, u_t) for the joint actions ``actions_BTA`` at state slots ``slots``: [B,T]."""
        agent = self.target_central_agent if target else self.central_agent
        mixer = self.target_central_mixer if target else self.central_mixer
        q = central_agent_q if central_agent_q is not None else self.agent_q(agent, clean)
        chosen = q[:, slots].gather(-1, actions_BTA.unsqueeze(-1)).squeeze(-1)
        return mixer(chosen, clean.state[:, slots]).squeeze(-1)

    @torch.no_grad()
    def next_value(self, clean: CleanBatch, q_BTAU: torch.Tensor) -> torch.Tensor:
        """Q*^-(s_{t+1}, tau_{t+1}, u') with u' the QMIX agents' greedy joint action (online with double Q): [B,T]."""
        target_q = q_BTAU if self.config.double_q else self.agent_q(self.target_agent, clean)
        best_next = self.greedy_next_actions(q_BTAU, target_q, clean)
        return self.central_q(clean, best_next, slots=slice(1, None), target=True)

    def weights(self, target_BT: torch.Tensor, q_tot_BT: torch.Tensor, is_greedy_BT: torch.Tensor,
                q_star_greedy_BT: torch.Tensor) -> torch.Tensor:
        """w (or w_e, given E as the target): 1 on joint actions believed optimal, alpha elsewhere. [B,T]"""
        if self.weighting == "cw":
            full = is_greedy_BT | (target_BT > q_star_greedy_BT)
        else:
            full = q_tot_BT < target_BT
        return torch.where(full, torch.ones_like(target_BT), torch.full_like(target_BT, self.alpha))

    # ----- the update --------------------------------------------------------------------------------------

    def compute_loss(self, batch: EpisodeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The weighted QMIX loss plus the central Q* loss (and their episodic counterparts)."""
        clean = CleanBatch.from_batch(batch)
        q = self.agent_q(self.agent, clean)  # [B,T+1,A,U]
        chosen_q = q[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1)
        q_tot = self.mixer(chosen_q, clean.state[:, :-1],
                           **self.mixer_extra(self.mixer, q[:, :-1], clean.actions, clean.avail[:, :-1])).squeeze(-1)
        central_agent_q = self.agent_q(self.central_agent, clean)
        q_star = self.central_q(clean, clean.actions, slots=slice(None, -1), central_agent_q=central_agent_q)

        next_value = self.next_value(clean, q)
        y = self.td_target(clean, next_value)

        with torch.no_grad():
            greedy = q[:, :-1].masked_fill(~clean.avail[:, :-1], MASKED_Q).argmax(dim=-1)  # u^ [B,T,A]
            is_greedy = (greedy == clean.actions).all(dim=-1)
            q_star_greedy = self.central_q(clean, greedy, slots=slice(None, -1), central_agent_q=central_agent_q)
            q_tot_fixed = q_tot.detach()
            w = self.weights(y, q_tot_fixed, is_greedy, q_star_greedy)

        mask = clean.mask
        qmix_loss = self.masked_mean(w * (q_tot - y) ** 2, mask)
        central_loss = self.masked_mean((q_star - y) ** 2, mask)
        td_loss = qmix_loss + central_loss
        stats = {"loss_td": td_loss.item(), "loss_qmix": qmix_loss.item(), "loss_central": central_loss.item(),
                 "wqmix_weight": self.masked_mean(w, mask).item(), "q_tot": self.masked_mean(q_tot_fixed, mask).item(),
                 "q_star": self.masked_mean(q_star.detach(), mask).item(), "target_y": self.masked_mean(y, mask).item()}
        if self.memory is None:
            return td_loss, stats
        with torch.no_grad():
            e, e_mask = self.episodic_target(clean, y, next_value)  # a miss falls back to Q*^-(s', u'): E = y
            w_e = self.weights(e, q_tot_fixed, is_greedy, q_star_greedy)
        em_loss = self.masked_mean(w_e * (q_tot - e) ** 2, e_mask) + self.masked_mean((q_star - e) ** 2, e_mask)
        stats.update(loss_em=em_loss.item(), target_e=self.masked_mean(e, mask).item(),
                     memory_hit_rate=float(self._last_hits))
        lam = self.memory_config.lam
        if lam == 0.0:  # plain WQMIX, bit for bit
            return td_loss, stats
        if lam == 1.0:
            return em_loss, stats
        return (1.0 - lam) * td_loss + lam * em_loss, stats

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


__all__ = ["WQMIXLearner", "WEIGHTINGS"]
