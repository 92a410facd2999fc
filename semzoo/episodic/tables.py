"""Episodic-memory tables: SEM (key = phi(s)) and SAEM (key = (phi(s), joint action)), registered memories.

Paper: "State-based Episodic Memory for Multi-Agent Reinforcement Learning"
(Ma & Li, 2021), sections 4-5 and Algorithm 1. Layout, determinism and
eviction rules are explained in docs/memory.md. Both answer the ``Memory``
hooks of semzoo.episodic.memory under the names "sem" and "saem".

Shapes: B = episodes, T = episode limit, F = state size, D = projection size,
A = agents, K = number of keys, W = 32-bit words per key, N = buckets,
L = slots per bucket.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from semzoo.episodic.memory import Memory, memory_class, register_memory
from semzoo.episodic.target import EpisodicTarget, TableLookup, applying, next_state_target, scatter
from semzoo.types import EpisodeBatch

if TYPE_CHECKING:
    from semzoo.config import TrainConfig
    from semzoo.types import CleanBatch

# ---------------------------------------------------------------- table layout
BUCKET_SLOTS = 16
"""Slots per bucket: one probe compares a whole bucket at once."""
SLOTS_PER_ENTRY = 1.2
"""Slots allocated per entry of capacity (maximum load factor 1/1.2 = 0.83)."""
COUNT_BITS = 8
AGE_BITS = 24
"""The count sits above the low 24 bits: the merged flag (bit 23) and the age (bits 0-22)."""
COUNT_MAX = (1 << COUNT_BITS) - 1
"""Access counts saturate here (an 8-bit LFU counter, as in Redis' LFU)."""
MERGED = np.uint32(1 << (AGE_BITS - 1))
"""Set once a second write met the entry (it holds more than one visit): a diagnostic that eviction ignores."""
AGE_LIMIT = 1 << (AGE_BITS - 1)
"""Ages (add() call numbers) are renumbered by rank before reaching this."""
MAX_CAPACITY = AGE_LIMIT >> 1
"""Renumbered ages are < n_entries, so capacity must leave room below AGE_LIMIT."""
LOW_BITS = np.uint32((1 << AGE_BITS) - 1)
"""The merged flag and the age: what an access keeps of an entry's meta."""
EMPTY_META = 0
"""meta = count << AGE_BITS | merged | age with count >= 1, so 0 marks an empty slot."""
OVERFLOW_MAX = np.iinfo(np.uint16).max
_ONE_U16 = np.uint16(1)  # ufunc.at with a matching scalar dtype takes the fast path

# ---------------------------------------------------------------- keys
ACTION_ID_LIMIT = 1 << 16
"""SAEM stores each agent's action id in 16 bits (two agents per key word)."""
MISS_VALUE = 0.0
"""Value returned by lookup() for a key that is not in the table (check `hit`)."""
EVICTION_SAMPLE_STRIDE = 64
"""Victim search looks at every 64th slot first to find a cheap threshold."""
EVICTION_SAMPLE_MARGIN = 2
"""The threshold aims at this many times the needed victims."""

_HASH_SEED = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFT_30, _SHIFT_27, _SHIFT_31 = np.uint64(30), np.uint64(27), np.uint64(31)

_WITNESSES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
"""Miller-Rabin with these bases is exact for every n < 3.3e24 (Sorenson and Webster 2015), far above any bucket count."""


def _is_prime(n: int) -> bool:
    """Whether ``n`` is prime: deterministic Miller-Rabin, O(log n) multiplications, exact for n < 3.3e24."""
    if n < 2:
        return False
    for p in _WITNESSES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _WITNESSES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def n_buckets_for(capacity: int) -> int:
    """Buckets allocated for `capacity` entries: the first prime >= capacity * 1.2 / 16.

    A prime count makes every probe step (1 .. N-1) visit all buckets. ValueError for a capacity that is not a whole
    number in ``MEMORY_CAPACITY`` (up to 1e12: the bound keeps the search quick and the table on a machine).
    """
    from semzoo.config import MEMORY_CAPACITY

    if isinstance(capacity, bool) or not isinstance(capacity, int | float) or capacity not in MEMORY_CAPACITY \
            or int(capacity) != capacity:
        raise ValueError(f"capacity={capacity!r}: expected a whole number of entries {MEMORY_CAPACITY} "
                         f"({MEMORY_CAPACITY.note}); lower --memory-capacity, e.g. 1e6")
    n_buckets = max(2, math.ceil(capacity * SLOTS_PER_ENTRY / BUCKET_SLOTS))
    while not _is_prime(n_buckets):
        n_buckets += 1
    return n_buckets


def table_nbytes(capacity: int, key_words: int) -> int:
    """Bytes a table of `capacity` entries with `key_words` 32-bit key words allocates.

    Per slot: key 4 W bytes + value 4 + meta 4 (count, merged flag and age packed); per
    bucket: a 2-byte overflow counter.
    """
    n_buckets = n_buckets_for(capacity)
    slot_bytes = 4 * key_words + 4 + 4
    return n_buckets * (BUCKET_SLOTS * slot_bytes + 2)


def sem_key_words(proj_dim: int) -> int:
    """32-bit words in a SEM key: the float32 bits of phi(s)."""
    return proj_dim


def saem_key_words(proj_dim: int, n_agents: int) -> int:
    """32-bit words in a SAEM key: phi(s) then the action ids, 16 bits each."""
    return proj_dim + (n_agents + 1) // 2


# ---------------------------------------------------------------- bytes (the memory plan; semzoo.episodic.cost)
DEFAULT_CAPACITY = 1_000_000
"""|Q^S| of the paper's storage figures (sec. 6)."""
PAPER_PROJ_DIM = 4
"""D of the paper's storage figures (sec. 6)."""


def table_class(kind: str) -> type[EpisodicMemory]:
    """The registered memory ``kind`` if it is a table keyed on phi(s) (it has a cost model); ValueError otherwise."""
    cls = memory_class(kind)
    if not issubclass(cls, EpisodicMemory):
        raise ValueError(f"memory {kind!r} is not a table keyed on phi(s) (an EpisodicMemory): it has no table cost model")
    return cls


def check_table_sizes(kind: str, n_agents: int, n_actions: int, capacity: int | float, proj_dim: int) -> int:
    """The capacity as an int, after a ValueError for a ``kind`` that is no table or a size that is not positive."""
    table_class(kind)
    for name, value in (("n_agents", n_agents), ("n_actions", n_actions), ("proj_dim", proj_dim)):
        if int(value) != value or value <= 0:
            raise ValueError(f"{name}={value!r} must be a positive int")
    if int(capacity) != capacity or capacity <= 0:
        raise ValueError(f"capacity={capacity!r} must be a positive whole number of entries")
    return int(capacity)


def semzoo_storage_bytes(
    kind: str,
    n_agents: int,
    n_actions: int,
    capacity: int | float = DEFAULT_CAPACITY,
    proj_dim: int = PAPER_PROJ_DIM,
) -> int:
    """Bytes semzoo's table allocates: one table of `capacity` entries for SEM and for SAEM.

    Equals `make_episodic_memory(kind, ...).nbytes`; SAEM keys add 2 bytes per agent.
    """
    n_entries = check_table_sizes(kind, n_agents, n_actions, capacity, proj_dim)
    if n_actions > ACTION_ID_LIMIT:
        raise ValueError(f"n_actions={n_actions} exceeds the {ACTION_ID_LIMIT} action ids a SAEM key can hold")
    return table_nbytes(n_entries, table_class(kind).key_words_for(proj_dim, int(n_agents)))


PROJECTION_BYTES_PER_ENTRY = 8
"""semzoo draws V as float64 (numpy's standard_normal) and projects in float64."""


def projection_bytes(proj_dim: int, state_dim: int) -> int:
    """Bytes of the random projection V (D x F float64), shared by SEM and SAEM."""
    return proj_dim * state_dim * PROJECTION_BYTES_PER_ENTRY


def _mix64(h_K: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 (wrapping arithmetic)."""
    h_K = (h_K ^ (h_K >> _SHIFT_30)) * _MIX_1
    h_K = (h_K ^ (h_K >> _SHIFT_27)) * _MIX_2
    return h_K ^ (h_K >> _SHIFT_31)


def _hash_keys(keys_KW: np.ndarray) -> np.ndarray:
    """uint64 hash [K] of uint32 key words [K, W]."""
    h_K = np.full(keys_KW.shape[0], _HASH_SEED, dtype=np.uint64)
    for w in range(keys_KW.shape[1]):
        h_K = _mix64(h_K ^ keys_KW[:, w].astype(np.uint64))
    return h_K


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def project_fixed_order(projection_DF: np.ndarray, states_KF: np.ndarray) -> np.ndarray:
    """V s for states [K, F] (float32 values): float64 [D, K], bit-identical whatever batch, layout or device.

    Every product V[d, f] s[f] is formed in float64 and accumulated in the fixed order f = 0..F-1 with
    elementwise numpy ops (no BLAS: its summation order depends on shapes). SEM's phi(s) and EMC's z = M s.
    """
    states_FK = np.ascontiguousarray(states_KF.astype(np.float32).T, dtype=np.float64)
    acc_DK = np.zeros((projection_DF.shape[0], states_FK.shape[1]))
    term_DK = np.empty_like(acc_DK)
    for f in range(states_FK.shape[0]):  # a loop over state features, not keys
        np.multiply(projection_DF[:, f, None], states_FK[f], out=term_DK)
        acc_DK += term_DK
    return acc_DK


def discounted_returns(reward_BT: Any, filled_BT: Any, gamma: float) -> np.ndarray:
    """Discounted return from every real step to the end of its episode.

    reward [B, T], filled [B, T] bool -> float32 [B, T], zero on padding.
    Paper: R(s_t) = sum_{i=t}^{T} gamma^(i-t) r_i, computed backwards in float64.
    """
    reward = _to_numpy(reward_BT).astype(np.float64)
    filled = _to_numpy(filled_BT).astype(bool)
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


class LFUKeyTable:
    """Fixed-size exact-match map from uint32 key words to float32 max returns.

    Open addressing over buckets of BUCKET_SLOTS slots with double hashing
    (bucket_i = home + i * step mod N, N prime); a per-bucket overflow counter (keys stored past this bucket) ends a miss
    early and lets entries be deleted without tombstones. Full tables evict
    the least frequently accessed entry, ties by age (oldest first), then slot.

    keys [N, W, L] uint32, value [N, L] float32, meta [N, L] uint32
    (count << AGE_BITS | MERGED if a second write met the entry | age, 0 = empty), overflow [N] uint16.
    """

    def __init__(self, capacity: int, key_words: int) -> None:
        self.capacity = capacity
        self.key_words = key_words
        self.n_buckets = n_buckets_for(capacity)
        self.key_NWL = np.zeros((self.n_buckets, key_words, BUCKET_SLOTS), np.uint32)
        self.value_NL = np.zeros((self.n_buckets, BUCKET_SLOTS), np.float32)
        self.meta_NL = np.zeros((self.n_buckets, BUCKET_SLOTS), np.uint32)
        self.overflow_N = np.zeros(self.n_buckets, np.uint16)
        self.n_entries = 0
        self.tick = 0  # age given to the entries inserted by the next upsert

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.key_NWL, self.value_NL, self.meta_NL, self.overflow_N))

    # ------------------------------------------------------------ probing
    def _probe(self, keys_KW: np.ndarray, h_K: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """First bucket and probe step of each key: ([K], [K]) int64, step in [1, N-1]."""
        if h_K is None:
            h_K = _hash_keys(keys_KW)
        home_K = (h_K % np.uint64(self.n_buckets)).astype(np.int64)
        step_K = ((h_K >> np.uint64(32)) % np.uint64(self.n_buckets - 1)).astype(np.int64) + 1
        return home_K, step_K

    def find(self, keys_KW: np.ndarray, h_K: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Bucket and slot-in-bucket of each key, -1 where absent: ([K], [K]) int64."""
        n_keys = keys_KW.shape[0]
        bucket_K = np.full(n_keys, -1, np.int64)
        slot_K = np.full(n_keys, -1, np.int64)
        active = np.arange(n_keys)
        probe_K, step_K = self._probe(keys_KW, h_K)
        for _ in range(self.n_buckets):
            if active.size == 0:
                break
            b = probe_K[active]
            # compare the first word of the whole bucket, verify candidates in full
            row, col = np.nonzero(self.key_NWL[b, 0, :] == keys_KW[active, 0, None])
            ok = self.meta_NL[b[row], col] != EMPTY_META
            if self.key_words > 1:
                ok &= (self.key_NWL[b[row], 1:, col] == keys_KW[active[row], 1:]).all(axis=1)
            found = active[row[ok]]
            bucket_K[found] = b[row[ok]]
            slot_K[found] = col[ok]
            keep = self.overflow_N[b] > 0
            keep[row[ok]] = False
            active = active[keep]
            probe_K[active] = (b[keep] + step_K[active]) % self.n_buckets
        return bucket_K, slot_K

    def _insert(self, keys_KW: np.ndarray, values_K: np.ndarray, h_K: np.ndarray, age: int,
                merged_K: np.ndarray) -> None:
        """Place keys known to be absent into free slots (there must be room); ``merged_K`` (bool [K]): written twice."""
        meta_K = np.where(merged_K, MERGED, np.uint32(0)) | np.uint32((1 << AGE_BITS) | age)
        pending = np.arange(keys_KW.shape[0])
        probe_K, step_K = self._probe(keys_KW, h_K)
        for _ in range(self.n_buckets):
            if pending.size == 0:
                break
            order = np.argsort(probe_K[pending], kind="stable")
            pending = pending[order]
            b = probe_K[pending]
            # rank of each key among the keys aiming at the same bucket this round
            idx = np.arange(b.size)
            starts = np.r_[True, b[1:] != b[:-1]]
            rank = idx - np.maximum.accumulate(np.where(starts, idx, 0))
            empty_mL = self.meta_NL[b] == EMPTY_META
            placed = rank < empty_mL.sum(axis=1)
            # the rank-th empty slot of the bucket
            nth_empty = (np.cumsum(empty_mL, axis=1) == (rank + 1)[:, None]) & empty_mL
            col = np.argmax(nth_empty, axis=1)
            pb, pc, pk = b[placed], col[placed], pending[placed]
            self.key_NWL[pb, :, pc] = keys_KW[pk]
            self.value_NL[pb, pc] = values_K[pk]
            self.meta_NL[pb, pc] = meta_K[pk]
            # the others pass through a full bucket: count them there, move on
            passed = b[~placed]
            np.add.at(self.overflow_N, passed, _ONE_U16)
            if passed.size and self.overflow_N[passed].max() >= OVERFLOW_MAX:
                raise RuntimeError("episodic table overflow counter saturated (hash clustering)")
            pending = pending[~placed]
            probe_K[pending] = (passed + step_K[pending]) % self.n_buckets
        self.n_entries += keys_KW.shape[0]

    def _remove(self, bucket_K: np.ndarray, slot_K: np.ndarray) -> None:
        """Delete entries and undo their overflow counts along their probe path."""
        probe_K, step_K = self._probe(self.key_NWL[bucket_K, :, slot_K])
        on_path = np.flatnonzero(probe_K != bucket_K)
        for _ in range(self.n_buckets):
            if on_path.size == 0:
                break
            np.subtract.at(self.overflow_N, probe_K[on_path], _ONE_U16)
            probe_K[on_path] = (probe_K[on_path] + step_K[on_path]) % self.n_buckets
            on_path = on_path[probe_K[on_path] != bucket_K[on_path]]
        self.meta_NL[bucket_K, slot_K] = EMPTY_META
        self.n_entries -= bucket_K.size

    def _victims(self, n_victims: int) -> np.ndarray:
        """Flat slots of the n smallest (count, age, slot) entries."""
        # uint32 wrap-around sends empty slots (meta 0) to the top; the merged flag plays no part
        rank_S = (self.meta_NL.reshape(-1) & ~MERGED) - np.uint32(1)
        empty_rank = np.iinfo(np.uint32).max  # EMPTY_META - 1 after the wrap-around
        sample = rank_S[::EVICTION_SAMPLE_STRIDE]
        n_sample = math.ceil(EVICTION_SAMPLE_MARGIN * n_victims / EVICTION_SAMPLE_STRIDE)
        candidates = None
        if n_sample < sample.size:
            threshold = np.partition(sample, n_sample)[n_sample]
            if threshold != empty_rank:
                candidates = np.flatnonzero(rank_S <= threshold)
                if candidates.size < n_victims:
                    candidates = None
        if candidates is None:
            candidates = np.flatnonzero(rank_S != empty_rank)
        # stable sort of slot-ordered candidates: equal (count, age) -> lower slot first
        order = np.argsort(rank_S[candidates], kind="stable")[:n_victims]
        return candidates[order]

    # ------------------------------------------------------------ public ops
    def lookup(self, keys_KW: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values [K] float32 and hit [K] bool; each hit counts as one access."""
        values_K, hit_K, _ = self.lookup_merged(keys_KW)
        return values_K, hit_K

    def lookup_merged(self, keys_KW: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``lookup`` and whether each hit entry holds more than one visit (bool [K], false on a miss)."""
        bucket_K, slot_K = self.find(keys_KW)
        hit_K = bucket_K >= 0
        values_K = np.full(keys_KW.shape[0], MISS_VALUE, np.float32)
        values_K[hit_K] = self.value_NL[bucket_K[hit_K], slot_K[hit_K]]
        merged_K = np.zeros(keys_KW.shape[0], bool)
        merged_K[hit_K] = (self.meta_NL[bucket_K[hit_K], slot_K[hit_K]] & MERGED) > 0
        flat, n_access = np.unique(bucket_K[hit_K] * BUCKET_SLOTS + slot_K[hit_K], return_counts=True)
        self._count_access(flat // BUCKET_SLOTS, flat % BUCKET_SLOTS, n_access)
        return values_K, hit_K, merged_K

    def _count_access(self, bucket: np.ndarray, slot: np.ndarray, n_access: np.ndarray) -> None:
        meta = self.meta_NL[bucket, slot]
        count = np.minimum((meta >> np.uint32(AGE_BITS)) + n_access.astype(np.uint32), COUNT_MAX)
        self.meta_NL[bucket, slot] = (count.astype(np.uint32) << np.uint32(AGE_BITS)) | (meta & LOW_BITS)

    def upsert_max(self, keys_KW: np.ndarray, returns_K: np.ndarray) -> int:
        """Per-key max of returns into the table (eq. 5), evicting LFU entries when full.

        Returns the merges: the writes whose key met a stored entry or an earlier write of the same call.
        """
        if keys_KW.shape[0] == 0:
            return 0
        # de-duplicate, R_Max(s) = max_k R_k(s): sort by hash, equal keys become adjacent
        h_K = _hash_keys(keys_KW)
        order = np.argsort(h_K, kind="stable")
        sorted_KW, sorted_h = keys_KW[order], h_K[order]
        key_changes = (sorted_KW[1:] != sorted_KW[:-1]).any(axis=1)
        if (key_changes & (sorted_h[1:] == sorted_h[:-1])).any():
            # a 64-bit hash collision could interleave keys: group by the keys themselves
            order = np.lexsort((*keys_KW.T[::-1], h_K))
            sorted_KW, sorted_h = keys_KW[order], h_K[order]
            key_changes = (sorted_KW[1:] != sorted_KW[:-1]).any(axis=1)
        starts = np.flatnonzero(np.r_[True, key_changes])
        unique_UW, unique_h = sorted_KW[starts], sorted_h[starts]
        best_U = np.maximum.reduceat(returns_K[order], starts)
        writes_U = np.diff(np.r_[starts, keys_KW.shape[0]])  # writes of each distinct key in this call

        bucket_U, slot_U = self.find(unique_UW, unique_h)
        hit_U = bucket_U >= 0
        hb, hs = bucket_U[hit_U], slot_U[hit_U]
        self.value_NL[hb, hs] = np.maximum(self.value_NL[hb, hs], best_U[hit_U])
        self._count_access(hb, hs, np.ones(hb.size, np.uint32))
        self.meta_NL[hb, hs] |= MERGED
        merges = keys_KW.shape[0] - int((~hit_U).sum())

        new_NW, new_N, new_h = unique_UW[~hit_U], best_U[~hit_U], unique_h[~hit_U]
        new_merged = writes_U[~hit_U] > 1
        if new_N.size > self.capacity:
            # more new keys than the table holds: keep the highest returns
            keep = np.sort(np.argsort(-new_N, kind="stable")[: self.capacity])
            new_NW, new_N, new_h, new_merged = new_NW[keep], new_N[keep], new_h[keep], new_merged[keep]
        n_evict = self.n_entries + new_N.size - self.capacity
        if n_evict > 0:
            flat = self._victims(n_evict)
            self._remove(flat // BUCKET_SLOTS, flat % BUCKET_SLOTS)
        self._insert(new_NW, new_N, new_h, self.tick, new_merged)
        self.tick += 1
        if self.tick >= AGE_LIMIT:
            self.renumber_ages()
        return merges

    def renumber_ages(self) -> None:
        """Replace ages by their rank among stored entries (keeps their order)."""
        occupied = self.meta_NL != EMPTY_META
        meta = self.meta_NL[occupied]
        ages, rank = np.unique(meta & np.uint32(AGE_LIMIT - 1), return_inverse=True)
        count_bits = meta & ~np.uint32(AGE_LIMIT - 1)
        self.meta_NL[occupied] = count_bits | rank.astype(np.uint32)
        self.tick = int(ages.size)


class TableUsage:
    """How a memory's table is used, counted since the run started: the diagnostics of a memory acting.

    ``memory_merge_rate``: the share of writes that met an existing entry (an equal key for SEM and SAEM, a key
    within the tolerance for EMC and EMU, or an earlier write of the same batch); ``memory_cross_hit_rate``: the
    share of lookups answered by an entry that holds more than one visit, so that a return of another visit
    could reach the target. A lookup answered by the entry its own step wrote, the only kind where states never
    repeat, is a self-hit: it counts in ``memory_hit_rate`` but not here. Both rates count a state that recurs
    within its own episode (a state the episode returns to) like one another episode reached; only the
    second brings another episode's return (``scripts/state_repeats.py`` tells the two apart in a run's buffer).
    """

    COUNTERS = ("writes", "merges", "lookups", "hits", "cross_hits")

    def __init__(self) -> None:
        self.writes = 0
        self.merges = 0
        self.lookups = 0
        self.hits = 0
        self.cross_hits = 0

    def wrote(self, writes: int, merges: int) -> None:
        """``writes`` writes, of which ``merges`` met an existing entry."""
        self.writes += int(writes)
        self.merges += int(merges)

    def looked_up(self, hit_K: np.ndarray, several_visits_K: np.ndarray) -> None:
        """K lookups: which hit, and which hit an entry of more than one visit (bool [K] each)."""
        self.lookups += int(hit_K.shape[0])
        self.hits += int(hit_K.sum())
        self.cross_hits += int((hit_K & several_visits_K).sum())

    def metrics(self) -> dict[str, float]:
        """The two rates, each once its denominator is positive."""
        out = {}
        if self.writes:
            out["memory_merge_rate"] = self.merges / self.writes
        if self.lookups:
            out["memory_cross_hit_rate"] = self.cross_hits / self.lookups
        return out

    def state_dict(self, prefix: str = "usage_") -> dict[str, int]:
        """The counters as flat entries ``<prefix><name>`` (a memory's state_dict holds them beside its arrays)."""
        return {prefix + name: getattr(self, name) for name in self.COUNTERS}

    @classmethod
    def from_state(cls, state: dict[str, Any], prefix: str = "usage_") -> TableUsage:
        """The counters saved by ``state_dict()`` in ``state``; zero where absent (a checkpoint from before them)."""
        usage = cls()
        for name in cls.COUNTERS:
            if prefix + name in state:
                setattr(usage, name, int(np.asarray(state[prefix + name]).item()))
        return usage


class EpisodicMemory(Memory, ABC):
    """Episodic memory table of highest discounted returns, keyed exactly on projected states.

    Keys are uint32 words [..., W]: the float32 bits of phi(s) = V s
    (V [D, F] ~ N(0, 1) from `seed`), then, for SAEM, the joint action.
    Pairs (key, R_t) wait in a pending set M and enter the table, per-key
    max, once M holds `pending_size` env steps (paper eq. 5, Algorithm 1).

    The ``Memory`` hooks (semzoo.episodic.memory): the state keys phi(s) are cached per stored slot
    (``state_key_words`` = D); ``on_store`` feeds M; ``lookup_batch`` probes the table for the steps
    ``_query_steps`` names; ``combine_target`` forms E from ``_target_values``. A subclass gives the key
    layout (``key_words``, ``keys_from_state_keys``, ``_step_keys``), those two hooks and the cost model.
    """

    @property
    def kind(self) -> str:
        """The registered name ("sem", "saem"), saved in state_dict and checked on load."""
        return self.name

    def __init__(
        self,
        *,
        state_dim: int,
        n_agents: int,
        proj_dim: int = 4,
        capacity: int = 1_000_000,
        pending_size: int = 5000,
        gamma: float = 0.99,
        seed: int = 0,
    ) -> None:
        for name, value in (
            ("state_dim", state_dim),
            ("n_agents", n_agents),
            ("proj_dim", proj_dim),
            ("capacity", capacity),
            ("pending_size", pending_size),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive int")
        if capacity > MAX_CAPACITY:
            raise ValueError(
                f"capacity={capacity} exceeds the supported maximum {MAX_CAPACITY}; use a smaller table"
            )
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r} must lie in [0, 1]")
        self.state_dim = int(state_dim)
        self.n_agents = int(n_agents)
        self.proj_dim = int(proj_dim)
        self.pending_size = int(pending_size)
        self.gamma = float(gamma)
        self.seed = int(seed)
        self.projection_DF = np.random.default_rng(self.seed).standard_normal((self.proj_dim, self.state_dim))
        self._table = LFUKeyTable(int(capacity), self.key_words)
        self._pending_keys: list[np.ndarray] = []
        self._pending_returns: list[np.ndarray] = []
        self._pending_steps = 0
        self.usage = TableUsage()

    @classmethod
    def from_config(cls, config: TrainConfig, *, state_dim: int, n_agents: int, n_actions: int,
                    obs_dim: int = 0) -> EpisodicMemory:
        """The table of a run: D, capacity and |M| from ``config.memory``, gamma and the seed of V from the run."""
        m = config.memory
        return cls(state_dim=state_dim, n_agents=n_agents, proj_dim=m.proj_dim, capacity=m.capacity,
                   pending_size=m.pending_size, gamma=config.learner.gamma, seed=config.seed)

    # ------------------------------------------------------------ cost model (semzoo.episodic.cost)
    @classmethod
    @abstractmethod
    def key_words_for(cls, proj_dim: int, n_agents: int) -> int:
        """W, 32-bit words per key of a table with projection size D and n agents."""

    @classmethod
    @abstractmethod
    def paper_n_tables(cls, n_agents: int, n_actions: int) -> int:
        """Tables the paper's layout needs (paper sec. 6): a Python int, exact for any size."""

    @classmethod
    def planned_nbytes(cls, config: TrainConfig, *, state_dim: int, n_agents: int, n_actions: int, obs_dim: int) -> int:
        """The table at its capacity and the projection V (what ``semzoo memory-cost`` reports)."""
        m = config.memory
        return (semzoo_storage_bytes(cls.name, n_agents, n_actions, capacity=m.capacity, proj_dim=m.proj_dim)
                + projection_bytes(m.proj_dim, state_dim))

    @classmethod
    def planned_state_key_words(cls, config: TrainConfig, *, state_dim: int, n_agents: int, n_actions: int) -> int:
        return config.memory.proj_dim  # state_key_words: the float32 bits of phi(s)

    # ------------------------------------------------------------ Memory hooks
    @property
    def state_key_words(self) -> int:
        return self.proj_dim

    def on_store(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None) -> None:
        """R_t of each real step into the pending set M; Q^S is written once M holds |M| steps."""
        self.update_from(batch, slot_state_keys)

    @abstractmethod
    def _query_steps(self, clean: CleanBatch) -> tuple[np.ndarray, int]:
        """The steps [B,T] (bool) whose key is looked up, and the slot of their state: t + the returned offset."""

    @abstractmethod
    def _query_keys(self, state_keys_KD: np.ndarray, clean: CleanBatch, episode_K: np.ndarray,
                    step_K: np.ndarray) -> np.ndarray:
        """Table keys [K, W] of the queried steps (episode_K, step_K) given their states' keys [K, D]."""

    @abstractmethod
    def _target_values(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(E [B,T], the steps whose E the memory answered [B,T] bool), tensor ops only."""

    @torch.no_grad()
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> TableLookup:
        """Phase 1: one batched query of the table for the steps of ``clean`` that read it.

        ``state_keys_BSD`` is the batch's ``EpisodeBatch.state_keys`` ([B,T+1,D] int32, the bits of phi(s) of
        every real slot, projected when the episode was stored); without it the states are projected here.
        """
        query_BT, slot_offset = self._query_steps(clean)
        n_steps = query_BT.shape[1]
        flat_K = np.flatnonzero(query_BT)  # row-major order, as a boolean mask gathers
        episode_K, step_K = np.divmod(flat_K, n_steps)
        slot_K = step_K + slot_offset
        if state_keys_BSD is None:
            state_keys_KD = self.state_keys(clean.state.cpu().numpy()[episode_K, slot_K])
        else:
            state_keys_KD = state_keys_BSD.cpu().numpy()[episode_K, slot_K].view(np.uint32)
        values_K, hits_K, merged_K = self.lookup_merged(self._query_keys(state_keys_KD, clean, episode_K, step_K))
        self.usage.looked_up(hits_K, merged_K)
        like = clean.reward
        return TableLookup(values_BT=scatter(values_K, flat_K, like), hit_BT=scatter(hits_K, flat_K, like).bool(),
                           hit_rate=torch.tensor(float(np.mean(hits_K)) if len(hits_K) else 0.0, dtype=torch.float64))

    def combine_target(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       *, gamma: float, miss_rule: str) -> EpisodicTarget:
        """Phase 2: E for every step of ``clean`` from the table's answers, a constant target like y (tensor ops only).

        ``y_BT`` and ``next_value_BT`` ([B,T]) are the learner's TD target and bootstrap value V(t+1),
        with y_t = r_t + gamma (1 - term_t) V(t+1).
        """
        with torch.no_grad():
            e_BT, answered_BT = self._target_values(lookup, clean, y_BT, next_value_BT, gamma)
        return applying(clean.mask.bool(), answered_BT, e_BT, lookup.hit_rate, miss_rule=miss_rule)

    def metrics(self) -> dict[str, float]:
        return {"memory_entries": float(self.n_entries), "memory_bytes": float(self.nbytes),
                "memory_pending_steps": float(self.pending_steps), **self.usage.metrics()}

    # ------------------------------------------------------------ keys
    @property
    @abstractmethod
    def key_words(self) -> int:
        """32-bit words per key (W)."""

    def keys(self, states: Any, actions: Any = None) -> np.ndarray:
        """Exact table keys: states [..., F] (actions [..., A]) -> uint32 [..., W]."""
        return self.keys_from_state_keys(self.state_keys(states), actions)

    @abstractmethod
    def keys_from_state_keys(self, state_keys: np.ndarray, actions: Any = None) -> np.ndarray:
        """Table keys from the states' keys ``state_keys(states)`` [..., D] (and actions [..., A]): uint32 [..., W]."""

    def state_keys(self, states: Any) -> np.ndarray:
        """The state's part of a key, the float32 bits of phi(s): states [..., F] -> uint32 [..., D]."""
        return self.project(states).view(np.uint32)

    def slot_state_keys(self, batch: EpisodeBatch) -> np.ndarray:
        """``state_keys`` of every real slot of a batch (t <= length: its steps and the state after the last).

        state [B, T+1, F] -> uint32 [B, T+1, D], zero on the other slots. Projected once when a batch is
        stored (semzoo.run.trainer), so that an update's lookup only probes the table (docs/memory.md).
        """
        state = _to_numpy(batch.state)
        length = _to_numpy(batch.length)
        if state.ndim != 3 or state.shape[0] != length.shape[0]:
            raise ValueError(f"batch.state has shape {tuple(state.shape)}, expected [B, T+1, F] with B = "
                             f"{length.shape[0]} from batch.length")
        real_BS = np.arange(state.shape[1])[None, :] <= length[:, None]
        keys_BSD = np.zeros((*state.shape[:2], self.proj_dim), np.uint32)
        keys_BSD[real_BS] = self.state_keys(state[real_BS])
        return keys_BSD

    def project(self, states: Any) -> np.ndarray:
        """Random projection phi(s) = V s: states [..., F] -> float32 [..., D].

        Bit-identical for a state whatever batch, layout or device it comes in:
        the state is rounded to float32, then every product V[d, f] s[f] is
        formed in float64 and accumulated in the fixed order f = 0..F-1 with
        elementwise numpy ops (no BLAS: its summation order depends on shapes),
        and the sum is rounded to float32.
        """
        states_np = _to_numpy(states)
        if states_np.ndim < 1 or states_np.shape[-1] != self.state_dim:
            raise ValueError(
                f"states have shape {tuple(states_np.shape)} but this memory expects [..., {self.state_dim}] "
                f"(state_dim={self.state_dim}); pass EpisodeBatch.state or build the memory with the env's state size"
            )
        lead = states_np.shape[:-1]
        acc_DK = project_fixed_order(self.projection_DF, states_np.reshape(-1, self.state_dim))
        return acc_DK.T.astype(np.float32).reshape(*lead, self.proj_dim)

    def _check_keys(self, keys: Any) -> np.ndarray:
        keys_np = _to_numpy(keys)
        if keys_np.dtype != np.uint32:
            raise TypeError(f"keys have dtype {keys_np.dtype}, expected uint32; build them with memory.keys(...)")
        if keys_np.ndim < 1 or keys_np.shape[-1] != self.key_words:
            raise ValueError(
                f"keys have shape {tuple(keys_np.shape)}, expected [..., {self.key_words}]; "
                "build them with memory.keys(...) of this memory"
            )
        return keys_np

    # ------------------------------------------------------------ table ops
    def add(self, keys: Any, returns: Any) -> None:
        """Write returns [...] for keys [..., W] into the table, per-key max (eq. 5)."""
        keys_np = self._check_keys(keys)
        returns_np = _to_numpy(returns).astype(np.float32)
        if returns_np.shape != keys_np.shape[:-1]:
            raise ValueError(
                f"returns have shape {tuple(returns_np.shape)}, expected {tuple(keys_np.shape[:-1])} "
                "(one return per key)"
            )
        if not np.isfinite(returns_np).all():
            raise ValueError("returns contain NaN or inf; mask padding steps before adding")
        flat_KW = keys_np.reshape(-1, self.key_words)
        self.usage.wrote(flat_KW.shape[0], self._table.upsert_max(flat_KW, returns_np.reshape(-1)))

    def lookup(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """Stored returns for keys [..., W]: (values float32 [...], hit bool [...]).

        A miss gives MISS_VALUE; each hit counts as an access for eviction.
        """
        values, hit, _ = self.lookup_merged(keys)
        return values, hit

    def lookup_merged(self, keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``lookup`` and whether each hit entry holds more than one visit (bool [...], false on a miss)."""
        keys_np = self._check_keys(keys)
        values_K, hit_K, merged_K = self._table.lookup_merged(keys_np.reshape(-1, self.key_words))
        lead = keys_np.shape[:-1]
        return values_K.reshape(lead), hit_K.reshape(lead), merged_K.reshape(lead)

    def query(self, states: Any, actions: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """lookup(keys(states, actions)): (values float32 [...], hit bool [...])."""
        return self.lookup(self.keys(states, actions))

    # ------------------------------------------------------------ pending set M
    @abstractmethod
    def _step_keys(self, state_keys_KD: np.ndarray, actions_KA: np.ndarray) -> np.ndarray:
        """Keys [K, W] of real steps given their states' keys [K, D] and joint actions [K, A]."""

    def update_from(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None = None) -> None:
        """Add (key of step t, R_t) for every real step of the batch to M; flush when full.

        state [B, T+1, F], actions [B, T, A], reward [B, T], filled [B, T]. The
        slot after the last step and padding are never written. ``slot_state_keys``
        is the batch's ``slot_state_keys(batch)`` when the caller has it already.
        """
        state = _to_numpy(batch.state)
        filled = _to_numpy(batch.filled).astype(bool)
        n_steps = filled.shape[1]
        if state.ndim != 3 or state.shape[:2] != (filled.shape[0], n_steps + 1):
            raise ValueError(
                f"batch.state has shape {tuple(state.shape)}, expected [B, T+1, F] = "
                f"[{filled.shape[0]}, {n_steps + 1}, {self.state_dim}] from filled {tuple(filled.shape)}"
            )
        returns_BT = discounted_returns(batch.reward, filled, self.gamma)
        actions = _to_numpy(batch.actions)
        if slot_state_keys is None:
            step_keys = self.state_keys(state[:, :n_steps][filled])
        else:
            step_keys = np.asarray(slot_state_keys)[:, :n_steps][filled]
        keys_KW = self._step_keys(step_keys, actions[filled])
        self._pending_keys.append(keys_KW)
        self._pending_returns.append(returns_BT[filled])
        self._pending_steps += int(filled.sum())
        if self._pending_steps >= self.pending_size:
            self.flush()

    def flush(self) -> None:
        """Write the pending set M into the table (per-key max) and empty it."""
        if self._pending_keys:
            keys_KW = np.concatenate(self._pending_keys)
            self.usage.wrote(keys_KW.shape[0], self._table.upsert_max(keys_KW, np.concatenate(self._pending_returns)))
        self._pending_keys, self._pending_returns, self._pending_steps = [], [], 0

    # ------------------------------------------------------------ properties
    @property
    def n_entries(self) -> int:
        return self._table.n_entries

    @property
    def capacity(self) -> int:
        return self._table.capacity

    @property
    def nbytes(self) -> int:
        """Bytes allocated for the table (keys, values, counters, index)."""
        return self._table.nbytes

    @property
    def pending_steps(self) -> int:
        return self._pending_steps

    # ------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "state_dim": self.state_dim,
            "n_agents": self.n_agents,
            "proj_dim": self.proj_dim,
            "capacity": self.capacity,
            "pending_size": self.pending_size,
            "gamma": self.gamma,
            "seed": self.seed,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: config, V, table, counters, pending set (numpy / python)."""
        pending_keys = (
            np.concatenate(self._pending_keys) if self._pending_keys else np.zeros((0, self.key_words), np.uint32)
        )
        pending_returns = (
            np.concatenate(self._pending_returns) if self._pending_returns else np.zeros(0, np.float32)
        )
        table = self._table
        return {
            **self._config(),
            "projection": self.projection_DF.copy(),
            "table_keys": table.key_NWL.copy(),
            "table_values": table.value_NL.copy(),
            "table_meta": table.meta_NL.copy(),
            "table_overflow": table.overflow_N.copy(),
            **self.usage.state_dict(),
            "n_entries": table.n_entries,
            "tick": table.tick,
            "pending_keys": pending_keys,
            "pending_returns": pending_returns,
            "pending_steps": self._pending_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from state_dict(); scalars may come back as 0-d arrays (np.savez)."""
        for name, expected in self._config().items():
            given = state[name]
            given = str(given) if isinstance(expected, str) else type(expected)(np.asarray(given).item())
            if given != expected:
                raise ValueError(
                    f"state_dict has {name}={given!r} but this memory has {name}={expected!r}; "
                    "build the memory with the same arguments before loading"
                )
        table = self._table
        arrays: dict[str, np.ndarray] = {
            "projection": self.projection_DF,
            "table_keys": table.key_NWL,
            "table_values": table.value_NL,
            "table_meta": table.meta_NL,
            "table_overflow": table.overflow_N,
        }
        for name, current in arrays.items():
            given = np.asarray(state[name])
            if given.shape != current.shape or given.dtype != current.dtype:
                raise ValueError(
                    f"state_dict[{name!r}] has {given.dtype} {given.shape}, expected {current.dtype} {current.shape}"
                )
            current[...] = given
        self.usage = TableUsage.from_state(state)
        table.n_entries = int(np.asarray(state["n_entries"]).item())
        table.tick = int(np.asarray(state["tick"]).item())
        pending_keys = np.asarray(state["pending_keys"], dtype=np.uint32).reshape(-1, self.key_words)
        pending_returns = np.asarray(state["pending_returns"], dtype=np.float32).reshape(-1)
        self._pending_keys = [pending_keys] if pending_keys.size else []
        self._pending_returns = [pending_returns] if pending_returns.size else []
        self._pending_steps = int(np.asarray(state["pending_steps"]).item())


@register_memory("sem")
class SEMTable(EpisodicMemory):
    """State-based episodic memory Q^S: phi(s) -> highest discounted return from s (paper sec. 5).

    E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1})) (eq. 7); on a miss Q^S(s_{t+1}) is replaced by the
    learner's bootstrap value V(t+1), so E_t = y_t.
    """

    description = "state-based memory Q^S(phi(s)), E = r + gamma Q^S(s') (Ma & Li 2021, eq. 6-7)"

    @property
    def key_words(self) -> int:
        return sem_key_words(self.proj_dim)

    @classmethod
    def key_words_for(cls, proj_dim: int, n_agents: int) -> int:
        return sem_key_words(proj_dim)

    @classmethod
    def paper_n_tables(cls, n_agents: int, n_actions: int) -> int:
        return 1

    def _query_steps(self, clean: CleanBatch) -> tuple[np.ndarray, int]:
        """Real, non-terminal steps read phi(s_{t+1}).

        A read counts as an access for LFU eviction, so reading padding or the slot after a real end would
        keep junk entries alive.
        """
        return (clean.mask.cpu().numpy() > 0) & (clean.terminated.cpu().numpy() == 0), 1

    def _query_keys(self, state_keys_KD: np.ndarray, clean: CleanBatch, episode_K: np.ndarray,
                    step_K: np.ndarray) -> np.ndarray:
        return self.keys_from_state_keys(state_keys_KD)

    def _target_values(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """A miss bootstraps from V(t+1); a real end needs no table (E = r), so it counts as answered."""
        return next_state_target(lookup, clean, next_value_BT, gamma)

    def keys_from_state_keys(self, state_keys: np.ndarray, actions: Any = None) -> np.ndarray:
        """The key is the state's key, the float32 bits of phi(s): uint32 [..., D]."""
        if actions is not None:
            raise ValueError("SEM keys use the state only; call keys(states) with actions=None (SAEM takes actions)")
        return state_keys

    def _step_keys(self, state_keys_KD: np.ndarray, actions_KA: np.ndarray) -> np.ndarray:
        return state_keys_KD


@register_memory("saem")
class SAEMTable(EpisodicMemory):
    """State-and-action episodic memory Q^SA: (phi(s), u) -> highest return (paper sec. 4).

    One shared table of fixed capacity instead of the paper's |U|^n tables;
    the joint action is part of the key, 16 bits per agent. E_t = Q^SA(phi(s_t), u_t) (eq. 4), y_t on a miss.
    """

    description = "state-and-action memory Q^SA(phi(s), u), E = Q^SA(s, u) (Ma & Li 2021, eq. 4)"

    @property
    def key_words(self) -> int:
        return saem_key_words(self.proj_dim, self.n_agents)

    @classmethod
    def key_words_for(cls, proj_dim: int, n_agents: int) -> int:
        return saem_key_words(proj_dim, n_agents)

    @classmethod
    def paper_n_tables(cls, n_agents: int, n_actions: int) -> int:
        return int(n_actions) ** int(n_agents)  # one table per joint action

    def _query_steps(self, clean: CleanBatch) -> tuple[np.ndarray, int]:
        """Every real step reads (phi(s_t), u_t)."""
        return clean.mask.cpu().numpy() > 0, 0

    def _query_keys(self, state_keys_KD: np.ndarray, clean: CleanBatch, episode_K: np.ndarray,
                    step_K: np.ndarray) -> np.ndarray:
        return self.keys_from_state_keys(state_keys_KD, clean.actions.cpu().numpy()[episode_K, step_K])

    def _target_values(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """A miss takes y."""
        return torch.where(lookup.hit_BT, lookup.values_BT, y_BT), lookup.hit_BT

    def _joint_actions(self, actions: Any, of: tuple[int, ...], what: str) -> np.ndarray:
        """``actions`` as numpy, checked to be [..., n_agents] for the states (or state keys) of shape ``of``."""
        if actions is None:
            raise ValueError("SAEM keys need the joint action: call keys(states, actions) with actions [..., n_agents]")
        actions_np = _to_numpy(actions)
        expected = (*of[:-1], self.n_agents)
        if tuple(actions_np.shape) != expected:
            raise ValueError(
                f"actions have shape {tuple(actions_np.shape)}, expected {expected} "
                f"for {what} {tuple(of)} and n_agents={self.n_agents}"
            )
        return actions_np

    def keys(self, states: Any, actions: Any = None) -> np.ndarray:
        """states [..., F], actions [..., A] int -> uint32 [..., D + ceil(A / 2)]."""
        states_np = _to_numpy(states)
        self._joint_actions(actions, states_np.shape, "states")  # before projecting: the error names the states
        return self.keys_from_state_keys(self.state_keys(states_np), actions)

    def keys_from_state_keys(self, state_keys: np.ndarray, actions: Any = None) -> np.ndarray:
        """phi(s)'s bits [..., D] then the action ids [..., A], 16 bits each: uint32 [..., D + ceil(A / 2)]."""
        actions_np = self._joint_actions(actions, state_keys.shape, "state keys")
        if not np.issubdtype(actions_np.dtype, np.integer):
            raise TypeError(f"actions have dtype {actions_np.dtype}, expected integer action ids")
        if actions_np.size and (actions_np.min() < 0 or actions_np.max() >= ACTION_ID_LIMIT):
            raise ValueError(
                f"action ids span [{actions_np.min()}, {actions_np.max()}], expected ids in [0, {ACTION_ID_LIMIT})"
            )
        ids = actions_np.astype(np.uint16).reshape(-1, self.n_agents)
        if self.n_agents % 2:
            ids = np.concatenate([ids, np.zeros((ids.shape[0], 1), np.uint16)], axis=1)
        n_action_words = self.key_words - self.proj_dim
        action_words = np.ascontiguousarray(ids).view(np.uint32).reshape(*state_keys.shape[:-1], n_action_words)
        return np.concatenate([state_keys, action_words], axis=-1)

    def _step_keys(self, state_keys_KD: np.ndarray, actions_KA: np.ndarray) -> np.ndarray:
        return self.keys_from_state_keys(state_keys_KD, actions_KA)


def make_episodic_memory(kind: str, **kwargs: Any) -> EpisodicMemory:
    """Build the registered table memory ``kind`` ("sem", "saem", ...) with EpisodicMemory's keyword arguments."""
    cls = memory_class(kind)
    if not issubclass(cls, EpisodicMemory):
        raise ValueError(f"memory {kind!r} is not a table keyed on phi(s) (an EpisodicMemory): build it with "
                         "semzoo.episodic.memory.make_memory(name, config, ...)")
    return cls(**kwargs)
