"""The discounted return R_t of every real step: the value SEM, SAEM, EMC, EMU, LAGMA and ``mc`` store or read.

Paper (Ma & Li, 2021, sec. 5): R(s_t) = sum_{i=t}^{T} gamma^(i-t) r_i over the rest of the episode. The memories
take numpy arrays or torch tensors alike (``to_numpy``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def to_numpy(x: Any) -> np.ndarray:
    """A numpy array of a torch tensor (detached, on the CPU) or of anything ``np.asarray`` takes."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def discounted_returns(reward_BT: Any, filled_BT: Any, gamma: float) -> np.ndarray:
    """Discounted return from every real step to the end of its episode.

    reward [B, T], filled [B, T] bool -> float32 [B, T], zero on padding.
    Paper: R(s_t) = sum_{i=t}^{T} gamma^(i-t) r_i, computed backwards in float64.
    """
    reward = to_numpy(reward_BT).astype(np.float64)
    filled = to_numpy(filled_BT).astype(bool)
    if reward.ndim != 2 or reward.shape != filled.shape:
        raise ValueError(
            f"reward {reward.shape} and filled {filled.shape} must both be [B, T]; "
            "pass EpisodeBatch.reward and EpisodeBatch.filled"
        )
    # padding may hold NaN or anything: zero it before it enters the recursion
    reward = np.where(filled, reward, 0.0)
    returns_BT = np.zeros_like(reward)
    next_B = np.zeros(reward.shape[0])
    for t in range(reward.shape[1] - 1, -1, -1):
        next_B = np.where(filled[:, t], reward[:, t] + gamma * next_B, 0.0)
        returns_BT[:, t] = next_B
    return returns_BT.astype(np.float32)
