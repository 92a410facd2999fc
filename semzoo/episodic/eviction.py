"""Which entries of a full nearest-key index make room for new keys: the policy's hooks, and EMC's and EMU's LRU."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

_NEVER = np.iinfo(np.int64).max
"""The age of a slot that is no candidate: it sorts after every real tick."""


class EvictionPolicy(ABC):
    """Which stored entries make room when a write finds the index full. The index calls these hooks."""

    @abstractmethod
    def reset(self, capacity: int) -> None:
        """Forget everything; slots are 0 .. capacity-1."""

    @abstractmethod
    def used(self, slots_K: np.ndarray) -> None:
        """Slots written or read, in order (a slot listed twice counts at its last position)."""

    @abstractmethod
    def victims(self, n: int, candidate_N: np.ndarray) -> np.ndarray:
        """int64 [n]: n distinct slots among candidate_N (bool [N]) to evict, first victim first."""

    @property
    def nbytes(self) -> int:
        return 0

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class LeastRecentlyUsed(EvictionPolicy):
    """EMC's and EMU's rule: evict the entry written or read longest ago.

    Every slot named in a call gets its own tick, in order, as their
    one-key-at-a-time loops give; ticks are unique, so victims are too.
    """

    def __init__(self) -> None:
        self.last_use_N = np.zeros(0, np.int64)
        self.clock = 0

    def reset(self, capacity: int) -> None:
        self.last_use_N = np.zeros(capacity, np.int64)
        self.clock = 0

    def used(self, slots_K: np.ndarray) -> None:
        # ufunc.at, not fancy assignment: a slot listed twice must keep its last (largest) tick
        np.maximum.at(self.last_use_N, slots_K, self.clock + np.arange(slots_K.shape[0]))
        self.clock += int(slots_K.shape[0])

    def victims(self, n: int, candidate_N: np.ndarray) -> np.ndarray:
        age_N = np.where(candidate_N, self.last_use_N, _NEVER)
        chosen = np.argpartition(age_N, n - 1)[:n] if n < age_N.shape[0] else np.arange(age_N.shape[0])
        return chosen[np.argsort(age_N[chosen])].astype(np.int64)

    @property
    def nbytes(self) -> int:
        return self.last_use_N.nbytes

    def state_dict(self) -> dict[str, Any]:
        return {"last_use": self.last_use_N.copy(), "clock": self.clock}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_use_N = np.asarray(state["last_use"], np.int64).copy()
        self.clock = int(np.asarray(state["clock"]).item())
