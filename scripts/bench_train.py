"""Training throughput: QMIX, GRU agent, MPE2 simple_spread (3 agents, 25-step episodes), CPU.

Workload of the foundation issue: batch 32 episodes, one update per collected episode,
50k env steps. Prints end-to-end env steps/s, ms per update (timed in the same run),
collection-only steps/s and peak RSS, with ratios against the reference figures of a
PyMARL-family code base measured on this kind of machine (feed-forward agent):
580 env steps/s end to end and 13.9 ms per update.

    python scripts/bench_train.py [--steps 50000] [--n-envs 8] [--threads 2] [--sequential]
    python scripts/bench_train.py --ab 3 [--steps 20000] [--env smax:3m] [--collector thread]

By default acting overlaps learning (the trainer's default), collecting in the actor process;
--collector thread collects on a thread of this process instead (the reference), --sequential
measures the collect-then-learn loop. --ab N alternates overlapped and sequential runs N times in
this one process (overlapped first) and prints each run's env steps/s, each mode's median and their
ratio; "cores busy" counts this process and the actor process. --env measures another env (the
reference figures are MPE2's).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import threading
import time

import torch

from semzoo.config import TrainConfig
from semzoo.run.trainer import Trainer

REFERENCE_STEPS_PER_S = 580.0
REFERENCE_MS_PER_UPDATE = 13.9
TARGET_SPEEDUP = 5.0
TARGET_MS_PER_UPDATE = 4.0
MPE2 = "pz:mpe2.simple_spread_v3:parallel_env"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--algo", default="qmix")
    parser.add_argument("--env", default=MPE2)
    parser.add_argument("--sequential", action="store_true", help="collect, then learn (the loop of 0.2)")
    parser.add_argument("--collector", choices=("process", "thread"), default="process",
                        help="overlap mode's collector: the actor process (the default) or a thread")
    parser.add_argument("--ab", type=int, default=0, metavar="N",
                        help="alternate overlapped and sequential runs N times; print both rates and their ratio")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    Trainer.acting_in_process = args.collector == "process"
    if args.ab > 0:
        ab(args)
        return

    config = TrainConfig(env=args.env, algo=args.algo, steps=args.steps,
                         n_envs=args.n_envs, device="cpu", test_interval=10**12, log_interval=10**12,
                         threads=args.threads, sequential=args.sequential)
    trainer = Trainer(config)
    update_time = 0.0
    original_train = trainer.learner.train

    def timed_train(batch):
        nonlocal update_time
        start = time.perf_counter()
        out = original_train(batch)
        update_time += time.perf_counter() - start
        return out

    trainer.learner.train = timed_train
    start = time.perf_counter()
    trainer.run()
    total = time.perf_counter() - start
    steps, updates = trainer.counters.env_steps, trainer.counters.updates

    collect_start, collected = time.perf_counter(), 0
    while collected < 5_000:
        collected += int(trainer.runner.run(epsilon=0.5, seed=collected, generator=trainer.generator)[1].lengths.sum())
    collect_rate = collected / (time.perf_counter() - collect_start)
    trainer.close()

    rate = steps / total
    ms_update = 1e3 * update_time / max(updates, 1)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"workload: {args.algo}, GRU agent, {args.env}, {args.n_envs} envs, batch 32, "
          f"{steps:,} env steps, {updates:,} updates, {args.threads} torch threads, "
          f"{'sequential' if args.sequential else f'acting overlaps learning ({args.collector})'}")
    print(f"end to end        {rate:9.0f} env steps/s   ({rate / REFERENCE_STEPS_PER_S:.2f}x reference "
          f"{REFERENCE_STEPS_PER_S:.0f}; target >= {TARGET_SPEEDUP:.0f}x)")
    print(f"per update        {ms_update:9.2f} ms         ({REFERENCE_MS_PER_UPDATE / ms_update:.2f}x faster than "
          f"reference {REFERENCE_MS_PER_UPDATE} ms; target <= {TARGET_MS_PER_UPDATE} ms)")
    print(f"collection only   {collect_rate:9.0f} env steps/s")
    print(f"wall time         {total:9.1f} s")
    print(f"peak RSS          {peak_mb:9.0f} MB")


def ab(args: argparse.Namespace) -> None:
    """Overlapped and sequential runs of the same config, alternated in this process; env steps/s of each."""
    rates: dict[bool, list[float]] = {False: [], True: []}
    print(f"workload: {args.algo}, GRU agent, {args.env}, {args.n_envs} envs, batch 32, {args.steps:,} env "
          f"steps per run, {args.threads} torch threads, overlap collector: {args.collector}, {os.cpu_count()} cores, "
          f"load before: {_load()}")
    print(f"control: two threads of matrix products keep {_cores_available():.2f} cores busy in this process "
          "(2.00 on an idle 2-core machine; the most any overlap can use)")
    for round_ in range(args.ab):
        for sequential in (False, True):
            config = TrainConfig(env=args.env, algo=args.algo, steps=args.steps,
                                 n_envs=args.n_envs, device="cpu", test_interval=10**12, log_interval=10**12,
                                 threads=args.threads, sequential=sequential, seed=round_)
            trainer = Trainer(config)
            start, cpu_start = time.perf_counter(), _cpu_seconds()
            trainer.run()
            trainer.close()  # the actor process ends (and is waited for, so its CPU time counts)
            wall = time.perf_counter() - start
            cores = (_cpu_seconds() - cpu_start) / wall  # CPU seconds of all threads and the actor per wall second
            rate = trainer.counters.env_steps / wall
            startup = trainer.actor_startup_s or 0.0
            rates[sequential].append(rate)
            print(f"round {round_}  {'sequential' if sequential else 'overlapped'}  {rate:7.0f} env steps/s  "
                  f"({trainer.counters.updates:,} updates, {cores:.2f} cores busy"
                  + (f", actor startup {startup:.1f} s, {trainer.counters.env_steps / (wall - startup):.0f} env "
                     f"steps/s without it" if startup else "") + f")  load: {_load()}", flush=True)
    overlapped, sequential_ = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median  overlapped {overlapped:7.0f}  sequential {sequential_:7.0f} env steps/s  "
          f"ratio {overlapped / sequential_:.2f}x")
    print(f"control after: {_cores_available():.2f} cores busy, load: {_load()}")


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its waited-for children (the actor processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _cores_available(seconds: float = 1.0) -> float:
    """CPU seconds per wall second of two threads doing 400x400 matrix products (torch drops the GIL for them)."""
    matrix = torch.randn(400, 400)
    deadline = time.perf_counter() + seconds

    def work() -> None:
        while time.perf_counter() < deadline:
            matrix @ matrix

    start, cpu_start = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (time.process_time() - cpu_start) / (time.perf_counter() - start)


def _load() -> str:
    """The 1, 5 and 15 minute load averages (how busy the machine was)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
