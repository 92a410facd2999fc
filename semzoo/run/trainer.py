"""The training loop, Algorithm 1 of the paper.

    initialise agents, mixer and targets (theta, theta^-), replay H, episodic table Q^S and pending set M
    repeat until `steps` env steps:
        collect N episodes epsilon-greedily; store them in H; their (phi(s_t), R_t) go to M,
            and M updates Q^S with per-key maxima once it holds |M| steps          (collect)
        for each collected episode, `updates_per_episode` times, once H holds `learn_start_episodes`:
            sample a batch from H; one gradient step on the loss of eq. (6)        (learn)
        every `target_update_episodes` episodes: theta^- <- theta
        every interval: log, evaluate greedily, checkpoint                          (_housekeeping)

Test evaluations are scheduled at the multiples of ``test_interval``: each is taken at the first iteration
at or past its multiple (an iteration adds ``n_envs`` episodes), so the evaluation for 50,000 env steps sits
at, say, 50,400, and never drifts later over a long run: the n-th evaluation of every run belongs to the same
step n x ``test_interval``, whatever its iteration size, and the report reads evaluations by that schedule.

Where the episodes come from is the collector's (``semzoo.run.collectors``). The default, ``sequential``, is the
loop above exactly: each batch is played by the learner's agent and its updates follow it. With ``sequential``
off, the overlapped collector plays batch k+1 on a copy of the agent, the acting agent, in the actor process
(or a thread) while the learner takes the updates owed for batch k: the policy lags by exactly one batch's
updates, and everything on the learner's side happens in the same order (the updates of batch k sample the
buffer holding batches 1..k, the memory has had batch k's returns, the target sync and epsilon read the same
counters). The acting agent draws its exploration from its own generator (seeded from the run seed), so a
seed still fixes the run. Housekeeping runs with nothing in flight: a checkpoint holds the owed updates
(``update_credit``) and the acting parameters, and a resumed run continues bit for bit. After the last batch
its owed updates run, so a run takes the same number of updates either way.

The loop's side jobs live where they belong: the run directory, its metrics file, TensorBoard events and the
checks before a resume in ``semzoo.run.rundir`` (its layout in ``semzoo.runfiles``); the actor process in
``semzoo.run.actor``; the best policy so far (``best.ckpt``, for the absolute metric) in
``semzoo.run.evaluation.BestPolicy``; what a metric row averages in ``semzoo.run.window``. A checkpoint holds
every piece of state the loop reads, so a resumed run continues bit for bit.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semzoo import algos
from semzoo.agents.rnn import RNNAgent, flatten_rnns
from semzoo.config import TrainConfig
from semzoo.envs.registry import make_vec_env
from semzoo.presets import preset_departures, preset_reward_mismatch, unused_preset
from semzoo.replay.buffer import EpisodeReplayBuffer
from semzoo.resolution import ResolvedRun, resolve
from semzoo.run import memory_plan
from semzoo.run.actor import ActorProcess, start_or_fall_back
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.collectors import Collector, EpisodeCollector, OverlappedCollector
from semzoo.run.device import replay_device, resolve_device
from semzoo.run.evaluation import SEED_STRIDE, BestPolicy, EvalResult, eval_env_seeds, greedy_episodes
from semzoo.run.memory_plan import EnvSizes, peak_rss_bytes
from semzoo.run.rundir import (
    MetricsLogger,
    RunLock,
    load_run_config,
    new_run_dir,
    open_run_dir,
    record_session,
    resume_point,
    write_best,
    write_final,
)
from semzoo.run.runner import EpisodeRunner, RolloutStats
from semzoo.run.stopping import RunStopped, StopRequest, stop_on_signals
from semzoo.run.window import MetricsWindow
from semzoo.types import EpisodeBatch

BYTES_PER_MB = 1e6
Progress = Callable[[dict[str, Any]], None]
"""Called after every iteration with the counters, epsilon, the target steps and the last test figures."""
ACTING_STREAM = 1
"""Spawn key of the acting thread's generator under the run seed (overlap mode), apart from the learner's."""
COMPILE_SHAPES = 8
"""Batch lengths a compiled update meets at most (torch.compile recompiles up to 8 times by default)."""
BUCKET_MULTIPLE = 8
"""A compiled update's batch lengths are multiples of this many steps."""
KEY_CHUNK = 256
"""Episodes whose state keys a resume computes at a time (a key is the same whatever batch computes it)."""


def compile_bucket(max_t: int) -> int:
    """The padding unit of a compiled update's batches: a multiple of ``BUCKET_MULTIPLE`` steps that cuts episodes of
    up to ``max_t`` steps into at most ``COMPILE_SHAPES`` lengths."""
    return BUCKET_MULTIPLE * math.ceil(math.ceil(max_t / COMPILE_SHAPES) / BUCKET_MULTIPLE)


@dataclass
class Counters:
    """Where a run stands; saved in checkpoints (as a dict, the field names are the keys)."""

    env_steps: int = 0
    episodes: int = 0
    updates: int = 0
    wall_time: float = 0.0
    """Seconds spent in ``run``, summed over resumes."""
    last_target_update: int = 0
    """Episodes at the last target-network sync."""
    last_log: int = 0
    last_test: int = 0
    last_save: int = 0
    """Env steps at the last metric row, evaluation and checkpoint."""
    update_credit: float = 0.0
    """Gradient updates owed (updates_per_episode may be fractional); in overlap mode, those of the last batch too."""
    test_runs: int = 0
    """Test episodes played so far: the position in the run's test-seed stream."""
    test_updates: int = 0
    """Gradient updates at the last evaluation (overlap mode evaluates again at the end after the last batch's updates)."""


class Trainer:
    """Owns every part of a run; ``run()`` trains to ``config.steps`` env steps.

    With ``run_dir`` the run writes config, metrics, checkpoints and TensorBoard events there, holding
    the directory's lock until ``close()``; ``Trainer.resume(run_dir)`` rebuilds a trainer from the
    last valid checkpoint.
    """

    acting_in_process = True
    """The overlapped collector plays in the actor process (two cores); False plays on a thread (one core)."""

    def __init__(self, config: TrainConfig | ResolvedRun, *, run_dir: str | Path | None = None, progress: Progress | None = None,
                 tensorboard: bool = True, _checkpoint: dict[str, Any] | None = None,
                 _lock: RunLock | None = None) -> None:
        run = resolve(config)  # the algorithm table judges the id, before the run directory exists
        self.config = run.config
        self.algo = run.algo
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.logger: MetricsLogger | None = None
        self._collector: Collector | None = None
        """The collector while ``run`` trains (``semzoo.run.collectors``)."""
        self.actor_startup_s: float | None = None
        """Seconds the last actor process took to start (not checkpointed; None before one started)."""
        self._lock = _lock if _lock is not None or self.run_dir is None else RunLock(self.run_dir)
        self._session_unrecorded = _checkpoint is not None and self.run_dir is not None
        """A resumed run adds its session to provenance.json when it starts training (``record_session``)."""
        try:
            self._build(run, _checkpoint)
            if self.run_dir is not None:  # the config as _build fitted it to the env (LAGMA's latent size)
                config = self.config
                self.logger = open_run_dir(self.run_dir, config, self.best.payload(config), resumed=_checkpoint is not None,
                                           env_steps=self.counters.env_steps, tensorboard=tensorboard,
                                           device=self.device)
        except BaseException:
            self.close()
            raise

    def _build(self, run: ResolvedRun, checkpoint: dict[str, Any] | None) -> None:
        config = run.config
        self.device = resolve_device(config.device)
        self.checkpoints = (CheckpointManager(self.run_dir, keep=max(1, config.keep_checkpoints))
                            if self.run_dir is not None else None)
        if self.checkpoints is not None and checkpoint is None and self.checkpoints.paths():
            raise ValueError(f"run directory {self.run_dir} already holds a run with checkpoints: continue it with "
                             f"`semzoo train --resume {self.run_dir}` or choose another --out/--run-name")
        if config.threads > 0:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        np.random.seed(config.seed % 2**32)
        random.seed(config.seed)
        if self._memory_never_written(run):
            warnings.warn(f"pending_size={config.memory.pending_size} env steps is more than the run's steps={config.steps}: "
                          "the episodic table is never written and E = y throughout; lower --pending-size", stacklevel=3)
        self.env = make_vec_env(config)
        self.max_t = int(config.episode_limit or self.env.episode_limit)
        # Refused here, before the memory and the replay buffer exist, when the worst case cannot fit: the CLI checked
        # already, but a run started from Python, a sweep's worker or a resume on a smaller machine had not.
        sizes = EnvSizes.of(self.env, self.max_t)
        run = memory_plan.fit_to_env(run, sizes)  # before the plan, which checks the memory's fit
        config = self.config = run.config
        memory_plan.check(run, sizes, device=self.device)
        parts = algos.build(run.config, run.algo, self.env, self.device)
        self.agent, self.mixer, self.memory, self.learner = parts.agent, parts.mixer, parts.memory, parts.learner
        if config.compile_update:
            self._compile_update()
        env = self.env
        self.buffer = EpisodeReplayBuffer(capacity=config.learner.buffer_size, max_t=self.max_t, n_agents=env.n_agents,
                                          obs_dim=env.obs_dim, state_dim=env.state_dim, n_actions=env.n_actions,
                                          state_key_words=self.memory.state_key_words if self.memory is not None else 0,
                                          store_dtype=config.learner.replay_dtype,
                                          device=replay_device(config.learner.replay_device, self.device))
        self.runner = EpisodeRunner(env, self.agent, device=self.device, episode_limit=self.max_t)
        self.generator = torch.Generator().manual_seed(config.seed)
        # Overlap mode: the acting agent (read only by the collecting thread) and its own random stream.
        self.acting_agent: RNNAgent | None = None
        self.acting_generator: torch.Generator | None = None
        if not config.sequential:
            self.acting_agent = flatten_rnns(copy.deepcopy(self.agent).requires_grad_(False))
            seed = np.random.SeedSequence([config.seed, ACTING_STREAM]).generate_state(1, np.uint64)[0]
            self.acting_generator = torch.Generator().manual_seed(int(seed))
        self.counters = Counters()
        self.window = MetricsWindow()
        """What the next metric row averages (its episodes and learner stats are saved in checkpoints)."""
        self._last_eval: dict[str, float] = {}
        self.best = BestPolicy()
        """The best test evaluation so far and its agent (``best.ckpt``)."""
        self._saved_at: int | None = None
        self._stop_request: StopRequest | None = None  # set while run() drives the loop (semzoo.run.stopping)
        if checkpoint is not None:
            self.load_state_dict(checkpoint)
            self._saved_at = self.counters.env_steps

    def _compile_update(self) -> None:
        """``compile_update``: the learner's loss compiled on a CUDA device, its batches padded to ``COMPILE_SHAPES`` lengths."""
        if self.device.type != "cuda":
            warnings.warn(f"compile_update applies on a CUDA device only; this run on {self.device} takes the plain "
                          "update", stacklevel=4)
            return
        self.learner.compile(bucket_steps=compile_bucket(self.max_t))

    @staticmethod
    def _memory_never_written(run: ResolvedRun) -> bool:
        """True when the run's memory is a table with a pending set M (SEM, SAEM) that cannot fill before the run ends."""
        from semzoo.episodic.memory import memory_class
        from semzoo.episodic.sem import EpisodicMemory

        algo, config = run.algo, run.config
        return (algo.has_memory and issubclass(memory_class(algo.memory), EpisodicMemory)
                and config.memory.pending_size > config.steps)

    @classmethod
    def resume(cls, run_dir: str | Path, *, steps: int | None = None, keep_checkpoints: int | None = None,
               progress: Progress | None = None, tensorboard: bool = True) -> Trainer:
        """A trainer that continues the run in ``run_dir`` from its last valid checkpoint.

        ``steps`` extends the run and ``keep_checkpoints`` changes how many checkpoints it keeps; the
        config otherwise comes from the run directory. With no checkpoint at all (killed before the
        first save), the run starts over with a warning; with only corrupt ones, CheckpointError. A run
        that finished with ``keep_checkpoints=0`` has none left and is refused (ValueError).
        """
        run_dir = Path(run_dir)
        config = load_run_config(run_dir)
        if steps is not None:
            config = dataclasses.replace(config, steps=steps)
        if keep_checkpoints is not None:
            config = dataclasses.replace(config, keep_checkpoints=keep_checkpoints)
        lock, payload = resume_point(run_dir, config)
        return cls(config, run_dir=run_dir, progress=progress, tensorboard=tensorboard, _checkpoint=payload,
                   _lock=lock)

    # ----- Algorithm 1 ---------------------------------------------------------------------------------------

    def run(self) -> dict[str, float]:
        """Train until ``config.steps`` env steps; returns the last evaluation's metrics.

        A SIGINT or SIGTERM meanwhile checkpoints the iteration it arrives in and raises ``RunStopped``
        (``semzoo.run.stopping``); ``Trainer.resume`` then continues the run exactly.
        """
        self.record_session()
        with stop_on_signals() as request:
            self._stop_request = request
            try:
                return self._train()
            finally:
                self._stop_request = None

    def record_session(self) -> None:
        """Add this session to a resumed run's provenance.json, once, as it starts training (a resume that fails
        before it starts, a group whose other run cannot be resumed, adds none)."""
        if self._session_unrecorded and self.run_dir is not None:
            record_session(self.run_dir, self.device, self.counters.env_steps)
            self._session_unrecorded = False

    def _train(self) -> dict[str, float]:
        """Algorithm 1 of the paper, top to bottom, over a collector (``semzoo.run.collectors``): the paper's, where
        each batch's updates follow it, or the overlapped one, where they run while the next batch is collected.

        Initialising H, M, Q^S, theta and theta^- is ``_build``'s; the run's shell (run directory, resume,
        evaluation, checkpoints) is ``_housekeeping``'s and ``_finish``'s, between and after the iterations.
        """
        cfg, c = self.config, self.counters
        clock, wall_at_start = time.perf_counter(), c.wall_time
        self.window.restart_clock(clock, c.env_steps)
        collector = self._collector = self._start_collector()
        try:
            while c.env_steps < cfg.steps:  # for each episode (a batch of n_envs episodes)
                # act epsilon-greedily for t = 1..T: argmax_u Q_a(tau^a, u) or a random action
                collector.submit(self._collect_seed(), self.epsilon())
                if collector.lag:
                    self._timed_update()  # overlapped: the updates owed for the last batch, while this one plays
                batch, stats, seconds = collector.result()
                stored = time.perf_counter()
                # store the episode in H; (phi(s_t), R_t) into M, and Q^S <- M by per-key max once M is full
                self.store(batch, stats)
                if not collector.lag:  # the paper's loop counts storing in H and M as collecting; an overlapped
                    seconds += time.perf_counter() - stored  # collector's figure is its own time, beside learning
                self.window.add_time("time_collect_s", seconds)
                self.owe_updates(len(stats.returns))
                if not collector.lag:
                    # sample B episodes from H, compute y and E, minimise eq. (6); theta^- <- theta every I_n episodes
                    self._timed_update()
                collector.sync(self.agent)  # the next batch acts with the parameters as they stand now
                self.end_iteration(stats, wall_at_start + time.perf_counter() - clock)  # log, evaluate, checkpoint
        finally:
            self._close_collector()
        if collector.lag:
            # The last batch's owed updates, so the run takes as many as the paper's loop. The acting agent keeps
            # the parameters from before them: a run extended with --steps goes on as one that had been asked for
            # more steps from the start.
            self._timed_update()
            c.wall_time = wall_at_start + time.perf_counter() - clock
        self._finish()
        return self._last_eval

    def _timed_update(self) -> None:
        started = time.perf_counter()
        self._update()
        self.window.add_time("time_learn_s", time.perf_counter() - started)

    def _start_collector(self) -> Collector:
        """The run's collector: the paper's (``sequential``), or the overlapped one, whose actor process starts here
        (``acting_in_process``; a thread where the process cannot build the run's envs) and ends with the loop."""
        if self.config.sequential:
            return EpisodeCollector(self.runner, self.generator)
        assert self.acting_agent is not None and self.acting_generator is not None
        actor = None
        if self.acting_in_process:
            process = ActorProcess(self.config.to_dict(), device=str(self.device), episode_limit=self.max_t)
            try:
                actor = start_or_fall_back(process)
            except BaseException:  # a stop (Ctrl-C) while the child starts: it does not outlive the run
                process.close()
                raise
        if actor is not None:
            self.actor_startup_s = actor.startup_s
        runner = EpisodeRunner(self.env, self.acting_agent, device=self.device, episode_limit=self.max_t)
        return OverlappedCollector(self.acting_agent, self.acting_generator, runner=runner, actor=actor)

    def _close_collector(self) -> None:
        collector, self._collector = getattr(self, "_collector", None), None
        if collector is not None:
            collector.close()

    def end_iteration(self, stats: RolloutStats, wall_time: float) -> None:
        """Close an iteration (also driven by semzoo.run.multi): the run's wall time, its episodes, housekeeping."""
        self.counters.wall_time = wall_time
        self.window.add_episodes(stats)
        self._housekeeping()
        if self._stop_request is not None and self._stop_request.signum is not None:
            raise RunStopped(self._stop_request.signum, [self.checkpoint_to_stop()])

    def checkpoint_to_stop(self) -> tuple[Path | None, int]:
        """Checkpoint this iteration off the periodic schedule (a stop request): (run directory, env steps).

        The periodic schedule (``last_save``) is left as it was, so the resumed run saves where the run that
        was never stopped does.
        """
        self.save_checkpoint(scheduled=False)
        return (None if self.run_dir is None else Path(self.run_dir)), self.counters.env_steps

    def collect(self) -> RolloutStats:
        """N epsilon-greedy training episodes into the replay buffer H and the episodic memory's pending set M."""
        epsilon, seed = self.next_collection()
        batch, stats = self.runner.run(epsilon=epsilon, seed=seed, generator=self.generator)
        self.store(batch, stats)
        return stats

    def next_collection(self) -> tuple[float, int]:
        """Epsilon and env seed of the next training batch (``collect``; semzoo.run.multi collects K runs' at once)."""
        return self.epsilon(), self._collect_seed()

    def _collect_seed(self) -> int:
        """Env seed of the next training batch: the run's training stream at the episodes collected so far."""
        return (self.config.seed * SEED_STRIDE + self.counters.episodes) % 2**31

    def store(self, batch: EpisodeBatch, stats: RolloutStats) -> None:
        """A collected batch into the replay buffer H and the pending set M; the counters move on past it."""
        c = self.counters
        if self.config.learner.timeout_as_terminal:  # PyMARL: a time limit ends the episode like a real end
            last = (batch.length - 1).clamp(min=0)
            batch.terminated[torch.arange(batch.batch_size), last] = True
        memory, env_steps_before = self.memory, c.env_steps
        # the memory's key of every real slot (SEM: phi(s)), computed once here: the updates that sample the
        # episode only probe the table
        state_keys = memory.slot_state_keys(batch) if memory is not None else None
        if state_keys is None:
            self.buffer.insert(batch)
        else:
            self.buffer.insert(dataclasses.replace(batch, state_keys=torch.from_numpy(state_keys.view(np.int32))))
        if memory is not None:
            memory.on_wins(stats.battle_won)  # EMU: a won episode is desirable
            memory.on_store(batch, state_keys)  # SEM: R_t of each real step; Q^S is written once M holds |M| steps
        c.env_steps += int(stats.lengths.sum())
        c.episodes += batch.batch_size
        interval = memory.env_step_interval if memory is not None else 0
        if memory is not None and interval > 0 and c.env_steps // interval > env_steps_before // interval:
            memory.on_env_steps(c.env_steps)  # the memory's own schedule (EMU retrains its embedder)

    def learn(self, n_episodes: int) -> None:
        """``updates_per_episode`` gradient steps per collected episode, then the periodic target sync."""
        self.owe_updates(n_episodes)
        self._update()

    def _update(self) -> None:
        """The gradient steps owed (``update_credit``) while the buffer can fill a batch, then the periodic target sync.

        Calling it again with nothing owed changes nothing.
        """
        while (sample := self.next_update_batch()) is not None:
            self.record_update(self.learner.train(sample))
        self.finish_learning()

    # The steps of ``_update``, also driven by semzoo.run.multi (K runs' updates in one vmapped step).

    def owe_updates(self, n_episodes: int) -> None:
        """``updates_per_episode`` gradient updates owed for each of ``n_episodes`` new episodes."""
        self.counters.update_credit += n_episodes * self.config.learner.updates_per_episode

    def next_update_batch(self) -> EpisodeBatch | None:
        """The batch of the next gradient update owed (its credit paid), or None: none owed or H too small."""
        c, cfg = self.counters, self.config.learner
        if c.update_credit < 1.0 or not self.can_learn():
            return None
        c.update_credit -= 1.0
        return self.buffer.sample(cfg.batch_size, self.generator).for_update(self.device)

    def can_learn(self) -> bool:
        """H holds a batch and the burn-in: ``learn_start_episodes`` episodes (unset: ``batch_size``)."""
        cfg = self.config.learner
        return self.buffer.can_sample(max(cfg.batch_size, cfg.learn_start_episodes or 0))

    def record_update(self, stats: dict[str, float]) -> None:
        """Count one gradient update and keep its diagnostics for the next metric row; with PyMARL's target count,
        the target sync that PyMARL's ``q_learner.train`` makes after its gradient step."""
        c, cfg = self.counters, self.config.learner
        c.updates += 1
        if self.memory is not None:
            self.memory.on_update()
        self.window.add_update(stats)
        # PyMARL passes train() the 0-based index of the newest episode (run.py's `episode` before its increment)
        if cfg.target_count == "pymarl" and c.episodes - 1 - c.last_target_update >= cfg.target_update_episodes:
            self._sync_target(c.episodes - 1)

    def finish_learning(self) -> None:
        """After an iteration's updates: no credit piles up while H fills; the periodic target sync (counted in
        collected episodes; PyMARL's count syncs in ``record_update``)."""
        c, cfg = self.counters, self.config.learner
        if not self.can_learn():
            c.update_credit = 0.0  # no credit piles up while the buffer fills
        if cfg.target_count == "collected" and c.episodes - c.last_target_update >= cfg.target_update_episodes:
            self._sync_target(c.episodes)

    def _sync_target(self, episode: int) -> None:
        self.learner.update_target()
        self.counters.last_target_update = episode
        if self.memory is not None:
            self.memory.on_target_sync()

    def epsilon(self) -> float:
        return self.config.exploration.epsilon(self.counters.env_steps)

    def evaluate(self, n_episodes: int | None = None, *, seed: int | None = None) -> EvalResult:
        """``n_episodes`` greedy (epsilon 0) episodes; they are not stored and do not count as env steps.

        Env seeds come from the run's test stream, disjoint from training's; ``seed`` picks another
        stream and leaves the run's position in its own untouched.
        """
        n_episodes = self.config.test_episodes if n_episodes is None else n_episodes
        seeds = eval_env_seeds(self.config.seed, self.env.n_envs, seed, start=self.counters.test_runs)
        result = greedy_episodes(self.runner, n_episodes, seeds, self.generator)
        if seed is None:
            self.counters.test_runs += math.ceil(n_episodes / self.env.n_envs) * self.env.n_envs
        return result

    # ----- logging, evaluation and checkpoints between iterations --------------------------------------------

    def _housekeeping(self) -> None:
        cfg, c = self.config, self.counters
        if c.env_steps - c.last_log >= cfg.log_interval:
            self._log(self._train_metrics())
            c.last_log = c.env_steps
        if c.env_steps >= (c.last_test // cfg.test_interval + 1) * cfg.test_interval:
            self._test()  # at the first iteration at or past each multiple of test_interval: no drift
        if cfg.save_interval > 0 and c.env_steps - c.last_save >= cfg.save_interval:
            self.save_checkpoint()
        if self.progress is not None:
            self.progress({**dataclasses.asdict(c), "epsilon": self.epsilon(), "steps": cfg.steps, **self._last_eval})

    def _finish(self) -> None:
        c = self.counters
        # The final checkpoint holds the loop state before the closing rows below, so a run extended
        # later with --steps continues exactly as one that had been asked for more steps from the start. A run
        # that keeps none (keep_checkpoints 0) writes none: it would be removed below.
        if self.config.keep_checkpoints > 0:
            self.save_checkpoint()
        if self.window.recent:
            self._log(self._train_metrics())
        if c.last_test != c.env_steps or not self._last_eval or (not self.config.sequential
                                                                 and c.test_updates != c.updates):
            self._test()
        if self.run_dir is not None:
            write_final(self.run_dir, {"env_steps": c.env_steps, "episodes": c.episodes, "updates": c.updates,
                                       "steps": self.config.steps, "wall_time": c.wall_time,
                                       "result": self._last_eval, "replay_bytes": self.buffer.nbytes,
                                       "peak_rss_bytes": peak_rss_bytes()})
            if self.config.keep_checkpoints == 0 and self._saved_at is not None and self.checkpoints is not None:
                self.checkpoints.remove_all()  # after final.json: a crash before it leaves a resumable run

    def _test(self) -> None:
        started = time.perf_counter()
        metrics = self.evaluate().as_metrics()
        self._log({**metrics, "test_time_s": time.perf_counter() - started})
        self._last_eval = metrics
        self.counters.last_test = self.counters.env_steps
        self.counters.test_updates = self.counters.updates
        if self.best.offer(metrics, self.agent, step=self.counters.env_steps, updates=self.counters.updates) \
                and self.run_dir is not None:
            started = time.perf_counter()
            write_best(self.run_dir, self.best.payload(self.config))
            self.window.add_time("checkpoint_time_s", time.perf_counter() - started)

    def _log(self, metrics: dict[str, float]) -> None:
        if self.logger is not None:
            c = self.counters
            self.logger.log(metrics, env_steps=c.env_steps, episodes=c.episodes, updates=c.updates,
                            wall_time=c.wall_time)

    def _train_metrics(self) -> dict[str, float]:
        """The metric row of the window since the last row: learner stats, episodes, memory, timing."""
        return self.window.row(epsilon=self.epsilon(), memory_metrics=None if self.memory is None else self.memory.metrics(),
                               buffer_episodes=len(self.buffer), env_steps=self.counters.env_steps)

    def state_dict(self) -> dict[str, Any]:
        """Everything the loop reads, for an exact resume (numpy arrays, tensors, plain values)."""
        rng: dict[str, Any] = {"torch": torch.get_rng_state(), "generator": self.generator.get_state(),
                               "numpy": np.random.get_state(), "python": random.getstate()}
        if self.acting_generator is not None:
            rng["acting_generator"] = self.acting_generator.get_state()
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        buffer = self.buffer.state_dict()  # the real slots only: an empty buffer costs nothing
        return {
            "env": self.config.env, "algo": self.config.algo, "config": self.config.to_dict(),
            "counters": dataclasses.asdict(self.counters), "epsilon": self.epsilon(),
            "learner": self.learner.state_dict(), "buffer": buffer,
            "memory": self.memory.state_dict() if self.memory is not None else None,
            "rng": rng,
            "loop": {**self.window.state_dict(), "last_eval": dict(self._last_eval)},
            "best": dict(self.best.record) if self.best.record is not None else None,
            "metrics_bytes": self.logger.nbytes() if self.logger is not None else 0,
            **({"acting": self.acting_agent.state_dict()} if self.acting_agent is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``state_dict``."""
        self.counters = Counters(**state["counters"])
        self.learner.load_state_dict(state["learner"])
        self.buffer.load_state_dict(state["buffer"])
        if self.memory is not None:
            self.memory.load_state_dict(state["memory"])
            # not in the checkpoint (a function of the states and the memory): computed again, a slice of the
            # buffer at a time so that its padded copy (on the GPU with replay_device 'run') stays small
            if self.buffer.state_key_words and len(self.buffer):
                state_keys = np.concatenate([self.memory.slot_state_keys(self.buffer.stored(first, first + KEY_CHUNK))
                                             for first in range(0, len(self.buffer), KEY_CHUNK)])
                self.buffer.set_state_keys(torch.from_numpy(state_keys.view(np.int32)))
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        self.generator.set_state(rng["generator"])
        if self.acting_agent is not None and self.acting_generator is not None:
            self.acting_agent.load_state_dict(state["acting"])
            flatten_rnns(self.acting_agent)
            self.acting_generator.set_state(rng["acting_generator"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        loop = state["loop"]
        self.window.load_state_dict(loop)
        self._last_eval = dict(loop["last_eval"])
        self.best.record = state.get("best")  # None: a checkpoint without a best-policy record, no best yet

    def save_checkpoint(self, *, scheduled: bool = True) -> Path | None:
        """Write a checkpoint of the current state (no-op without a run directory or if one exists for this step).

        ``scheduled=False`` (a checkpoint on a stop request) leaves the periodic schedule where it was.
        """
        c = self.counters
        if self.checkpoints is None or self._saved_at == c.env_steps:
            return None
        started = time.perf_counter()
        if scheduled:
            c.last_save = c.env_steps
        path, nbytes = self.checkpoints.save(self.state_dict(), c.env_steps)
        self._saved_at = c.env_steps
        self.window.add_time("checkpoint_time_s", time.perf_counter() - started)
        self.window.timing["checkpoint_mb"] = nbytes / BYTES_PER_MB
        return path

    def close(self) -> None:
        """Close files and envs and release the run directory (safe to call twice, and on a half-built trainer)."""
        if self.logger is not None:
            self.logger.close()  # and its TensorBoard events
            self.logger = None
        self._close_collector()
        env = getattr(self, "env", None)
        if env is not None:
            env.close()
            self.env = None
        if self._lock is not None:
            self._lock.release()


def train(config: TrainConfig | ResolvedRun, *, progress: Progress | bool = True,
          tensorboard: bool = True) -> tuple[Path, dict[str, float]]:
    """Run ``config`` in a new run directory (see ``new_run_dir``); returns it and the final evaluation.

    ``progress``: True shows progress on stderr (``ConsoleProgress``), False nothing, or a callable.
    """
    run = resolve(config)
    for note in (unused_preset(run.config, run.algo), preset_reward_mismatch(run.config, run.algo),
                 preset_departures(run.config, run.algo)):
        if note is not None:
            warnings.warn(note, stacklevel=2)
    run_dir = new_run_dir(run.config)
    trainer = Trainer(run, run_dir=run_dir, tensorboard=tensorboard)
    return run_dir, _run_to_end(trainer, progress)


def resume(run_dir: str | Path, *, steps: int | None = None, keep_checkpoints: int | None = None,
           progress: Progress | bool = True, tensorboard: bool = True) -> tuple[Path, dict[str, float]]:
    """Continue the run in ``run_dir`` from its last valid checkpoint (to ``steps`` if given)."""
    trainer = Trainer.resume(run_dir, steps=steps, keep_checkpoints=keep_checkpoints, tensorboard=tensorboard)
    return Path(run_dir), _run_to_end(trainer, progress)


def _run_to_end(trainer: Trainer, progress: Progress | bool) -> dict[str, float]:
    console = None
    if progress is True:
        from semzoo.run.progress import ConsoleProgress, one_off_work

        console = ConsoleProgress(trainer.config.steps, start=trainer.counters.env_steps,
                                  first_iteration=one_off_work(trainer.config))
        trainer.progress = console
    elif progress is not False:
        trainer.progress = progress
    try:
        return trainer.run()
    finally:
        trainer.close()
        if console is not None:
            console.close()


__all__ = ["Counters", "Trainer", "resume", "train"]
