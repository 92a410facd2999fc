"""Checkpoint size and save/load time with a full default replay buffer (5000 episodes) and SEM table.

    python scripts/bench_checkpoint.py --envs matrix:climbing,smax:3m,smax:2s3z --lengths 1.0,0.6

The buffer is filled with 5000 synthetic episodes (random observations: incompressible) so the numbers
are those of a run past its first 5000 episodes; the SEM table has its default capacity (1e6). A
checkpoint stores the episodes' real steps only, so its size follows their length: ``--lengths`` gives
the episode lengths as fractions of the env's limit (1.0: every episode at the time limit, the
largest checkpoint; SMAX 2s3z episodes average about 0.6 of theirs by 0.5M steps).

Beside the times, the extra memory of a save and of a load: the peak of the process's resident memory
during the call (sampled every 5 ms) over its resident memory just before. A load's extra memory holds the
loaded payload itself, which the trainer then copies into its buffer and drops.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from semzoo.config import TrainConfig
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.trainer import Trainer
from semzoo.types import EpisodeBatch

BYTES_PER_MB = 1e6
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def extra_memory(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result and the peak of resident memory during it over resident memory before it, in bytes."""
    before = peak = resident_bytes()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.005):
            peak = max(peak, resident_bytes())

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = call()
    finally:
        done.set()
        sampler.join()
    return result, max(peak, resident_bytes()) - before


def fill(trainer: Trainer, length: int, chunk: int = 100) -> None:
    """Fill the trainer's buffer with episodes of ``length`` steps (random observations, as incompressible as real ones)."""
    buffer, env = trainer.buffer, trainer.env
    b, t = chunk, length
    batch = EpisodeBatch(
        obs=torch.randn(b, t + 1, env.n_agents, env.obs_dim), state=torch.randn(b, t + 1, env.state_dim),
        avail=torch.ones(b, t + 1, env.n_agents, env.n_actions, dtype=torch.bool),
        actions=torch.zeros(b, t, env.n_agents, dtype=torch.int64), reward=torch.zeros(b, t),
        terminated=torch.zeros(b, t, dtype=torch.bool), filled=torch.ones(b, t, dtype=torch.bool),
        length=torch.full((b,), t))
    if trainer.memory is not None:
        batch.state_keys = torch.from_numpy(trainer.memory.slot_state_keys(batch).view(np.int32))
    while len(buffer) < buffer.capacity:
        buffer.insert(batch)


def bench(env: str, algo: str, repeats: int, fraction: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(TrainConfig(env=env, algo=algo, device="cpu"), run_dir=tmp, tensorboard=False)
        try:
            buffer = trainer.buffer
            length = max(1, round(fraction * buffer.max_t))
            fill(trainer, length)
            save_s, load_s, save_extra, load_extra = [], [], [], []
            for i in range(repeats):
                trainer.counters.env_steps = i + 1
                start = time.perf_counter()
                path, extra = extra_memory(trainer.save_checkpoint)
                save_s.append(time.perf_counter() - start)
                save_extra.append(extra)
                start = time.perf_counter()
                loaded, extra = extra_memory(CheckpointManager(tmp).load_latest)
                load_s.append(time.perf_counter() - start)
                load_extra.append(extra)
                del loaded
            size = path.stat().st_size
            print(f"{env:18s} {algo:9s} length {length:4d}/{buffer.max_t:<4d} buffer {buffer.nbytes / BYTES_PER_MB:8.1f} MB  memory "
                  f"{(trainer.memory.nbytes if trainer.memory else 0) / BYTES_PER_MB:6.1f} MB  checkpoint "
                  f"{size / BYTES_PER_MB:8.1f} MB  save {min(save_s):6.2f} s (+{max(save_extra) / BYTES_PER_MB:.0f} MB)  "
                  f"load {min(load_s):6.2f} s (+{max(load_extra) / BYTES_PER_MB:.0f} MB)")
        finally:
            trainer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="matrix:climbing,smax:3m")
    parser.add_argument("--algo", default="sem-qmix")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--lengths", default="1.0,0.6", help="episode lengths, as fractions of the env's limit")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for env in args.envs.split(","):
        for fraction in (float(f) for f in args.lengths.split(",")):
            bench(env, args.algo, args.repeats, fraction)


if __name__ == "__main__":
    main()
