"""The exact-match hash table behind SEM and SAEM: uint32 key words -> float32 max return, LFU eviction.

Open addressing over buckets of 16 slots with double hashing and a prime bucket count, so one probe
compares a whole bucket and every probe sequence visits every bucket. Layout, determinism and eviction
rules: docs/memory.md.

Shapes: K = number of keys, W = 32-bit words per key, N = buckets, L = slots per bucket.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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


def splitmix64(h_K: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 [K] (wrapping arithmetic): mixes this table's keys and the nearest index's cells."""
    h_K = (h_K ^ (h_K >> _SHIFT_30)) * _MIX_1
    h_K = (h_K ^ (h_K >> _SHIFT_27)) * _MIX_2
    return h_K ^ (h_K >> _SHIFT_31)


def _hash_keys(keys_KW: np.ndarray) -> np.ndarray:
    """uint64 hash [K] of uint32 key words [K, W]."""
    h_K = np.full(keys_KW.shape[0], _HASH_SEED, dtype=np.uint64)
    for w in range(keys_KW.shape[1]):
        h_K = splitmix64(h_K ^ keys_KW[:, w].astype(np.uint64))
    return h_K


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
        """The counters saved by ``state_dict()`` in ``state``; zero where absent (a checkpoint that holds none)."""
        usage = cls()
        for name in cls.COUNTERS:
            if prefix + name in state:
                setattr(usage, name, int(np.asarray(state[prefix + name]).item()))
        return usage
