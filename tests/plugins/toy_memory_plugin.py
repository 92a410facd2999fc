"""A plugin module as a user writes one: it registers an episodic memory from outside the semzoo package.

Importing it (``semzoo --plugin toy_memory_plugin``, ``SEMZOO_PLUGINS=toy_memory_plugin`` or an entry point)
makes the ids ``best-<base>`` trainable for every base (``best-qmix``, ``best-vdn``, ...), with no edit to semzoo.

The memory keeps one number, H, the highest discounted return of any step stored so far (a constant-value
table: every state reads H). Its target is E_t = r_t + gamma (1 - term_t) H at every real step, blended
with y by lambda as SEM's is. It adds an exploration bonus b / sqrt(1 + stored episodes) to the TD
target, b its one setting of its own (``BestSettings.bonus``: ``--set best.bonus=0.05``, the section "best" of
config.json), and counts the calls of its schedule hooks (logged with every metric row) so a test can see the
trainer call them. Everything it holds is in ``state_dict``, so a stopped run resumes exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from semzoo import Memory, MemorySetup, register_memory
from semzoo.config import NON_NEGATIVE, ranged
from semzoo.episodic.target import EpisodicTarget, applying

BONUS = 0.01
"""The exploration bonus's default."""
NOTHING_STORED = -math.inf
"""H before any return is stored: every lookup misses."""
ENV_STEP_INTERVAL = 100
"""on_env_steps runs each time a run passes a multiple of this many env steps."""
COUNTERS = ("stores", "updates", "target_syncs", "env_step_calls")


@dataclass(frozen=True)
class BestLookup:
    """What the memory answers for a batch; tensors only, so the multi-seed update can stack and vmap them."""

    best: torch.Tensor
    """H, 0-d float (0 before anything is stored)."""
    stored: torch.Tensor
    """Whether H exists yet, 0-d bool."""
    bonus: torch.Tensor
    """The exploration bonus of this run now, 0-d float."""


@dataclass(frozen=True, kw_only=True)
class BestSettings:
    """The toy memory's own settings: the section "best" of a best-<base> run's config."""

    bonus: float = ranged(BONUS, NON_NEGATIVE, "0 turns the bonus off")
    """The exploration bonus before any episode is stored; it decays as 1 / sqrt(1 + episodes stored)."""


@register_memory("best", settings=BestSettings)
class BestReturnMemory(Memory):
    """One value for every state: the highest discounted return seen from any stored step."""

    description = "toy plugin: one value H (the best return seen), E = r + gamma H"
    env_step_interval = ENV_STEP_INTERVAL

    def __init__(self, *, gamma: float, bonus: float = BONUS) -> None:
        self.gamma = gamma
        self.bonus = bonus
        self.best = NOTHING_STORED
        self.counts = dict.fromkeys(COUNTERS, 0)

    @classmethod
    def from_config(cls, setup: MemorySetup) -> BestReturnMemory:
        return cls(gamma=setup.gamma, bonus=setup.settings("best").bonus)

    # ----- the schedule
    def on_store(self, batch: Any, slot_state_keys: np.ndarray | None) -> None:
        reward = batch.reward.double().numpy()
        filled = batch.filled.numpy()
        ret = np.zeros(reward.shape[0])
        for t in range(reward.shape[1] - 1, -1, -1):  # backwards over a handful of steps, all episodes at once
            ret = np.where(filled[:, t], reward[:, t] + self.gamma * ret, 0.0)
            if filled[:, t].any():
                self.best = max(self.best, float(ret[filled[:, t]].max()))
        self.counts["stores"] += batch.batch_size

    def on_update(self) -> None:
        self.counts["updates"] += 1

    def on_target_sync(self) -> None:
        self.counts["target_syncs"] += 1

    def on_env_steps(self, env_steps: int) -> None:
        self.counts["env_step_calls"] += 1

    # ----- the update
    def lookup_batch(self, clean: Any, state_keys_BSD: torch.Tensor | None) -> BestLookup:
        stored = self.best != NOTHING_STORED
        return BestLookup(best=torch.tensor(self.best if stored else 0.0), stored=torch.tensor(stored),
                          bonus=torch.tensor(self.bonus / math.sqrt(1 + self.counts["stores"])))

    def intrinsic_reward(self, lookup: BestLookup, clean: Any, next_value_BT: torch.Tensor) -> torch.Tensor:
        return lookup.bonus.to(clean.reward.dtype).expand_as(clean.reward)

    def combine_target(self, lookup: BestLookup, clean: Any, y_BT: torch.Tensor, next_value_BT: torch.Tensor, *,
                       gamma: float, miss_rule: str) -> EpisodicTarget:
        e_BT = clean.bootstrapped(lookup.best.to(y_BT.dtype).expand_as(y_BT), gamma)
        e_BT = torch.where(lookup.stored, e_BT, y_BT)  # nothing stored yet: every step misses, E = y
        answered_BT = lookup.stored.expand_as(y_BT)
        return applying(clean.mask.bool(), answered_BT, e_BT, lookup.stored.double(), miss_rule=miss_rule)

    # ----- state
    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, **self.counts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = float(state["best"])
        self.counts = {name: int(state[name]) for name in COUNTERS}

    @property
    def nbytes(self) -> int:
        return 8

    def metrics(self) -> dict[str, float]:
        best = {"memory_best": self.best} if self.best != NOTHING_STORED else {}
        return {**best, **{f"memory_{name}": float(n) for name, n in self.counts.items()}}
