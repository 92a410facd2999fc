"""Many runs in one process: K seeds of one config trained in lockstep, their gradient updates vmapped.

    build K ordinary Trainers (own env, replay H, episodic table, generator, run directory, lock, checkpoints)
    repeat while a run has env steps to go:
        every unfinished run collects N episodes, all in lockstep: one agent   (run/group_runner.py;
            forward per step for all runs (group_collect; off: run by run)      Trainer.collect)
        while some run owes an update: each owing run samples its own batch,   (Trainer.next_update_batch)
            one vmapped gradient step updates them all                          (learners/stacked.py)
        per run: target sync, then log / evaluate / checkpoint at its intervals (Trainer.finish_learning, ...)
        a run that reached its steps finishes as a single run does (final checkpoint, test, final.json)

Every random draw of a run comes from its own streams (its generator, its env seeds, its table's
projection), never from process-global RNG state, so run k samples, explores and evaluates exactly as
the single run with its seed and the sequential loop (``sequential=True``, which a group of K > 1 runs
sets: acting does not overlap learning in a group); only the update's float rounding differs (vmapped
kernels, batches padded to a common length), within 1e-5 relative per update (``compile_update`` on a CUDA
device compiles the vmapped loss: ``StackedUpdate.compile``). The group's collection in lockstep acts with the
runs' agents stacked, which may round otherwise in the last bit at some sizes (bit for bit on the development
machine's CPU: ``tests/test_group_collect.py``). K = 1 is the plain Trainer, with the config as given.

Checkpoints are taken group-wide: when one run saves, every unfinished run saves at the same iteration,
so ``MultiTrainer.resume`` of the whole group continues bit for bit; a stop signal (``semzoo.run.stopping``)
checkpoints every unfinished run at the iteration it arrives in. One run of a group resumed alone
continues as a single run, within float tolerance of what the group would have done.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semzoo.config import TrainConfig
from semzoo.learners.stacked import StackedUpdate
from semzoo.presets import preset_departures, preset_reward_mismatch, unused_preset
from semzoo.resolution import ResolvedRun, resolve
from semzoo.run import memory_plan
from semzoo.run.group_runner import GroupRunner
from semzoo.run.rundir import new_run_dir
from semzoo.run.runner import RolloutStats
from semzoo.run.stopping import RunStopped, StopRequest, stop_on_signals
from semzoo.run.trainer import Progress, Trainer, compile_bucket

RUN_FIELDS = ("seed", "run_name")
"""The config fields the runs of a group may differ in: the seed and the run's own name (a sweep names each run)."""


def parse_seeds(spec: str) -> list[int]:
    """Seeds from a spec like ``0-9``, ``0,3,5`` or ``0-4,7``: distinct, in the order given.

    ValueError names the bad part, what is expected and the fix.
    """
    seeds: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first, last = (int(low), int(high)) if dash else (int(part), int(part))
        except ValueError:
            raise ValueError(f"--seeds {spec!r}: {part!r} is not a seed or a range; expected non-negative integers "
                             "and ranges such as 0-9, 0,3,5 or 0-4,7") from None
        if first < 0 or last < first:
            raise ValueError(f"--seeds {spec!r}: {part!r} is not a range low-high with 0 <= low <= high; "
                             "write e.g. 0-9")
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        raise ValueError(f"--seeds {spec!r} names seed {repeated[0]} twice; give each seed once")
    return seeds


def group_config(config: TrainConfig) -> dict[str, Any]:
    """The part of ``config`` the runs of one group share: all of it but ``RUN_FIELDS``."""
    return {k: v for k, v in config.to_dict().items() if k not in RUN_FIELDS}


def check_group_configs(configs: Sequence[TrainConfig]) -> None:
    """ValueError unless the configs differ only in the seed and run name (the runs of one group)."""
    first = group_config(configs[0])
    for config in configs[1:]:
        other = group_config(config)
        if other != first:
            differ = sorted(k for k in first if first[k] != other.get(k))
            raise ValueError(f"the runs of a group must share their config except the seed; these differ: "
                             f"{', '.join(differ)}. Resume runs of different configs one at a time")
    seeds = [c.seed for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"the runs of a group need distinct seeds, got {seeds}")


class MultiTrainer:
    """K ordinary ``Trainer`` objects of one config (different seeds) driven in lockstep; ``run()`` trains them all."""

    def __init__(self, trainers: Sequence[Trainer], *, progress: Progress | None = None) -> None:
        if not trainers:
            raise ValueError("a MultiTrainer needs at least one Trainer")
        check_group_configs([t.config for t in trainers])
        if len(trainers) > 1 and not trainers[0].config.sequential:
            raise ValueError("the runs of a group take the sequential loop (collect, then learn): build them with "
                             "sequential=True (MultiTrainer.create does)")
        self.trainers = list(trainers)
        self.progress = progress
        self._stacked = StackedUpdate([t.learner for t in self.trainers]) if len(self.trainers) > 1 else None
        # compile_update on a CUDA device: the vmapped loss compiled too (each Trainer compiled its own learner's
        # loss, or warned that its device takes the plain update).
        first = self.trainers[0]
        if self._stacked is not None and first.config.compile_update and first.device.type == "cuda":
            self._stacked.compile(bucket_steps=compile_bucket(first.max_t))
        # One agent forward per step for all runs (``group_collect``) where their agents stack; else run by run.
        self._group_collect = (len(self.trainers) > 1 and trainers[0].config.group_collect
                               and GroupRunner.why_not([t.runner for t in self.trainers]) is None)

    @classmethod
    def create(cls, config: TrainConfig | ResolvedRun, seeds: Sequence[int], *, tensorboard: bool = True,
               on_built: Callable[[int, Trainer], None] | None = None) -> MultiTrainer:
        """Trainers for ``config`` with each of ``seeds``, each in its own new run directory (``new_run_dir``).

        ``on_built(i, trainer)`` is called after the i-th (1-based) is built: building many runs takes a while.
        """
        if not seeds:
            raise ValueError("seeds is empty: give at least one seed")
        run = resolve(config)
        config = run.config
        if config.run_name and len(seeds) > 1:
            raise ValueError(f"run_name={config.run_name!r} names one run; the runs of --seeds take the default "
                             "names <env>_<algo>_seed<seed>: drop --run-name")
        if len(seeds) > 1:  # each Trainer checks its own run's plan; the K runs together are checked before any exists
            sizes = memory_plan.env_sizes(run.config)
            run = memory_plan.fit_to_env(run, sizes)  # once for the group: its runs take the fitted config
            memory_plan.check(run, sizes, runs=len(seeds))
        config = run.config
        for note in (unused_preset(config, run.algo), preset_reward_mismatch(config, run.algo),
                     preset_departures(config, run.algo)):
            if note is not None:
                warnings.warn(note, stacklevel=2)
        trainers: list[Trainer] = []
        try:
            for seed in seeds:
                # A group runs the sequential loop (collect, then learn); one seed is the plain single run.
                seed_run = run.replace(seed=seed, sequential=config.sequential or len(seeds) > 1)
                trainers.append(Trainer(seed_run, run_dir=new_run_dir(seed_run.config), tensorboard=tensorboard))
                if on_built is not None:
                    on_built(len(trainers), trainers[-1])
            return cls(trainers)
        except BaseException:
            for trainer in trainers:
                trainer.close()
            raise

    @classmethod
    def resume(cls, run_dirs: Sequence[str | Path], *, steps: int | None = None, keep_checkpoints: int | None = None,
               tensorboard: bool = True) -> MultiTrainer:
        """The group of runs in ``run_dirs`` continued from their last checkpoints (``Trainer.resume`` each).

        Exact when the unfinished runs' checkpoints come from one iteration of the group (the group saves
        them together; a kill in the middle of a group save leaves them apart, which is warned about).
        """
        trainers: list[Trainer] = []
        try:
            for run_dir in run_dirs:
                trainers.append(Trainer.resume(run_dir, steps=steps, keep_checkpoints=keep_checkpoints,
                                               tensorboard=tensorboard))
            going = {t.counters.episodes for t in trainers if t.counters.env_steps < t.config.steps}
            if len(going) > 1:
                warnings.warn(f"the runs' last checkpoints come from different iterations (episodes {sorted(going)}): "
                              "the group continues within float tolerance, not bit for bit", stacklevel=2)
            return cls(trainers)
        except BaseException:
            for trainer in trainers:
                trainer.close()
            raise

    # ----- the lockstep loop -----------------------------------------------------------------------------------

    def run(self) -> list[dict[str, float]]:
        """Train every run to its ``config.steps``; each run's last evaluation, in the order of ``trainers``."""
        if len(self.trainers) == 1:  # the single-run path, bit for bit
            trainer = self.trainers[0]
            if self.progress is not None:
                trainer.progress = lambda info: self._report()
            return [trainer.run()]
        with stop_on_signals() as request:
            return self._train_group(request)

    def _train_group(self, request: StopRequest) -> list[dict[str, float]]:
        for t in self.trainers:
            t.record_session()
        clock = time.perf_counter()
        wall_at_start = {id(t): t.counters.wall_time for t in self.trainers}
        for t in self.trainers:
            t.window.restart_clock(clock, t.counters.env_steps)
        done = [t.counters.env_steps >= t.config.steps for t in self.trainers]
        while not all(done):
            active = [t for t, finished in zip(self.trainers, done) if not finished]
            stats = self._collect(active)
            for t, rollout in zip(active, stats):
                t.owe_updates(len(rollout.returns))
            t0 = time.perf_counter()
            self._learn(active)
            for t in active:
                t.finish_learning()
                t.window.add_time("time_learn_s", (time.perf_counter() - t0) / len(active))  # the group's time, shared
            for t, rollout in zip(active, stats):
                t.end_iteration(rollout, wall_at_start[id(t)] + time.perf_counter() - clock)
            self._save_together(active)
            for i, t in enumerate(self.trainers):
                if not done[i] and t.counters.env_steps >= t.config.steps:
                    t._finish()
                    done[i] = True
            self._report()
            if request.signum is not None and not all(done):  # every unfinished run checkpoints this iteration: exact group resume
                going = [t for t, finished in zip(self.trainers, done) if not finished]
                raise RunStopped(request.signum, [t.checkpoint_to_stop() for t in going])
        return [t._last_eval for t in self.trainers]

    def _collect(self, active: Sequence[Trainer]) -> list[RolloutStats]:
        """Each run's N training episodes (``Trainer.collect``): in lockstep (``GroupRunner``) or run by run."""
        if not self._group_collect:
            stats = []
            for t in active:
                t0 = time.perf_counter()
                stats.append(t.collect())
                t.window.add_time("time_collect_s", time.perf_counter() - t0)
            return stats
        t0 = time.perf_counter()
        plans = [t.next_collection() for t in active]
        collected = GroupRunner([t.runner for t in active]).run(
            epsilons=[epsilon for epsilon, _ in plans], seeds=[seed for _, seed in plans],
            generators=[t.generator for t in active])
        for t, (batch, rollout) in zip(active, collected):
            t.store(batch, rollout)
        for t in active:
            t.window.add_time("time_collect_s", (time.perf_counter() - t0) / len(active))  # the group's time, shared
        return [rollout for _, rollout in collected]

    def _learn(self, active: Sequence[Trainer]) -> None:
        """The updates owed, one vmapped step at a time over the runs that owe one (each samples its own batch)."""
        while True:
            owing, batches = [], []
            for t in active:
                batch = t.next_update_batch()
                if batch is not None:
                    owing.append(t)
                    batches.append(batch)
            if not owing:
                return
            if len(owing) == 1 or self._stacked is None:
                results = [t.learner.train(b) for t, b in zip(owing, batches)]
            else:
                results = self._stacked.train([t.learner for t in owing], batches)
            for t, result in zip(owing, results):
                t.record_update(result)

    def _save_together(self, active: Sequence[Trainer]) -> None:
        """When one run saved a checkpoint this iteration, every unfinished run saves one too (exact group resume)."""
        if any(t._saved_at == t.counters.env_steps for t in active):
            for t in active:
                if t.counters.env_steps < t.config.steps:
                    t.save_checkpoint()

    def _report(self) -> None:
        """One progress line for the group: env steps summed, the mean of the runs' last test figures."""
        if self.progress is None:
            return
        counters = [t.counters for t in self.trainers]
        info: dict[str, Any] = {"env_steps": sum(c.env_steps for c in counters),
                                "steps": sum(t.config.steps for t in self.trainers),
                                "epsilon": float(np.mean([t.epsilon() for t in self.trainers])),
                                "runs": len(self.trainers)}
        for name in ("test_return_mean", "test_win_rate"):
            values = [t._last_eval[name] for t in self.trainers if name in t._last_eval]
            if values:
                info[name] = float(np.mean(values))
        self.progress(info)

    def close(self) -> None:
        for trainer in self.trainers:
            trainer.close()


def train_seeds(config: TrainConfig, seeds: Sequence[int], *, progress: Progress | bool = True,
                tensorboard: bool = True) -> list[tuple[Path, dict[str, float]]]:
    """Train ``config`` once per seed in one process (``MultiTrainer``); (run directory, final evaluation) per seed.

    Each run is the single run of ``dataclasses.replace(config, seed=seed, sequential=True)`` (a group collects,
    then learns) in its default run directory under ``config.out``; one seed is exactly ``semzoo.train(config)``.
    """
    group = MultiTrainer.create(config, list(seeds), tensorboard=tensorboard)
    return _run_group(group, progress)


def resume_seeds(run_dirs: Sequence[str | Path], *, steps: int | None = None, keep_checkpoints: int | None = None,
                 progress: Progress | bool = True, tensorboard: bool = True) -> list[tuple[Path, dict[str, float]]]:
    """Continue a group trained by ``train_seeds`` (all its run directories) from their last checkpoints."""
    group = MultiTrainer.resume(run_dirs, steps=steps, keep_checkpoints=keep_checkpoints, tensorboard=tensorboard)
    return _run_group(group, progress)


def _run_group(group: MultiTrainer, progress: Progress | bool) -> list[tuple[Path, dict[str, float]]]:
    console = None
    if progress is True:
        from semzoo.run.progress import ConsoleProgress, one_off_work

        total = sum(t.config.steps for t in group.trainers)
        console = ConsoleProgress(total, start=sum(t.counters.env_steps for t in group.trainers),
                                  label=f"train x{len(group.trainers)}" if len(group.trainers) > 1 else "train",
                                  first_iteration=one_off_work(group.trainers[0].config))
        group.progress = console
    elif progress is not False:
        group.progress = progress
    try:
        results = group.run()
    finally:
        group.close()
        if console is not None:
            console.close()
    return [(Path(t.run_dir) if t.run_dir is not None else Path(), r) for t, r in zip(group.trainers, results)]


__all__ = ["MultiTrainer", "check_group_configs", "group_config", "parse_seeds", "resume_seeds", "train_seeds"]
