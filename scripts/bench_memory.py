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

Second section (EMC / EMU lookup, `semzoo.episodic.nearest`): 1e6 float keys,
D = 4, 3840 queries (half near stored keys, half new); the batched
nearest-within-tolerance lookup against a cKDTree over the stored keys
queried one key at a time in a Python loop with the tolerance test after each
query, as EMC's and EMU's public code do. Both tolerances (EMC's allclose,
EMU's z-normalised box), the build of each structure over 1e6 keys and the
re-grid after re-embedding every key (EMU). Target: >= 100x.

Third section (EMU's schedule, `semzoo.episodic.emu`): a memory holding 1e6 entries of raw states of size 120
(SMAX 2s3z's), timed through its own methods: the embedder's training (102,400 samples, 100 Adam steps of 1,024)
followed by re-embedding every stored key from its raw state (`train_embedder`), and the re-embedding alone
(`reembed`: the encoder over 1e6 states, the index rebuilt, the normalisation refreshed). Target: seconds.

Usage: python scripts/bench_memory.py [--repeats 30] [--reference-repeats 3] [--only sem|tolerance|emu]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
import torch
from scipy.spatial import cKDTree

from semzoo.episodic.nearest import NearestIndex
from semzoo.episodic.sem import EpisodicMemory, make_episodic_memory
from semzoo.episodic.tolerance import EMU_DELTA, AllClose, Tolerance, ZBox
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


def timed_cpu(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """Median and minimum wall time and median CPU time of fn() in ms (CPU time: this process only, so a
    machine shared with other jobs inflates it less than wall time)."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return 1e3 * float(np.median(wall)), 1e3 * float(np.min(wall)), 1e3 * float(np.median(cpu))


EMC_KEY_STD = float(np.sqrt(STATE_DIM / PROJ_DIM))
"""EMC's key z = M s, M with N(0, 1/4) entries: a unit Gaussian state of size 120 gives N(0, 30) per key dimension."""


class KDTreeToleranceLoop:
    """EMC/EMU public code: a kd-tree over the stored keys, one query per key, then the tolerance test."""

    def __init__(self, keys_ND: np.ndarray, tolerance: Tolerance) -> None:
        self.keys_ND = keys_ND
        self.tolerance = tolerance
        self.tree = cKDTree(keys_ND)

    def lookup(self, queries_MD: np.ndarray) -> np.ndarray:
        slots = np.full(queries_MD.shape[0], -1, np.int64)
        tol = self.tolerance
        for i, key in enumerate(queries_MD):
            _, index = self.tree.query(key, k=1)
            if isinstance(tol, AllClose):  # EMC: np.allclose(stored, key, atol=1e-8)
                close = np.allclose(self.keys_ND[index], key, rtol=tol.rtol, atol=tol.atol)
            else:  # EMU: np.allclose(stored_norm, key_norm, rtol=0, atol=delta)
                assert isinstance(tol, ZBox) and tol.mean_D is not None and tol.std_D is not None
                stored = (self.keys_ND[index] - tol.mean_D) / tol.std_D
                close = np.allclose(stored, (key - tol.mean_D) / tol.std_D, rtol=0.0, atol=tol.delta)
            if close:
                slots[i] = index
        return slots


def bench_tolerance(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """Batched nearest-within-tolerance lookup (EMC, EMU) against the kd-tree loop: 1e6 keys, 3840 queries."""
    keys = (rng.standard_normal((CAPACITY, PROJ_DIM)) * EMC_KEY_STD).astype(np.float32)
    print(f"\nEMC/EMU lookup (semzoo.episodic.nearest): {CAPACITY:,} keys, D {PROJ_DIM}, {N_LOOKUP} queries; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'measure':58s} {'median':>10s} {'min':>10s}  target")
    for name, tolerance in (("EMC allclose(atol 1e-8, rtol 1e-5)", AllClose()), ("EMU z-box(delta 1.3e-5)", ZBox(EMU_DELTA))):
        index = NearestIndex(PROJ_DIM, CAPACITY, tolerance)
        start = time.perf_counter()
        index.add(keys)
        add_s = time.perf_counter() - start
        index.fit_normalisation()
        start = time.perf_counter()
        index.rebuild()
        rebuild_s = time.perf_counter() - start
        start = time.perf_counter()
        reference = KDTreeToleranceLoop(keys, tolerance)
        tree_s = time.perf_counter() - start

        # half the queries revisit stored keys (exact, or within a fifth of the tolerance), half are new states
        near = keys[rng.choice(CAPACITY, N_LOOKUP // 2, replace=False)].astype(np.float64)
        width = tolerance.half_width(near)
        near += rng.uniform(-0.2, 0.2, near.shape) * width * (rng.random((near.shape[0], 1)) < 0.5)
        new = rng.standard_normal((N_LOOKUP - near.shape[0], PROJ_DIM)) * EMC_KEY_STD
        queries = rng.permutation(np.concatenate([near, new])).astype(np.float32)

        ours_ms, ours_min_ms, ours_cpu = timed_cpu(lambda index=index, queries=queries: index.query(queries),
                                                   args.repeats)
        ref_ms, ref_min_ms, ref_cpu = timed_cpu(
            lambda reference=reference, queries=queries: reference.lookup(queries), args.reference_repeats
        )
        found, ref_slots = index.query(queries), reference.lookup(queries)
        agree = bool(np.array_equal(found.slot, ref_slots))
        write_keys = np.concatenate([queries[: N_LOOKUP // 2], rng.standard_normal((N_LOOKUP // 2, PROJ_DIM)) * EMC_KEY_STD])
        write_sets = iter([write_keys.astype(np.float32) + np.float32(i) for i in range(args.repeats)])
        write_ms, _ = timed(lambda index=index, sets=write_sets: index.find_or_add(next(sets)), args.repeats)
        # EMU after retraining its embedder: every stored key moves, the grid is rebuilt in one call
        moved = (keys * np.float32(1.5) + np.float32(0.25)).astype(np.float32)
        start = time.perf_counter()
        index.rebuild(moved[: index.n_entries], index.slots()) if index.n_entries == CAPACITY else None
        reembed_s = time.perf_counter() - start
        speedup = ref_ms / ours_ms

        print(f"-- {name}: hits {int(found.hit.sum())}/{N_LOOKUP}")
        print(f"{'  lookup 3840 keys, batched hash grid (ms)':58s} {ours_ms:10.3f} {ours_min_ms:10.3f}"
              f"  cpu {ours_cpu:.3f}")
        print(f"{'  lookup 3840 keys, cKDTree loop + tolerance test (ms)':58s} {ref_ms:10.1f} {ref_min_ms:10.1f}"
              f"  cpu {ref_cpu:.1f}")
        print(f"{'  speedup (kd-tree loop / batched)':58s} {speedup:10.0f}x {ref_min_ms / ours_min_ms:9.0f}x"
              f"  >= {TARGET_SPEEDUP:.0f}x {'ok' if speedup >= TARGET_SPEEDUP else 'MISSED'}"
              f"; cpu time {ref_cpu / ours_cpu:.0f}x")
        print(f"{'  same slots as the kd-tree loop':58s} {agree!s:>10s}")
        print(f"{'  build over 1e6 keys: first add / rebuild() (s)':58s} {add_s:10.2f} {rebuild_s:10.2f}")
        print(f"{'  build over 1e6 keys: cKDTree (s)':58s} {tree_s:10.2f}")
        print(f"{'  re-embed: rebuild(new keys for all 1e6 slots) (s)':58s} {reembed_s:10.2f}")
        print(f"{'  find_or_add 3840 keys, full index, half new (ms)':58s} {write_ms:10.3f}")
        print(f"{'  bytes per entry (nbytes / capacity)':58s} {index.nbytes / CAPACITY:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--reference-repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("sem", "tolerance", "emu"), default=None,
                        help="run one section: the SEM table, the EMC/EMU tolerance lookup, or EMU's retraining and "
                             "re-embedding (default: all)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.only in (None, "sem"):
        bench_sem(args, rng)
    if args.only in (None, "tolerance"):
        bench_tolerance(args, rng)
    if args.only in (None, "emu"):
        bench_emu_schedule(rng)


def bench_emu_schedule(rng: np.random.Generator) -> None:
    """EMU's embedder training plus re-embedding of 1e6 stored states, and the re-embedding alone (seconds)."""
    from semzoo.episodic.emu import EMUMemory

    torch.set_num_threads(1)
    memory = EMUMemory(state_dim=STATE_DIM, proj_dim=PROJ_DIM, capacity=CAPACITY, seed=0)
    # 1e6 entries as the memory would hold them: raw states, their steps, returns, and keys from the embedder
    memory.limit = EPISODE_LEN
    memory.state_NS[:] = rng.standard_normal((CAPACITY, STATE_DIM), dtype=np.float32)
    memory.time_N[:] = rng.integers(0, EPISODE_LEN, CAPACITY)
    memory.return_N[:] = rng.uniform(0.0, 20.0, CAPACITY).astype(np.float32)
    memory.index.add(memory.embed(memory.state_NS, memory.time_N))
    print(f"\nEMU schedule (semzoo.episodic.emu): {memory.index.n_entries:,} entries, raw state {STATE_DIM} float32, "
          f"D {PROJ_DIM}, 1 torch thread; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    start = time.perf_counter()
    memory.reembed()
    reembed_s = time.perf_counter() - start
    start = time.perf_counter()
    memory.train_embedder()
    train_s = time.perf_counter() - start
    print(f"{'  re-embed every stored key (encoder + rebuild + normalisation) (s)':70s} {reembed_s:8.2f}")
    print(f"{'  train the embedder (102,400 samples, 100 steps) and re-embed (s)':70s} {train_s:8.2f}"
          f"  (embedder loss {memory.last_loss:.3g})")
    print(f"{'  memory bytes (raw states are ' + format(memory.state_NS.nbytes, ',') + ')':70s} {memory.nbytes:,}")


def bench_sem(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """The SEM table: lookup against the KD-tree reference, updates, bytes per entry."""

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
