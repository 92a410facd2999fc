"""The own-return ablation of SEM, registered as "mc": eq. (6) with E from the episode's own return, no table.

    E_t = r_t + gamma (1 - term_t) R_{t+1},  R_{t+1} = sum_{i>t} gamma^(i-t-1) r_i of the same episode   (a hit)
    E_t = r_t                                                     at a real end (no table needed, as SEM)
    E_t = y_t (miss rule "target")                                after the last step of a time-limited episode
    L   = (1 - lambda) L_td + lambda L_em                         (eq. 6, lambda = --lam, as SEM)

This is exactly what SEM's table answers when it never merges two visits of a state (every key written
once, by the step of the same episode): Q^S(phi(s_{t+1})) is then R_{t+1}, the discounted return that step
wrote, with the same truncation (no bootstrap after the last real step) and the same rounding (computed in
float64 by ``discounted_returns``, stored as float32). The state after a time-limited episode's last step is
never written to SEM's table, so there SEM misses and E = y; so does this memory. What SEM adds over ``mc`` is
therefore the table itself: other episodes' returns, through merges (the max over visits of a key).

One difference remains by design: SEM answers a step only once its return has left the pending set M (every
|M| env steps), so the steps of the latest <= |M| env steps miss; this memory answers every step at once.

No state: ``state_dict`` is empty and nothing is written, so ``mc-<base>`` is the smallest registered memory
(a check of the registry: one file, no learner or trainer code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from semzoo.episodic.memory import BUILTIN_DESCRIPTIONS, Memory, register_memory
from semzoo.episodic.returns import discounted_returns
from semzoo.episodic.sem import next_state_target
from semzoo.episodic.target import EpisodicTarget, TableLookup, scatter

if TYPE_CHECKING:
    from semzoo.episodic.setup import MemorySetup
    from semzoo.types import CleanBatch


@register_memory("mc")
class OwnReturn(Memory):
    """E from the episode's own discounted return (the module docstring): SEM without a table."""

    description = BUILTIN_DESCRIPTIONS["mc"]

    def __init__(self, *, gamma: float = 0.99) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r}: expected a discount in [0, 1]; set learner.gamma")
        self.gamma = float(gamma)

    @classmethod
    def from_config(cls, setup: MemorySetup) -> OwnReturn:
        """gamma of the run; lambda and the miss rule are read by the learner from the run's ``memory`` section."""
        return cls(gamma=setup.gamma)

    @torch.no_grad()
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> TableLookup:
        """Phase 1: R_{t+1} of every real non-terminal step whose next step is real (the steps SEM's table answers)."""
        mask_BT = clean.mask.cpu().numpy() > 0
        query_BT = mask_BT & (clean.terminated.cpu().numpy() == 0)
        returns_BT = discounted_returns(clean.reward.cpu().numpy(), mask_BT, self.gamma)  # as SEM writes R_t
        next_real_BT = np.zeros_like(mask_BT)
        next_real_BT[:, :-1] = mask_BT[:, 1:]
        next_return_BT = np.zeros_like(returns_BT)
        next_return_BT[:, :-1] = returns_BT[:, 1:]
        flat_K = np.flatnonzero(query_BT)
        hits_K = next_real_BT.reshape(-1)[flat_K]
        values_K = np.where(hits_K, next_return_BT.reshape(-1)[flat_K], 0.0).astype(np.float32)
        like = clean.reward
        return TableLookup(values_BT=scatter(values_K, flat_K, like), hit_BT=scatter(hits_K, flat_K, like).bool(),
                           hit_rate=torch.tensor(float(np.mean(hits_K)) if len(hits_K) else 0.0, dtype=torch.float64))

    def combine_target(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       *, gamma: float, miss_rule: str) -> EpisodicTarget:
        """Phase 2: E = r + gamma (1 - term) R_{t+1} on hits, V(t+1) in its place on a miss (SEM's eq. 7 and rule)."""
        return next_state_target(lookup, clean, next_value_BT, gamma, miss_rule)

    def state_dict(self) -> dict[str, Any]:
        return {"gamma": self.gamma}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        given = float(np.asarray(state["gamma"]).item())
        if given != self.gamma:
            raise ValueError(f"checkpoint has mc gamma={given}, this memory {self.gamma}; resume with the run's config")

    @property
    def nbytes(self) -> int:
        return 0


__all__ = ["OwnReturn"]
