"""Specification of the batched nearest-key-within-tolerance index (EMC's and EMU's lookup).

Every answer is checked against a brute-force reference: torch.cdist over all
stored keys with the same tolerance rule, written here independently.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import semzoo.episodic.nearest as nearest
import semzoo.episodic.tolerance as tolerance
from semzoo.episodic.eviction import EvictionPolicy
from semzoo.episodic.nearest import NearestIndex
from semzoo.episodic.tolerance import EMC_ATOL, EMC_RTOL, EMU_DELTA, EMU_DELTA_SUPER_HARD, AllClose, ZBox

DIMS = (1, 2, 4, 6)
INSIDE, JUST_INSIDE, AT, JUST_OUTSIDE, OUTSIDE = 0.5, 0.97, 1.0, 1.03, 2.0
"""Offsets as fractions of the tolerance's width; 3 % clears float32 rounding of the planted key (<= 1 %)."""


# ---------------------------------------------------------------- the reference
def brute_force(index: NearestIndex, queries_MD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slot [M] with -1 on a miss, distance [M]): every stored key compared with every query."""
    if not np.flatnonzero(index.occupied_N).size:
        return np.full(queries_MD.shape[0], -1), np.full(queries_MD.shape[0], np.inf)
    parts = [brute_force_chunk(index, queries_MD[i:i + 256]) for i in range(0, queries_MD.shape[0], 256)]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def brute_force_chunk(index: NearestIndex, queries_MD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    slots = np.flatnonzero(index.occupied_N)
    k = torch.from_numpy(index.keys_ND[slots]).double()
    q = torch.from_numpy(np.asarray(queries_MD, np.float32)).double()
    tol = index.tolerance
    diff = (q[:, None, :] - k[None, :, :]).abs()
    if isinstance(tol, AllClose):
        scale = q[:, None, :] if tol.scale_by == "query" else k[None, :, :]
        within = (diff <= tol.atol + tol.rtol * scale.abs()).all(-1)
        space_q, space_k = q, k
    else:
        assert isinstance(tol, ZBox)
        mean = torch.zeros(q.shape[1], dtype=torch.float64) if tol.mean_D is None else torch.from_numpy(tol.mean_D)
        std = torch.ones(q.shape[1], dtype=torch.float64) if tol.std_D is None else torch.from_numpy(tol.std_D)
        space_q, space_k = (q - mean) / std, (k - mean) / std
        within = ((space_q[:, None, :] - space_k[None, :, :]).abs() <= tol.delta).all(-1)
    dist = torch.cdist(space_q, space_k, compute_mode="donot_use_mm_for_euclid_dist")
    dist[~within] = torch.inf
    best = dist.argmin(dim=1)  # first minimum: the lowest slot on a tie (slots ascend)
    best_dist = dist.gather(1, best[:, None])[:, 0]
    slot = np.where(torch.isfinite(best_dist).numpy(), slots[best.numpy()], -1)
    return slot, best_dist.numpy()


def assert_matches_reference(index: NearestIndex, queries_MD: np.ndarray) -> np.ndarray:
    found = index.query(queries_MD)
    slot, dist = brute_force(index, queries_MD)
    np.testing.assert_array_equal(found.hit, slot >= 0)
    np.testing.assert_array_equal(found.slot, slot)
    np.testing.assert_allclose(found.distance[found.hit], dist[slot >= 0], rtol=1e-9, atol=1e-300)
    assert np.isinf(found.distance[~found.hit]).all()
    return found.slot


# ---------------------------------------------------------------- data
def gaussian_keys(n: int, dim: int, seed: int) -> np.ndarray:
    """Keys like an embedder's: Gaussian, a different scale and offset per dimension."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-2, 2, dim)
    return ((rng.standard_normal((n, dim)) + 0.5 * rng.standard_normal(dim)) * scale).astype(np.float32)


def random_keys(n: int, dim: int, seed: int) -> np.ndarray:
    """Keys over six orders of magnitude (rtol then matters) with a different scale per dimension."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-3, 3, size=(n, 1)) * 10.0 ** np.arange(dim)[None, :] / 10 ** (dim // 2)
    return (rng.standard_normal((n, dim)) * scale).astype(np.float32)


def planted(keys: np.ndarray, width_KD: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Queries offset from each key by +-fraction x the tolerance's width, in one random or in every dimension."""
    rng = np.random.default_rng(seed)
    sign = rng.choice([-1.0, 1.0], size=keys.shape)
    mask = np.ones(keys.shape)
    one_dim = rng.random(keys.shape[0]) < 0.5
    mask[one_dim] = 0.0
    mask[one_dim, rng.integers(0, keys.shape[1], int(one_dim.sum()))] = 1.0
    return (keys.astype(np.float64) + sign * mask * fraction * width_KD).astype(np.float32)


def allclose_width(keys: np.ndarray, tol: AllClose) -> np.ndarray:
    return tol.atol + tol.rtol * np.abs(keys.astype(np.float64))


def isolated(keys: np.ndarray, width_KD: np.ndarray) -> np.ndarray:
    """Keys with no other key within 4 widths (a query planted at most 2 widths away then has one neighbour)."""
    k = torch.from_numpy(keys).double()
    w = torch.from_numpy(np.ascontiguousarray(width_KD, np.float64))
    n_close = torch.cat([
        ((k[i:i + 256, None, :] - k[None, :, :]).abs() <= 2 * (w[i:i + 256, None, :] + w[None, :, :])).all(-1).sum(1)
        for i in range(0, k.shape[0], 256)
    ])
    # the planted offset must survive float32 rounding: the key's float32 spacing is under 1 % of the width
    # (EMU's delta 1.3e-5 is about 100 float32 ulps of a key at 1 sigma: keys beyond ~2 sigma are left out)
    fine = (np.spacing(np.abs(keys)) <= 0.02 * width_KD).all(axis=1)
    return np.flatnonzero((n_close.numpy() == 1) & fine)


def query_set(keys: np.ndarray, width_KD: np.ndarray, seed: int) -> dict[float, np.ndarray]:
    rng = np.random.default_rng(seed)
    candidates = isolated(keys, width_KD)
    assert candidates.size >= 50, "too few isolated keys to plant queries around"
    pick = rng.choice(candidates, min(200, candidates.size), replace=False)
    sets = {f: planted(keys[pick], width_KD[pick], f, seed + i) for i, f in enumerate((INSIDE, JUST_INSIDE, AT, JUST_OUTSIDE, OUTSIDE))}
    sets[0.0] = keys[pick]
    return sets


# ---------------------------------------------------------------- EMC's rule
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("scale_by", ["query", "key"])
def test_allclose_lookup_matches_brute_force_at_and_around_the_tolerance(dim, scale_by):
    tol = AllClose(EMC_ATOL, EMC_RTOL, scale_by=scale_by)
    keys = random_keys(2000, dim, seed=dim)
    index = NearestIndex(dim, 4000, tol)
    index.add(keys[:1000])  # two writes: the second lands in the recent run and regrids for larger keys
    index.add(keys[1000:])
    sets = query_set(keys, allclose_width(keys, tol), seed=10 * dim)
    for fraction, queries in sets.items():
        slot = assert_matches_reference(index, queries)
        if fraction <= JUST_INSIDE:
            assert (slot >= 0).all(), f"planted keys at {fraction} of the tolerance must all hit"
        if fraction >= JUST_OUTSIDE:
            assert (slot < 0).all(), f"planted keys at {fraction} of the tolerance must all miss"
    assert_matches_reference(index, random_keys(500, dim, seed=99))


def test_allclose_defaults_are_emcs():
    tol = AllClose()
    assert (tol.atol, tol.rtol, tol.scale_by) == (1e-8, 1e-5, "query")
    # numpy's allclose(stored, key) is the rule EMC's peek applies
    rng = np.random.default_rng(0)
    stored = rng.standard_normal((2000, 4))
    key = stored * (1 + rng.choice([-1, 1], size=stored.shape) * rng.uniform(0.5e-5, 1.5e-5, size=stored.shape))
    expected = np.array([np.allclose(s, k, rtol=1e-5, atol=1e-8) for s, k in zip(stored, key)])
    assert 0 < expected.sum() < expected.size
    np.testing.assert_array_equal(tol.within(key, stored), expected)


# ---------------------------------------------------------------- EMU's rule
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("delta", [EMU_DELTA, EMU_DELTA_SUPER_HARD])
@pytest.mark.parametrize("statistics", ["supplied", "fitted"])
def test_zbox_lookup_matches_brute_force_at_and_around_the_tolerance(dim, delta, statistics):
    keys = gaussian_keys(150 if dim == 1 else 2000, dim, seed=dim + 7)  # in 1-D, 2000 keys crowd a 1.3e-3 box
    rng = np.random.default_rng(dim)
    if statistics == "supplied":
        spread = keys.astype(np.float64).std(0)
        tol = ZBox(delta, mean_D=spread * rng.standard_normal(dim), std_D=spread * 10.0 ** rng.uniform(0, 0.5, dim))
        index = NearestIndex(dim, 3000, tol)
        index.add(keys)
    else:
        tol = ZBox(delta)
        index = NearestIndex(dim, 3000, tol)
        index.add(keys)
        index.fit_normalisation()
        np.testing.assert_allclose(tol.mean_D, keys.astype(np.float64).mean(0))
        np.testing.assert_allclose(tol.std_D, keys.astype(np.float64).std(0))
    assert tol.std_D is not None
    width = np.broadcast_to(delta * tol.std_D, keys.shape)
    for fraction, queries in query_set(keys, width, seed=dim).items():
        slot = assert_matches_reference(index, queries)
        if fraction <= JUST_INSIDE:
            assert (slot >= 0).all()
        if fraction >= JUST_OUTSIDE:
            assert (slot < 0).all()


def test_zbox_refit_changes_the_box_and_the_answers():
    tol = ZBox(0.1)
    index = NearestIndex(2, 100, tol)
    index.add(np.array([[0.0, 0.0], [10.0, 0.0]], np.float32))  # mean 0 -> 5, std 1 -> 5 in dimension 0
    query = np.array([[0.3, 0.0]], np.float32)
    assert not index.query(query).hit[0]  # unfitted: mu 0, sigma 1, |0.3| > 0.1
    index.fit_normalisation()
    assert index.query(query).slot[0] == 0  # sigma 5: 0.3 / 5 = 0.06 <= 0.1
    assert_matches_reference(index, query)
    index.set_normalisation([0.0, 0.0], [1.0, 1.0])
    assert not index.query(query).hit[0]


def test_zbox_constant_dimension_is_an_exact_match():
    index = NearestIndex(2, 10, ZBox(EMU_DELTA))
    index.add(np.array([[1.0, 3.0], [2.0, 3.0]], np.float32))
    index.fit_normalisation()  # dimension 1 has std 0: normalised by MIN_STD
    found = index.query(np.array([[1.0, 3.0], [1.0, 3.0 + 1e-6]], np.float32))
    np.testing.assert_array_equal(found.hit, [True, False])


# ---------------------------------------------------------------- nearest, ties, empty
def test_nearest_of_several_hits_wins_and_ties_go_to_the_lowest_slot():
    index = NearestIndex(2, 10, ZBox(1.0, mean_D=[0, 0], std_D=[1, 1]))
    index.add(np.array([[0.5, 0.0], [0.25, 0.0], [-0.25, 0.0], [0.25, 0.0]], np.float32))
    found = index.query(np.array([[0.0, 0.0], [0.3, 0.0], [0.25, 0.0]], np.float32))
    # 0: slots 1 and 2 both at 0.25 (and slot 3 too): the lowest, 1; 1: slot 1 (0.05) beats slot 0 (0.2)
    np.testing.assert_array_equal(found.slot, [1, 1, 1])
    np.testing.assert_allclose(found.distance, [0.25, 0.05, 0.0], atol=1e-7)
    assert_matches_reference(index, np.array([[0.0, 0.0], [0.3, 0.0], [0.25, 0.0]], np.float32))


def test_empty_index_misses_everything():
    index = NearestIndex(4, 10)
    found = index.query(np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(found.slot, [-1, -1, -1])
    assert not found.hit.any() and np.isinf(found.distance).all()
    assert index.query(np.zeros((0, 4), np.float32)).slot.shape == (0,)
    index.add(np.ones((2, 4), np.float32))
    index.remove([0, 1])
    assert not index.query(np.ones((1, 4), np.float32)).hit[0]


# ---------------------------------------------------------------- removal, eviction, rebuild
@pytest.mark.parametrize("merge_after", [64, nearest.RECENT_MAX])
def test_removed_keys_are_not_found_and_slots_are_reused(monkeypatch, merge_after):
    monkeypatch.setattr(nearest, "RECENT_MAX", merge_after)  # 64: the main table is rebuilt, stale entries dropped
    keys = random_keys(2000, 4, seed=3)
    index = NearestIndex(4, 2000)
    index.add(keys[:100])
    index.add(keys[100:])  # 1900 in the recent run, or merged
    gone = np.random.default_rng(0).choice(2000, 1000, replace=False)
    index.remove(gone[:500])
    index.remove(gone[500:])
    assert index.n_entries == 1000
    slot = assert_matches_reference(index, keys)
    assert (slot[gone] == -1).all() and (slot[np.setdiff1d(np.arange(2000), gone)] >= 0).all()
    fresh = random_keys(1000, 4, seed=4)
    new_slots = index.add(fresh)
    assert set(new_slots.tolist()) == set(gone.tolist())
    assert_matches_reference(index, np.concatenate([keys, fresh]))


def test_lru_eviction_drops_the_least_recently_used_entries():
    index = NearestIndex(1, 4)
    keys = np.arange(4, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(index.add(keys), [0, 1, 2, 3])
    index.touch([0, 2])  # order of use now: 1, 3, 0, 2
    slots = index.add(np.array([[10.0], [11.0]], np.float32))
    np.testing.assert_array_equal(slots, [1, 3])
    found = index.query(np.array([[0.0], [1.0], [2.0], [3.0], [10.0], [11.0]], np.float32))
    np.testing.assert_array_equal(found.slot, [0, -1, 2, -1, 1, 3])
    assert_matches_reference(index, keys)


def test_full_index_without_eviction_refuses_a_write():
    index = NearestIndex(2, 3, eviction=None)
    index.add(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="full"):
        index.add(np.ones((1, 2), np.float32))


def test_a_custom_eviction_policy_chooses_the_victims():
    class EvictHighestSlot(EvictionPolicy):
        def reset(self, capacity):
            pass

        def used(self, slots_K):
            pass

        def victims(self, n, candidate_N):
            return np.flatnonzero(candidate_N)[::-1][:n]

    index = NearestIndex(1, 3, eviction=EvictHighestSlot())
    index.add(np.array([[0.0], [1.0], [2.0]], np.float32))
    np.testing.assert_array_equal(index.add(np.array([[5.0]], np.float32)), [2])


def test_rebuild_after_re_embedding_finds_new_keys_only():
    keys = gaussian_keys(1500, 4, seed=5)
    index = NearestIndex(4, 1500, ZBox(EMU_DELTA_SUPER_HARD))
    index.add(keys)
    index.fit_normalisation()
    slots = index.slots()
    new_keys = (keys * 3.0 + 1.0).astype(np.float32)  # an embedder retrained: every key moves
    index.rebuild(new_keys, slots)
    index.fit_normalisation()
    slot = assert_matches_reference(index, new_keys)
    np.testing.assert_array_equal(slot, slots)
    assert_matches_reference(index, keys)


def test_set_keys_moves_entries_and_keeps_their_slots():
    index = NearestIndex(2, 10)
    index.add(np.array([[0.0, 0.0], [1.0, 1.0]], np.float32))
    index.set_keys([1], np.array([[5.0, 5.0]], np.float32))
    found = index.query(np.array([[1.0, 1.0], [5.0, 5.0]], np.float32))
    np.testing.assert_array_equal(found.slot, [-1, 1])


def test_keys_far_beyond_the_grid_regrid_and_stay_correct():
    index = NearestIndex(2, 100)
    index.add(np.full((1, 2), 1e-9, np.float32))  # a grid of ~1e-7 cells
    big = random_keys(50, 2, seed=8) * 1e3
    index.add(big)
    assert_matches_reference(index, np.concatenate([big, planted(big, allclose_width(big, AllClose()), 0.5, 1)]))


@pytest.mark.parametrize("max_probes", [1, nearest.MAX_PROBES])
def test_boxes_over_too_many_cells_compare_with_every_key(monkeypatch, max_probes):
    monkeypatch.setattr(nearest, "MAX_PROBES", max_probes)
    # rtol 0.5: a query at 1e3 spans the whole grid of keys in [0, 1]
    index = NearestIndex(2, 2000, AllClose(atol=0.0, rtol=0.5))
    keys = np.random.default_rng(0).random((1500, 2)).astype(np.float32)
    index.add(keys)
    queries = np.concatenate([keys[:100] * 1.2, np.array([[1e3, 1e3], [0.9, 0.9]], np.float32)])
    assert_matches_reference(index, queries)


# ---------------------------------------------------------------- the write path
def one_at_a_time(tol, stored: np.ndarray, keys: np.ndarray) -> list[int]:
    """Reference write loop: each key joins its nearest entry within tolerance, or becomes a new entry."""
    index = NearestIndex(keys.shape[1], stored.shape[0] + keys.shape[0], tol)
    index.add(stored) if stored.size else None
    out = []
    for key in keys:
        slot, _ = brute_force(index, key[None])
        out.append(int(slot[0]) if slot[0] >= 0 else int(index.add(key[None])[0]))
    return out


def test_find_or_add_writes_as_one_key_at_a_time_would():
    rng = np.random.default_rng(1)
    tol = ZBox(0.1, mean_D=[0, 0], std_D=[1, 1])
    stored = rng.random((30, 2)).astype(np.float32) * 10
    # revisited states: exact repeats, repeats of stored keys, chains of keys 0.08 apart
    chain = np.array([[20.0, 20.0], [20.08, 20.0], [20.16, 20.0], [20.24, 20.0]], np.float32)
    keys = np.concatenate([stored[:5], chain, chain[::-1], rng.random((20, 2)).astype(np.float32) * 10 + 30, stored[:3]])
    keys = keys[rng.permutation(keys.shape[0])]
    index = NearestIndex(2, 200, tol)
    index.add(stored)
    slots, added = index.find_or_add(keys)
    assert slots.tolist() == one_at_a_time(tol, stored, keys)
    assert added.sum() == index.n_entries - 30
    assert_matches_reference(index, keys)


def test_find_or_add_never_evicts_an_entry_it_hits():
    index = NearestIndex(1, 3)
    index.add(np.array([[0.0], [1.0], [2.0]], np.float32))
    slots, added = index.find_or_add(np.array([[0.0], [7.0]], np.float32))
    # slot 0 is the least recently used, but this write hits it: slot 1 goes instead
    np.testing.assert_array_equal(slots, [0, 1])
    np.testing.assert_array_equal(added, [False, True])


# ---------------------------------------------------------------- checkpoints, size, input errors
@pytest.mark.parametrize("tol", [AllClose(), ZBox(EMU_DELTA_SUPER_HARD)])
def test_state_dict_round_trip_gives_the_same_answers_slots_and_victims(tmp_path, tol):
    keys = random_keys(1500, 4, seed=11)
    index = NearestIndex(4, 1200, tol)
    index.add(keys[:1200])
    index.remove(np.arange(0, 1200, 7))
    index.fit_normalisation()
    index.touch(index.slots()[1:100:2])
    torch.save(index.state_dict(), tmp_path / "index.pt")
    restored = NearestIndex(4, 1200, type(tol)())
    restored.load_state_dict(torch.load(tmp_path / "index.pt", weights_only=False))
    probe = np.concatenate([keys, random_keys(100, 4, seed=12)])
    a, b = index.query(probe), restored.query(probe)
    np.testing.assert_array_equal(a.slot, b.slot)
    np.testing.assert_array_equal(a.distance, b.distance)
    # the next writes take the same free slots, then evict the same entries
    np.testing.assert_array_equal(index.add(keys[1200:]), restored.add(keys[1200:]))
    assert_matches_reference(restored, probe)


def test_state_dict_refuses_another_shape():
    with pytest.raises(ValueError, match="capacity"):
        NearestIndex(4, 20).load_state_dict(NearestIndex(4, 10).state_dict())


def test_nbytes_counts_the_arrays():
    index = NearestIndex(4, 1000)
    empty = index.nbytes
    assert empty >= 1000 * (4 * 4 + 1 + 8 + 4 + 8)  # keys, occupancy, cell hash, free stack, LRU ticks
    index.add(random_keys(1000, 4, seed=0))
    assert index.nbytes >= empty + 1000 * (8 + 4)  # plus the sorted run: hash and slot


def test_bad_input_names_the_problem():
    index = NearestIndex(4, 10)
    with pytest.raises(ValueError, match=r"expected \[K, 4\]"):
        index.query(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="not finite"):
        index.add(np.full((1, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="holds no entry"):
        index.remove([3])
    with pytest.raises(ValueError, match="rtol"):
        AllClose(rtol=1.5)
    with pytest.raises(ValueError, match="eviction"):
        NearestIndex(4, 10, eviction="fifo")


def test_torch_tensors_are_accepted():
    index = NearestIndex(4, 10)
    keys = torch.randn(3, 4)
    index.add(keys)
    np.testing.assert_array_equal(index.query(keys).slot, [0, 1, 2])


@pytest.mark.parametrize("path", ["corner cells", "mixed-radix cells", "every key"])
@pytest.mark.parametrize("cell_per_width", [0.5, 8.0])
def test_every_probe_path_gives_the_brute_force_answers(monkeypatch, path, cell_per_width):
    # cells narrower than a box (0.5) make queries span up to 5 cells per dimension
    monkeypatch.setattr(tolerance, "CELL_PER_WIDTH", cell_per_width)
    if path != "corner cells":
        monkeypatch.setattr(nearest, "MAX_CORNER_DIM", 0)
    if path == "every key":
        monkeypatch.setattr(nearest, "MAX_PROBES", 0)
    keys = random_keys(1500, 3, seed=21)
    tol = AllClose()
    index = NearestIndex(3, 1500, tol)
    index.add(keys)
    for queries in query_set(keys, allclose_width(keys, tol), seed=22).values():
        assert_matches_reference(index, queries)


@pytest.mark.parametrize("tol", [AllClose(), ZBox(EMU_DELTA)], ids=["allclose", "zbox"])
def test_keys_of_many_dimensions_take_the_general_probe_path(tol):
    """Past MAX_CORNER_DIM (8) no 2^D corner table is built: 70-dimensional keys (a raw state as key) still match."""
    keys = gaussian_keys(500, 70, seed=3)
    index = NearestIndex(70, 600, tol)
    index.add(keys)
    index.fit_normalisation()
    queries = np.concatenate([keys[:100], gaussian_keys(100, 70, seed=4)])
    slot = assert_matches_reference(index, queries)
    assert (slot[:100] == np.arange(100)).all() and (slot[100:] < 0).all()
