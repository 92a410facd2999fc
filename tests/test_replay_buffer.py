"""The replay buffer keeps each slot's episodic state keys beside its state (projected once, at store time)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from semzoo.episodic.tables import make_episodic_memory
from semzoo.replay.buffer import EpisodeReplayBuffer
from semzoo.types import EpisodeBatch

A, O, S, U, T = 2, 3, 5, 4, 6


def make_batch(lengths: list[int], seed: int = 0) -> EpisodeBatch:
    g = torch.Generator().manual_seed(seed)
    b, t = len(lengths), max(lengths)
    length = torch.tensor(lengths)
    return EpisodeBatch(
        obs=torch.randn(b, t + 1, A, O, generator=g), state=torch.randn(b, t + 1, S, generator=g),
        avail=torch.ones(b, t + 1, A, U, dtype=torch.bool), actions=torch.randint(0, U, (b, t, A), generator=g),
        reward=torch.randn(b, t, generator=g), terminated=torch.zeros(b, t, dtype=torch.bool),
        filled=torch.arange(t)[None] < length[:, None], length=length,
    )


def make_buffer(key_words: int) -> EpisodeReplayBuffer:
    return EpisodeReplayBuffer(capacity=4, max_t=T, n_agents=A, obs_dim=O, state_dim=S, n_actions=U,
                               state_key_words=key_words)


def with_keys(memory, batch: EpisodeBatch) -> EpisodeBatch:
    return dataclasses.replace(batch, state_keys=torch.from_numpy(memory.slot_state_keys(batch).view(np.int32)))


def test_sampled_state_keys_are_the_keys_of_the_sampled_states():
    memory = make_episodic_memory("sem", state_dim=S, n_agents=A)
    buffer = make_buffer(memory.proj_dim)
    for seed, lengths in enumerate([[3, 6], [2, 4], [5, 1]]):  # the third batch wraps around the buffer
        buffer.insert(with_keys(memory, make_batch(lengths, seed)))
    sample = buffer.sample(3, torch.Generator().manual_seed(0))
    assert sample.state_keys is not None and sample.state_keys.shape == (3, sample.max_t + 1, memory.proj_dim)
    np.testing.assert_array_equal(sample.state_keys.numpy().view(np.uint32), memory.slot_state_keys(sample))


def test_a_buffer_that_keeps_keys_refuses_a_batch_without_them():
    with pytest.raises(ValueError, match="slot_state_keys"):
        make_buffer(4).insert(make_batch([2]))


def test_a_buffer_without_keys_ignores_them():
    memory = make_episodic_memory("sem", state_dim=S, n_agents=A)
    buffer = make_buffer(0)
    buffer.insert(with_keys(memory, make_batch([2, 3])))
    assert buffer.sample(2, torch.Generator().manual_seed(0)).state_keys is None
    assert "state_keys" not in buffer.state_dict()


def test_state_keys_stay_out_of_the_state_dict_and_are_set_again():
    memory = make_episodic_memory("saem", state_dim=S, n_agents=A)
    buffer = make_buffer(memory.proj_dim)
    buffer.insert(with_keys(memory, make_batch([3, 6, 2])))
    state = buffer.state_dict()
    assert "state_keys" not in state  # a function of the states and V: checkpoints of older versions load alike
    restored = make_buffer(memory.proj_dim)
    restored.load_state_dict(state)
    restored.set_state_keys(torch.from_numpy(memory.slot_state_keys(restored.stored()).view(np.int32)))
    assert restored.data.state_keys is not None and buffer.data.state_keys is not None
    assert torch.equal(restored.data.state_keys, buffer.data.state_keys)
    assert restored.nbytes == buffer.nbytes


def test_memory_cost_counts_the_buffers_state_keys():
    from semzoo.episodic.cost import state_keys_bytes

    capacity_slots = 4 * (T + 1)
    assert make_buffer(4).nbytes - make_buffer(0).nbytes == state_keys_bytes(capacity_slots, 4)
