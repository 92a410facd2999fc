"""Benchmark the SEM table against a KD-tree reference episodic memory.

Table of 1e6 entries, D = 4, state size 120. Measures, in one run:
  * batched lookup of 3840 keys (32 episodes x 120 steps, half hits, half misses)
  * the same lookup the way earlier episodic-memory code does it: a scipy
    cKDTree over the stored keys (rebuilt periodically), one query per key in a
    Python loop, exact-match check with np.allclose
  * update from |M| = 5000 pairs into a table with room, and into a full table
  * bytes per entry
Targets: lookup >= 100x faster than the reference; update < 5 ms with room,
< 20 ms full; <= 29 bytes per entry.

Usage: python scripts/bench_memory.py [--repeats 30] [--reference-repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
import torch
from scipy.spatial import cKDTree

from semzoo.episodic.tables import EpisodicMemory, make_episodic_memory
from semzoo.types import EpisodeBatch

CAPACITY = 1_000_000
PROJ_DIM = 4
STATE_DIM = 120
N_EPISODES, EPISODE_LEN = 32, 120
N_LOOKUP = N_EPISODES * EPISODE_LEN  # 3840
PENDING = 5000
FILL_CHUNK = 100_000
DUPLICATE_FRACTION = 0.2  # states revisited within M
KNOWN_FRACTION = 0.1  # states of M already in the table

TARGET_SPEEDUP = 100.0
TARGET_UPDATE_ROOM_MS = 5.0
TARGET_UPDATE_FULL_MS = 20.0
TARGET_BYTES_PER_ENTRY = 29.0


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and minimum wall time of fn() in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def fill(memory: EpisodicMemory, n_entries: int, rng: np.random.Generator) -> np.ndarray:
    """Add n_entries random states' keys; returns the keys [n_entries, D]."""
    keys = []
    for start in range(0, n_entries, FILL_CHUNK):
        n = min(FILL_CHUNK, n_entries - start)
        chunk = memory.keys(rng.standard_normal((n, STATE_DIM), dtype=np.float32))
        memory.add(chunk, rng.standard_normal(n).astype(np.float32))
        keys.append(chunk)
    return np.concatenate(keys)


def pending_set(memory: EpisodicMemory, stored: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An M of 5000 pairs like training produces: some states repeat, some are already stored."""
    n_known = int(KNOWN_FRACTION * PENDING)
    n_new = PENDING - n_known - int(DUPLICATE_FRACTION * PENDING)
    new = memory.keys(rng.standard_normal((n_new, STATE_DIM), dtype=np.float32))
    known = stored[rng.integers(0, stored.shape[0], n_known)]
    distinct = np.concatenate([new, known])
    keys = np.concatenate([distinct, distinct[rng.integers(0, distinct.shape[0], PENDING - distinct.shape[0])]])
    return keys, rng.standard_normal(PENDING).astype(np.float32)


class KDTreeReference:
    """Earlier episodic-memory style: KD-tree nearest neighbour + np.allclose, one key at a time."""

    def __init__(self, keys_KD: np.ndarray, values_K: np.ndarray) -> None:
        self.keys_KD = keys_KD
        self.values_K = values_K
        self.rebuild()

    def rebuild(self) -> None:
        self.tree = cKDTree(self.keys_KD)

    def lookup(self, queries_QD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.zeros(queries_QD.shape[0], np.float32)
        hit = np.zeros(queries_QD.shape[0], bool)
        for i, key in enumerate(queries_QD):
            _, index = self.tree.query(key, k=1)
            if np.allclose(self.keys_KD[index], key):
                values[i] = self.values_K[index]
                hit[i] = True
        return values, hit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--reference-repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    memory = make_episodic_memory("sem", state_dim=STATE_DIM, n_agents=2, proj_dim=PROJ_DIM, capacity=CAPACITY)
    start = time.perf_counter()
    stored = fill(memory, CAPACITY, rng)
    fill_s = time.perf_counter() - start
    assert memory.n_entries == CAPACITY

    # ---- lookup: half stored keys, half unseen states
    hit_keys = stored[rng.choice(CAPACITY, N_LOOKUP // 2, replace=False)]
    miss_keys = memory.keys(rng.standard_normal((N_LOOKUP - N_LOOKUP // 2, STATE_DIM), dtype=np.float32))
    queries = rng.permutation(np.concatenate([hit_keys, miss_keys]))
    states = rng.standard_normal((N_LOOKUP, STATE_DIM), dtype=np.float32)
    lookup_ms, lookup_min_ms = timed(lambda: memory.lookup(queries), args.repeats)
    query_ms, _ = timed(lambda: memory.query(states), args.repeats)
    ours_values, ours_hit = memory.lookup(queries)

    # ---- reference over the same table contents
    table = memory._table
    occupied = table.meta_NL != 0
    bucket, slot = np.nonzero(occupied)
    ref_keys = table.key_NWL[bucket, :, slot].view(np.float32)
    start = time.perf_counter()
    reference = KDTreeReference(ref_keys, table.value_NL[bucket, slot])
    build_s = time.perf_counter() - start
    ref_ms, ref_min_ms = timed(lambda: reference.lookup(queries.view(np.float32)), args.reference_repeats)
    ref_values, ref_hit = reference.lookup(queries.view(np.float32))
    agree = bool(np.array_equal(ref_hit, ours_hit) and np.array_equal(ref_values[ref_hit], ours_values[ours_hit]))

    # ---- update from M = 5000 pairs into a table with room (half full), then into the full table
    room = make_episodic_memory("sem", state_dim=STATE_DIM, n_agents=2, proj_dim=PROJ_DIM, capacity=CAPACITY)
    room_stored = fill(room, CAPACITY // 2, rng)
    room_sets = [pending_set(room, room_stored, rng) for _ in range(args.repeats)]
    full_sets = [pending_set(memory, stored, rng) for _ in range(args.repeats)]
    room_iter, full_iter = iter(room_sets), iter(full_sets)
    room_ms, room_min_ms = timed(lambda: room.add(*next(room_iter)), args.repeats)
    full_ms, full_min_ms = timed(lambda: memory.add(*next(full_iter)), args.repeats)
    # worst case: 5000 distinct unseen states, all inserted, 5000 evictions
    fresh_iter = iter(
        [
            (memory.keys(rng.standard_normal((PENDING, STATE_DIM), dtype=np.float32)), np.ones(PENDING, np.float32))
            for _ in range(args.repeats)
        ]
    )
    fresh_ms, fresh_min_ms = timed(lambda: memory.add(*next(fresh_iter)), args.repeats)
    assert memory.n_entries == CAPACITY and room.n_entries < CAPACITY

    # ---- update_from: returns + projection of a 32 x 120 episode batch into M
    batch = EpisodeBatch(
        obs=torch.zeros(N_EPISODES, EPISODE_LEN + 1, 2, 1),
        state=torch.randn(N_EPISODES, EPISODE_LEN + 1, STATE_DIM),
        avail=torch.ones(N_EPISODES, EPISODE_LEN + 1, 2, 1, dtype=torch.bool),
        actions=torch.zeros(N_EPISODES, EPISODE_LEN, 2, dtype=torch.int64),
        reward=torch.randn(N_EPISODES, EPISODE_LEN),
        terminated=torch.zeros(N_EPISODES, EPISODE_LEN, dtype=torch.bool),
        filled=torch.ones(N_EPISODES, EPISODE_LEN, dtype=torch.bool),
        length=torch.full((N_EPISODES,), EPISODE_LEN),
    )
    pending_probe = make_episodic_memory(
        "sem", state_dim=STATE_DIM, n_agents=2, capacity=1000, pending_size=10**9
    )
    update_from_ms, _ = timed(lambda: pending_probe.update_from(batch), args.repeats)

    bytes_per_entry = memory.nbytes / memory.capacity
    speedup = ref_ms / lookup_ms

    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    print(f"SEM table: capacity {CAPACITY:,}, D {PROJ_DIM}, state size {STATE_DIM}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"fill 1e6 entries (10 x add of 100k): {fill_s:.2f} s; KD-tree build: {build_s:.2f} s")
    print(f"{'measure':58s} {'median':>10s} {'min':>10s}  target")
    print(f"{'lookup 3840 keys, SEM table (ms)':58s} {lookup_ms:10.3f} {lookup_min_ms:10.3f}")
    print(f"{'query 3840 states incl. projection (ms)':58s} {query_ms:10.3f}")
    print(f"{'lookup 3840 keys, cKDTree + allclose loop (ms)':58s} {ref_ms:10.1f} {ref_min_ms:10.1f}")
    print(f"{'  speedup (reference / SEM table)':58s} {speedup:10.0f}x {ref_min_ms / lookup_min_ms:9.0f}x"
          f"  >= {TARGET_SPEEDUP:.0f}x {verdict(speedup >= TARGET_SPEEDUP)}")
    print(f"{'  hits agree with the reference':58s} {agree!s:>10s}  hits {int(ours_hit.sum())}/{N_LOOKUP}")
    print(f"{'update |M|=5000 pairs, table with room (ms)':58s} {room_ms:10.3f} {room_min_ms:10.3f}"
          f"  < {TARGET_UPDATE_ROOM_MS:.0f} {verdict(room_ms < TARGET_UPDATE_ROOM_MS)}")
    print(f"{'update |M|=5000 pairs, full table, evicts (ms)':58s} {full_ms:10.3f} {full_min_ms:10.3f}"
          f"  < {TARGET_UPDATE_FULL_MS:.0f} {verdict(full_ms < TARGET_UPDATE_FULL_MS)}")
    print(f"{'update 5000 distinct new keys, full table (ms)':58s} {fresh_ms:10.3f} {fresh_min_ms:10.3f}"
          f"  < {TARGET_UPDATE_FULL_MS:.0f} {verdict(fresh_ms < TARGET_UPDATE_FULL_MS)}")
    print(f"{'update_from 32 x 120 steps into M (returns + keys, ms)':58s} {update_from_ms:10.3f}")
    print(f"{'bytes per entry (nbytes / capacity)':58s} {bytes_per_entry:10.2f} {'':10s}"
          f"  <= {TARGET_BYTES_PER_ENTRY:.0f} {verdict(bytes_per_entry <= TARGET_BYTES_PER_ENTRY)}")


if __name__ == "__main__":
    main()
