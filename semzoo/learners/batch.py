"""Episode batches padded on their time axis (the vmapped and the compiled update); the batch made safe for the
loss, CleanBatch, is in semzoo.types."""

from __future__ import annotations

import dataclasses

import torch

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


__all__ = ["bucketed", "pad_batch"]
