"""Batched nearest-neighbour lookup within a tolerance: a hash grid over float keys.

EMC (Zheng et al., "Episodic Multi-agent Reinforcement Learning with
Curiosity-driven Exploration", NeurIPS 2021) and EMU (Na et al., "Efficient
Episodic Memory Utilization of Cooperative Multi-Agent Reinforcement
Learning", ICLR 2024) look a state's key up as "the nearest stored key, if it
is close enough". Their public code answers one key at a time with a kd-tree
in a Python loop; this index answers a whole batch with a few array
operations. Design, guarantees and timings: docs/nearest.md, "Nearest key
within a tolerance".

Shapes: N = capacity (slots), D = key size, K = keys given to a write,
M = queries, P = probed cells, C = candidate (query, slot) pairs.

The index stores keys only; a caller keeps its values (returns, visit counts,
raw states) in its own arrays indexed by the slot ids the index hands out. When a stored key answers a query is
the tolerance's rule (semzoo.episodic.tolerance); which entries make room in a full index, the eviction policy's
(semzoo.episodic.eviction).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from semzoo.episodic.eviction import EvictionPolicy, LeastRecentlyUsed
from semzoo.episodic.hash_table import splitmix64
from semzoo.episodic.plans import RECENT_MAX, n_buckets, nearest_index_bytes
from semzoo.episodic.tolerance import (
    EMC_ATOL,
    EMC_RTOL,
    EMU_DELTA,
    EMU_DELTA_SUPER_HARD,
    AllClose,
    Tolerance,
    ZBox,
)

# ---------------------------------------------------------------- grid
REGRID_RATIO = 4.0
"""A write whose keys need cells 4x larger than the grid's re-grids: probes per query stay bounded."""
MAX_CORNER_DIM = 8
"""Up to D = 8 a narrow box's 2^D corner cells are enumerated at once (256 per query)."""
MAX_PROBES = 4096
"""A query whose box covers more cells is compared with every stored key instead (always correct)."""
BRUTE_CHUNK = 1 << 22
"""Candidate pairs per chunk on that brute-force path (bounds its memory)."""
COORD_LIMIT = float(1 << 62)
"""Cell coordinates are clamped here; clamping is monotone, so no candidate is lost."""
WIDTH_SLACK = 1e-6
"""Relative widening of a query's box, and 16 ulps, so float rounding never drops a true hit."""
ULP_SLACK = 2.0 ** -48
"""16 ulps of a float64 relative to its magnitude (an ulp of x is at most |x| 2^-52 for normal x)."""
ULP_FLOOR = 2.0 ** -1070
"""16 ulps of the smallest floats (an ulp of a subnormal is 2^-1074), so the widening holds near zero too."""

_COORD_MULTIPLIERS = np.random.default_rng(0x5E3A).integers(1, 1 << 62, 16, dtype=np.int64).view(np.uint64) | np.uint64(1)
_NO_SLOT = -1


class Nearest(NamedTuple):
    """A batched lookup's answer, one row per query."""

    slot: np.ndarray
    """int64 [M]: the nearest stored key's slot within the tolerance, -1 on a miss."""
    hit: np.ndarray
    """bool [M]: slot >= 0."""
    distance: np.ndarray
    """float64 [M]: L2 distance to that key in the tolerance's space (raw, or z-normalised for ZBox); inf on a miss."""


def _as_keys(keys: Any, dim: int, what: str) -> np.ndarray:
    """float32 [K, D] from a numpy array or torch tensor [K, D]; refuses other shapes and non-finite values."""
    if isinstance(keys, torch.Tensor):
        keys = keys.detach().cpu().numpy()
    array = np.asarray(keys)
    if array.ndim != 2 or array.shape[1] != dim:
        raise ValueError(f"{what} have shape {tuple(array.shape)}, expected [K, {dim}]; reshape them to (-1, {dim})")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
        raise ValueError(f"{what} row {bad} is not finite ({array[bad].tolist()}); keys must be finite floats")
    return array


def _as_slots(slots: Any) -> np.ndarray:
    if isinstance(slots, torch.Tensor):
        slots = slots.detach().cpu().numpy()
    return np.asarray(slots, dtype=np.int64).reshape(-1)


def _linear_hash(coords_DP: np.ndarray) -> np.ndarray:
    """uint64 [P]: sum of int64 cell coordinates [D, P] times fixed odd 64-bit multipliers (wrapping)."""
    h_P = np.zeros(coords_DP.shape[1], np.uint64)
    for d in range(coords_DP.shape[0]):  # D is 4: a loop over dimensions, not keys
        h_P += coords_DP[d].view(np.uint64) * _COORD_MULTIPLIERS[d % _COORD_MULTIPLIERS.shape[0]]
    return h_P


def _corner_offsets(dim: int) -> np.ndarray:
    """uint64 [2^D]: _linear_hash of each corner offset b in {0, 1}^D (bit d of the index is b_d)."""
    bits = (np.arange(1 << dim)[None, :] >> np.arange(dim)[:, None]) & 1
    return _linear_hash(bits.astype(np.int64))


def _hash_cells(coords_PD: np.ndarray) -> np.ndarray:
    """uint64 [P] hash of int64 cell coordinates [P, D]; equal cells hash equal, collisions only add candidates.

    The linear hash, then a splitmix64 finaliser; the 16 multipliers repeat past D = 16.
    """
    return splitmix64(_linear_hash(coords_PD.T))


def _cell_coords(x_MD: np.ndarray, cell_D: np.ndarray) -> np.ndarray:
    """int64 [M, D] cell of each float64 point: floor(x / cell), clamped to +-2^62."""
    return np.clip(np.floor(x_MD / cell_D), -COORD_LIMIT, COORD_LIMIT).astype(np.int64)


def _cell_coords_rows(x_DM: np.ndarray, cell_D: np.ndarray) -> np.ndarray:
    """int64 [D, M]: `_cell_coords` of points given as rows (the same floats, the faster layout)."""
    return np.clip(np.floor(x_DM / cell_D[:, None]), -COORD_LIMIT, COORD_LIMIT).astype(np.int64)


# ---------------------------------------------------------------- the index
class NearestIndex:
    """Fixed-capacity set of float keys [N, D] answering "nearest stored key within the tolerance" for batches.

    A hash grid: each key lives in the cell floor(k / cell) (per dimension).
    The main table lists slots by the low bits of their cell's hash (bucket
    offsets, CSR style); recent writes sit in a small run sorted by hash. A
    query probes every cell its tolerance box overlaps, for the whole batch
    at once: one gather per probe in the main table, a binary search in the
    recent run. Correctness does not depend on the cell size (only the speed
    does), and every candidate is tested with the exact rule.

    `eviction="lru"` (the default) evicts the least recently used entry, as
    EMC and EMU do; any `EvictionPolicy` can take its place, and `None` makes
    a write to a full index an error (the caller then `remove()`s first). Slots are handed out from a free stack
    (0, 1, 2, ... on a fresh index), then from the eviction policy's victims.
    """

    def __init__(
        self,
        dim: int,
        capacity: int,
        tolerance: Tolerance | None = None,
        eviction: EvictionPolicy | str | None = "lru",
    ) -> None:
        if dim < 1 or capacity < 1 or capacity >= 1 << 31:
            raise ValueError(f"dim={dim}, capacity={capacity}: expected dim >= 1 and 1 <= capacity < 2^31")
        self.dim, self.capacity = int(dim), int(capacity)
        self.tolerance: Tolerance = tolerance if tolerance is not None else AllClose()
        if eviction == "lru":
            eviction = LeastRecentlyUsed()
        elif not (eviction is None or isinstance(eviction, EvictionPolicy)):
            raise ValueError(f"eviction={eviction!r}: expected 'lru', None (a full index refuses writes) or an EvictionPolicy")
        self.eviction: EvictionPolicy | None = eviction
        self.keys_ND = np.zeros((capacity, dim), np.float32)
        self.occupied_N = np.zeros(capacity, bool)
        self.cell_hash_N = np.zeros(capacity, np.uint64)
        # free stack: pops from the end, so a fresh index hands out 0, 1, 2, ...
        self.free_F = np.arange(capacity - 1, -1, -1, dtype=np.int32)
        self.n_free = capacity
        self.cell_D: np.ndarray | None = None
        self.coord_min_D = np.full(dim, np.iinfo(np.int64).max)
        self.coord_max_D = np.full(dim, np.iinfo(np.int64).min)
        self.bucket_start = np.zeros(2, np.int32)
        self.main_slot = np.zeros(0, np.int32)
        self.recent_hash, self.recent_slot = np.zeros(0, np.uint64), np.zeros(0, np.int32)
        self._stale = 0
        if self.eviction is not None:
            self.eviction.reset(capacity)

    # ------------------------------------------------------------ size
    @property
    def n_entries(self) -> int:
        return self.capacity - self.n_free

    def __len__(self) -> int:
        return self.n_entries

    @property
    def nbytes(self) -> int:
        """Bytes held: keys, occupancy, cell hashes, free stack, main table and recent run, eviction state."""
        arrays = (self.keys_ND, self.occupied_N, self.cell_hash_N, self.free_F,
                  self.bucket_start, self.main_slot, self.recent_hash, self.recent_slot)
        return sum(a.nbytes for a in arrays) + (self.eviction.nbytes if self.eviction is not None else 0)

    @property
    def settled_nbytes(self) -> int:
        """``nbytes`` with the grid counted as right after a rebuild (every key in the main table, no recent run).

        What a run logs: the recent run depends on when the grid was last rebuilt, and a resumed index rebuilds
        it, so a run resumed from a checkpoint would otherwise log other bytes than one never stopped.
        """
        per_slot = (self.keys_ND, self.occupied_N, self.cell_hash_N, self.free_F)
        listing = 4 * self.n_entries + 4 * (n_buckets(self.n_entries) + 1)
        return sum(a.nbytes for a in per_slot) + listing + (self.eviction.nbytes if self.eviction is not None else 0)

    @staticmethod
    def planned_nbytes(capacity: int, dim: int, *, lru: bool = True) -> int:
        """The most an index of ``capacity`` keys of ``dim`` floats holds (full, its recent run at its largest)."""
        return nearest_index_bytes(capacity, dim, lru=lru)

    def slots(self) -> np.ndarray:
        """int64 [n_entries]: the occupied slots, ascending."""
        return np.flatnonzero(self.occupied_N)

    def keys(self, slots: Any) -> np.ndarray:
        """float32 [K, D]: the keys stored at these slots."""
        return self.keys_ND[self._check_occupied(_as_slots(slots))]

    # ------------------------------------------------------------ queries
    def query(self, queries_MD: Any) -> Nearest:
        """For each query [M, D], the nearest stored key (L2, ties to the lowest slot) among those within tolerance.

        Queries are rounded to float32, as the keys are. Touches nothing:
        call `touch(result.slot[result.hit])` where a read should count for
        eviction.
        """
        queries = _as_keys(queries_MD, self.dim, "queries")
        q_MD = queries.astype(np.float64)
        pair_q, pair_slot, pair_dist = self._pairs(q_MD)
        slot_M = np.full(q_MD.shape[0], _NO_SLOT, np.int64)
        dist_M = np.full(q_MD.shape[0], np.inf)
        if pair_q.size and np.bincount(pair_q, minlength=q_MD.shape[0]).max() == 1:
            slot_M[pair_q], dist_M[pair_q] = pair_slot, pair_dist  # one hit each: nothing to choose
        elif pair_q.size:
            # nearest per query: sort by (query, distance, slot), keep each query's first pair
            order = np.lexsort((pair_slot, pair_dist, pair_q))
            q_sorted = pair_q[order]
            first = np.ones(order.shape[0], bool)
            first[1:] = q_sorted[1:] != q_sorted[:-1]
            slot_M[q_sorted[first]] = pair_slot[order[first]]
            dist_M[q_sorted[first]] = pair_dist[order[first]]
        return Nearest(slot=slot_M, hit=slot_M >= 0, distance=dist_M)

    def _pairs(self, q_MD: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (query, slot) within tolerance: query index [C], slot [C] int64, distance [C] float64."""
        n_queries = q_MD.shape[0]
        if self.n_entries == 0 or n_queries == 0 or self.cell_D is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        # probe planning runs in [D, M] layout: numpy broadcasts a [D] vector over rows much faster than
        # over the short last axis of [M, D], and reductions over D become elementwise operations on rows
        q_DM = np.ascontiguousarray(q_MD.T)
        width_DM = np.ascontiguousarray(self.tolerance.half_width(q_MD).T)
        # widen by a relative slack and 16 ulps: the rule is then evaluated exactly on the candidates
        width_DM = width_DM * (1.0 + WIDTH_SLACK) + (np.abs(q_DM) + width_DM) * ULP_SLACK + ULP_FLOOR
        box = _cell_coords_rows(np.concatenate([q_DM - width_DM, q_DM + width_DM], axis=1), self.cell_D)
        lo_DM = np.maximum(box[:, :n_queries], self.coord_min_D[:, None])
        hi_DM = np.minimum(box[:, n_queries:], self.coord_max_D[:, None])
        # cells per dimension, capped before the product so it cannot overflow
        count_DM = np.clip(hi_DM - lo_DM + 1, 0, MAX_PROBES + 1)
        n_probes_M = count_DM.prod(axis=0)  # at most 4097^D: no overflow for D <= 5
        if self.dim > 5:
            n_probes_M = np.exp(np.log(np.maximum(count_DM, 1)).sum(axis=0)).round().astype(np.int64) * (n_probes_M > 0)
        wide = n_probes_M > MAX_PROBES
        n_probes_M[wide] = 0
        # usual case, a box over at most 2 cells per dimension: the probes are lo + b for b in {0, 1}^D;
        # the hash is linear in the coordinates before its finaliser, so each probe is one addition
        base_M = _linear_hash(lo_DM)
        if self.dim <= MAX_CORNER_DIM:
            corners = (count_DM.max(axis=0) <= 2) & (n_probes_M > 0)
        else:
            corners = np.zeros(n_queries, bool)
        single = np.flatnonzero(corners & (n_probes_M == 1))  # most queries: one cell, its hash is base_M
        several = np.flatnonzero(corners & (n_probes_M > 1))
        if several.size:  # never past D = MAX_CORNER_DIM, so 2^D stays small
            # bit d of `two` is set where the box spans two cells in dimension d (packbits: D <= 8)
            two = np.packbits(count_DM[:, several] == 2, axis=0, bitorder="little")[0].astype(np.int64)
            # each such query probes lo + b for every b whose bits lie within `two`: flat (query, b) pairs
            pair = np.flatnonzero(((np.arange(1 << self.dim)[None, :] & ~two[:, None]) == 0).ravel())
            nth, corner_b = pair >> self.dim, pair & ((1 << self.dim) - 1)
            corner_q = np.concatenate([single, several[nth]])
            corner_hash = np.concatenate([base_M[single],
                                          base_M[several[nth]] + _corner_offsets(self.dim)[corner_b]])
        else:
            corner_q, corner_hash = single, base_M[single]
        # other queries: every cell of their box, decoded as mixed-radix digits
        n_probes_M[corners] = 0
        if n_probes_M.any():
            probe_q = np.repeat(np.arange(n_queries), n_probes_M)
            rest = np.arange(probe_q.shape[0]) - np.repeat(np.cumsum(n_probes_M) - n_probes_M, n_probes_M)
            coords_DP = np.empty((self.dim, probe_q.shape[0]), np.int64)
            for d in range(self.dim):
                digits = count_DM[d, probe_q]
                coords_DP[d] = lo_DM[d, probe_q] + rest % digits
                rest //= digits
            probe_q = np.concatenate([corner_q, probe_q])
            probe_hash = splitmix64(np.concatenate([corner_hash, _linear_hash(coords_DP)]))
        else:
            probe_q, probe_hash = corner_q, splitmix64(corner_hash)
        cand_q, cand_slot = [], []
        # main table: bucket = low bits of the hash, its entries at bucket_start[b] .. bucket_start[b + 1]
        bucket = (probe_hash & np.uint64(self.bucket_start.shape[0] - 2)).astype(np.int64)
        start = self.bucket_start[bucket]
        runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(self.main_slot, start, self.bucket_start[bucket + 1] - start)]
        if self.recent_hash.size:
            # recent run: sorted hashes, small enough for a binary search per probe
            left = np.searchsorted(self.recent_hash, probe_hash, "left")
            runs.append((self.recent_slot, left, np.searchsorted(self.recent_hash, probe_hash, "right") - left))
        for run_slot, first, count in runs:
            hits = np.flatnonzero(count)
            count_H = count[hits]
            owner = np.repeat(hits, count_H)
            # the candidates' positions in the run: each probe's first, first + 1, ... (its entries are contiguous)
            position = np.repeat(first[hits] - (np.cumsum(count_H) - count_H), count_H) + np.arange(owner.shape[0])
            slot = run_slot[position].astype(np.int64)
            # a bucket mixes cells, and the runs keep entries of removed or moved keys until the next
            # rebuild: a candidate counts only if its slot holds a key in the probed cell now
            live = self.occupied_N[slot] & (self.cell_hash_N[slot] == probe_hash[owner])
            cand_q.append(probe_q[owner[live]])
            cand_slot.append(slot[live])
        if wide.any():
            q_wide, slot_wide = self._all_pairs(np.flatnonzero(wide))
            cand_q.append(q_wide)
            cand_slot.append(slot_wide)
        if not cand_q:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        pair_q, pair_slot = np.concatenate(cand_q), np.concatenate(cand_slot)
        # column-major [C, D] (see Tolerance.match)
        q_CD = q_DM[:, pair_q].T
        k_CD = np.ascontiguousarray(self.keys_ND[pair_slot].T, dtype=np.float64).T
        keep, distance = self.tolerance.match(q_CD, k_CD)
        return pair_q[keep], pair_slot[keep], distance[keep]

    def _all_pairs(self, queries_W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (query, occupied slot) pair for these queries (their box covers too many cells), in chunks."""
        stored = self.slots()
        per_chunk = max(1, BRUTE_CHUNK // max(1, stored.shape[0]))
        pair_q, pair_slot = [], []
        for start in range(0, queries_W.shape[0], per_chunk):  # chunks of queries, not one key at a time
            chunk = queries_W[start:start + per_chunk]
            pair_q.append(np.repeat(chunk, stored.shape[0]))
            pair_slot.append(np.tile(stored, chunk.shape[0]))
        return np.concatenate(pair_q), np.concatenate(pair_slot)

    # ------------------------------------------------------------ writes
    def add(self, keys_KD: Any) -> np.ndarray:
        """Store each key [K, D] as a new entry; int64 [K] slots. Evicts when full (a reused slot's old entry is gone)."""
        keys = _as_keys(keys_KD, self.dim, "keys")
        return self._add(keys, protected=np.zeros(0, np.int64))

    def _add(self, keys: np.ndarray, protected: np.ndarray) -> np.ndarray:
        n_new = keys.shape[0]
        if n_new > self.capacity:
            raise ValueError(f"{n_new} keys do not fit a capacity of {self.capacity}; add fewer or raise capacity")
        n_victims = max(0, n_new - self.n_free)
        if n_victims and self.eviction is None:
            raise ValueError(
                f"the index is full ({self.n_entries} of {self.capacity}) and has no eviction policy; "
                f"remove() {n_victims} entries first or build it with an EvictionPolicy"
            )
        from_free = self.free_F[self.n_free - (n_new - n_victims):self.n_free][::-1].astype(np.int64)
        self.n_free -= n_new - n_victims
        if n_victims:
            assert self.eviction is not None
            candidate_N = self.occupied_N.copy()
            candidate_N[protected] = False
            if int(candidate_N.sum()) < n_victims:
                raise ValueError(f"{n_new} new keys need {n_victims} evictions but only "
                                 f"{int(candidate_N.sum())} entries may be evicted; write fewer keys at once")
            victims = self.eviction.victims(n_victims, candidate_N)
            self._stale += n_victims  # their old cells' run entries are dead now
            slots = np.concatenate([from_free, victims])
        else:
            slots = from_free
        self._place(slots, keys)
        if self.eviction is not None:
            self.eviction.used(slots)
        return slots

    def _place(self, slots: np.ndarray, keys: np.ndarray) -> None:
        """Write keys at slots (occupied from now on) and list them in the recent run."""
        self.keys_ND[slots] = keys
        self.occupied_N[slots] = True
        needed = self.tolerance.cell_size(keys.astype(np.float64))
        if self.cell_D is None or (needed > REGRID_RATIO * self.cell_D).any():
            self._regrid(np.maximum(needed, self.cell_D) if self.cell_D is not None else needed)
            return
        coords = _cell_coords(keys.astype(np.float64), self.cell_D)
        self.coord_min_D = np.minimum(self.coord_min_D, coords.min(axis=0))
        self.coord_max_D = np.maximum(self.coord_max_D, coords.max(axis=0))
        hashes = _hash_cells(coords)
        self.cell_hash_N[slots] = hashes
        merged_hash = np.concatenate([self.recent_hash, hashes])
        order = np.argsort(merged_hash, kind="stable")
        self.recent_hash = merged_hash[order]
        self.recent_slot = np.concatenate([self.recent_slot, slots.astype(np.int32)])[order]
        self._rebuild_main_if_due()

    def remove(self, slots: Any) -> None:
        """Delete the entries at these slots (each must be occupied, listed once); they become free."""
        slots_K = self._check_occupied(_as_slots(slots))
        if np.unique(slots_K).shape[0] != slots_K.shape[0]:
            raise ValueError("slots to remove must be distinct; pass np.unique(slots)")
        self.occupied_N[slots_K] = False
        self.free_F[self.n_free:self.n_free + slots_K.shape[0]] = slots_K[::-1]
        self.n_free += slots_K.shape[0]
        self._stale += slots_K.shape[0]
        self._rebuild_main_if_due()

    def set_keys(self, slots: Any, keys_KD: Any) -> None:
        """Move the entries at these occupied slots to new keys [K, D] (EMU's memory shift), values stay with the slot."""
        slots_K = self._check_occupied(_as_slots(slots))
        keys = _as_keys(keys_KD, self.dim, "keys")
        if keys.shape[0] != slots_K.shape[0]:
            raise ValueError(f"{slots_K.shape[0]} slots but {keys.shape[0]} keys; give one key per slot")
        self._stale += slots_K.shape[0]
        self._place(slots_K, keys)

    def touch(self, slots: Any) -> None:
        """Count a read of these slots for eviction (LRU: they become the most recent, in order)."""
        if self.eviction is not None:
            self.eviction.used(self._check_occupied(_as_slots(slots)))

    def find_or_add(self, keys_KD: Any) -> tuple[np.ndarray, np.ndarray]:
        """The write path of EMC/EMU: each key [K, D] joins its nearest stored key within tolerance, or is added.

        Returns slots int64 [K] and added bool [K]. As if the keys were
        written one at a time: a key that misses the stored keys joins the
        nearest earlier new key of this batch within tolerance, if any, and
        is added otherwise. Keys that hit count as used (LRU); entries they
        hit are never evicted by this call.
        """
        keys = _as_keys(keys_KD, self.dim, "keys")
        found = self.query(keys)
        slots = found.slot.copy()
        hit_slots = slots[found.hit]
        if self.eviction is not None and hit_slots.size:
            self.eviction.used(hit_slots)
        miss = np.flatnonzero(~found.hit)
        added = np.zeros(keys.shape[0], bool)
        if miss.size == 0:
            return slots, added
        new_of_miss = self._resolve_within_batch(keys[miss])
        is_new = new_of_miss == np.arange(miss.shape[0])
        new_slots = self._add(keys[miss[is_new]], protected=hit_slots)
        slot_of_miss = np.full(miss.shape[0], _NO_SLOT, np.int64)
        slot_of_miss[is_new] = new_slots
        slots[miss] = slot_of_miss[new_of_miss]
        added[miss[is_new]] = True
        return slots, added

    def _resolve_within_batch(self, keys_UD: np.ndarray) -> np.ndarray:
        """int64 [U]: for keys written in order into an index without them, the index of the key each one joins
        (itself when it is added): the nearest earlier added key within tolerance, as a one-at-a-time loop gives."""
        n_keys = keys_UD.shape[0]
        scratch = NearestIndex(self.dim, n_keys, self.tolerance, eviction=None)
        scratch.cell_D = self.cell_D
        scratch.add(keys_UD)  # slots 0 .. U-1 in order: slot = position in the batch
        later, earlier, dist = scratch._pairs(keys_UD.astype(np.float64))
        before = earlier < later  # only an earlier key can be there when a key is written
        later, earlier, dist = later[before], earlier[before], dist[before]
        # decide in rounds, each at least the first undecided key: added when none of its earlier
        # neighbours was added, joined when one was; the rounds follow chains of neighbours, not keys
        state = np.zeros(n_keys, np.int8)  # 0 undecided, 1 added, 2 joined
        while (state == 0).any():
            blocked = np.zeros(n_keys, bool)
            blocked[later[state[earlier] == 0]] = True
            joins = np.zeros(n_keys, bool)
            joins[later[state[earlier] == 1]] = True
            undecided = state == 0
            state[undecided & joins] = 2
            state[undecided & ~joins & ~blocked] = 1
        joined_to = np.arange(n_keys)
        link = state[earlier] == 1
        later, earlier, dist = later[link], earlier[link], dist[link]
        if later.size:
            order = np.lexsort((earlier, dist, later))
            first = np.ones(order.shape[0], bool)
            first[1:] = later[order][1:] != later[order][:-1]
            joined_to[later[order][first]] = earlier[order][first]
        return joined_to

    # ------------------------------------------------------------ normalisation and rebuild
    def fit_normalisation(self) -> None:
        """Let the tolerance refresh statistics from the stored keys (ZBox: mean/std; EMU every 200 env steps)."""
        if self.tolerance.fit(self.keys_ND[self.slots()].astype(np.float64)):
            self._regrid_if_off()

    def set_normalisation(self, mean_D: Any, std_D: Any) -> None:
        """Fix a ZBox tolerance's mean [D] and std [D] (the caller keeps them)."""
        if not isinstance(self.tolerance, ZBox):
            raise ValueError(f"set_normalisation needs a ZBox tolerance, this index has {type(self.tolerance).__name__}")
        self.tolerance.set_statistics(mean_D, std_D)
        self._regrid_if_off()

    def _regrid_if_off(self) -> None:
        stored = self.keys_ND[self.slots()].astype(np.float64)
        if stored.shape[0] == 0 or self.cell_D is None:
            return
        needed = self.tolerance.cell_size(stored)
        if (needed > REGRID_RATIO * self.cell_D).any() or (needed * REGRID_RATIO < self.cell_D).any():
            self._regrid(needed)

    def rebuild(self, keys_KD: Any = None, slots: Any = None) -> None:
        """Re-grid every stored key, optionally after replacing keys: keys [K, D] for slots [K] (default: all, ascending).

        EMU re-embeds every stored state after retraining its embedder; this
        takes the new keys in one call. The cell size is recomputed from the
        tolerance and the keys.
        """
        if keys_KD is not None:
            slots_K = self.slots() if slots is None else self._check_occupied(_as_slots(slots))
            keys = _as_keys(keys_KD, self.dim, "keys")
            if keys.shape[0] != slots_K.shape[0]:
                raise ValueError(f"{keys.shape[0]} keys for {slots_K.shape[0]} slots; give one key per slot")
            self.keys_ND[slots_K] = keys
        stored = self.keys_ND[self.slots()].astype(np.float64)
        self._regrid(self.tolerance.cell_size(stored) if stored.shape[0] else None)

    def _regrid(self, cell_D: np.ndarray | None) -> None:
        """Hash every stored key into cells of this size and sort them into the main run."""
        self.cell_D = cell_D
        self.coord_min_D = np.full(self.dim, np.iinfo(np.int64).max)
        self.coord_max_D = np.full(self.dim, np.iinfo(np.int64).min)
        stored = self.slots()
        if cell_D is None or stored.shape[0] == 0:
            self._rebuild_main()
            return
        coords = _cell_coords(self.keys_ND[stored].astype(np.float64), cell_D)
        self.coord_min_D, self.coord_max_D = coords.min(axis=0), coords.max(axis=0)
        self.cell_hash_N[stored] = _hash_cells(coords)
        self._rebuild_main()

    def _rebuild_main_if_due(self) -> None:
        if self.recent_hash.shape[0] + self._stale > RECENT_MAX:
            self._rebuild_main()

    def _rebuild_main(self) -> None:
        """List every stored key in the main table by bucket (cell hashes are current); empty the recent run."""
        stored = self.slots()
        n_bucket = n_buckets(stored.shape[0])
        bucket = (self.cell_hash_N[stored] & np.uint64(n_bucket - 1)).astype(np.int64)
        order = np.argsort(bucket, kind="stable")
        self.main_slot = stored[order].astype(np.int32)
        self.bucket_start = np.zeros(n_bucket + 1, np.int32)
        np.cumsum(np.bincount(bucket, minlength=n_bucket), out=self.bucket_start[1:])
        self.recent_hash, self.recent_slot = np.zeros(0, np.uint64), np.zeros(0, np.int32)
        self._stale = 0

    def _check_occupied(self, slots_K: np.ndarray) -> np.ndarray:
        bad = (slots_K < 0) | (slots_K >= self.capacity)
        if not bad.any():
            bad = ~self.occupied_N[slots_K]
        if bad.any():
            raise ValueError(f"slot {int(slots_K[bad][0])} holds no entry; use slots that add() or query() returned")
        return slots_K

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Keys, occupancy, free stack, cell size, tolerance and eviction state (numpy arrays and python scalars)."""
        return {
            "dim": self.dim,
            "capacity": self.capacity,
            "tolerance": type(self.tolerance).__name__,
            "keys": self.keys_ND.copy(),
            "occupied": self.occupied_N.copy(),
            "free": self.free_F[:self.n_free].copy(),
            "cell": self.cell_D.copy() if self.cell_D is not None else np.zeros(0),
            "tolerance_state": self.tolerance.state_dict(),
            "eviction_state": self.eviction.state_dict() if self.eviction is not None else {},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from state_dict(); the grid is rebuilt with the saved cell size, so answers and slots match."""
        for name, mine in (("dim", self.dim), ("capacity", self.capacity), ("tolerance", type(self.tolerance).__name__)):
            given = np.asarray(state[name]).item()
            if given != mine:
                raise ValueError(f"checkpoint has {name}={given}, this index {mine}; build the index with {name}={given}")
        self.keys_ND = np.asarray(state["keys"], np.float32).copy()
        self.occupied_N = np.asarray(state["occupied"], bool).copy()
        free = np.asarray(state["free"], np.int32)
        self.free_F = np.zeros(self.capacity, np.int32)
        self.free_F[:free.shape[0]] = free
        self.n_free = int(free.shape[0])
        self.tolerance.load_state_dict(state["tolerance_state"])
        if self.eviction is not None:
            self.eviction.load_state_dict(state["eviction_state"])
        cell = np.asarray(state["cell"], np.float64)
        self._regrid(cell.copy() if cell.size else None)


__all__ = [
    "EMC_ATOL", "EMC_RTOL", "EMU_DELTA", "EMU_DELTA_SUPER_HARD", "AllClose", "EvictionPolicy", "LeastRecentlyUsed",
    "Nearest", "NearestIndex", "Tolerance", "ZBox",
]
