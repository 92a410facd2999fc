"""Replay buffer: bytes per stored step, the buffer at its expected and worst size, insert and sample times
against the padded buffer of 0.3 (kept below as the baseline), and the pace and peak RSS of a 27m_vs_30m run.

    python scripts/bench_replay.py                       # sizes of 3m, 2s3z, 3s5z, 27m_vs_30m; timings
    python scripts/bench_replay.py --run-dir RUN         # add the pace and peak RSS of a finished run

Sizes come from the SMAX envs (built, not stepped) and the memory plan (``semzoo.run.memory_plan``), for
SEM-QMIX at the paper's 5000-episode buffer and 0.5M steps. Timings use synthetic episodes whose lengths
are uniform between half the typical length and the limit (``TYPICAL_LENGTH``, else the limit), inserted
``n_envs`` = 8 at a time, and batches of 32; both buffers sample with the same generator and must hand out
equal batches. On 27m_vs_30m the padded buffer of 5000 episodes (42 GB) does not fit this machine, so both
buffers hold ``--capacity-27m`` episodes there.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from semzoo.config import TrainConfig
from semzoo.replay.buffer import EpisodeReplayBuffer, slot_bytes
from semzoo.run.memory_plan import TYPICAL_LENGTH, env_sizes, gb, plan
from semzoo.types import EpisodeBatch

MAPS = ("3m", "2s3z", "3s5z", "27m_vs_30m")
PROJ_DIM = 4
BATCH, N_ENVS = 32, 8
PAPER_BUFFER = 5000


class PaddedBuffer:
    """The replay buffer of 0.3, as the baseline: every episode padded to ``max_t``, preallocated."""

    def __init__(self, *, capacity: int, max_t: int, n_agents: int, obs_dim: int, state_dim: int, n_actions: int,
                 state_key_words: int) -> None:
        c, t, a = capacity, max_t, n_agents
        self.capacity, self.max_t = capacity, max_t
        self.data = EpisodeBatch(
            obs=torch.zeros(c, t + 1, a, obs_dim), state=torch.zeros(c, t + 1, state_dim),
            avail=torch.zeros(c, t + 1, a, n_actions, dtype=torch.bool),
            actions=torch.zeros(c, t, a, dtype=torch.int64), reward=torch.zeros(c, t),
            terminated=torch.zeros(c, t, dtype=torch.bool), filled=torch.zeros(c, t, dtype=torch.bool),
            length=torch.zeros(c, dtype=torch.int64),
            state_keys=torch.zeros(c, t + 1, state_key_words, dtype=torch.int32) if state_key_words else None)
        self.insert_pos = self.size = 0

    def insert(self, batch: EpisodeBatch) -> None:
        n, t = batch.batch_size, batch.max_t
        idx = (self.insert_pos + torch.arange(n)) % self.capacity
        for name, dst in self.data.tensors().items():
            src = getattr(batch, name)
            if name == "length":
                dst[idx] = src
                continue
            slots = name in ("obs", "state", "avail", "state_keys")
            steps = t + 1 if slots else t
            tt = torch.arange(steps)[None, :]
            real = tt <= batch.length[:, None] if slots else tt < batch.length[:, None]
            dst[idx] = 0
            dst[idx, :steps] = torch.where(real.view(*real.shape, *[1] * (src.dim() - 2)), src[:, :steps],
                                           torch.zeros((), dtype=src.dtype))
        self.insert_pos = (self.insert_pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> EpisodeBatch:
        idx = torch.randperm(self.size, generator=generator)[:batch_size]
        batch = self.data.index(idx)
        t = int(batch.length.max())
        return EpisodeBatch(
            obs=batch.obs[:, : t + 1], state=batch.state[:, : t + 1], avail=batch.avail[:, : t + 1],
            actions=batch.actions[:, :t], reward=batch.reward[:, :t], terminated=batch.terminated[:, :t],
            filled=batch.filled[:, :t], length=batch.length,
            state_keys=None if batch.state_keys is None else batch.state_keys[:, : t + 1])


def episodes(sizes: Any, typical: int, generator: torch.Generator) -> EpisodeBatch:
    """``N_ENVS`` synthetic episodes padded to the limit, lengths uniform in [typical / 2, limit]."""
    b, t, a = N_ENVS, sizes.episode_limit, sizes.n_agents
    length = torch.randint(max(1, typical // 2), t + 1, (b,), generator=generator)
    return EpisodeBatch(
        obs=torch.randn(b, t + 1, a, sizes.obs_dim, generator=generator),
        state=torch.randn(b, t + 1, sizes.state_dim, generator=generator),
        avail=torch.rand(b, t + 1, a, sizes.n_actions, generator=generator) < 0.5,
        actions=torch.randint(0, sizes.n_actions, (b, t, a), generator=generator),
        reward=torch.randn(b, t, generator=generator), terminated=torch.rand(b, t, generator=generator) < 0.05,
        filled=torch.arange(t)[None] < length[:, None], length=length,
        state_keys=torch.randint(-2**31, 2**31 - 1, (b, t + 1, PROJ_DIM), dtype=torch.int32, generator=generator))


def timings(sizes: Any, typical: int, capacity: int, samples: int) -> dict[str, float]:
    """Mean ms per insert of N_ENVS episodes and per sample of BATCH, old (padded) and new, and the fills' bytes."""
    kw = dict(capacity=capacity, max_t=sizes.episode_limit, n_agents=sizes.n_agents, obs_dim=sizes.obs_dim,
              state_dim=sizes.state_dim, n_actions=sizes.n_actions, state_key_words=PROJ_DIM)
    old, new = PaddedBuffer(**kw), EpisodeReplayBuffer(**kw)
    generator = torch.Generator().manual_seed(0)
    batches = [episodes(sizes, typical, generator) for _ in range(4)]
    insert = {"old": 0.0, "new": 0.0}
    n_inserts = -(-capacity // N_ENVS) + 4
    for i in range(n_inserts):
        for name, buffer in (("old", old), ("new", new)):
            start = time.perf_counter()
            buffer.insert(batches[i % len(batches)])
            insert[name] += time.perf_counter() - start
    sample = {"old": 0.0, "new": 0.0}
    for round_ in range(samples):
        for name, buffer in (("old", old), ("new", new)) if round_ % 2 else (("new", new), ("old", old)):
            g = torch.Generator().manual_seed(round_)
            start = time.perf_counter()
            got = buffer.sample(BATCH, g)
            sample[name] += time.perf_counter() - start
            if name == "new":
                want = old.sample(BATCH, torch.Generator().manual_seed(round_))
                assert all(torch.equal(v, getattr(want, k)) for k, v in got.tensors().items()), "samples differ"
    return {"insert_old_ms": 1e3 * insert["old"] / n_inserts, "insert_new_ms": 1e3 * insert["new"] / n_inserts,
            "sample_old_ms": 1e3 * sample["old"] / samples, "sample_new_ms": 1e3 * sample["new"] / samples,
            "old_bytes": sum(v.nbytes for v in old.data.tensors().values()), "new_bytes": new.nbytes}


def run_pace(run_dir: Path) -> dict[str, float]:
    """Env steps/s, ms per update and peak RSS of a finished run (its final.json and metrics.csv)."""
    import csv

    final = json.loads((run_dir / "final.json").read_text())
    with (run_dir / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    learn_s = sum(float(r["value"]) for r in rows if r["name"] == "time_learn_s")
    collect_s = sum(float(r["value"]) for r in rows if r["name"] == "time_collect_s")
    return {"env_steps": final["env_steps"], "updates": final["updates"], "wall_s": final["wall_time"],
            "steps_per_s": final["env_steps"] / final["wall_time"], "collect_s": collect_s, "learn_s": learn_s,
            "ms_per_update": 1e3 * learn_s / max(final["updates"], 1), "peak_rss_gb": final.get("peak_rss_bytes", 0) / 1e9,
            "replay_gb": final.get("replay_bytes", 0) / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maps", default=",".join(MAPS))
    parser.add_argument("--samples", type=int, default=100, help="samples timed per buffer")
    parser.add_argument("--capacity", type=int, default=5000)
    parser.add_argument("--capacity-27m", type=int, default=400, help="episodes both buffers hold on 27m_vs_30m")
    parser.add_argument("--no-timings", action="store_true")
    parser.add_argument("--run-dir", type=Path, help="a finished run whose pace and peak RSS to report")
    args = parser.parse_args()
    print("| map | A, O, S, U, limit | bytes/step f32 (f16) | padded 5000 | expected | worst 0.5M f32 (f16), with a "
          "checkpoint's copy "
          "| insert old/new ms | sample old/new ms | timed capacity |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.maps.split(","):
        env = f"smax:{name}"
        config = TrainConfig(env=env, algo="sem-qmix", steps=500_000)
        sizes = env_sizes(config)
        t = sizes.episode_limit
        per = {dtype: sum(slot_bytes(n_agents=sizes.n_agents, obs_dim=sizes.obs_dim, state_dim=sizes.state_dim,
                                     n_actions=sizes.n_actions, state_key_words=PROJ_DIM, store_dtype=dtype).values())
               for dtype in ("float32", "float16")}
        padded = PAPER_BUFFER * ((t + 1) * (4 * (sizes.n_agents * sizes.obs_dim + sizes.state_dim + PROJ_DIM)
                                            + sizes.n_agents * sizes.n_actions) + t * (8 * sizes.n_agents + 6) + 8)
        p32 = plan(config, sizes)
        p16 = plan(TrainConfig(env=env, algo="sem-qmix", steps=500_000, learner=config.learner.__class__(
            replay_dtype="float16")), sizes)
        cells = [name, f"{sizes.n_agents}, {sizes.obs_dim}, {sizes.state_dim}, {sizes.n_actions}, {t}",
                 f"{per['float32']:,} ({per['float16']:,})", gb(padded), gb(p32.replay_expected),
                 f"{gb(p32.replay_worst + p32.copy_worst)} ({gb(p16.replay_worst + p16.copy_worst)})"]
        if args.no_timings:
            cells += ["", "", ""]
        else:
            capacity = args.capacity_27m if name == "27m_vs_30m" else args.capacity
            m = timings(sizes, min(TYPICAL_LENGTH.get(env, t), t), capacity, args.samples)
            cells += [f"{m['insert_old_ms']:.2f} / {m['insert_new_ms']:.2f}",
                      f"{m['sample_old_ms']:.2f} / {m['sample_new_ms']:.2f} ({m['sample_new_ms'] / m['sample_old_ms'] - 1:+.0%})",
                      f"{capacity} ({gb(m['old_bytes'])} / {gb(m['new_bytes'])})"]
        print("| " + " | ".join(cells) + " |", flush=True)
    if args.run_dir is not None:
        pace = run_pace(args.run_dir)
        print(f"\nrun {args.run_dir.name}: {pace['env_steps']:,} env steps, {pace['updates']:,} updates in "
              f"{pace['wall_s']:.0f} s: {pace['steps_per_s']:.1f} env steps/s, {pace['ms_per_update']:.0f} ms per "
              f"update (learn {pace['learn_s']:.0f} s, collect {pace['collect_s']:.0f} s), replay buffer "
              f"{pace['replay_gb']:.3f} GB at the end, peak RSS {pace['peak_rss_gb']:.2f} GB")


if __name__ == "__main__":
    main()
