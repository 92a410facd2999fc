"""The one loss of eq. (6): double-Q TD target, the episodic target and their blend, with hooks for WQMIX.

    y_t = r_t + r^i_t + gamma (1 - term_t) V(t+1),  V(t+1) = Q_tot(tau_{t+1}, argmax_u Q(tau_{t+1}, u; theta), s_{t+1}; theta^-)
         (with td_lambda > 0, TD(lambda): y_t = r_t + r^i_t + gamma (1 - term_t) [(1 - lambda) V(t+1) + lambda y_{t+1}])
    E_t = the memory's episodic target (SEM eq. 7, SAEM eq. 4; E_t = y_t on a miss)
    L   = (1 - lambda) L_td + lambda L_em + sum_j L_j                                   (eq. 6)
    L_td = sum_t m_t  [w_t   (Q_tot - y_t)^2 + sum_k (Q^k - y_t)^2] / sum_t m_t
    L_em = sum_t m'_t [w^e_t (Q_tot - E_t)^2 + sum_k (Q^k - E_t)^2] / sum_t m_t

m_t marks real steps, m'_t the steps the memory term applies to (the miss rule). The memory (a registered
``semzoo.episodic.memory.Memory``) gives E and m' (``combine_target``; without it there is no L_em), an
intrinsic reward r^i (``intrinsic_reward``; 0 without it) and further losses L_j (``memory_losses``). The hooks a derived
learner overrides: ``online_values`` (the forward pass the loss reads), ``next_value`` (V), ``step_weights``
(w, w^e; ones here), ``extra_losses`` (further estimates Q^k regressed on the same target; none here) and
the diagnostics ``term_stats`` / ``value_stats``. WQMIX (learners/wqmix.py) is the one such learner.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from semzoo.agents.rnn import MASKED_Q, RNNAgent, flatten_rnns, one_hot
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.episodic.memory import NO_MEMORY, Memory
from semzoo.learners.batch import bucketed
from semzoo.mixers.base import Mixer
from semzoo.types import CleanBatch, EpisodeBatch, OnlineValues

UNDEFINED_STAT = float("nan")
"""A diagnostic with no value for a batch (``target_e_hit`` when the table answered no step); not logged."""


def stats_to_floats(stats: dict[str, torch.Tensor]) -> dict[str, float]:
    """The loss's 0-d tensor diagnostics as logged floats, those undefined for the batch left out."""
    floats = {name: float(value) for name, value in stats.items()}
    return {name: value for name, value in floats.items() if not (name == "target_e_hit" and math.isnan(value))}


@dataclass(frozen=True)
class TargetLoss:
    """The loss against one target (y or E), divided by the number of real steps, and its pieces (scalars)."""

    total: torch.Tensor
    """mixer + the extra terms."""
    mixer: torch.Tensor
    """sum_t applies_t w_t (Q_tot - target_t)^2 / sum_t m_t, m_t the real steps."""
    extras: dict[str, torch.Tensor]
    """sum_t applies_t (Q^k - target_t)^2 / sum_t m_t of every extra estimate Q^k, by name."""
    weights_BT: torch.Tensor
    """w_t, [B,T]."""


def compiled_update(loss: Any, bucket_steps: int, backend: str = "inductor") -> Any:
    """``loss`` under ``torch.compile`` for batches padded to multiples of ``bucket_steps`` (fixed shapes): with
    inductor, mode reduce-overhead (CUDA graphs); another backend (``aot_eager``) as it is."""
    if bucket_steps < 1:
        raise ValueError(f"bucket_steps={bucket_steps}: expected a positive number of steps")
    how: dict[str, Any] = {"mode": "reduce-overhead"} if backend == "inductor" else {"backend": backend}
    return torch.compile(loss, dynamic=False, **how)


class QLearner:
    """Value-decomposition Q-learning with an optional episodic-memory target.

    ``memory`` is a registered ``Memory`` (SEM, SAEM, ...) or None; with ``memory_config.lam == 0``
    the loss is exactly the plain mixer's (for a memory with no intrinsic reward or extra loss).
    """

    def __init__(
        self, *, agent: RNNAgent, mixer: Mixer, config: LearnerConfig, memory_config: MemoryConfig,
        memory: Memory | None = None,
    ) -> None:
        self.agent, self.mixer = agent, mixer
        self.config, self.memory_config = config, memory_config
        self.memory = memory
        self.target_agent = flatten_rnns(copy.deepcopy(agent).requires_grad_(False))
        self.target_mixer = copy.deepcopy(mixer).requires_grad_(False)
        self.params = list(agent.parameters()) + list(mixer.parameters())
        self.optimizer = torch.optim.RMSprop(self.params, lr=config.lr, alpha=config.rms_alpha, eps=config.rms_eps,
                                             foreach=True)
        self.updates = 0
        self.bucket_steps = 1
        """A batch's time axis is padded up to a multiple of this before the loss (1: as sampled; see ``compile``)."""
        self.compiled_loss: Any = None
        """``loss`` compiled by ``compile`` (None: the plain ``loss``)."""

    def compile(self, bucket_steps: int, *, backend: str = "inductor") -> None:
        """Compile ``loss`` (``torch.compile``; with inductor, mode reduce-overhead: CUDA graphs) for updates on a GPU.

        Batches are padded up to a multiple of ``bucket_steps`` steps first, so episode lengths give a few
        shapes rather than one compile each; the padding is masked, so the loss is that of the batch as
        sampled, up to the float rounding of sums over a longer time axis. ``backend`` other than inductor
        (``aot_eager``) traces the same function without a C compiler or a GPU: the CPU tests do. A group's
        vmapped update compiles its own loss (``StackedUpdate.compile``).
        """
        self.compiled_loss = compiled_update(self.loss, bucket_steps, backend)  # refuses bucket_steps < 1 first
        self.bucket_steps = bucket_steps

    @property
    def memory_kind(self) -> str:
        """The registered name of the memory ('none' without one)."""
        return NO_MEMORY if self.memory is None else self.memory.name

    settings_section: ClassVar[str | None] = None
    """The section of the run's config that holds this learner's own settings (WQMIX's ``wqmix``); None: none."""

    @classmethod
    def from_config(cls, config: LearnerConfig, *, memory_config: MemoryConfig, settings: Any = None,
                    agent: RNNAgent, mixer: Mixer, memory: Memory | None = None, **learner_args: Any) -> QLearner:
        """The learner of a run from its parts only: the ``learner`` and ``memory`` sections, its own settings (the
        run's section ``settings_section``, passed on as ``settings=`` to a learner that has one; None where the run
        holds none, for the learner's defaults) and the row's ``learner_args`` (see semzoo.algos)."""
        own = {"settings": settings} if cls.settings_section else {}
        if settings is not None and not own:
            raise TypeError(f"{cls.__name__} has no settings of its own (settings_section is None): got {settings!r}")
        return cls(agent=agent, mixer=mixer, config=config, memory_config=memory_config, memory=memory, **own,
                   **learner_args)

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
        return {"actions_onehot": one_hot(actions_BTA, q_BTAU.shape[-1], q_BTAU.dtype), "max_qs": max_qs}

    def greedy_next_actions(self, q_BTAU: torch.Tensor, target_q_BTAU: torch.Tensor, clean: CleanBatch) -> torch.Tensor:
        """argmax over available actions at t+1: online net's (double Q) or target's. [B,T,A]"""
        chooser = q_BTAU[:, 1:].detach() if self.config.double_q else target_q_BTAU[:, 1:]
        return chooser.masked_fill(~clean.avail[:, 1:], MASKED_Q).argmax(dim=-1)

    def td_target(self, clean: CleanBatch, next_value_BT: torch.Tensor,
                  intrinsic_BT: torch.Tensor | None = None) -> torch.Tensor:
        """y = r + r^i + gamma (1 - terminated) V(t+1), or its TD(lambda) form when ``td_lambda`` > 0: [B,T].

        ``intrinsic_BT`` (a memory's curiosity or incentive, no gradient) joins the reward of every real step.
        """
        mask = clean.mask
        if self.config.td_lambda == 0.0:  # the one-step target, in the order of additions the golden runs pinned
            y = clean.bootstrapped(next_value_BT, self.config.gamma)
            return y if intrinsic_BT is None else y + intrinsic_BT * mask
        reward = clean.reward if intrinsic_BT is None else clean.reward + intrinsic_BT * mask
        return clean.lambda_returns(next_value_BT, self.config.gamma, self.config.td_lambda, reward)

    @staticmethod
    def masked_mean(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
        """Mean of x_BT over the steps where mask_BT is 1 (a scalar; 0 when the mask is empty)."""
        return (x_BT * mask_BT).sum() / mask_BT.sum().clamp(min=1.0)

    @torch.no_grad()
    def td_targets(self, batch: EpisodeBatch) -> torch.Tensor:
        """The vanilla targets y of a batch, [B,T] (zero on padding)."""
        clean = CleanBatch.from_batch(batch)
        q = self.agent_q(self.agent, clean)
        return self.td_target(clean, self.next_value(clean, q)) * clean.mask

    # ----- hooks: what a derived learner (WQMIX) overrides ------------------------------------------------

    def online_values(self, clean: CleanBatch) -> OnlineValues:
        """Q_a of every slot and Q_tot of the taken joint actions, through the online networks."""
        q = self.agent_q(self.agent, clean)  # [B,T+1,A,U]
        chosen_q = q[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
        q_tot = self.mixer(chosen_q, clean.state[:, :-1],
                           **self.mixer_extra(self.mixer, q[:, :-1], clean.actions, clean.avail[:, :-1])).squeeze(-1)
        return OnlineValues(clean=clean, q_BTAU=q, q_tot_BT=q_tot)

    @torch.no_grad()
    def next_value(self, clean: CleanBatch, q_BTAU: torch.Tensor) -> torch.Tensor:
        """V(t+1) = max_u Q_tot(tau_{t+1}, u; theta^-) with the argmax from the online net (double Q): [B,T]."""
        target_q = self.agent_q(self.target_agent, clean)
        best_next = self.greedy_next_actions(q_BTAU, target_q, clean)
        target_max = target_q[:, 1:].gather(-1, best_next.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
        extra = self.mixer_extra(self.target_mixer, target_q[:, 1:], best_next, clean.avail[:, 1:])
        return self.target_mixer(target_max, clean.state[:, 1:], **extra).squeeze(-1)

    def step_weights(self, values: OnlineValues, target_BT: torch.Tensor) -> torch.Tensor:
        """w_t of (Q_tot - target_t)^2 for the target y or E, [B,T]: ones, eq. (6) weighs every step alike.

        Called without gradient: a weight is a constant of the step, like the target.
        """
        return torch.ones_like(target_BT)

    def extra_losses(self, values: OnlineValues, target_BT: torch.Tensor) -> dict[str, torch.Tensor]:
        """(Q^k - target_t)^2 [B,T] of further estimates Q^k regressed on the same target, by name: none."""
        return {}

    def term_stats(self, values: OnlineValues, td: TargetLoss) -> dict[str, torch.Tensor]:
        """Diagnostics of the TD loss's pieces (0-d tensors), logged right after ``loss_td``: none (it is one term)."""
        return {}

    def value_stats(self, values: OnlineValues) -> dict[str, torch.Tensor]:
        """Diagnostics of further estimates (0-d tensors), logged right after ``q_tot``: none."""
        return {}

    # ----- the update -------------------------------------------------------------------------------------

    def compute_loss(self, batch: EpisodeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """L = (1 - lambda) L_td + lambda L_em of one batch (paper eq. 6) and its diagnostics; no optimiser step."""
        batch = bucketed(batch, self.bucket_steps)
        clean = CleanBatch.from_batch(batch)
        lookup = self.table_lookup(clean, batch.state_keys)
        if self.compiled_loss is None:
            loss, stats = self.loss(clean, lookup)
        else:
            torch.compiler.cudagraph_mark_step_begin()  # the graphs' outputs of the last update are no longer read
            loss, stats = self.compiled_loss(clean, lookup)
        return loss, stats_to_floats(stats)

    def table_lookup(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None = None) -> Any:
        """The memory's answers for ``clean`` (``Memory.lookup_batch``: numpy allowed, so outside any vmap); None without memory.

        ``state_keys_BSD``: the sampled batch's ``EpisodeBatch.state_keys``, if the buffer kept them.
        """
        if self.memory is None:
            return None
        with torch.no_grad():
            return self.memory.lookup_batch(clean, state_keys_BSD)

    def loss(self, clean: CleanBatch, lookup: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """L = (1 - lambda) L_td + lambda L_em (paper eq. 6) + the memory's losses, and its diagnostics as 0-d tensors.

        Tensor ops only, no Python branch on a value: it runs as it is under ``torch.func.vmap`` over
        many runs' parameters (semzoo.learners.stacked). ``stats_to_floats`` turns the diagnostics into
        the logged floats. ``lookup`` is the memory's ``lookup_batch`` of ``clean`` (None without memory).
        """
        memory = self.memory if lookup is not None else None
        values = self.online_values(clean)
        next_value = self.next_value(clean, values.q_BTAU)
        mask = clean.mask
        intrinsic = None if memory is None else memory.intrinsic_reward(lookup, clean, next_value)
        # a memory's curiosity (or incentive) joins the reward of the TD target
        y = self.td_target(clean, next_value, None if intrinsic is None else intrinsic.detach())
        td = self.loss_against(values, y, mask)
        stats = {"loss_td": td.total.detach(), **self.term_stats(values, td),
                 "q_tot": self.masked_mean(values.q_tot_BT.detach(), mask), **self.value_stats(values),
                 "target_y": self.masked_mean(y, mask)}
        if intrinsic is not None:
            stats["reward_intrinsic"] = self.masked_mean(intrinsic.detach(), mask)
            for name, part in memory.reward_parts(lookup, clean, next_value).items():  # type: ignore[union-attr]
                stats[f"reward_{name}"] = self.masked_mean(part.detach(), mask)
        # A mixer's own loss term (QPLEX-Qatten's attention regulariser); None for the others.
        regularizer = self.mixer.regularizer(clean.state[:, :-1], clean.mask.amax(dim=0))
        if regularizer is not None:
            stats["loss_mixer_reg"] = regularizer.detach()
        if memory is None:
            return td.total if regularizer is None else td.total + regularizer, stats
        total = self._blend(values, clean, lookup, y, next_value, td, stats)
        if regularizer is not None:
            total = total + regularizer
        for name, extra in memory.memory_losses(lookup, values).items():
            stats[f"loss_{name}"] = extra.detach()
            total = total + extra
        return total, stats

    def _blend(self, values: OnlineValues, clean: CleanBatch, lookup: Any, y: torch.Tensor, next_value: torch.Tensor,
               td: TargetLoss, stats: dict[str, torch.Tensor]) -> torch.Tensor:
        """(1 - lambda) L_td + lambda L_em with the memory's E (eq. 6), its diagnostics into ``stats``; L_td without E."""
        assert self.memory is not None
        mask = clean.mask
        target = self.memory.combine_target(lookup, clean, y, next_value, gamma=self.config.gamma,
                                            miss_rule=self.memory_config.miss_rule)
        if target is None:
            return td.total
        em = self.loss_against(values, target.e_BT, target.applies_BT)
        answered = target.answered_BT
        # E where the table answered: the paper's E_s curve, without the y of misses (undefined with no answer)
        e_hit = torch.where(answered.sum() > 0, self.masked_mean(target.e_BT, answered), UNDEFINED_STAT)
        stats.update(loss_em=em.total.detach(), target_e=self.masked_mean(target.e_BT, mask),
                     memory_hit_rate=target.hit_rate, target_e_hit=e_hit)
        lam = self.memory_config.lam
        if lam == 0.0:  # the plain method, bit for bit (the table is still read, for its diagnostics)
            return td.total
        if lam == 1.0:
            return em.total
        return (1.0 - lam) * td.total + lam * em.total

    def loss_against(self, values: OnlineValues, target_BT: torch.Tensor, applies_BT: torch.Tensor) -> TargetLoss:
        """sum_t applies_t [w_t (Q_tot - target_t)^2 + sum_k (Q^k - target_t)^2] / sum_t m_t: L_td or L_em.

        Divided by the number of real steps m_t whatever ``applies_BT`` holds, so under miss rule "zero"
        a missed step simply has no memory loss; dividing by the answered steps would up-weight the hits
        (by 100 at a 1 % hit rate).
        """
        n_real = values.clean.mask.sum().clamp(min=1.0)
        with torch.no_grad():
            w = self.step_weights(values, target_BT)
        mixer = (w * (values.q_tot_BT - target_BT) ** 2 * applies_BT).sum() / n_real
        extras = {name: (sq_BT * applies_BT).sum() / n_real
                  for name, sq_BT in self.extra_losses(values, target_BT).items()}
        total = mixer
        for extra in extras.values():
            total = total + extra
        return TargetLoss(total=total, mixer=mixer, extras=extras, weights_BT=w)

    def train(self, batch: EpisodeBatch) -> dict[str, float]:
        """One gradient step on ``batch``; returns diagnostics."""
        loss, stats = self.compute_loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        stats.update(loss=loss.item(), grad_norm=self.step())
        return stats

    def step(self) -> float:
        """Clip the gradients in ``params``' ``.grad`` to ``grad_clip`` (one global norm), one RMSprop step.

        Returns the norm before clipping. ``train`` and the K-run update (semzoo.learners.stacked) both end here.
        """
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.config.grad_clip)
        self.optimizer.step()
        self.updates += 1
        return float(grad_norm)

    def networks(self) -> dict[str, nn.Module]:
        """Every network the loss reads, by name: those holding ``params``, and the targets (no gradient)."""
        return {"agent": self.agent, "mixer": self.mixer, "target_agent": self.target_agent,
                "target_mixer": self.target_mixer}

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
        for net in self.networks().values():
            flatten_rnns(net)
