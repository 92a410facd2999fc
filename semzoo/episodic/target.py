"""What memories' episodic targets share: the table's answers, E with the steps it applies to, the miss rules.

A memory's E comes in two phases, hooks of each memory (semzoo.episodic.memory): ``lookup_batch`` queries its table
(numpy allowed, no network) and returns a dataclass of tensors such as ``TableLookup``; ``combine_target`` forms E
from those answers with tensor ops only, so the loss can run under ``torch.func.vmap`` over many runs
(semzoo.learners.stacked), and returns an ``EpisodicTarget``. SEM's E (eq. 7) and SAEM's (eq. 4) are formed in
semzoo.episodic.sem. The miss rule says where the memory term of eq. (6) applies: every real step ("target", the
paper) or only the steps the memory answered ("zero", EMC); ``applying`` builds the EpisodicTarget of a memory of
one's own under it (tests/plugins/toy_memory_plugin.py). ``semzoo.episodic.memory.episodic_target`` is the two
phases in a row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

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


def scatter(values_K: np.ndarray, flat_K: np.ndarray, like_BT: torch.Tensor) -> torch.Tensor:
    """values [K] at the flat (row-major) indices ``flat_K`` of a [B,T] tensor like ``like_BT``, 0 elsewhere."""
    out = np.zeros(like_BT.numel(), np.float32)
    out[flat_K] = values_K
    return torch.from_numpy(out.reshape(like_BT.shape)).to(device=like_BT.device, dtype=like_BT.dtype)


__all__ = ["MISS_RULES", "EpisodicTarget", "TableLookup", "applying", "check_miss_rule", "scatter"]
