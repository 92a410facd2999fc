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


def junk_padded(batch: EpisodeBatch) -> EpisodeBatch:
    """``batch`` with its padding full of junk, as a collection leaves it (finished envs keep stepping)."""
    junk = {}
    for name, value in batch.tensors().items():
        if name in ("length", "filled"):
            continue
        slots = value.shape[1]
        real = torch.arange(slots)[None] <= batch.length[:, None] if slots == batch.max_t + 1 else batch.filled
        real = real.view(*real.shape, *[1] * (value.dim() - 2))
        fill = torch.ones_like(value) if value.dtype == torch.bool else torch.full_like(value, 7)
        junk[name] = torch.where(real, value, fill)
    return dataclasses.replace(batch, **junk)


def test_padding_is_stored_as_zeros_whatever_the_batch_held():
    buffer = make_buffer(0)
    buffer.insert(junk_padded(make_batch([2, 5])))
    clean = make_buffer(0)
    clean.insert(make_batch([2, 5]))  # make_batch pads with random values too, but only where real
    stored = buffer.stored()
    assert not stored.obs[0, 3:].any() and not stored.state[0, 3:].any() and not stored.avail[0, 3:].any()
    assert not stored.actions[0, 2:].any() and not stored.reward[0, 2:].any() and not stored.terminated[0, 2:].any()
    for name, value in clean.stored().tensors().items():
        assert torch.equal(value, getattr(stored, name)), name


@pytest.mark.parametrize("key_words", [0, 4])
def test_the_packed_state_dict_holds_only_real_slots_and_restores_the_buffer_exactly(key_words):
    memory = make_episodic_memory("sem", state_dim=S, n_agents=A) if key_words else None
    buffer = make_buffer(memory.proj_dim if memory else 0)
    for seed, lengths in enumerate([[3, 6], [2, 4], [5, 1]]):  # wraps: slot 0 and 1 overwritten by shorter episodes
        batch = junk_padded(make_batch(lengths, seed))
        buffer.insert(with_keys(memory, batch) if memory else batch)
    state = buffer.state_dict()
    lengths = buffer.data.length[: buffer.size]
    assert state["obs"].shape == (int((lengths + 1).sum()), A, O)
    assert state["actions"].shape == (int(lengths.sum()), A) and "filled" not in state
    restored = make_buffer(memory.proj_dim if memory else 0)
    restored.load_state_dict(state)
    if memory:
        restored.set_state_keys(torch.from_numpy(memory.slot_state_keys(restored.stored()).view(np.int32)))
    for name, value in buffer.data.tensors().items():
        assert torch.equal(value, getattr(restored.data, name)), name
    assert (restored.insert_pos, restored.size) == (buffer.insert_pos, buffer.size)
    generator = torch.Generator().manual_seed(3)
    want = buffer.sample(3, generator).tensors()
    generator.manual_seed(3)
    assert all(torch.equal(value, want[name]) for name, value in restored.sample(3, generator).tensors().items())


def test_the_padded_state_dict_of_older_checkpoints_still_loads():
    buffer = make_buffer(0)
    buffer.insert(make_batch([3, 6, 2]))
    size = buffer.size
    legacy = {"insert_pos": buffer.insert_pos, "size": size,  # before 0.3: each field's first `size` slots, padded
              **{name: value[:size].clone() for name, value in buffer.data.tensors().items()}}
    restored = make_buffer(0)
    restored.load_state_dict(legacy)
    for name, value in buffer.data.tensors().items():
        assert torch.equal(value, getattr(restored.data, name)), name
