"""Specification of the SEM / SAEM episodic-memory tables and their storage model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semzoo.episodic.cost import paper_storage_bytes, semzoo_storage_bytes, storage_comparison
from semzoo.episodic.hash_table import BUCKET_SLOTS
from semzoo.episodic.returns import discounted_returns
from semzoo.episodic.sem import EpisodicMemory, SAEMTable, SEMTable, make_episodic_memory
from semzoo.types import EpisodeBatch

STATE_DIM = 6
N_AGENTS = 3
GB = 1e9


def make_sem(**kw) -> EpisodicMemory:
    return make_episodic_memory("sem", **{"state_dim": STATE_DIM, "n_agents": N_AGENTS, **kw})


def make_saem(**kw) -> EpisodicMemory:
    return make_episodic_memory("saem", **{"state_dim": STATE_DIM, "n_agents": N_AGENTS, **kw})


def random_states(n: int, seed: int = 0, dim: int = STATE_DIM) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def one_hot_states(n: int) -> np.ndarray:
    """Distinct, easily told apart states: state i has value i + 1 in feature i % F."""
    states = np.zeros((n, STATE_DIM), np.float32)
    states[np.arange(n), np.arange(n) % STATE_DIM] = np.arange(1, n + 1)
    return states


def make_batch(states_BT1F: np.ndarray, reward_BT: np.ndarray, length_B: list[int], n_agents: int = N_AGENTS):
    """EpisodeBatch with the given states and rewards; unused fields zero."""
    n_eps, t_plus_1, _ = states_BT1F.shape
    max_t = t_plus_1 - 1
    filled = np.arange(max_t)[None, :] < np.asarray(length_B)[:, None]
    terminated = np.zeros((n_eps, max_t), bool)
    terminated[np.arange(n_eps), np.asarray(length_B) - 1] = True
    return EpisodeBatch(
        obs=torch.zeros(n_eps, t_plus_1, n_agents, 2),
        state=torch.as_tensor(states_BT1F),
        avail=torch.ones(n_eps, t_plus_1, n_agents, 2, dtype=torch.bool),
        actions=torch.zeros(n_eps, max_t, n_agents, dtype=torch.int64),
        reward=torch.as_tensor(reward_BT, dtype=torch.float32),
        terminated=torch.as_tensor(terminated),
        filled=torch.as_tensor(filled),
        length=torch.as_tensor(length_B, dtype=torch.int64),
    )


def check_table_invariants(memory: EpisodicMemory) -> None:
    """Every stored key is found where it lies; overflow counters match a recount."""
    table = memory._table
    bucket, slot = np.nonzero(table.meta_NL != 0)
    assert bucket.size == memory.n_entries <= memory.capacity
    keys = table.key_NWL[bucket, :, slot]
    found_bucket, found_slot = table.find(keys)
    np.testing.assert_array_equal(found_bucket, bucket)
    np.testing.assert_array_equal(found_slot, slot)
    probe, step = table._probe(keys)
    overflow = np.zeros(table.n_buckets, np.int64)
    on_path = np.flatnonzero(probe != bucket)
    while on_path.size:
        np.add.at(overflow, probe[on_path], 1)
        probe[on_path] = (probe[on_path] + step[on_path]) % table.n_buckets
        on_path = on_path[probe[on_path] != bucket[on_path]]
    np.testing.assert_array_equal(overflow, table.overflow_N)


# ---------------------------------------------------------------- values


def test_sem_keeps_highest_return():
    memory = make_sem()
    keys = memory.keys(random_states(1))
    for value in (1.0, 3.0, 2.0):
        memory.add(keys, np.array([value]))
    # duplicates inside one add() also take the max
    memory.add(np.repeat(keys, 3, axis=0), np.array([2.5, 2.9, -1.0]))
    values, hit = memory.lookup(keys)
    assert hit.tolist() == [True]
    assert values.tolist() == [3.0]
    assert memory.n_entries == 1


def test_lookup_misses_unknown_states():
    memory = make_sem()
    memory.add(memory.keys(random_states(4, seed=1)), np.arange(4.0))
    values, hit = memory.query(random_states(4, seed=2))
    assert not hit.any()
    assert (values == 0.0).all()


def test_discounted_returns_hand_computed():
    gamma = 0.5
    reward = np.array([[1.0, 2.0, 3.0, np.nan], [4.0, np.nan, np.nan, np.nan]])
    filled = np.array([[True, True, True, False], [True, False, False, False]])
    returns = discounted_returns(reward, filled, gamma)
    expected = [[1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0]]
    np.testing.assert_allclose(returns, expected)


def test_update_from_writes_discounted_returns_per_step():
    gamma = 0.9
    states = one_hot_states(4).reshape(1, 4, STATE_DIM)  # T = 3 steps + next slot
    reward = np.array([[1.0, 0.0, 2.0]])
    memory = make_sem(gamma=gamma, pending_size=1)
    memory.update_from(make_batch(states, reward, [3]))
    values, hit = memory.query(states[0, :3])
    assert hit.all()
    np.testing.assert_allclose(values, [1 + 0.81 * 2, 0.9 * 2, 2.0], rtol=1e-6)


def test_padding_and_terminal_next_slots_never_written():
    max_t = 4
    states = one_hot_states(2 * (max_t + 1)).reshape(2, max_t + 1, STATE_DIM)
    reward = np.ones((2, max_t))
    reward[0, 2:] = np.nan  # padding may hold anything
    memory = make_sem(pending_size=1)
    memory.update_from(make_batch(states, reward, [2, max_t]))
    assert memory.n_entries == 2 + max_t
    _, hit_real = memory.query(np.concatenate([states[0, :2], states[1, :max_t]]))
    assert hit_real.all()
    # episode 0: slot 2 is the state after the last step, 3-4 padding; episode 1: slot 4 follows its last step
    _, hit_never = memory.query(np.concatenate([states[0, 2:], states[1, max_t:]]))
    assert not hit_never.any()


# ---------------------------------------------------------------- pending set M


def test_pending_set_flushes_at_pending_size():
    states = one_hot_states(2 * 4).reshape(2, 4, STATE_DIM)
    memory = make_sem(pending_size=5)
    memory.update_from(make_batch(states[:1], np.ones((1, 3)), [3]))
    assert (memory.pending_steps, memory.n_entries) == (3, 0)
    memory.update_from(make_batch(states[1:], np.ones((1, 3)), [2]))
    assert (memory.pending_steps, memory.n_entries) == (0, 5)


def test_flush_forces_pending_into_table():
    states = one_hot_states(4).reshape(1, 4, STATE_DIM)
    memory = make_sem(pending_size=100)
    memory.update_from(make_batch(states, np.ones((1, 3)), [3]))
    assert memory.n_entries == 0
    memory.flush()
    assert (memory.pending_steps, memory.n_entries) == (0, 3)


def test_pending_set_deduplicates_with_max():
    # the same state visited twice in M keeps the larger return
    states = np.stack([one_hot_states(2)[[0, 0]], one_hot_states(2)[[1, 1]]]).reshape(2, 2, STATE_DIM)
    states = np.concatenate([states, states[:, :1]], axis=1)
    memory = make_sem(gamma=1.0, pending_size=1000)
    memory.update_from(make_batch(states, np.array([[1.0, 5.0], [2.0, 1.0]]), [2, 2]))
    memory.flush()
    values, hit = memory.query(one_hot_states(2))
    assert hit.all()
    assert values.tolist() == [6.0, 3.0]


# ---------------------------------------------------------------- capacity and eviction


def test_capacity_never_exceeded():
    memory = make_sem(capacity=50)
    for seed in range(10):
        memory.add(memory.keys(random_states(30, seed=seed)), np.ones(30))
        assert memory.n_entries <= 50
    assert memory.n_entries == 50
    check_table_invariants(memory)


def test_eviction_removes_least_frequently_accessed():
    memory = make_sem(capacity=3)
    a, b, c, d = memory.keys(one_hot_states(4))[:, None, :]
    for key in (a, b, c):
        memory.add(key, np.ones(1))
    memory.lookup(np.concatenate([a, c]))  # a and c read once more than b
    memory.add(d, np.ones(1))
    _, hit = memory.lookup(np.concatenate([a, b, c, d]))
    assert hit.tolist() == [True, False, True, True]


def test_eviction_ties_broken_by_age_oldest_first():
    memory = make_sem(capacity=3)
    a, b, c, d, e = memory.keys(one_hot_states(5))[:, None, :]
    for key in (a, b, c, d):
        memory.add(key, np.ones(1))
    _, hit = memory.lookup(np.concatenate([b, c, d]))
    assert hit.all()  # a, the oldest, went first
    memory.add(e, np.ones(1))  # b, c, d tie at two accesses: b, the oldest, goes
    _, hit = memory.lookup(np.concatenate([a, b, c, d, e]))
    assert hit.tolist() == [False, False, True, True, True]


def test_writes_count_as_accesses():
    memory = make_sem(capacity=2)
    a, b, c = memory.keys(one_hot_states(3))[:, None, :]
    memory.add(a, np.ones(1))
    memory.add(b, np.ones(1))
    memory.add(a, np.zeros(1))  # a written twice, b once
    memory.add(c, np.ones(1))
    _, hit = memory.lookup(np.concatenate([a, b, c]))
    assert hit.tolist() == [True, False, True]


def test_age_renumbering_keeps_eviction_order():
    memory = make_sem(capacity=3)
    a, b, c, d = memory.keys(one_hot_states(4))[:, None, :]
    for key in (a, b, c):
        memory.add(key, np.ones(1))
    memory._table.tick = 1 << 30  # simulate many add() calls
    memory._table.renumber_ages()
    assert memory._table.tick == 3
    memory.add(d, np.ones(1))
    _, hit = memory.lookup(np.concatenate([a, b, c, d]))
    assert hit.tolist() == [False, True, True, True]


def test_every_stored_key_is_found_after_heavy_eviction():
    memory = make_sem(capacity=2000)
    rng = np.random.default_rng(3)
    for seed in range(12):
        keys = memory.keys(random_states(700, seed=seed))
        memory.add(keys, rng.standard_normal(700))
        memory.lookup(keys[: 100 * (seed % 3)])
    check_table_invariants(memory)
    assert memory.n_entries == 2000


def test_more_new_keys_than_capacity_keep_highest_returns():
    memory = make_sem(capacity=BUCKET_SLOTS)
    keys = memory.keys(random_states(3 * BUCKET_SLOTS))
    returns = np.arange(3 * BUCKET_SLOTS, dtype=np.float32)
    memory.add(keys, returns)
    _, hit = memory.lookup(keys)
    assert hit.tolist() == [False] * 2 * BUCKET_SLOTS + [True] * BUCKET_SLOTS


# ---------------------------------------------------------------- keys


def test_keys_bit_identical_alone_and_in_batch():
    memory = make_sem(state_dim=120)
    states = random_states(5000, seed=7, dim=120)
    one = states[1234]
    batch_keys = memory.keys(states)
    np.testing.assert_array_equal(memory.keys(one[None])[0], batch_keys[1234])
    np.testing.assert_array_equal(memory.keys(one), batch_keys[1234])
    # non-contiguous and transposed layouts, torch input, float64 input, extra leading axes
    transposed = np.ascontiguousarray(states.T).T
    assert not transposed.flags.c_contiguous
    np.testing.assert_array_equal(memory.keys(transposed), batch_keys)
    np.testing.assert_array_equal(memory.keys(states[::-1])[::-1], batch_keys)
    np.testing.assert_array_equal(memory.keys(torch.as_tensor(states)), batch_keys)
    np.testing.assert_array_equal(memory.keys(states.astype(np.float64)), batch_keys)
    np.testing.assert_array_equal(memory.keys(states.reshape(50, 100, 120)).reshape(5000, -1), batch_keys)


def test_keys_are_the_float32_projection():
    memory = make_sem()
    states = random_states(10)
    phi = memory.keys(states).view(np.float32)
    np.testing.assert_allclose(phi, states @ memory.projection_DF.T, rtol=1e-5, atol=1e-5)
    assert memory.projection_DF.shape == (4, STATE_DIM)


def test_projection_depends_on_seed_only():
    np.testing.assert_array_equal(make_sem(seed=3).projection_DF, make_sem(seed=3).projection_DF)
    assert not np.array_equal(make_sem(seed=3).projection_DF, make_sem(seed=4).projection_DF)


def test_saem_distinguishes_joint_actions_in_same_state():
    memory = make_saem()
    state = np.repeat(random_states(1), 2, axis=0)
    actions = np.array([[0, 1, 2], [1, 0, 2]])
    keys = memory.keys(state, actions)
    assert not np.array_equal(keys[0], keys[1])
    memory.add(keys, np.array([1.0, 2.0]))
    assert memory.n_entries == 2
    values, hit = memory.query(state, actions)
    assert hit.all()
    assert values.tolist() == [1.0, 2.0]
    _, hit = memory.query(state[:1], np.array([[2, 1, 0]]))
    assert not hit.any()


def test_saem_update_from_keys_each_step_by_its_joint_action():
    states = one_hot_states(3).reshape(1, 3, STATE_DIM)
    batch = make_batch(states, np.array([[1.0, 1.0]]), [2])
    batch.actions = torch.tensor([[[0, 1, 2], [3, 4, 5]]])
    memory = make_saem(gamma=1.0, pending_size=1)
    memory.update_from(batch)
    values, hit = memory.query(states[0, :2], batch.actions[0])
    assert hit.all()
    assert values.tolist() == [2.0, 1.0]
    _, hit = memory.query(states[0, :2], batch.actions[0].flip(0))
    assert not hit.any()


def test_sem_ignores_action_in_key():
    memory = make_sem()
    state = random_states(1)
    memory.add(memory.keys(state), np.array([1.0]))
    memory.add(memory.keys(state), np.array([4.0]))
    assert memory.n_entries == 1


# ---------------------------------------------------------------- persistence


def test_state_dict_round_trip_same_lookups_and_evictions(tmp_path):
    for factory in (make_sem, make_saem):
        memory = factory(capacity=40, pending_size=1000, seed=5)
        rng = np.random.default_rng(0)
        actions = None if memory.kind == "sem" else rng.integers(0, 5, (60, N_AGENTS))
        memory.add(memory.keys(random_states(60), actions), rng.standard_normal(60))
        memory.query(random_states(60)[:25], None if actions is None else actions[:25])
        memory.update_from(make_batch(random_states(8, seed=9).reshape(2, 4, STATE_DIM), np.ones((2, 3)), [3, 2]))
        np.savez(tmp_path / "memory.npz", **memory.state_dict())
        restored = factory(capacity=40, pending_size=1000, seed=5)
        restored.load_state_dict(dict(np.load(tmp_path / "memory.npz")))
        assert restored.pending_steps == memory.pending_steps == 5
        probe_states = random_states(80)
        probe_actions = None if actions is None else np.concatenate([actions, actions[:20]])
        # lookups count accesses, so both go through the same sequence
        for mem in (memory, restored):
            mem.flush()
            mem.add(mem.keys(random_states(30, seed=11), None if actions is None else actions[:30]), np.ones(30))
        v1, h1 = memory.query(probe_states, probe_actions)
        v2, h2 = restored.query(probe_states, probe_actions)
        np.testing.assert_array_equal(h1, h2)
        np.testing.assert_array_equal(v1, v2)
        for name, value in memory.state_dict().items():
            np.testing.assert_array_equal(np.asarray(value), np.asarray(restored.state_dict()[name]), err_msg=name)


def test_load_state_dict_rejects_other_config():
    state = make_sem(capacity=40).state_dict()
    with pytest.raises(ValueError, match="capacity"):
        make_sem(capacity=41).load_state_dict(state)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("capacity", [0, -5])
def test_nonpositive_capacity_raises(capacity):
    with pytest.raises(ValueError, match="capacity"):
        make_sem(capacity=capacity)


def test_wrong_state_width_names_both_shapes():
    memory = make_sem()
    with pytest.raises(ValueError, match=r"\(7, 5\).*\[\.\.\., 6\]"):
        memory.keys(np.zeros((7, 5), np.float32))


def test_unknown_kind_raises():
    with pytest.raises(ValueError, match=r"unknown memory 'nem'.*sem, saem.*register_memory"):
        make_episodic_memory("nem", state_dim=STATE_DIM, n_agents=N_AGENTS)


def test_action_argument_mismatch_raises():
    with pytest.raises(ValueError, match="actions=None"):
        make_sem().keys(random_states(2), np.zeros((2, N_AGENTS), np.int64))
    with pytest.raises(ValueError, match="joint action"):
        make_saem().keys(random_states(2))
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        make_saem().keys(random_states(2), np.zeros((2, 2), np.int64))


def test_add_rejects_non_finite_returns_and_foreign_keys():
    memory = make_sem()
    with pytest.raises(ValueError, match="NaN"):
        memory.add(memory.keys(random_states(1)), np.array([np.nan]))
    with pytest.raises(TypeError, match="uint32"):
        memory.lookup(random_states(1)[:, :4])


def test_factory_builds_both_kinds():
    assert isinstance(make_sem(), SEMTable)
    assert isinstance(make_saem(), SAEMTable)


# ---------------------------------------------------------------- storage


def test_sem_table_at_most_29_bytes_per_entry():
    memory = make_episodic_memory("sem", state_dim=120, n_agents=2, capacity=1_000_000)
    assert memory.nbytes / memory.capacity <= 29.0
    assert memory.nbytes == semzoo_storage_bytes("sem", 2, 70)


def test_semzoo_storage_matches_allocated_bytes():
    for kind, n_agents in (("sem", 3), ("saem", 3), ("saem", 4)):
        memory = make_episodic_memory(kind, state_dim=STATE_DIM, n_agents=n_agents, capacity=5000)
        assert semzoo_storage_bytes(kind, n_agents, 10, capacity=5000) == memory.nbytes


def test_paper_storage_reproduces_reported_figures():
    assert paper_storage_bytes("sem", 2, 70) / GB == pytest.approx(0.029, rel=0.01)
    assert paper_storage_bytes("saem", 2, 70) / GB == pytest.approx(142, rel=0.01)  # 2c_vs_64zg
    assert paper_storage_bytes("saem", 27, 36) / GB == pytest.approx(3e40, rel=0.05)  # 27m_vs_30m
    assert paper_storage_bytes("sem", 27, 36) == paper_storage_bytes("sem", 2, 70)


def test_semzoo_saem_is_one_table_not_one_per_joint_action():
    costs = storage_comparison(27, 36)
    assert costs["semzoo_saem"] < 0.2 * GB
    assert costs["paper_saem"] > 1e40 * GB
    assert costs["semzoo_sem"] <= costs["paper_sem"]


def test_empty_inputs_are_noops():
    memory = make_saem(pending_size=1)
    keys = memory.keys(np.zeros((0, STATE_DIM), np.float32), np.zeros((0, N_AGENTS), np.int64))
    assert keys.shape == (0, memory.key_words)
    memory.add(keys, np.zeros(0))
    values, hit = memory.lookup(keys)
    assert values.shape == hit.shape == (0,)
    batch = make_batch(random_states(8).reshape(2, 4, STATE_DIM), np.ones((2, 3)), [1, 1])
    batch.filled[:] = False
    memory.update_from(batch)
    assert (memory.n_entries, memory.pending_steps) == (0, 0)


@pytest.mark.parametrize("make", [make_sem, make_saem], ids=["sem", "saem"])
def test_slot_state_keys_are_the_keys_of_every_real_slot_and_zero_elsewhere(make):
    memory = make()
    states = random_states(2 * 5, seed=3).reshape(2, 5, STATE_DIM)
    batch = make_batch(states, np.ones((2, 4)), [4, 2])
    slot_keys = memory.slot_state_keys(batch)
    assert slot_keys.dtype == np.uint32 and slot_keys.shape == (2, 5, memory.proj_dim)
    np.testing.assert_array_equal(slot_keys[0], memory.state_keys(states[0]))  # slots 0..4: the steps and s_T
    np.testing.assert_array_equal(slot_keys[1, :3], memory.state_keys(states[1, :3]))
    assert not slot_keys[1, 3:].any()  # past slot length: never read, never projected


@pytest.mark.parametrize("make", [make_sem, make_saem], ids=["sem", "saem"])
def test_update_from_with_stored_slot_keys_writes_the_same_table(make):
    projected, given = make(pending_size=1), make(pending_size=1)
    states = random_states(3 * 5, seed=4).reshape(3, 5, STATE_DIM)
    batch = make_batch(states, np.arange(12.0).reshape(3, 4), [4, 2, 3])
    batch.actions[:] = torch.randint(0, 5, batch.actions.shape, generator=torch.Generator().manual_seed(0))
    projected.update_from(batch)
    given.update_from(batch, given.slot_state_keys(batch))
    for name, value in projected.state_dict().items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(given.state_dict()[name]), err_msg=name)


def test_usage_counts_merges_and_cross_episode_hits_not_self_hits():
    memory = make_sem(pending_size=1)
    states = one_hot_states(4)
    memory.add(memory.keys(states[:3]), np.array([1.0, 2.0, 3.0]))  # three new keys: no merge
    assert memory.metrics()["memory_merge_rate"] == 0.0
    memory.add(memory.keys(states[[0, 3, 3]]), np.array([5.0, 1.0, 2.0]))  # state 0 again; state 3 twice in one call
    assert memory.metrics()["memory_merge_rate"] == pytest.approx(2 / 6)
    # lookups through the update's path: an entry of one visit is a self-hit, of two a cross hit
    batch = make_batch(np.stack([states[[1, 0, 2]], states[[2, 3, 1]]]), np.ones((2, 2), np.float32), [2, 2])
    from semzoo.types import CleanBatch

    clean = CleanBatch.from_batch(batch)
    clean.terminated.zero_()  # query both steps of each episode: s_1 = states 0 / 3 (merged), s_2 = 2 / 1 (single)
    lookup = memory.lookup_batch(clean, None)
    assert lookup.hit_BT.all()
    assert memory.metrics()["memory_cross_hit_rate"] == pytest.approx(2 / 4)
    restored = make_sem(pending_size=1)
    restored.load_state_dict(memory.state_dict())
    assert restored.metrics() == memory.metrics()


def test_merged_flag_leaves_eviction_order_unchanged():
    states = one_hot_states(7)

    def survivors(first_write: list[int]) -> list[bool]:
        memory = make_sem(capacity=4, pending_size=1)
        memory.add(memory.keys(states[first_write]), np.arange(len(first_write), dtype=np.float64))
        memory.add(memory.keys(states[[4, 5, 6]]), np.full(3, 9.0))  # three evictions among equal (count, age)
        return memory.query(states[:7])[1].tolist()

    plain = survivors([0, 1, 2, 3])
    assert sum(plain) == 4
    for twice in range(4):  # each entry merged in turn: the same entries survive
        assert survivors([twice, 0, 1, 2, 3]) == plain, twice
