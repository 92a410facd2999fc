"""Checkpoint size and save/load time with a full default replay buffer (5000 episodes) and SEM table.

    python scripts/bench_checkpoint.py --envs matrix:climbing,smax:3m,smax:2s3z

The buffer is marked full (its preallocated tensors are what a full buffer holds) so the numbers
are those of a run past its first 5000 episodes; the SEM table has its default capacity (1e6).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from semzoo.config import TrainConfig
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.trainer import Trainer

BYTES_PER_MB = 1e6


def bench(env: str, algo: str, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(TrainConfig(env=env, algo=algo, device="cpu"), run_dir=tmp, tensorboard=False)
        try:
            buffer = trainer.buffer
            buffer.size = buffer.capacity
            buffer.data.obs.normal_()  # incompressible content, as real observations
            save_s, load_s = [], []
            for i in range(repeats):
                trainer.counters.env_steps = i + 1
                start = time.perf_counter()
                path = trainer.save_checkpoint()
                save_s.append(time.perf_counter() - start)
                start = time.perf_counter()
                CheckpointManager(tmp).load_latest()
                load_s.append(time.perf_counter() - start)
            size = path.stat().st_size
            print(f"{env:18s} {algo:9s} buffer {buffer.nbytes / BYTES_PER_MB:8.1f} MB  memory "
                  f"{(trainer.memory.nbytes if trainer.memory else 0) / BYTES_PER_MB:6.1f} MB  checkpoint "
                  f"{size / BYTES_PER_MB:8.1f} MB  save {min(save_s):6.2f} s  load {min(load_s):6.2f} s")
        finally:
            trainer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="matrix:climbing,smax:3m")
    parser.add_argument("--algo", default="sem-qmix")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for env in args.envs.split(","):
        bench(env, args.algo, args.repeats)


if __name__ == "__main__":
    main()
