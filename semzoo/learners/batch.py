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

    def lambda_returns(self, value_BT: torch.Tensor, gamma: float, td_lambda: float,
                       reward_BT: torch.Tensor | None = None) -> torch.Tensor:
        """TD(lambda) targets of every step: [B,T], computed backwards (PyMARL2's ``build_td_lambda_targets``).

            G_t = r_t + gamma (1 - term_t) [(1 - lambda) V_{t+1} + lambda G_{t+1}]

        ``value_BT[:, t]`` is V_{t+1}, the bootstrap value of the state after step t. After the last real step
        of an episode that did not terminate (a time limit) G_{t+1} is replaced by V_{t+1}, so that step's target
        is the one-step target; after a real end nothing is bootstrapped. ``reward_BT`` (default: ``reward``)
        lets a caller add an intrinsic reward. Padding steps hold values that no real step reads. At lambda 0
        this is ``bootstrapped`` up to rounding. Tensor ops only, so it runs under ``torch.func.vmap``.
        """
        reward = self.reward if reward_BT is None else reward_BT
        n_steps = reward.shape[1]
        returns: list[torch.Tensor] = []
        for t in range(n_steps - 1, -1, -1):
            if t + 1 < n_steps:  # G_{t+1} where step t+1 is real, V_{t+1} after an episode's last step
                g_next = torch.where(self.mask[:, t + 1] > 0, returns[-1], value_BT[:, t])
            else:
                g_next = value_BT[:, t]
            blended = (1.0 - td_lambda) * value_BT[:, t] + td_lambda * g_next
            returns.append(reward[:, t] + gamma * (1.0 - self.terminated[:, t]) * blended)
        return torch.stack(returns[::-1], dim=1)

