"""The episodic target E of a sampled batch, read from the SEM or SAEM table (paper eq. 4, 6, 7).

    SEM:  E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1}))      (eq. 7; E_t = r_t after a real end)
    SAEM: E_t = Q^SA(phi(s_t), u_t)                              (eq. 4)

On a table miss E_t = y_t: the paper puts max_u Q_tot(tau_{t+1}, u; theta^-), the learner's bootstrap
value, in place of Q^S(s_{t+1}). The miss rule says where the memory term of eq. (6) applies: every
real step ("target", the paper) or only the steps the table answered ("zero", EMC).

Two phases, hooks of each memory (semzoo.episodic.memory): ``lookup_batch`` queries the numpy table (one
batched query, a table access for LFU eviction) and needs no network; ``combine_target`` forms E from its
answers with tensor ops only, so the loss can run under ``torch.func.vmap`` over many runs
(semzoo.learners.stacked). SEM's and SAEM's are in semzoo.episodic.sem; this module holds what they
share. ``semzoo.episodic.memory.episodic_target`` is the two in a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from semzoo.types import CleanBatch

MISS_RULES = ("target", "zero")


@dataclass(frozen=True)
class TableLookup:
    """What the table answered for every step of a batch: [B,T] tensors, 0 / false where it was not asked."""

    values_BT: torch.Tensor
    """SEM: Q^S(phi(s_{t+1})); SAEM: Q^SA(phi(s_t), u_t) (float, 0 on a miss)."""
    hit_BT: torch.Tensor
    """The table answered (bool)."""
    hit_rate: torch.Tensor
    """Hits / queries of this batch, 0-d float64 (SEM queries real non-terminal steps, SAEM every real step); 0 if none."""


@dataclass(frozen=True)
class EpisodicTarget:
    """E of every step of a batch, the steps the memory term applies to, and how often the table answered.

    All tensors are [B,T]; on padding ``applies_BT`` and ``answered_BT`` are 0 and ``e_BT`` is meaningless.
    """

    e_BT: torch.Tensor
    """E_t (float)."""
    applies_BT: torch.Tensor
    """m'_t (float 0/1): every real step for miss rule "target", the answered steps for "zero"."""
    answered_BT: torch.Tensor
    """float 0/1: real steps whose E came from the table, SEM's real ends included (E = r needs no table)."""
    hit_rate: torch.Tensor
    """Hits / queries of this batch, 0-d (see TableLookup.hit_rate)."""


def check_miss_rule(miss_rule: str) -> None:
    """ValueError for a miss rule that is neither 'target' nor 'zero'."""
    if miss_rule not in MISS_RULES:
        raise ValueError(f"miss_rule={miss_rule!r}: expected 'target' (paper) or 'zero' (EMC)")


def applying(real_BT: torch.Tensor, answered_BT: torch.Tensor, e_BT: torch.Tensor, hit_rate: torch.Tensor, *,
             miss_rule: str) -> EpisodicTarget:
    """The EpisodicTarget of E [B,T] answered by the memory at ``answered_BT`` (bool), under ``miss_rule``.

    ``real_BT`` (bool) marks the real steps: "target" applies E at every real step, "zero" at the answered ones.
    """
    check_miss_rule(miss_rule)
    answered = real_BT & answered_BT
    applies = real_BT if miss_rule == "target" else answered
    return EpisodicTarget(e_BT=e_BT, applies_BT=applies.float(), answered_BT=answered.float(), hit_rate=hit_rate)


def next_state_target(lookup: TableLookup, clean: CleanBatch, next_value_BT: torch.Tensor,
                      gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """SEM's eq. (7) and miss rule: (E [B,T], the steps the memory answered [B,T] bool) from next-state answers.

    E_t = r_t + gamma (1 - term_t) Q(phi(s_{t+1})) on a hit, V(t+1) in its place on a miss; a real end needs no
    memory (E = r), so it counts as answered. Shared by SEM's table and the own-return ablation, which must agree.
    """
    e_BT = clean.bootstrapped(torch.where(lookup.hit_BT, lookup.values_BT, next_value_BT), gamma)
    return e_BT, lookup.hit_BT | (clean.terminated > 0)


def scatter(values_K: np.ndarray, flat_K: np.ndarray, like_BT: torch.Tensor) -> torch.Tensor:
    """values [K] at the flat (row-major) indices ``flat_K`` of a [B,T] tensor like ``like_BT``, 0 elsewhere."""
    out = np.zeros(like_BT.numel(), np.float32)
    out[flat_K] = values_K
    return torch.from_numpy(out.reshape(like_BT.shape)).to(device=like_BT.device, dtype=like_BT.dtype)


__all__ = ["MISS_RULES", "EpisodicTarget", "TableLookup", "applying", "check_miss_rule", "next_state_target",
           "scatter"]
