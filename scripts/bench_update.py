"""Where one gradient update's time goes, and how far it is from what this machine can do.

Fills a replay buffer by training briefly, then times, on the same sampled batches and alternating
batch by batch (each round in another order) so that a busy machine slows every part alike:

- the whole update (``learner.train``), for a plain algorithm and its ``<memory>-`` variant of each memory asked
  for (``--memories``, default every registered one: SEM, SAEM, EMC, EMU), so each memory's share of an update is
  measured (SEM's bound: under 5 %);
- its parts: the online agent network forward + backward, the target agent network's forward, each memory's
  phase 1 as the update runs it (``QLearner.table_lookup``, the memory's ``lookup_batch``: SEM's table probe on the
  state keys the replay buffer kept; EMC's and EMU's tolerance lookup plus their curiosity networks' own training
  step); "rest" is the mixer, loss, masks, clipping and the optimiser;
- the floor: the GRU's arithmetic per update (online forward + backward = 3 forwards, target 1
  forward) over the GFLOP/s that ``nn.GRU`` reaches on this machine at the update's shapes, timed
  alone. An update cannot go below that without fewer FLOPs or a faster GEMM.

Medians and ranges over the rounds; a memory's share (<memory>- update / plain update - 1, and its phase 1 /
its update) is taken round by round, so both sides of a ratio saw the same load. The memories' work outside
the update (writes when episodes are stored, EMU's embedder retraining every 10k env steps) is not in these
figures: scripts/bench_memory.py times it.

    python scripts/bench_update.py --env smax:3m --algo qmix --batches 30
    python scripts/bench_update.py --memories sem,emc --batches 10 --rounds 4
    python scripts/bench_update.py --algo qplex --memories sem --preset authors-smac   # QPLEX's SMAC setup

The last lines give the learning time per collected episode: an update's time times its updates per episode (two
in QPLEX's and EMC's SMAC setups, ``--preset authors-smac``), the figure to compare across setups.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable

import torch

from semzoo.config import TrainConfig
from semzoo.episodic.memory import memory_names
from semzoo.run.trainer import Trainer
from semzoo.types import CleanBatch, EpisodeBatch


def gru_flops(batch: EpisodeBatch, hidden: int) -> float:
    """FLOPs of one GRU forward over a batch's B x A sequences of T + 1 steps (input and hidden GEMMs)."""
    b, t1, a, _ = batch.obs.shape
    return 2.0 * 2 * (3 * hidden * hidden) * b * a * t1


def trained(env: str, algo: str, steps: int, seed: int, preset: str = "none") -> Trainer:
    config = TrainConfig(env=env, algo=algo, steps=steps, seed=seed, device="cpu", test_interval=10**12,
                         log_interval=10**12, threads=1, preset=preset)
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
    parser.add_argument("--algo", default="qmix", help="the plain algorithm; its <memory>- variants are timed beside it")
    parser.add_argument("--memories", default=",".join(memory_names()),
                        help="comma-separated registered memories whose variants are timed (default: all)")
    parser.add_argument("--fill-steps", type=int, default=8000, help="env steps of training before timing")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds: medians and ranges over them")
    parser.add_argument("--preset", default="none", help="a config preset (authors-smac: each algorithm's setup as its "
                        "authors ran it on SMAC, e.g. QPLEX-Qatten with 2 updates per episode)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    memories = [m.strip() for m in args.memories.split(",") if m.strip()]
    unknown = [m for m in memories if m not in memory_names()]
    if not memories or unknown:
        parser.error(f"--memories {args.memories!r}: expected registered memories from {', '.join(memory_names())}")
    plain = trained(args.env, args.algo, args.fill_steps, seed=0, preset=args.preset)
    with_memory = {m: trained(args.env, f"{m}-{args.algo}", args.fill_steps, seed=0, preset=args.preset)
                   for m in memories}
    generator = torch.Generator().manual_seed(1)
    # sampled from a buffer that caches state keys when one does (SEM, SAEM): every memory gets what it reads
    source = next((t for t in with_memory.values() if t.buffer.state_key_words), plain)
    batches = [source.buffer.sample(plain.config.learner.batch_size, generator) for _ in range(args.batches)]
    learner = plain.learner
    hidden = plain.config.agent.hidden_dim

    def agent_fwd_bwd(batch: EpisodeBatch) -> None:
        learner.agent_q(learner.agent, CleanBatch.from_batch(batch)).sum().backward()

    @torch.no_grad()
    def target_fwd(batch: EpisodeBatch) -> None:
        learner.agent_q(learner.target_agent, CleanBatch.from_batch(batch))

    cleans = {id(batch): CleanBatch.from_batch(batch) for batch in batches}  # made by every update alike

    def phase1(trainer: Trainer) -> Callable[[EpisodeBatch], object]:
        def run(batch: EpisodeBatch) -> object:
            keys = batch.state_keys if trainer.buffer.state_key_words else None
            return trainer.learner.table_lookup(cleans[id(batch)], keys)
        return run

    def curiosity_step(trainer: Trainer) -> Callable[[EpisodeBatch], object]:
        curiosity = getattr(trainer.memory, "curiosity")  # noqa: B009  (only memories that have one)

        def run(batch: EpisodeBatch) -> object:
            with torch.no_grad():  # as the learner's phase 1 holds it
                return curiosity.reward(cleans[id(batch)])
        return run

    def update(trainer: Trainer) -> Callable[[EpisodeBatch], object]:
        def run(batch: EpisodeBatch) -> object:
            if not trainer.buffer.state_key_words:  # a memory that caches no key gets the batch it would sample
                batch = dataclasses.replace(batch, state_keys=None)
            return trainer.learner.train(batch)
        return run

    gru = torch.nn.GRU(hidden, hidden, batch_first=True)

    def gru_alone(batch: EpisodeBatch) -> None:
        b, t1, a, _ = batch.obs.shape
        x = torch.randn(b * a, t1, hidden, requires_grad=True)
        gru(x)[0].sum().backward()

    parts: dict[str, Callable[[EpisodeBatch], object]] = {"update (plain)": learner.train}
    parts.update({f"update ({m}-)": update(t) for m, t in with_memory.items()})
    parts.update({"agent fwd+bwd": agent_fwd_bwd, "target agent fwd": target_fwd})
    parts.update({f"{m} phase 1 (lookup)": phase1(t) for m, t in with_memory.items()})
    # EMC's and EMU's phase 1 holds their curiosity's own training step: timed alone, so the lookup's share shows
    parts.update({f"{m} curiosity (in phase 1)": curiosity_step(t) for m, t in with_memory.items()
                  if getattr(t.memory, "curiosity", None) is not None})
    parts["nn.GRU fwd+bwd alone"] = gru_alone
    calls = alternate(parts, batches, args.rounds)
    ms = {name: per_round(values, len(batches)) for name, values in calls.items()}
    median = {name: statistics.median(values) for name, values in ms.items()}
    flops_fwd = sum(gru_flops(b, hidden) for b in batches) / len(batches)
    gru_gflops = 3 * flops_fwd / (median["nn.GRU fwd+bwd alone"] * 1e-3) / 1e9
    floor_ms = 4 * flops_fwd / (gru_gflops * 1e9) * 1e3
    mean_t = sum(b.max_t for b in batches) / len(batches)
    mean_len = sum(float(b.length.float().mean()) for b in batches) / len(batches)

    print(f"{args.env}, {args.algo} and {', '.join(f'{m}-{args.algo}' for m in memories)}, batch {plain.config.learner.batch_size} episodes, "
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
    print("each memory's share of an update (SEM's bound: under 5 %), round by round, median (range) and batch by "
          "batch (the updates of a batch back to back), median [quartiles]:")
    for m in memories:
        mine, look = f"update ({m}-)", f"{m} phase 1 (lookup)"
        extra = [s / p - 1 for s, p in zip(ms[mine], plain_ms)]
        lookup_share = [lk / s for lk, s in zip(ms[look], ms[mine])]
        paired = [s / p - 1 for s, p in zip(calls[mine], calls["update (plain)"])]
        lookup_paired = [lk / s for lk, s in zip(calls[look], calls[mine])]
        print(f"  {m:5s} {m}- / plain - 1 = {spread(extra, 100)} % | {quartiles(paired, 100)} %; "
              f"phase 1 / {m}- update = {spread(lookup_share, 100)} % | {quartiles(lookup_paired, 100)} %")
        if f"{m} curiosity (in phase 1)" in ms:
            own = [c / s for c, s in zip(ms[f"{m} curiosity (in phase 1)"], ms[mine])]
            print(f"        of which its curiosity's training step / {m}- update = {spread(own, 100)} %")
    print(f"floor: GRU {4 * flops_fwd / 1e6:.0f} MFLOP per update at {gru_gflops:.1f} GFLOP/s (nn.GRU alone) "
          f"= {floor_ms:.1f} ms; the plain update is {median['update (plain)'] / floor_ms:.2f}x the floor")
    # What a collected episode costs in learning: an update's time times the updates each episode owes.
    print("learning per collected episode = update ms x updates/episode (the preset or --updates-per-episode):")
    for name, trainer in [(args.algo, plain), *((f"{m}-{args.algo}", t) for m, t in with_memory.items())]:
        rate = trainer.config.learner.updates_per_episode
        update_ms = median["update (plain)" if trainer is plain else f"update ({name.partition('-')[0]}-)"]
        print(f"  {name:14s} {update_ms:.1f} ms x {rate:g} update(s)/episode = {update_ms * rate:.1f} ms per episode")


if __name__ == "__main__":
    main()
