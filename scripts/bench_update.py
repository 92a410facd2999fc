"""Where one gradient update's time goes, and how far it is from what this machine can do.

Fills a replay buffer by training briefly, then times, on the same sampled batches and alternating
so that a busy machine slows every part alike:

- the whole update (``learner.train``), for a plain algorithm and its ``sem-`` variant, so memory's
  share of an update is measured (the issue's bound: under 5 %);
- its parts: the online agent network forward + backward, the target agent network's forward, the
  episodic lookup (``semzoo.episodic.target.episodic_target``); "rest" is the mixer, loss, masks,
  clipping and the optimiser;
- the floor: the GRU's arithmetic per update (online forward + backward = 3 forwards, target 1
  forward) over the GFLOP/s that ``nn.GRU`` reaches on this machine at the update's shapes, timed
  alone. An update cannot go below that without fewer FLOPs or a faster GEMM.

    python scripts/bench_update.py --env smax:3m --algo qmix --batches 30
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from semzoo.config import TrainConfig
from semzoo.episodic.target import episodic_target
from semzoo.learners.batch import CleanBatch
from semzoo.run.trainer import Trainer
from semzoo.types import EpisodeBatch


def gru_flops(batch: EpisodeBatch, hidden: int) -> float:
    """FLOPs of one GRU forward over a batch's B x A sequences of T + 1 steps (input and hidden GEMMs)."""
    b, t1, a, _ = batch.obs.shape
    return 2.0 * 2 * (3 * hidden * hidden) * b * a * t1


def trained(env: str, algo: str, steps: int, seed: int) -> Trainer:
    config = TrainConfig(env=env, algo=algo, steps=steps, seed=seed, device="cpu", test_interval=10**12,
                         log_interval=10**12, threads=1)
    trainer = Trainer(config)
    trainer.run()
    return trainer


def time_it(fn, batches: list[EpisodeBatch]) -> float:
    """Mean milliseconds of fn(batch) over the batches (one untimed warm-up call)."""
    fn(batches[0])
    start = time.perf_counter()
    for batch in batches:
        fn(batch)
    return 1e3 * (time.perf_counter() - start) / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="smax:3m")
    parser.add_argument("--algo", default="qmix", help="the plain algorithm; its sem- variant is timed beside it")
    parser.add_argument("--fill-steps", type=int, default=8000, help="env steps of training before timing")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best round is reported")
    args = parser.parse_args()
    torch.set_num_threads(1)

    plain = trained(args.env, args.algo, args.fill_steps, seed=0)
    sem = trained(args.env, f"sem-{args.algo}", args.fill_steps, seed=0)
    generator = torch.Generator().manual_seed(1)
    batches = [sem.buffer.sample(plain.config.learner.batch_size, generator) for _ in range(args.batches)]
    learner, memory = plain.learner, sem.learner
    hidden = plain.config.agent.hidden_dim

    def agent_fwd_bwd(batch: EpisodeBatch) -> None:
        learner.agent_q(learner.agent, CleanBatch.from_batch(batch)).sum().backward()

    @torch.no_grad()
    def target_fwd(batch: EpisodeBatch) -> None:
        learner.agent_q(learner.target_agent, CleanBatch.from_batch(batch))

    def lookup(batch: EpisodeBatch) -> None:
        clean = CleanBatch.from_batch(batch)
        y = torch.zeros_like(clean.reward)
        assert memory.memory is not None
        episodic_target(memory.memory, memory.memory_kind, clean, y, y, gamma=0.99, miss_rule="target")

    gru = torch.nn.GRU(hidden, hidden, batch_first=True)

    def gru_alone(batch: EpisodeBatch) -> None:
        b, t1, a, _ = batch.obs.shape
        x = torch.randn(b * a, t1, hidden, requires_grad=True)
        gru(x)[0].sum().backward()

    parts = {"update (plain)": learner.train, "update (sem-)": memory.train, "agent fwd+bwd": agent_fwd_bwd,
             "target agent fwd": target_fwd, "episodic lookup": lookup, "nn.GRU fwd+bwd alone": gru_alone}
    best = {name: float("inf") for name in parts}
    for _ in range(args.rounds):
        for name, fn in parts.items():
            best[name] = min(best[name], time_it(fn, batches))
    flops_fwd = sum(gru_flops(b, hidden) for b in batches) / len(batches)
    gru_gflops = 3 * flops_fwd / (best["nn.GRU fwd+bwd alone"] * 1e-3) / 1e9
    floor_ms = 4 * flops_fwd / (gru_gflops * 1e9) * 1e3
    mean_t = sum(b.max_t for b in batches) / len(batches)
    mean_len = sum(float(b.length.float().mean()) for b in batches) / len(batches)

    print(f"{args.env}, {args.algo} and sem-{args.algo}, batch {plain.config.learner.batch_size} episodes, "
          f"GRU {hidden}, 1 torch thread; load average {os.getloadavg()[0]:.2f} at the end")
    print(f"sampled batches: padded to {mean_t:.1f} steps on average, episodes {mean_len:.1f} steps long")
    rest = best["update (plain)"] - best["agent fwd+bwd"] - best["target agent fwd"]
    for name, ms in [*best.items(), ("rest of the plain update", rest)]:
        share = f"{100 * ms / best['update (plain)']:5.1f} % of the plain update" if "alone" not in name else ""
        print(f"  {name:26s} {ms:7.2f} ms   {share}")
    memory_share = best["update (sem-)"] / best["update (plain)"] - 1
    print(f"memory's share of a sem- update: lookup {100 * best['episodic lookup'] / best['update (sem-)']:.1f} %, "
          f"whole update {100 * memory_share:+.1f} % against the plain one (bound: under 5 %)")
    print(f"floor: GRU {4 * flops_fwd / 1e6:.0f} MFLOP per update at {gru_gflops:.1f} GFLOP/s (nn.GRU alone) "
          f"= {floor_ms:.1f} ms; the plain update is {best['update (plain)'] / floor_ms:.2f}x the floor")


if __name__ == "__main__":
    main()
