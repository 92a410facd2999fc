"""The loss: double-Q TD target, the episodic-memory target and their blend (paper eq. 6).

    y_t = r_t + gamma (1 - term_t) Q_tot(tau_{t+1}, argmax_u Q(tau_{t+1}, u; theta), s_{t+1}; theta^-)
    E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1}))          (SEM; on a miss the paper uses y_t)
    E_t = Q^SA(phi(s_t), u_t)                                  (SAEM; on a miss, y_t)
    L   = (1 - lambda) mean (Q_tot - y)^2 + lambda mean (Q_tot - E)^2   over real steps only
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from semzoo.config import LearnerConfig, MemoryConfig, TrainConfig
from semzoo.mixers.base import Mixer
from semzoo.agents.rnn import MASKED_Q, RNNAgent
from semzoo.learners.batch import CleanBatch
from semzoo.types import EpisodeBatch

class QLearner:
    """Value-decomposition Q-learning with an optional episodic-memory target.

    ``memory`` is an ``EpisodicMemory`` (SEM or SAEM) or None; with ``memory_config.lam == 0``
    the loss is exactly the plain mixer's.
    """

    def __init__(
        self, *, agent: RNNAgent, mixer: Mixer, config: LearnerConfig, memory_config: MemoryConfig,
        memory: Any | None = None, memory_kind: str = "none",
    ) -> None:
        self.agent, self.mixer = agent, mixer
        self.config, self.memory_config = config, memory_config
        self.memory, self.memory_kind = memory, memory_kind
        self.target_agent = copy.deepcopy(agent).requires_grad_(False)
        self.target_mixer = copy.deepcopy(mixer).requires_grad_(False)
        self.params = list(agent.parameters()) + list(mixer.parameters())
        self.optimizer = torch.optim.RMSprop(self.params, lr=config.lr, alpha=config.rms_alpha, eps=config.rms_eps,
                                             foreach=True)
        self.updates = 0
        self._last_hits = 0.0  # hit rate of the last episodic_target call (a diagnostic)
        self._answered = torch.zeros(0, dtype=torch.bool)  # [B,T] steps whose E came from the table

    @classmethod
    def from_config(cls, config: TrainConfig, *, agent: RNNAgent, mixer: Mixer, memory: Any | None = None,
                    memory_kind: str = "none", **learner_args: Any) -> "QLearner":
        """The learner of a run: its sections of ``config`` plus the row's ``learner_args`` (see semzoo.algos)."""
        return cls(agent=agent, mixer=mixer, config=config.learner, memory_config=config.memory, memory=memory,
                   memory_kind=memory_kind, **learner_args)

    # ----- pieces shared with derived learners (WQMIX) -------------------------------------------------

    def agent_q(self, agent: RNNAgent, clean: CleanBatch) -> torch.Tensor:
        """Q_a for every slot: [B,T+1,A,U]."""
        q, _ = agent(agent.build_inputs(clean.obs, clean.last_actions))
        return q

    def mixer_extra(self, mixer: Mixer, q_BTAU: torch.Tensor, actions_BTA: torch.Tensor,
                    avail_BTAU: torch.Tensor) -> dict[str, torch.Tensor]:
        """The extra inputs of mixers that read the joint action (QPLEX)."""
        if not getattr(mixer, "uses_actions", False):
            return {}
        max_qs = q_BTAU.masked_fill(~avail_BTAU, MASKED_Q).max(dim=-1).values
        max_qs = torch.where(avail_BTAU.any(-1), max_qs, 0.0)
        return {"actions_onehot": F.one_hot(actions_BTA, q_BTAU.shape[-1]).to(q_BTAU.dtype), "max_qs": max_qs}

    def greedy_next_actions(self, q_BTAU: torch.Tensor, target_q_BTAU: torch.Tensor, clean: CleanBatch) -> torch.Tensor:
        """argmax over available actions at t+1: online net's (double Q) or target's. [B,T,A]"""
        chooser = q_BTAU[:, 1:].detach() if self.config.double_q else target_q_BTAU[:, 1:]
        return chooser.masked_fill(~clean.avail[:, 1:], MASKED_Q).argmax(dim=-1)

    def td_target(self, clean: CleanBatch, next_value_BT: torch.Tensor) -> torch.Tensor:
        """r + gamma (1 - terminated) V(t+1): [B,T]."""
        return clean.reward + self.config.gamma * (1.0 - clean.terminated) * next_value_BT

    def episodic_target(self, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """E and the mask of steps where the memory term applies ([B,T] each).

        SEM:  E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1}))   (paper eq. 7); E_t = r_t after a real end.
        SAEM: E_t = Q^SA(phi(s_t), u_t)                           (paper eq. 4).
        On a table miss E_t = y_t (paper: max_u Q_tot(tau_{t+1}, u; theta^-) replaces Q^S(s_{t+1})).
        The mask is every real step for miss_rule "target", and only the steps the memory answered
        (hits, and SEM's terminal steps) for miss_rule "zero" (EMC).
        """
        assert self.memory is not None
        mask = clean.mask.bool()
        if self.memory_kind == "sem":
            # Only real, non-terminal steps read the table (a read counts as an access for eviction).
            query = mask & (clean.terminated == 0)
            states = clean.state[:, 1:][query].detach().cpu().numpy()
            values, hits = self.memory.query(states)
            self._last_hits = float(np.mean(hits)) if len(hits) else 0.0
            memory_next = self._scatter(values, query, y_BT)
            hit = self._scatter(hits, query, y_BT).bool()
            bootstrap = torch.where(hit, memory_next, next_value_BT)
            e = self.td_target(clean, bootstrap)
            hit = hit | (clean.terminated > 0)  # E = r exactly: no table needed
        else:
            states = clean.state[:, :-1][mask].detach().cpu().numpy()
            actions = clean.actions[mask].detach().cpu().numpy()
            values, hits = self.memory.query(states, actions)
            self._last_hits = float(np.mean(hits)) if len(hits) else 0.0
            hit = self._scatter(hits, mask, y_BT).bool()
            e = torch.where(hit, self._scatter(values, mask, y_BT), y_BT)
        self._answered = mask & hit  # steps whose E came from the table (a diagnostic)
        applies = mask if self.memory_config.miss_rule == "target" else self._answered
        return e, applies.float()

    @staticmethod
    def _scatter(values: np.ndarray, where: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(like)
        out[where] = torch.as_tensor(np.asarray(values, np.float32), device=like.device).to(like.dtype)
        return out

    @staticmethod
    def masked_mean(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
        return (x_BT * mask_BT).sum() / mask_BT.sum().clamp(min=1.0)

    @torch.no_grad()
    def next_value(self, clean: CleanBatch, q_BTAU: torch.Tensor) -> torch.Tensor:
        """max_u Q_tot(tau_{t+1}, u; theta^-) with the argmax from the online net (double Q): [B,T]."""
        target_q = self.agent_q(self.target_agent, clean)
        best_next = self.greedy_next_actions(q_BTAU, target_q, clean)
        target_max = target_q[:, 1:].gather(-1, best_next.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
        extra = self.mixer_extra(self.target_mixer, target_q[:, 1:], best_next, clean.avail[:, 1:])
        return self.target_mixer(target_max, clean.state[:, 1:], **extra).squeeze(-1)

    @torch.no_grad()
    def td_targets(self, batch: EpisodeBatch) -> torch.Tensor:
        """The vanilla targets y of a batch, [B,T] (zero on padding)."""
        clean = CleanBatch.from_batch(batch)
        q = self.agent_q(self.agent, clean)
        return self.td_target(clean, self.next_value(clean, q)) * clean.mask

    # ----- the update -------------------------------------------------------------------------------------

    def compute_loss(self, batch: EpisodeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The blended loss of one batch and its diagnostics (no optimiser step)."""
        clean = CleanBatch.from_batch(batch)
        q = self.agent_q(self.agent, clean)  # [B,T+1,A,U]
        chosen_q = q[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
        q_tot = self.mixer(chosen_q, clean.state[:, :-1],
                           **self.mixer_extra(self.mixer, q[:, :-1], clean.actions, clean.avail[:, :-1])).squeeze(-1)

        next_value = self.next_value(clean, q)
        y = self.td_target(clean, next_value)

        mask = clean.mask
        td_loss = self.masked_mean((q_tot - y) ** 2, mask)
        stats = {"loss_td": td_loss.item(), "q_tot": self.masked_mean(q_tot.detach(), mask).item(),
                 "target_y": self.masked_mean(y, mask).item()}
        lam = self.memory_config.lam
        if self.memory is None:
            return td_loss, stats
        with torch.no_grad():
            e, e_mask = self.episodic_target(clean, y, next_value)
        # Normalised by all real steps, so miss_rule "zero" gives a missed step no memory loss
        # instead of up-weighting the steps that hit.
        em_loss = (((q_tot - e) ** 2) * e_mask).sum() / mask.sum().clamp(min=1.0)
        stats.update(loss_em=em_loss.item(), target_e=self.masked_mean(e, mask).item(),
                     memory_hit_rate=float(self._last_hits))
        if self._answered.any():  # E where the table answered: the paper's E_s curve, without the y of misses
            stats["target_e_hit"] = self.masked_mean(e, self._answered.float()).item()
        if lam == 0.0:  # the plain method, bit for bit
            return td_loss, stats
        if lam == 1.0:
            return em_loss, stats
        return (1.0 - lam) * td_loss + lam * em_loss, stats

    def train(self, batch: EpisodeBatch) -> dict[str, float]:
        """One gradient step on ``batch``; returns diagnostics."""
        loss, stats = self.compute_loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.config.grad_clip)
        self.optimizer.step()
        self.updates += 1
        stats.update(loss=loss.item(), grad_norm=float(grad_norm))
        return stats

    def update_target(self) -> None:
        """theta^- <- theta (hard update)."""
        self.target_agent.load_state_dict(self.agent.state_dict())
        self.target_mixer.load_state_dict(self.mixer.state_dict())

    def state_dict(self) -> dict[str, Any]:
        return {"agent": self.agent.state_dict(), "mixer": self.mixer.state_dict(),
                "target_agent": self.target_agent.state_dict(), "target_mixer": self.target_mixer.state_dict(),
                "optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.mixer.load_state_dict(state["mixer"])
        self.target_agent.load_state_dict(state["target_agent"])
        self.target_mixer.load_state_dict(state["target_mixer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
