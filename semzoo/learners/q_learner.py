"""The one loss of eq. (6): Q_tot, the double-Q TD target y, the episodic target E and their blend, in one method.

    Q_tot = mixer(Q_a(tau_t, u_t), s_t)                                                   (online networks)
    y_t   = r_t + r^i_t + gamma (1 - term_t) V(t+1),  V(t+1) = Q_tot(tau_{t+1}, argmax_u Q(tau_{t+1}, u), s_{t+1}; theta^-)
            (with td_lambda > 0, TD(lambda): y_t = r_t + r^i_t + gamma (1 - term_t) [(1 - lambda) V(t+1) + lambda y_{t+1}])
    E_t   = the memory's episodic target (SEM eq. 7, SAEM eq. 4; E_t = y_t on a miss)
    L     = (1 - lambda) L_td + lambda L_em + [the mixer's regulariser] + [the memory's losses]     (eq. 6)
    L_td  = sum_t m_t  (Q_tot - y_t)^2 / sum_t m_t,   L_em = sum_t m'_t (Q_tot - E_t)^2 / sum_t m_t

m_t marks real steps, m'_t the steps the memory term applies to (the miss rule). ``QLearner.loss`` is that list,
top to bottom. What the other methods add, each through one hook:

- a memory (a registered ``semzoo.episodic.memory.Memory``): E and m' (``combine_target``; SEM forms E in
  semzoo/episodic/sem.py), an intrinsic reward r^i (``intrinsic_reward``: EMC's curiosity, EMU's and LAGMA's
  incentives) and losses of its own (``memory_losses``: EMC's episodic loss);
- a mixer: a regulariser (``Mixer.regularizer``: QPLEX-Qatten's);
- a derived learner: WQMIX (learners/wqmix.py) adds Q* (``online_values``), bootstraps from it (``next_value``)
  and weighs each squared error (``loss_against``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
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


def masked_mean(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """Mean of x_BT over the steps where mask_BT is 1 (a scalar; 0 when the mask is empty)."""
    return (x_BT * mask_BT).sum() / mask_BT.sum().clamp(min=1.0)


@dataclass(frozen=True)
class TargetLoss:
    """The squared error against one target (y or E), divided by the number of real steps (a scalar)."""

    total: torch.Tensor
    stats: dict[str, torch.Tensor] = field(default_factory=dict)
    """Its pieces, logged after ``loss_td`` (WQMIX's: the QMIX and the central loss, the mean weight); none here."""


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

    # ----- the loss of eq. (6) ------------------------------------------------------------------------------

    def train(self, batch: EpisodeBatch) -> dict[str, float]:
        """One gradient step on ``batch``; returns diagnostics."""
        loss, stats = self.compute_loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        stats.update(loss=loss.item(), grad_norm=self.step())
        return stats

    def compute_loss(self, batch: EpisodeBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """L of one batch (``loss``) and its diagnostics as logged floats; no optimiser step."""
        if self.bucket_steps > 1:  # a compiled loss: a few padded lengths, not one shape per episode length
            batch = bucketed(batch, self.bucket_steps)
        clean = CleanBatch.from_batch(batch)
        lookup = self.table_lookup(clean, batch.state_keys)
        if self.compiled_loss is None:
            loss, stats = self.loss(clean, lookup)
        else:
            torch.compiler.cudagraph_mark_step_begin()  # the graphs' outputs of the last update are no longer read
            loss, stats = self.compiled_loss(clean, lookup)
        return loss, stats_to_floats(stats)

    def loss(self, clean: CleanBatch, lookup: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """L = (1 - lambda) L_td + lambda L_em (paper eq. 6), plus what a mixer or memory adds; diagnostics as 0-d tensors.

        ``lookup`` is the memory's ``lookup_batch`` of ``clean`` (None without memory). Tensor ops only, no Python
        branch on a value: it runs as it is under ``torch.func.vmap`` over many runs (semzoo.learners.stacked).
        """
        memory = self.memory if lookup is not None else None
        mask = clean.mask
        # Q_tot(tau_t, u_t, s_t; theta) of the taken joint actions
        values = self.online_values(clean)
        # y_t = r_t + r^i_t + gamma (1 - term_t) V(t+1), V(t+1) = Q_tot(tau_{t+1}, argmax_u Q(tau_{t+1}, u), s_{t+1}; theta^-)
        next_value = self.next_value(clean, values.q_BTAU)
        # r^i: what a memory adds to the reward (EMC's curiosity, EMU's and LAGMA's incentives), no gradient
        intrinsic = memory.intrinsic_reward(lookup, clean, next_value) if memory is not None and memory.adds_reward \
            else None
        y = self.td_target(clean, next_value, None if intrinsic is None else intrinsic.detach())
        td = self.loss_against(values, y, mask)  # L_td
        stats = {"loss_td": td.total.detach(), **td.stats, "q_tot": masked_mean(values.q_tot_BT.detach(), mask),
                 **{name: masked_mean(v, mask) for name, v in values.logged.items()}, "target_y": masked_mean(y, mask)}
        if intrinsic is not None:
            stats["reward_intrinsic"] = masked_mean(intrinsic.detach(), mask)
            for name, part in memory.reward_parts(lookup, clean, next_value).items():  # type: ignore[union-attr]
                stats[f"reward_{name}"] = masked_mean(part.detach(), mask)
        # QPLEX-Qatten's attention regulariser (None for the other mixers)
        regularizer = self.mixer.regularizer(clean.state[:, :-1], mask.amax(dim=0))
        if regularizer is not None:
            stats["loss_mixer_reg"] = regularizer.detach()
        total = td.total
        # E_t, the memory's episodic target (SEM: r_t + gamma Q^S(s_{t+1}), y_t on a miss) and the steps it applies to
        target = memory.combine_target(lookup, clean, y, next_value, gamma=self.config.gamma,
                                       miss_rule=self.memory_config.miss_rule) \
            if memory is not None and memory.adds_target else None
        if target is not None:
            em = self.loss_against(values, target.e_BT, target.applies_BT)  # L_em
            answered = target.answered_BT
            # E where the table answered: the paper's E_s curve, without the y of misses (undefined with no answer)
            e_hit = torch.where(answered.sum() > 0, masked_mean(target.e_BT, answered), UNDEFINED_STAT)
            stats.update(loss_em=em.total.detach(), target_e=masked_mean(target.e_BT, mask),
                         memory_hit_rate=target.hit_rate, target_e_hit=e_hit)
            lam = self.memory_config.lam
            if lam == 1.0:
                total = em.total
            elif lam != 0.0:  # lambda 0 is the plain method, bit for bit (the table is still read, for its diagnostics)
                total = (1.0 - lam) * td.total + lam * em.total
        if regularizer is not None:
            total = total + regularizer
        if memory is not None and memory.adds_loss:  # a memory's own losses (EMC's episodic loss)
            for name, extra in memory.memory_losses(lookup, values).items():
                stats[f"loss_{name}"] = extra.detach()
                total = total + extra
        return total, stats

    # ----- its pieces, and the hooks a derived learner (WQMIX) overrides ----------------------------------------

    def online_values(self, clean: CleanBatch) -> OnlineValues:
        """Q_a of every slot and Q_tot of the taken joint actions, through the online networks (WQMIX adds Q*)."""
        q = self.agent_q(self.agent, clean)  # [B,T+1,A,U]
        chosen_q = q[:, :-1].gather(-1, clean.actions.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
        extra = self.mixer_extra(q[:, :-1], clean.actions, clean.avail[:, :-1]) if self.mixer.uses_actions else {}
        q_tot = self.mixer(chosen_q, clean.state[:, :-1], **extra).squeeze(-1)
        return OnlineValues(clean=clean, q_BTAU=q, q_tot_BT=q_tot)

    @torch.no_grad()
    def next_value(self, clean: CleanBatch, q_BTAU: torch.Tensor) -> torch.Tensor:
        """V(t+1) = Q_tot(tau_{t+1}, u', s_{t+1}; theta^-), u' the argmax of the online net (double Q) or the target's:
        [B,T]. WQMIX bootstraps from its Q* instead."""
        target_q = self.agent_q(self.target_agent, clean)
        chooser = q_BTAU[:, 1:].detach() if self.config.double_q else target_q[:, 1:]
        best_next = chooser.masked_fill(~clean.avail[:, 1:], MASKED_Q).argmax(dim=-1)  # u' [B,T,A]
        target_max = target_q[:, 1:].gather(-1, best_next.unsqueeze(-1)).squeeze(-1)  # [B,T,A]
        extra = self.mixer_extra(target_q[:, 1:], best_next, clean.avail[:, 1:]) if self.mixer.uses_actions else {}
        return self.target_mixer(target_max, clean.state[:, 1:], **extra).squeeze(-1)

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

    def loss_against(self, values: OnlineValues, target_BT: torch.Tensor, applies_BT: torch.Tensor) -> TargetLoss:
        """sum_t applies_t (Q_tot - target_t)^2 / sum_t m_t: L_td (target y) or L_em (target E). WQMIX weighs it.

        Divided by the number of real steps m_t whatever ``applies_BT`` holds, so under miss rule "zero"
        a missed step simply has no memory loss; dividing by the answered steps would up-weight the hits
        (by 100 at a 1 % hit rate).
        """
        n_real = values.clean.mask.sum().clamp(min=1.0)
        total = ((values.q_tot_BT - target_BT) ** 2 * applies_BT).sum() / n_real
        return TargetLoss(total=total)

    def table_lookup(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None = None) -> Any:
        """The memory's answers for ``clean`` (``Memory.lookup_batch``: numpy allowed, so outside the loss and any
        vmap); None without memory. ``state_keys_BSD``: the sampled batch's ``EpisodeBatch.state_keys``, if kept."""
        if self.memory is None:
            return None
        with torch.no_grad():
            return self.memory.lookup_batch(clean, state_keys_BSD)

    def agent_q(self, agent: RNNAgent, clean: CleanBatch) -> torch.Tensor:
        """Q_a for every slot: [B,T+1,A,U]."""
        q, _ = agent(agent.build_inputs(clean.obs, clean.last_actions))
        return q

    def mixer_extra(self, q_BTAU: torch.Tensor, actions_BTA: torch.Tensor,
                    avail_BTAU: torch.Tensor) -> dict[str, torch.Tensor]:
        """The extra inputs of a mixer that reads the joint action (``Mixer.uses_actions``: QPLEX)."""
        max_qs = q_BTAU.masked_fill(~avail_BTAU, MASKED_Q).max(dim=-1).values
        max_qs = torch.where(avail_BTAU.any(-1), max_qs, 0.0)
        return {"actions_onehot": one_hot(actions_BTA, q_BTAU.shape[-1], q_BTAU.dtype), "max_qs": max_qs}

    @torch.no_grad()
    def td_targets(self, batch: EpisodeBatch) -> torch.Tensor:
        """The vanilla targets y of a batch, [B,T] (zero on padding)."""
        clean = CleanBatch.from_batch(batch)
        q = self.agent_q(self.agent, clean)
        return self.td_target(clean, self.next_value(clean, q)) * clean.mask


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
