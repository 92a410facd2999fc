"""Where one gradient update's time goes, and how far it is from what this machine can do.

Fills a replay buffer by training briefly, then times, on the same sampled batches and alternating
batch by batch (each round in another order) so that a busy machine slows every part alike:

- the whole update (``learner.train``), for a plain algorithm and its ``sem-`` variant, so memory's
  share of an update is measured (the issue's bound: under 5 %);
- its parts: the online agent network forward + backward, the target agent network's forward, the
  episodic table lookup as the update runs it (``QLearner.table_lookup``, the memory's ``lookup_batch``, on the state keys
  the replay buffer kept); "rest" is the mixer, loss, masks, clipping and the optimiser;
- the floor: the GRU's arithmetic per update (online forward + backward = 3 forwards, target 1
  forward) over the GFLOP/s that ``nn.GRU`` reaches on this machine at the update's shapes, timed
  alone. An update cannot go below that without fewer FLOPs or a faster GEMM.

Medians and ranges over the rounds; memory's share (sem- update / plain update - 1, and lookup / sem-
update) is taken round by round, so both sides of a ratio saw the same load.

    python scripts/bench_update.py --env smax:3m --algo qmix --batches 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch

from semzoo.config import TrainConfig
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


def alternate(parts: dict[str, Callable[[EpisodeBatch], object]], batches: list[EpisodeBatch],
              rounds: int) -> dict[str, list[float]]:
    """Milliseconds of every call: [round * len(batches) + batch] per part. The parts take turns on each batch,
    in another order each round (one warm-up call each)."""
    for fn in parts.values():
        fn(batches[0])
    names = list(parts)
    calls: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for batch in batches:
            for name in order:
                start = time.perf_counter()
                parts[name](batch)
                calls[name].append(1e3 * (time.perf_counter() - start))
    return calls


def per_round(calls: list[float], n_batches: int) -> list[float]:
    """Mean milliseconds per batch of each round."""
    return [statistics.fmean(calls[i:i + n_batches]) for i in range(0, len(calls), n_batches)]


def spread(values: list[float], scale: float = 1.0) -> str:
    """'median (min-max)' of values times scale."""
    return f"{scale * statistics.median(values):7.2f} ({scale * min(values):.2f}-{scale * max(values):.2f})"


def quartiles(values: list[float], scale: float = 1.0) -> str:
    """'median [25 %-75 %]' of values times scale."""
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"{scale * q2:.2f} [{scale * q1:.2f} to {scale * q3:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="smax:3m")
    parser.add_argument("--algo", default="qmix", help="the plain algorithm; its sem- variant is timed beside it")
    parser.add_argument("--fill-steps", type=int, default=8000, help="env steps of training before timing")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds: medians and ranges over them")
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

    cleans = {id(batch): CleanBatch.from_batch(batch) for batch in batches}  # made by every update alike

    def lookup(batch: EpisodeBatch) -> None:
        assert memory.memory is not None
        memory.table_lookup(cleans[id(batch)], batch.state_keys)

    gru = torch.nn.GRU(hidden, hidden, batch_first=True)

    def gru_alone(batch: EpisodeBatch) -> None:
        b, t1, a, _ = batch.obs.shape
        x = torch.randn(b * a, t1, hidden, requires_grad=True)
        gru(x)[0].sum().backward()

    parts = {"update (plain)": learner.train, "update (sem-)": memory.train, "agent fwd+bwd": agent_fwd_bwd,
             "target agent fwd": target_fwd, "episodic lookup": lookup, "nn.GRU fwd+bwd alone": gru_alone}
    calls = alternate(parts, batches, args.rounds)
    ms = {name: per_round(values, len(batches)) for name, values in calls.items()}
    median = {name: statistics.median(values) for name, values in ms.items()}
    flops_fwd = sum(gru_flops(b, hidden) for b in batches) / len(batches)
    gru_gflops = 3 * flops_fwd / (median["nn.GRU fwd+bwd alone"] * 1e-3) / 1e9
    floor_ms = 4 * flops_fwd / (gru_gflops * 1e9) * 1e3
    mean_t = sum(b.max_t for b in batches) / len(batches)
    mean_len = sum(float(b.length.float().mean()) for b in batches) / len(batches)

    print(f"{args.env}, {args.algo} and sem-{args.algo}, batch {plain.config.learner.batch_size} episodes, "
          f"GRU {hidden}, 1 torch thread, {args.rounds} rounds of {args.batches} batches; "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print(f"sampled batches: padded to {mean_t:.1f} steps on average, episodes {mean_len:.1f} steps long")
    print("  part                       ms: median (range over rounds)")
    plain_ms = ms["update (plain)"]
    rest = [u - a - t for u, a, t in zip(plain_ms, ms["agent fwd+bwd"], ms["target agent fwd"])]
    for name, values in [*ms.items(), ("rest of the plain update", rest)]:
        share = "" if "alone" in name else \
            f"  {100 * statistics.median(values) / median['update (plain)']:5.1f} % of the plain update"
        print(f"  {name:26s} {spread(values)}{share}")
    extra = [s / p - 1 for s, p in zip(ms["update (sem-)"], plain_ms)]
    lookup_share = [lk / s for lk, s in zip(ms["episodic lookup"], ms["update (sem-)"])]
    print(f"memory's share (bound: under 5 %), round by round: sem- update / plain update - 1 = {spread(extra, 100)} %; "
          f"lookup / sem- update = {spread(lookup_share, 100)} %")
    paired = [s / p - 1 for s, p in zip(calls["update (sem-)"], calls["update (plain)"])]
    lookup_paired = [lk / s for lk, s in zip(calls["episodic lookup"], calls["update (sem-)"])]
    print(f"  batch by batch (the two updates of a batch back to back), median [quartiles]: sem- / plain - 1 = "
          f"{quartiles(paired, 100)} %; lookup / sem- update = {quartiles(lookup_paired, 100)} %")
    print(f"floor: GRU {4 * flops_fwd / 1e6:.0f} MFLOP per update at {gru_gflops:.1f} GFLOP/s (nn.GRU alone) "
          f"= {floor_ms:.1f} ms; the plain update is {median['update (plain)'] / floor_ms:.2f}x the floor")


if __name__ == "__main__":
    main()
