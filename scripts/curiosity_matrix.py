"""Does curiosity explore its way to the optimum? MAVEN's m-step game with fast-annealed epsilon, over seeds.

    python scripts/curiosity_matrix.py --algos qmix,emc-qmix,emu-qmix --workers 2   # the table of docs/matrix_games.md
    python scripts/curiosity_matrix.py --algos emc-qmix --grid curiosity.curiosity_scale=0.001,0.1
    python scripts/curiosity_matrix.py --algos qmix --seeds 3 --steps 2000           # a quick look

The game (``matrix:m_step``, Mahajan et al. 2019): the first joint action picks a branch; on (0,0) and (1,1)
repeating it pays 1 a step, anything else ends the episode. The last step of (0,0) pays 4 for (1,1), so the
best return is m + 3 (8 at the default m = 5); every other complete episode returns m. Finding the 3 extra takes
m - 1 steps of (0,0) and then (1,1) at the last step: 1 episode in 4^m (1,024) under uniform actions, and rarely
more once epsilon is small, unless the greedy policy walks branch (0,0) and explores at its end.

Prints one markdown row per (algorithm, --grid cell): the greedy return of every seed at the end, how many reach
m + 3, the mean, which branch the greedy policies follow (a seed on (0,0) that misses m + 3 has not learnt the
last step's bonus; one on (1,1) is in the trap) and the mean seconds per run. ``--set KEY=VALUE`` overrides any config field for every run
(``semzoo train --help`` lists them; ``curiosity.curiosity=false`` switches the curiosity of emc-/emu- off).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

ENV = "matrix:m_step"


@dataclass(frozen=True)
class Setting:
    """What one run trains with; the defaults are those of the table in docs/matrix_games.md."""

    m: int = 5
    """The game's length: optimum m + 3 = 8, the trap m = 5. MAVEN's m = 10 is out of reach at this budget
    (QMIX returned 10 in all 13 runs over four epsilon schedules, docs/matrix_games.md)."""
    steps: int = 10_000
    """Env steps per run: 2,000 to 10,000 episodes depending on how far they get."""
    n_envs: int = 8
    epsilon_anneal_steps: int = 2_000
    """Epsilon falls 1 -> epsilon_finish over the first fifth of the run, then stays."""
    epsilon_finish: float = 0.05
    lr: float = 5e-4
    batch_size: int = 32
    buffer_size: int = 1_000
    """Episodes: the last 1,000, mostly greedy once epsilon is small."""
    target_update_episodes: int = 100
    updates_per_episode: float = 0.25
    """Two updates per collection of 8 episodes (keeps a run near 10 s on an idle core)."""


def run_config(algo: str, seed: int, setting: Setting, overrides: dict[str, Any]) -> Any:
    """The TrainConfig of one run: the setting, then the ``--set``/``--grid`` overrides (validated); a memory's own
    setting (``curiosity.*``) reaches the runs of the algorithms that train with that memory only."""
    from semzoo.config import ExplorationConfig, LearnerConfig, TrainConfig, registered_components
    from semzoo.run.sweep import apply_overrides

    config = TrainConfig(
        env=ENV, env_args={"m": setting.m}, algo=algo, steps=setting.steps, seed=seed, n_envs=setting.n_envs,
        test_episodes=setting.n_envs, test_interval=10**9, log_interval=10**9, save_interval=0, device="cpu",
        sequential=True,  # collect, then learn: one core per run, no actor process to start
        exploration=ExplorationConfig(epsilon_anneal_steps=setting.epsilon_anneal_steps,
                                      epsilon_finish=setting.epsilon_finish),
        learner=LearnerConfig(lr=setting.lr, batch_size=setting.batch_size, buffer_size=setting.buffer_size,
                              target_update_episodes=setting.target_update_episodes,
                              updates_per_episode=setting.updates_per_episode),
    )
    apply_overrides({}, overrides)  # each key a config key, for every algorithm (ValueError naming one that is not)
    components = registered_components()
    used = {key: value for key, value in overrides.items()
            if key.partition(".")[0] not in components or components[key.partition(".")[0]].used_by(algo)}
    return TrainConfig.from_dict(apply_overrides(config.to_dict(), used))


BRANCHES = {(0, 0): "(0,0)", (1, 1): "(1,1)"}
"""The branches that pay: the greedy policy's first joint action names the one it follows."""


def train_one(job: tuple[str, int, Setting, dict[str, Any]]) -> tuple[float, str, float]:
    """Train one run; returns (greedy return at the end, the greedy policy's branch, seconds)."""
    import torch

    from semzoo.run.trainer import Trainer

    torch.set_num_threads(1)  # tiny networks: extra threads only contend
    started = time.perf_counter()
    trainer = Trainer(run_config(*job))
    try:
        greedy = trainer.run()["test_return_mean"]
        # One more greedy episode, after the run's own evaluation, to read the path it takes (the game is deterministic).
        batch, _ = trainer.runner.run(epsilon=0.0, seed=0, generator=trainer.generator)
        first_joint = tuple(int(a) for a in batch.actions[0, 0])
    finally:
        trainer.close()
    return float(greedy), BRANCHES.get(first_joint, "none"), time.perf_counter() - started


def parse_overrides(items: list[str], parser: argparse.ArgumentParser) -> dict[str, Any]:
    """['curiosity.curiosity_scale=0.1'] -> {'curiosity.curiosity_scale': 0.1}; values are JSON, else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            parser.error(f"--set {item!r}: expected KEY=VALUE, e.g. --set curiosity.curiosity_scale=0.1")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def cell_name(cell: dict[str, Any]) -> str:
    return " ".join(f"{key.rpartition('.')[2]}={json.dumps(value)}" for key, value in cell.items())


def main(argv: list[str] | None = None) -> None:
    from semzoo.algos import parse_algorithm
    from semzoo.run.sweep import parse_grid

    default = Setting()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default="qmix", help="comma-separated algorithm ids (emc-qmix, emu-qmix, ...)")
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1")
    parser.add_argument("--workers", type=int, default=1, help="runs in parallel, one process each")
    parser.add_argument("--m", type=int, default=default.m, help="the game's length; optimum m + 3")
    parser.add_argument("--steps", type=int, default=default.steps, help="env steps per run")
    parser.add_argument("--epsilon-anneal-steps", type=int, default=default.epsilon_anneal_steps)
    parser.add_argument("--epsilon-finish", type=float, default=default.epsilon_finish)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every run, e.g. --set curiosity.curiosity=false (repeatable)")
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                        help="one table row per value, e.g. --grid curiosity.curiosity_scale=0.001,0.1 (repeatable)")
    args = parser.parse_args(argv)

    setting = Setting(m=args.m, steps=args.steps, epsilon_anneal_steps=args.epsilon_anneal_steps,
                      epsilon_finish=args.epsilon_finish)
    overrides = parse_overrides(args.overrides, parser)
    try:
        axes = parse_grid(args.grid)
        algos = args.algos.split(",")
        for algo in algos:
            parse_algorithm(algo)  # a typo fails here, not in a worker
        cells = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
        rows = [(algo, cell) for algo in algos for cell in cells]
        for algo, cell in rows:
            run_config(algo, 0, setting, {**overrides, **cell})  # a bad override fails here, before any run
    except ValueError as error:
        parser.error(str(error))

    from semzoo import make_env

    optimum = make_env(ENV, m=setting.m).optimal_return
    print(f"m-step game, m = {setting.m} (optimum {optimum:g}), {setting}, overrides {overrides or 'none'}, "
          f"seeds 0..{args.seeds - 1}", flush=True)
    jobs = [(algo, seed, setting, {**overrides, **cell}) for algo, cell in rows for seed in range(args.seeds)]
    started = time.perf_counter()
    if args.workers == 1:
        results = [train_one(job) for job in jobs]  # in this process: no start-up, easy to debug
    else:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            results = list(pool.map(train_one, jobs))
    wall = time.perf_counter() - started

    print()
    print(f"| algorithm | greedy return per seed | reach {optimum:g} | mean | greedy branch (0,0) / (1,1) / none "
          "| s per run |")
    print("|---|---|---|---|---|---|")
    for i, (algo, cell) in enumerate(rows):
        runs = results[i * args.seeds:(i + 1) * args.seeds]
        returns = [greedy for greedy, _, _ in runs]
        branches = [branch for _, branch, _ in runs]
        name = f"{algo} {cell_name(cell)}".strip()
        print(f"| {name} | {' '.join(f'{r:g}' for r in returns)} | "
              f"{sum(bool(np.isclose(r, optimum)) for r in returns)}/{len(returns)} | {np.mean(returns):.2f} | "
              f"{' / '.join(str(branches.count(b)) for b in (*BRANCHES.values(), 'none'))} | "
              f"{np.mean([seconds for _, _, seconds in runs]):.1f} |")
    print()
    print(f"{len(jobs)} runs, {args.workers} workers, {wall:.0f} s wall")


if __name__ == "__main__":
    main()
