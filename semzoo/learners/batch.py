"""A sampled episode batch made safe for the loss: padding zeroed, masks derived."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from semzoo.agents.rnn import NO_ACTION
from semzoo.types import EpisodeBatch


def pad_batch(batch: EpisodeBatch, n_steps: int) -> EpisodeBatch:
    """``batch`` with its time axis padded to ``n_steps`` steps (zeros, false: padding, masked by every consumer)."""
    extra = n_steps - batch.reward.shape[1]
    if extra == 0:
        return batch
    assert extra > 0, "pad_batch only lengthens a batch"

    def pad(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x.new_zeros((x.shape[0], extra, *x.shape[2:]))], dim=1)

    return dataclasses.replace(batch, **{name: pad(value) for name, value in batch.tensors().items()
                                         if name != "length"})


def bucketed(batch: EpisodeBatch, bucket_steps: int) -> EpisodeBatch:
    """``batch`` with its time axis padded up to a multiple of ``bucket_steps`` (1: as it is).

    A compiled loss then meets a few shapes, not one per episode length; the padding is masked like any other.
    """
    return pad_batch(batch, -(-batch.max_t // bucket_steps) * bucket_steps)


@dataclass
class CleanBatch:
    """An EpisodeBatch with padding replaced by zeros, plus the masks derived from it.

    Padding can hold anything (NaN, 1e9); every tensor here is finite and identical
    whatever the padding held, so losses and gradients do not depend on it.
    """

    obs: torch.Tensor  # [B,T+1,A,O]
    state: torch.Tensor  # [B,T+1,S]
    avail: torch.Tensor  # [B,T+1,A,U] bool, all false on padding
    actions: torch.Tensor  # [B,T,A]
    last_actions: torch.Tensor  # [B,T+1,A], NO_ACTION at t=0
    reward: torch.Tensor  # [B,T]
    terminated: torch.Tensor  # [B,T] float
    mask: torch.Tensor  # [B,T] float, 1 on real steps

    @classmethod
    def from_batch(cls, batch: EpisodeBatch) -> CleanBatch:
        t = batch.reward.shape[1]
        device = batch.reward.device
        slot_valid = torch.arange(t + 1, device=device)[None, :] <= batch.length[:, None]  # [B,T+1]
        filled = batch.filled
        actions = torch.where(filled[..., None], batch.actions, 0)
        last_actions = torch.cat([torch.full_like(actions[:, :1], NO_ACTION), actions], dim=1)
        real = torch.get_default_dtype()  # float32; float64 where the golden runs ask for it (tests/golden_runs.py)
        return cls(
            obs=torch.where(slot_valid[..., None, None], batch.obs, 0.0).to(real),
            state=torch.where(slot_valid[..., None], batch.state, 0.0).to(real),
            avail=batch.avail & slot_valid[..., None, None],
            actions=actions,
            last_actions=last_actions,
            reward=torch.where(filled, batch.reward, 0.0).to(real),
            terminated=(batch.terminated & filled).to(real),
            mask=filled.to(real),
        )

    def bootstrapped(self, value_BT: torch.Tensor, gamma: float) -> torch.Tensor:
        """One-step target r_t + gamma (1 - term_t) V_{t+1} of every step: [B,T] (paper eq. 2 and 7).

        A time limit is not a termination, so a truncated step bootstraps like any other.
        """
        return self.reward + gamma * (1.0 - self.terminated) * value_BT
