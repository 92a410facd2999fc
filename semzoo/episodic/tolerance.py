"""When a stored float key answers a query, for the nearest-key index: EMC's allclose rule and EMU's z-normalised box.

EMC (Zheng et al., NeurIPS 2021) accepts a stored key k for a query q when ``np.allclose(k, q)``; EMU (Na et al.,
ICLR 2024) when every z-normalised dimension lies within delta. A ``Tolerance`` gives the rule, the distance that
picks the nearest among hits, and the box |q - k| per dimension that bounds every hit, so that the grid of
semzoo.episodic.nearest probes only the cells of that box.

Shapes: D = key size, M = queries, C = candidate (query, stored key) pairs, K = stored keys.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import torch

# ---------------------------------------------------------------- tolerance defaults
EMC_ATOL = 1e-8
"""EMC's absolute tolerance: `np.allclose(stored, key, atol=1e-8)` in its LRU_KNN.peek (Zheng et al., 2021)."""
EMC_RTOL = 1e-5
"""EMC's relative tolerance: numpy's allclose default, which its peek leaves unchanged."""
EMU_DELTA = 1.3e-5
"""EMU's box half-width on z-normalised keys, the default maps (Na et al., 2024, appendix)."""
EMU_DELTA_SUPER_HARD = 1.3e-3
"""EMU's delta on SMAC's super-hard maps (Na et al., 2024, appendix)."""
MIN_STD = 1e-12
"""A key dimension with a smaller standard deviation is normalised by this (a constant dimension)."""

# ---------------------------------------------------------------- the grid cell a tolerance calls for
CELL_PER_WIDTH = 16.0
"""Cell edge = 16 x the largest tolerance half-width w, i.e. 8 box widths 2w: a query box then spans
1 + 2w / cell = 1.125 cells per dimension on average (about 1.6 probes at D = 4, at most 2^D). Keys closer
than a tolerance are one entry, so a cell holds at most about 8^D keys; at the keys' density in practice, one."""
MIN_CELL = 1e-300
"""Cell edge floor, so a zero tolerance (atol 0 on a zero key) still divides."""


# ---------------------------------------------------------------- tolerances
class Tolerance(ABC):
    """When a stored key k answers a query q, and how far apart they are.

    Rules are evaluated in float64 on the float32 keys. `half_width` bounds
    |q - k| per dimension for every k that passes `within`, so the grid
    probes only the cells of that box.
    """

    @abstractmethod
    def half_width(self, queries_MD: np.ndarray) -> np.ndarray:
        """float64 [M, D]: for each query, a bound on |q_d - k_d| over every hitting k (before slack)."""

    @abstractmethod
    def within(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> np.ndarray:
        """bool [C]: the tolerance rule for each (query, stored key) pair, float64 [C, D] each."""

    @abstractmethod
    def distance(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> np.ndarray:
        """float64 [C]: the L2 distance that picks the nearest among hits."""

    @abstractmethod
    def cell_size(self, keys_KD: np.ndarray) -> np.ndarray:
        """float64 [D]: the grid cell edge these stored keys call for (CELL_PER_WIDTH x their widest box)."""

    def match(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """bool [C] `within` and float64 [C] `distance` of every pair; a rule may share work between the two.

        The index passes column-major [C, D] arrays (row views of [D, C]): reductions over D are then
        elementwise operations on rows, which numpy runs faster than reductions over a short last axis.
        """
        return self.within(queries_CD, keys_CD), self.distance(queries_CD, keys_CD)

    def fit(self, keys_ND: np.ndarray) -> bool:
        """Refresh statistics kept from the stored keys; True when the rule changed. Default: nothing kept."""
        return False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class AllClose(Tolerance):
    """EMC's near-exact test: every dimension |q - k| <= atol + rtol * |r|, numpy's allclose rule.

    r is the query by default: EMC calls `np.allclose(stored, key)`, whose
    second argument (the looked-up key) scales rtol. `scale_by="key"` scales
    by the stored key instead; both bounds are exact (for "key",
    |q - k| <= (atol + rtol |q|) / (1 - rtol)).
    Distance: plain L2 on the keys.
    """

    def __init__(self, atol: float = EMC_ATOL, rtol: float = EMC_RTOL, scale_by: str = "query") -> None:
        if not (atol >= 0 and 0 <= rtol < 1):
            raise ValueError(f"atol={atol}, rtol={rtol}: expected atol >= 0 and 0 <= rtol < 1 (EMC: 1e-8, 1e-5)")
        if scale_by not in ("query", "key"):
            raise ValueError(f"scale_by={scale_by!r}: expected 'query' (EMC's np.allclose(stored, key)) or 'key'")
        self.atol, self.rtol, self.scale_by = float(atol), float(rtol), scale_by

    def half_width(self, queries_MD: np.ndarray) -> np.ndarray:
        width = self.atol + self.rtol * np.abs(queries_MD)
        return width if self.scale_by == "query" else width / (1.0 - self.rtol)

    def within(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> np.ndarray:
        scale = queries_CD if self.scale_by == "query" else keys_CD
        return (np.abs(queries_CD - keys_CD) <= self.atol + self.rtol * np.abs(scale)).all(axis=1)

    def distance(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> np.ndarray:
        return np.sqrt(np.square(queries_CD - keys_CD).sum(axis=1))

    def cell_size(self, keys_KD: np.ndarray) -> np.ndarray:
        widest = self.half_width(np.abs(keys_KD).max(axis=0, keepdims=True))[0]
        return np.maximum(CELL_PER_WIDTH * widest, MIN_CELL)


class ZBox(Tolerance):
    """EMU's box: every z-normalised dimension within delta, |(q - mu)/sigma - (k - mu)/sigma| <= delta.

    mu, sigma [D] are the per-dimension mean and standard deviation of the
    stored keys. Give them (`set_statistics`) to keep them fixed, or let the
    index compute them from its keys (`NearestIndex.fit_normalisation`, which
    EMU does every 200 env steps); until then mu = 0, sigma = 1. Distance: L2
    on the z-normalised keys. (EMU's code takes the nearest in raw space, then
    tests the box; the two agree unless two stored keys sit within a box of
    the query.)
    """

    def __init__(self, delta: float = EMU_DELTA, mean_D: Any = None, std_D: Any = None) -> None:
        if not delta >= 0:
            raise ValueError(f"delta={delta}: expected >= 0 (EMU: 1.3e-5, 1.3e-3 on super-hard maps)")
        self.delta = float(delta)
        self.mean_D: np.ndarray | None = None
        self.std_D: np.ndarray | None = None
        if (mean_D is None) != (std_D is None):
            raise ValueError("give both mean_D and std_D, or neither (the index then computes them)")
        if mean_D is not None:
            self.set_statistics(mean_D, std_D)

    def set_statistics(self, mean_D: Any, std_D: Any) -> None:
        """Fix the normalisation: mean [D], std [D] (std below MIN_STD counts as MIN_STD)."""
        mean = np.asarray(mean_D.cpu() if isinstance(mean_D, torch.Tensor) else mean_D, np.float64).reshape(-1)
        std = np.asarray(std_D.cpu() if isinstance(std_D, torch.Tensor) else std_D, np.float64).reshape(-1)
        if mean.shape != std.shape or not (np.isfinite(mean).all() and np.isfinite(std).all() and (std >= 0).all()):
            raise ValueError(
                f"mean {mean.tolist()} and std {std.tolist()} must be finite [D] vectors with std >= 0"
            )
        self.mean_D, self.std_D = mean, np.maximum(std, MIN_STD)

    def _stats(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        if self.mean_D is None or self.std_D is None:
            return np.zeros(dim), np.ones(dim)
        if self.mean_D.shape[0] != dim:
            raise ValueError(f"normalisation has {self.mean_D.shape[0]} dimensions, the keys {dim}")
        return self.mean_D, self.std_D

    def _z(self, x_CD: np.ndarray) -> np.ndarray:
        mean, std = self._stats(x_CD.shape[1])
        return (x_CD - mean) / std

    def half_width(self, queries_MD: np.ndarray) -> np.ndarray:
        _, std = self._stats(queries_MD.shape[1])
        return np.broadcast_to(self.delta * std, queries_MD.shape)

    def within(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> np.ndarray:
        return (np.abs(self._z(queries_CD) - self._z(keys_CD)) <= self.delta).all(axis=1)

    def distance(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> np.ndarray:
        return np.sqrt(np.square(self._z(queries_CD) - self._z(keys_CD)).sum(axis=1))

    def match(self, queries_CD: np.ndarray, keys_CD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gap_CD = self._z(queries_CD) - self._z(keys_CD)  # normalised once for both answers
        return (np.abs(gap_CD) <= self.delta).all(axis=1), np.sqrt(np.square(gap_CD).sum(axis=1))

    def cell_size(self, keys_KD: np.ndarray) -> np.ndarray:
        _, std = self._stats(keys_KD.shape[1])
        return np.maximum(CELL_PER_WIDTH * self.delta * std, MIN_CELL)

    def fit(self, keys_ND: np.ndarray) -> bool:
        if keys_ND.shape[0] == 0:
            return False
        old = self._stacked()
        self.set_statistics(keys_ND.mean(axis=0), keys_ND.std(axis=0))
        new = self._stacked()
        return old is None or new is None or not np.array_equal(old, new)

    def _stacked(self) -> np.ndarray | None:
        if self.mean_D is None or self.std_D is None:
            return None
        return np.stack([self.mean_D, self.std_D])

    def state_dict(self) -> dict[str, Any]:
        fitted = self.mean_D is not None
        return {
            "delta": self.delta,
            "mean": self.mean_D if fitted else np.zeros(0),
            "std": self.std_D if fitted else np.zeros(0),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.delta = float(np.asarray(state["delta"]).item())
        mean, std = np.asarray(state["mean"], np.float64), np.asarray(state["std"], np.float64)
        self.mean_D, self.std_D = (mean, std) if mean.size else (None, None)
