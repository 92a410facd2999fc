"""Throughput of one run and of a K-run group on a device: start-up, steady env steps/s, ms per update, time shares.

For ``--env`` and ``--algo`` on ``--device`` (cuda when a GPU is visible, else the CPU), it trains

- one run (seed 0) for ``--steps`` env steps, in the collect-then-learn loop (``--overlap``: the trainer's
  default loop, acting in the actor process while the learner updates);
- a group of ``--seeds`` K runs (seeds 0..K-1) for ``--steps`` env steps each, through ``semzoo train --seeds``'s
  path (``semzoo.run.multi.MultiTrainer``: the runs collect in lockstep, ``semzoo.run.group_runner.GroupRunner``,
  their env resets and steps in one call where the env has one, SMAX's ``reset_together`` and ``step_together``;
  their updates vmapped); ``--per-run-env-step``: the same with each run's envs reset and stepped on their own;

and prints, for each: the start-up seconds (building the run: env, networks, replay, memory, plus one throwaway
batch, where SMAX's JAX step compiles; the actor process's start with ``--overlap``; the group is built after
the single run in the same process, so it reuses JAX's compiled step and imports: its start-up is the build of
its K runs), the steady-state env steps/s
(the log windows of metrics.csv past ``--warmup`` env steps; a group's is the sum of its runs'), and the shares
of that time spent collecting, updating and in the rest (storing, logging; read from the run's own
``time_collect_s`` and ``time_learn_s`` metrics). Then the milliseconds of one gradient update (batch sampled
from run 0's buffer, moved to the device as the trainer moves it; ``--replay-device run`` keeps the buffers on the
device, so the batch is gathered there) and of one stacked update of the K runs
(``semzoo.learners.stacked.StackedUpdate``), medians over ``--rounds``; and the milliseconds of one env step and
of one env reset of the K runs' envs, one by one and in one grouped call (where the env has one). The last line
holds the figures as one JSON object, for machines.

    python scripts/bench_gpu.py --env smax:3s5z --seeds 8 --steps 20000
    python scripts/bench_gpu.py --env smax:3m --seeds 2 --steps 2000 --device cpu
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from semzoo.config import LearnerConfig, TrainConfig
from semzoo.learners.stacked import StackedUpdate
from semzoo.run import group_runner
from semzoo.run.device import resolve_device
from semzoo.run.multi import MultiTrainer
from semzoo.run.rundir import new_run_dir
from semzoo.run.trainer import Trainer
from semzoo.runfiles import read_metrics

NEVER = 10**12
"""An interval no bench run reaches (no evaluation, no periodic checkpoint inside the timed windows)."""


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model and core count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or "CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def throwaway_batch(trainer: Trainer) -> None:
    """One batch played and dropped (SMAX's step compiles here); every batch resets its envs with its own seed."""
    trainer.runner.run(epsilon=1.0, seed=0, generator=torch.Generator().manual_seed(0))


def steady(run_dir: Path, warmup: int) -> dict[str, float] | None:
    """Env steps, seconds, collection and update seconds of a run's log windows that start past ``warmup`` env steps.

    The window of the final checkpoint (``checkpoint_time_s``) is left out. None when no such window was logged.
    """
    windows: dict[tuple[int, float], dict[str, float]] = {}
    for row in read_metrics(run_dir):
        if not row["name"].startswith("test_"):
            windows.setdefault((row["env_steps"], row["wall_time"]), {})[row["name"]] = row["value"]
    rows = sorted((key, metrics) for key, metrics in windows.items() if "steps_per_s" in metrics)
    total = {"steps": 0.0, "seconds": 0.0, "collect_s": 0.0, "learn_s": 0.0}
    for ((steps_before, wall_before), _), ((steps, wall), metrics) in itertools.pairwise(rows):
        if steps_before < warmup or "checkpoint_time_s" in metrics:
            continue
        total["steps"] += steps - steps_before
        total["seconds"] += wall - wall_before
        total["collect_s"] += metrics.get("time_collect_s", 0.0)
        total["learn_s"] += metrics.get("time_learn_s", 0.0)
    return total if total["seconds"] > 0 else None


def shares(collect_s: float, learn_s: float, seconds: float, *, overlapped: bool) -> dict[str, float | None]:
    """Collection, update and the rest as shares of the wall time (no rest where collection overlaps the updates)."""
    collect, update = collect_s / seconds, learn_s / seconds
    return {"collect": collect, "update": update, "rest": None if overlapped else max(0.0, 1.0 - collect - update)}


def median_ms(fn: Callable[[], object], device: torch.device, rounds: int, calls: int) -> float:
    """Median over ``rounds`` of the mean milliseconds of ``calls`` calls of ``fn`` (two warm-up calls first)."""
    for _ in range(2):
        fn()
    sync(device)
    per_round = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        per_round.append(1e3 * (time.perf_counter() - start) / calls)
    return statistics.median(per_round)


def update_ms(trainers: Sequence[Trainer], rounds: int, calls: int) -> tuple[float | None, float | None]:
    """(ms of one update of run 0, ms of one stacked update of all runs; None where a buffer cannot fill a batch)."""
    size = trainers[0].config.learner.batch_size
    if not all(t.buffer.can_sample(size) for t in trainers):
        return None, None
    device = trainers[0].device
    generator = torch.Generator().manual_seed(1)

    def batch(trainer: Trainer) -> Any:
        return trainer.buffer.sample(size, generator).for_update(device)  # as Trainer.next_update_batch does

    first = trainers[0]
    single = median_ms(lambda: first.learner.train(batch(first)), device, rounds, calls)
    if len(trainers) == 1:
        return single, None
    learners = [t.learner for t in trainers]
    stacked_update = StackedUpdate(learners)
    stacked = median_ms(lambda: stacked_update.train(learners, [batch(t) for t in trainers]), device, rounds, calls)
    return single, stacked


def env_step_ms(trainers: Sequence[Trainer], rounds: int, calls: int) -> tuple[float | None, float | None]:
    """(ms of one step of each run's envs, one env after the other; ms of one grouped step of them all: None where
    the envs cannot step together). Every agent takes its first available action; an env whose episode ended
    costs as much as one still going (SMAX steps its frozen envs and keeps their state)."""
    envs = [trainer.env for trainer in trainers]
    arrays = [env.reset(seed=1000 * k) for k, env in enumerate(envs)]

    def first_legal() -> list[Any]:
        return [a.avail.argmax(-1) for a in arrays]

    def one_by_one() -> None:
        for k, (env, actions) in enumerate(zip(envs, first_legal())):
            arrays[k] = env.step(actions)[0]

    per_run = median_ms(one_by_one, torch.device("cpu"), rounds, calls)  # device_get waits for the env step
    step_together = group_runner.env_step_together(envs)
    if step_together is None:
        return per_run, None

    def together() -> None:
        for k, result in enumerate(step_together(envs, first_legal())):
            arrays[k] = result[0]

    return per_run, median_ms(together, torch.device("cpu"), rounds, calls)


def env_reset_ms(trainers: Sequence[Trainer], rounds: int, calls: int) -> tuple[float | None, float | None]:
    """(ms of one reset of each run's envs, one env after the other; ms of one grouped reset of them all: None where
    the envs cannot reset together), each run's envs with its own seed as a collection seeds them."""
    envs = [trainer.env for trainer in trainers]
    seeds = [1000 * k for k in range(len(envs))]
    per_run = median_ms(lambda: [env.reset(seed=seed) for env, seed in zip(envs, seeds)], torch.device("cpu"),
                        rounds, calls)  # device_get waits for the reset
    reset_together = group_runner.env_reset_together(envs)
    if reset_together is None:
        return per_run, None
    return per_run, median_ms(lambda: reset_together(envs, seeds), torch.device("cpu"), rounds, calls)


def bench(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    device = torch.device(args.device)
    config = TrainConfig(env=args.env, algo=args.algo, steps=args.steps, device=args.device, n_envs=args.n_envs,
                         out=str(out), test_interval=NEVER, test_episodes=args.n_envs, save_interval=0,
                         log_interval=args.log_interval or max(1, args.steps // 10), sequential=not args.overlap,
                         learner=LearnerConfig(replay_device=args.replay_device))
    warmup = args.steps // 4 if args.warmup is None else args.warmup
    figures: dict[str, Any] = {"env": args.env, "algo": args.algo, "device": str(device),
                               "device_name": device_name(device), "torch": torch.__version__,
                               "torch_threads": config.threads, "runs": args.seeds,
                               "steps_per_run": args.steps, "warmup_steps": warmup,
                               "single_loop": "overlapped" if args.overlap else "sequential",
                               "replay_device": args.replay_device}

    started = time.perf_counter()
    single_config = dataclasses.replace(config, run_name="single")
    single = Trainer(single_config, run_dir=new_run_dir(single_config), tensorboard=False)
    try:
        throwaway_batch(single)
        startup = time.perf_counter() - started
        single.run()
        startup += single.actor_startup_s or 0.0
        window = steady(Path(single.run_dir or ""), warmup)
        ms_single, _ = update_ms([single], args.rounds, args.calls)
    finally:
        single.close()
    figures.update(startup_s_single=startup, ms_update_single=ms_single,
                   steps_per_s_single=window["steps"] / window["seconds"] if window else None,
                   share_single=shares(window["collect_s"], window["learn_s"], window["seconds"],
                                       overlapped=args.overlap) if window else None)

    figures.update(startup_s_group=None, steps_per_s_group=None, share_group=None, ms_update_stacked=None,
                   group_env_step="per run" if args.per_run_env_step else "together where the env can",
                   ms_env_step_per_run=None, ms_env_step_together=None, ms_env_reset_per_run=None,
                   ms_env_reset_together=None)
    if args.seeds > 1:
        if args.per_run_env_step:  # GroupRunner finds no grouped env call: each run's envs reset and step alone
            group_runner.env_step_together = lambda envs: None  # type: ignore[assignment]
            group_runner.env_reset_together = lambda envs: None  # type: ignore[assignment]
        started = time.perf_counter()
        group_config = dataclasses.replace(config, sequential=True, out=str(out / "group"))
        group = MultiTrainer.create(group_config, list(range(args.seeds)), tensorboard=False)
        try:
            for trainer in group.trainers:
                throwaway_batch(trainer)
            figures["startup_s_group"] = time.perf_counter() - started
            group.run()
            windows = [steady(Path(t.run_dir or ""), warmup) for t in group.trainers]
            _, figures["ms_update_stacked"] = update_ms(group.trainers, args.rounds, args.calls)
            figures["ms_env_step_per_run"], figures["ms_env_step_together"] = env_step_ms(
                group.trainers, args.rounds, args.calls)
            figures["ms_env_reset_per_run"], figures["ms_env_reset_together"] = env_reset_ms(
                group.trainers, args.rounds, args.calls)
        finally:
            group.close()
        if all(w is not None for w in windows):
            got = [w for w in windows if w is not None]
            seconds = statistics.fmean(w["seconds"] for w in got)  # the runs share one clock: about equal
            figures["steps_per_s_group"] = sum(w["steps"] / w["seconds"] for w in got)
            figures["share_group"] = shares(sum(w["collect_s"] for w in got), sum(w["learn_s"] for w in got),
                                            seconds, overlapped=False)
    figures["load_average"] = os.getloadavg()[0]
    return figures


def report(figures: dict[str, Any]) -> None:
    def number(value: float | None, form: str) -> str:
        return "not measured" if value is None else format(value, form)

    def share_line(share: dict[str, float | None] | None) -> str:
        if share is None:
            return "not measured"
        rest = "overlapped with collection" if share["rest"] is None else f"{100 * share['rest']:.0f} %"
        return f"collection {100 * share['collect']:.0f} %, update {100 * share['update']:.0f} %, rest {rest}"

    k = figures["runs"]
    print(f"{figures['algo']} on {figures['env']}, {figures['device']} ({figures['device_name']}), torch "
          f"{figures['torch']}, {figures['steps_per_run']} env steps per run, steady state past "
          f"{figures['warmup_steps']} env steps; load average {figures['load_average']:.2f} at the end")
    print(f"start-up        one run {number(figures['startup_s_single'], '.1f')} s"
          + (f"; group of {k}: {number(figures['startup_s_group'], '.1f')} s (JAX's step compiled already)"
             if k > 1 else ""))
    print(f"env steps/s     one run ({figures['single_loop']}) {number(figures['steps_per_s_single'], ',.0f')}"
          + (f"; group of {k}: {number(figures['steps_per_s_group'], ',.0f')} in all" if k > 1 else ""))
    print(f"time shares     one run: {share_line(figures['share_single'])}")
    if k > 1:
        print(f"                group:   {share_line(figures['share_group'])}")
    stacked = figures["ms_update_stacked"]
    print(f"ms per update   single {number(figures['ms_update_single'], '.2f')}"
          + (f"; stacked over {k} runs {number(stacked, '.2f')} per call"
             + ("" if stacked is None else f" ({stacked / k:.2f} per run)") if k > 1 else ""))
    if k > 1:
        together = figures["ms_env_step_together"]
        print(f"ms per env step of the {k} runs ({figures['group_env_step']} in training): one by one "
              f"{number(figures['ms_env_step_per_run'], '.2f')}, grouped "
              + ("not available for this env" if together is None else f"{together:.2f}"))
        together = figures["ms_env_reset_together"]
        print(f"ms per env reset of the {k} runs: one by one {number(figures['ms_env_reset_per_run'], '.2f')}, "
              "grouped " + ("not available for this env" if together is None else f"{together:.2f}"))
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="smax:3m")
    parser.add_argument("--algo", default="sem-qmix")
    parser.add_argument("--seeds", type=int, default=8, help="K, the runs of the group (1: only the single run)")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of every run")
    parser.add_argument("--warmup", type=int, default=None, help="env steps left out of the steady state (default "
                        "a quarter of --steps)")
    parser.add_argument("--log-interval", type=int, default=0, help="env steps of a log window (default steps / 10)")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--replay-device", choices=["host", "run"], default="host",
                        help="where the runs keep their replay buffers (learner.replay_device)")
    parser.add_argument("--overlap", action="store_true",
                        help="the single run acts in the actor process while it learns (the trainer's default loop)")
    parser.add_argument("--per-run-env-step", action="store_true",
                        help="the group's runs step their envs one by one (no grouped env step)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of update timing (medians over them)")
    parser.add_argument("--calls", type=int, default=8, help="updates per round")
    parser.add_argument("--out", default=None, help="folder for the runs' directories (default: a temporary one)")
    args = parser.parse_args()
    for name in ("seeds", "steps", "n_envs", "rounds", "calls"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a positive integer")
    try:
        resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    if args.out is not None:
        report(bench(args, Path(args.out)))
        return
    with tempfile.TemporaryDirectory(prefix="bench_gpu_") as out:
        report(bench(args, Path(out)))


if __name__ == "__main__":
    main()
