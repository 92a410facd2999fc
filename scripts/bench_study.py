"""A seed study's cost: K separate single runs, one after another, against one K-run group (semzoo.run.multi).

Same configs (the default TrainConfig with the sequential loop, QMIX, seeds 0..K-1), short runs, the two variants measured
alternately in one process so machine load hits both alike. Prints per env and K: env steps/s (total
over the K runs), ms per update per run (the learning phase: sampling, updates, target syncs), collection ms per 1k env steps per run, the group's speed-up, and
an extrapolation of a 10 seeds x 500k env steps QMIX study on SMAX 3m.

    python scripts/bench_study.py [--steps 10000] [--ks 1,4,10] [--envs smax:3m,mpe] [--repeats 1]

The extrapolation is linear in env steps: the measured steady rate (JIT compilation and construction
left out) times 500k; it ignores that episodes shorten as the policy learns and that the replay buffer
fills (both change the two variants alike).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from semzoo.config import TrainConfig
from semzoo.run.multi import MultiTrainer
from semzoo.run.trainer import Trainer

ENVS = {"smax:3m": ("smax:3m", {}), "mpe": ("pz:mpe2.simple_spread_v3:parallel_env", {"max_cycles": 25})}
STUDY_SEEDS, STUDY_STEPS = 10, 500_000


@dataclass
class Timing:
    wall_s: float = 0.0
    env_steps: int = 0
    updates: int = 0
    """Gradient updates summed over the runs."""
    update_s: float = 0.0
    collect_s: float = 0.0


def timed(fn: Callable[..., Any], timing: Timing) -> Callable[..., Any]:
    def wrapper(*args: Any) -> Any:
        start = time.perf_counter()
        out = fn(*args)
        timing.update_s += time.perf_counter() - start
        return out
    return wrapper


def timed_collect(trainer: Trainer, timing: Timing) -> None:
    collect = trainer.collect

    def wrapper() -> Any:
        start = time.perf_counter()
        out = collect()
        timing.collect_s += time.perf_counter() - start
        return out
    trainer.collect = wrapper  # type: ignore[method-assign]


def single_runs(configs: Sequence[TrainConfig]) -> Timing:
    """The K runs one after another, each a plain Trainer (construction not timed)."""
    timing = Timing()
    for config in configs:
        trainer = Trainer(config, tensorboard=False)
        trainer.learn = timed(trainer.learn, timing)  # type: ignore[method-assign]
        timed_collect(trainer, timing)
        start = time.perf_counter()
        trainer.run()
        timing.wall_s += time.perf_counter() - start
        timing.env_steps += trainer.counters.env_steps
        timing.updates += trainer.counters.updates
        trainer.close()
    return timing


def group_run(configs: Sequence[TrainConfig]) -> Timing:
    """The K runs as one group (construction not timed)."""
    timing = Timing()
    group = MultiTrainer([Trainer(config, tensorboard=False) for config in configs])
    for trainer in group.trainers:
        trainer.learn = timed(trainer.learn, timing)  # type: ignore[method-assign]  # K = 1: the plain loop
        timed_collect(trainer, timing)
    group._learn = timed(group._learn, timing)  # type: ignore[method-assign]  # K > 1: every run's updates
    start = time.perf_counter()
    group.run()
    timing.wall_s = time.perf_counter() - start
    timing.env_steps = sum(t.counters.env_steps for t in group.trainers)
    timing.updates = sum(t.counters.updates for t in group.trainers)
    group.close()
    return timing


def describe(name: str, t: Timing) -> str:
    return (f"{name:7s} {t.env_steps / t.wall_s:8.0f} env steps/s  {1e3 * t.update_s / max(t.updates, 1):7.2f} ms/update/run  "
            f"{1e6 * t.collect_s / max(t.env_steps, 1):7.1f} ms collect/1k steps  wall {t.wall_s:6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000, help="env steps per run")
    parser.add_argument("--ks", default="1,4,10")
    parser.add_argument("--envs", default="smax:3m,mpe")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average at start: {os.getloadavg()}; torch threads 1; steps per run {args.steps:,}")
    rates: dict[tuple[str, int, str], list[float]] = {}
    for env_key in args.envs.split(","):
        env, env_args = ENVS[env_key]
        # Both variants take the sequential loop (a group always does): the comparison is of the updates.
        base = TrainConfig(env=env, env_args=env_args, algo="qmix", steps=args.steps, device="cpu", sequential=True,
                           test_interval=10**12, log_interval=10**12, save_interval=0)
        single_runs([replace(base, steps=base.n_envs * 60)])  # warm-up: JAX compilation, first-call costs
        for k in (int(x) for x in args.ks.split(",")):
            configs = [replace(base, seed=seed) for seed in range(k)]
            for repeat in range(args.repeats):
                order = (("single", single_runs), ("group", group_run))
                if repeat % 2:
                    order = order[::-1]
                for name, measure in order:
                    timing = measure(configs)
                    rates.setdefault((env_key, k, name), []).append(timing.env_steps / timing.wall_s)
                    print(f"{env_key:8s} K={k:<3d} {describe(name, timing)}  load {os.getloadavg()[0]:.2f}", flush=True)
            single = sum(rates[(env_key, k, "single")]) / args.repeats
            group = sum(rates[(env_key, k, "group")]) / args.repeats
            print(f"{env_key:8s} K={k:<3d} group / single throughput: {group / single:.2f}x", flush=True)
            if env_key == "smax:3m":
                total = STUDY_SEEDS * STUDY_STEPS
                print(f"{'':8s} extrapolated {STUDY_SEEDS} seeds x {STUDY_STEPS:,} env steps: single runs "
                      f"{total / single / 3600:.1f} h, group of {k} ({-(-STUDY_SEEDS // k)} groups) "
                      f"{total / group / 3600:.1f} h", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
