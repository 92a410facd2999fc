"""The episodic target E of a sampled batch, read from the SEM or SAEM table (paper eq. 4, 6, 7).

    SEM:  E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1}))      (eq. 7; E_t = r_t after a real end)
    SAEM: E_t = Q^SA(phi(s_t), u_t)                              (eq. 4)

On a table miss E_t = y_t: the paper puts max_u Q_tot(tau_{t+1}, u; theta^-), the learner's bootstrap
value, in place of Q^S(s_{t+1}). The miss rule says where the memory term of eq. (6) applies: every
real step ("target", the paper) or only the steps the table answered ("zero", EMC).

Two phases: ``table_lookup`` queries the numpy table (one batched query, a table access for LFU
eviction) and needs no network; ``combine_target`` forms E from its answers with tensor ops only, so
the loss can run under ``torch.func.vmap`` over many runs (semzoo.learners.stacked).
``episodic_target`` is the two in a row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from semzoo.episodic.tables import EpisodicMemory
from semzoo.learners.batch import CleanBatch

MISS_RULES = ("target", "zero")
KINDS = ("sem", "saem")


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


def check_episodic(kind: str, miss_rule: str) -> None:
    """ValueError for a memory kind or miss rule that has no episodic target."""
    if miss_rule not in MISS_RULES:
        raise ValueError(f"miss_rule={miss_rule!r}: expected 'target' (paper) or 'zero' (EMC)")
    if kind not in KINDS:
        raise ValueError(f"memory kind {kind!r} has no episodic target; expected 'sem' or 'saem'")


@torch.no_grad()
def table_lookup(memory: EpisodicMemory, kind: str, clean: CleanBatch,
                 state_keys_BSD: torch.Tensor | None = None) -> TableLookup:
    """Phase 1: one batched query of the table for the steps of ``clean`` that read it.

    ``state_keys_BSD`` is the batch's ``EpisodeBatch.state_keys`` ([B,T+1,D] int32, the bits of phi(s) of
    every real slot, projected when the episode was stored); without it the states are projected here.
    """
    check_episodic(kind, MISS_RULES[0])
    real_BT = clean.mask.cpu().numpy() > 0
    if kind == "sem":
        # Only real, non-terminal steps read the table: a read counts as an access for LFU eviction,
        # so reading padding or the slot after a real end would keep junk entries alive.
        query_BT = real_BT & (clean.terminated.cpu().numpy() == 0)
    else:
        query_BT = real_BT
    n_steps = query_BT.shape[1]
    flat_K = np.flatnonzero(query_BT)  # row-major order, as a boolean mask gathers
    episode_K, step_K = np.divmod(flat_K, n_steps)
    slot_K = step_K + 1 if kind == "sem" else step_K  # SEM reads phi(s_{t+1}), SAEM phi(s_t)
    if state_keys_BSD is None:
        state_keys_KD = memory.state_keys(clean.state.cpu().numpy()[episode_K, slot_K])
    else:
        state_keys_KD = state_keys_BSD.cpu().numpy()[episode_K, slot_K].view(np.uint32)
    actions = None if kind == "sem" else clean.actions.cpu().numpy()[episode_K, step_K]
    values_K, hits_K = memory.lookup(memory.keys_from_state_keys(state_keys_KD, actions))
    like = clean.reward
    return TableLookup(values_BT=_scatter(values_K, flat_K, like), hit_BT=_scatter(hits_K, flat_K, like).bool(),
                       hit_rate=torch.tensor(float(np.mean(hits_K)) if len(hits_K) else 0.0, dtype=torch.float64))


def combine_target(lookup: TableLookup, kind: str, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                   *, gamma: float, miss_rule: str) -> EpisodicTarget:
    """Phase 2: E for every step of ``clean`` from the table's answers, a constant target like y (tensor ops only).

    ``y_BT`` and ``next_value_BT`` ([B,T]) are the learner's TD target and bootstrap value V(t+1),
    with y_t = r_t + gamma (1 - term_t) V(t+1): a SEM miss bootstraps from V, a SAEM miss takes y.
    """
    check_episodic(kind, miss_rule)
    real = clean.mask.bool()
    hit = lookup.hit_BT
    with torch.no_grad():
        if kind == "sem":
            e = clean.bootstrapped(torch.where(hit, lookup.values_BT, next_value_BT), gamma)
            hit = hit | (clean.terminated > 0)
        else:
            e = torch.where(hit, lookup.values_BT, y_BT)
    answered = real & hit
    applies = real if miss_rule == "target" else answered
    return EpisodicTarget(e_BT=e, applies_BT=applies.float(), answered_BT=answered.float(), hit_rate=lookup.hit_rate)


@torch.no_grad()
def episodic_target(memory: EpisodicMemory, kind: str, clean: CleanBatch, y_BT: torch.Tensor,
                    next_value_BT: torch.Tensor, *, gamma: float, miss_rule: str) -> EpisodicTarget:
    """E for every step of ``clean``: ``table_lookup`` then ``combine_target``."""
    check_episodic(kind, miss_rule)
    return combine_target(table_lookup(memory, kind, clean), kind, clean, y_BT, next_value_BT, gamma=gamma,
                          miss_rule=miss_rule)


def _scatter(values_K: np.ndarray, flat_K: np.ndarray, like_BT: torch.Tensor) -> torch.Tensor:
    """values [K] at the flat (row-major) indices ``flat_K`` of a [B,T] tensor like ``like_BT``, 0 elsewhere."""
    out = np.zeros(like_BT.numel(), np.float32)
    out[flat_K] = values_K
    return torch.from_numpy(out.reshape(like_BT.shape)).to(device=like_BT.device, dtype=like_BT.dtype)


__all__ = ["KINDS", "MISS_RULES", "EpisodicTarget", "TableLookup", "check_episodic", "combine_target",
           "episodic_target", "table_lookup"]
