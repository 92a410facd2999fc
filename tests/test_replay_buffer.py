"""The replay buffer keeps each slot's episodic state keys beside its state (projected once, at store time)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from semzoo.episodic.sem import make_episodic_memory
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
    assert restored.nbytes <= buffer.nbytes  # restored compacted, oldest first


def test_memory_cost_counts_the_buffers_state_keys():
    from semzoo.episodic.cost import state_keys_bytes

    worst_slots = make_buffer(0).worst_slots
    assert make_buffer(4).worst_case_nbytes - make_buffer(0).worst_case_nbytes == state_keys_bytes(worst_slots, 4)


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


class PaddedReference:
    """The padded layout the buffer replaced: every episode at ``T`` steps, overwritten oldest first (0.3)."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.episodes: list[EpisodeBatch | None] = [None] * capacity

    def insert(self, batch: EpisodeBatch) -> None:
        for i in range(batch.batch_size):
            one = batch.index(slice(i, i + 1))
            length = int(one.length[0])
            padded = {}
            for name, value in one.tensors().items():
                if name == "length":
                    padded[name] = value
                    continue
                slots = T + 1 if value.shape[1] == batch.max_t + 1 else T
                full = torch.zeros((1, slots, *value.shape[2:]), dtype=value.dtype)
                keep = length + 1 if slots == T + 1 else length
                full[:, :keep] = value[:, :keep]
                padded[name] = full
            self.episodes[self.pos] = EpisodeBatch(**padded)
            self.pos = (self.pos + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> EpisodeBatch:
        idx = torch.randperm(self.size, generator=generator)[:batch_size]
        chosen = [self.episodes[int(i)] for i in idx]
        stacked = {name: torch.cat([getattr(e, name) for e in chosen]) for name in chosen[0].tensors()}
        t = int(stacked["length"].max())
        return EpisodeBatch(**{name: value if name == "length" else value[:, : t + 1 if value.shape[1] == T + 1 else t]
                               for name, value in stacked.items()})


@pytest.mark.parametrize("seed", range(6))
def test_samples_equal_the_padded_layouts_for_random_lengths_and_eviction(seed):
    rng = torch.Generator().manual_seed(100 + seed)
    capacity = int(torch.randint(3, 9, (1,), generator=rng))
    memory = make_episodic_memory("sem", state_dim=S, n_agents=A) if seed % 2 else None
    buffer = EpisodeReplayBuffer(capacity=capacity, max_t=T, n_agents=A, obs_dim=O, state_dim=S, n_actions=U,
                                 state_key_words=memory.proj_dim if memory else 0)
    reference = PaddedReference(capacity)
    for step in range(40):  # many laps of the ring: wraps, growths, evictions of long and short episodes
        lengths = torch.randint(1, T + 1, (int(torch.randint(1, 4, (1,), generator=rng)),), generator=rng).tolist()
        batch = junk_padded(make_batch(lengths, seed=1000 * seed + step))
        if memory:
            batch = with_keys(memory, batch)
        buffer.insert(batch)
        reference.insert(batch)
        assert len(buffer) == reference.size
        n = min(len(buffer), 3)
        got = buffer.sample(n, torch.Generator().manual_seed(step))
        want = reference.sample(n, torch.Generator().manual_seed(step))
        assert got.tensors().keys() == want.tensors().keys()
        for name, value in want.tensors().items():
            assert getattr(got, name).dtype == value.dtype and torch.equal(getattr(got, name), value), (step, name)
    assert buffer.nbytes <= buffer.worst_case_nbytes


def test_memory_follows_what_was_played():
    short, long = make_buffer(0), make_buffer(0)
    for seed in range(8):
        short.insert(make_batch([1, 1], seed))
        long.insert(make_batch([T, T], seed))
    assert short.nbytes < long.nbytes <= long.worst_case_nbytes
    assert short.n_slots < 1 + 4 * (T + 1) <= long.n_slots <= long.worst_slots  # four episodes at the limit


def test_compact_types_are_lossless_and_samples_keep_their_types():
    buffer = EpisodeReplayBuffer(capacity=4, max_t=T, n_agents=A, obs_dim=O, state_dim=S, n_actions=300)
    batch = dataclasses.replace(make_batch([4, 6]), actions=torch.full((2, 6, A), 299),
                                avail=torch.ones(2, 7, A, 300, dtype=torch.bool))
    buffer.insert(batch)
    assert buffer.store["actions"].dtype == torch.int16 and buffer.store["avail"].dtype == torch.bool
    sample = buffer.sample(2, torch.Generator().manual_seed(0))
    assert sample.actions.dtype == torch.int64 and sample.obs.dtype == torch.float32
    assert int(sample.actions[sample.filled].min()) == 299
    assert make_buffer(0).store["actions"].dtype == torch.uint8


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_lossy_storage_halves_observations_and_states(dtype):
    lossy = EpisodeReplayBuffer(capacity=4, max_t=T, n_agents=A, obs_dim=O, state_dim=S, n_actions=U,
                                store_dtype=dtype)
    exact = make_buffer(0)
    batch = make_batch([T, T])
    lossy.insert(batch)
    exact.insert(batch)
    assert lossy.store["obs"].nbytes * 2 == exact.store["obs"].nbytes
    got = lossy.sample(2, torch.Generator().manual_seed(0))
    want = exact.sample(2, torch.Generator().manual_seed(0))
    assert got.obs.dtype == torch.float32
    torch.testing.assert_close(got.obs, want.obs, rtol=1e-2, atol=1e-2)
    assert not torch.equal(got.obs, want.obs)  # lossy: why it is off by default
    with pytest.raises(ValueError, match="store_dtype='float8'"):
        EpisodeReplayBuffer(capacity=4, max_t=T, n_agents=A, obs_dim=O, state_dim=S, n_actions=U, store_dtype="float8")
