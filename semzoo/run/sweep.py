"""A grid of runs (env x algorithm x seed) on Ray: local by default, a cluster with ``address``.

Each trial trains in its own run directory ``<out>/<env>_<algo>_seed<seed>``. A trial that raises is
retried (at most ``max_retries`` times) and continues from its last checkpoint. Trials whose run
directory holds ``final.json`` for at least the requested steps are skipped, so an interrupted
sweep continues when the same command is run again. A SIGINT or SIGTERM to the sweep asks each running
trial to checkpoint its current iteration and stop (``semzoo.run.stopping``), so nothing trained is lost;
a second one stops at once. On a cluster ``out`` must be a folder every
node sees (a shared filesystem).

Packed (``pack_seeds``, ``semzoo sweep --pack-seeds``): the trials of one (env, algo) cell, which differ
only in the seed, become one Ray task that trains them together in one process (``MultiTrainer``, as
``semzoo train --seeds``), in the same run directories. A cell of two or more seeds takes the sequential
loop (collect, then learn), as every group does, so each of its runs matches the unpacked trial run with
``sequential=True`` within float tolerance. A retry or a re-run skips the cell's finished runs and
continues the others together: those with a run directory from their checkpoints, the rest from step 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semzoo.algos import parse_algorithm
from semzoo.config import TrainConfig, apply_overrides, component_fields, config_fields, registered_components
from semzoo.errors import MissingDependency
from semzoo.resolution import resolve
from semzoo.run.multi import MultiTrainer, group_config
from semzoo.run.progress import SWEEP_PROGRESS_INTERVAL_S, SweepProgress
from semzoo.run.rundir import default_run_name, run_finished
from semzoo.run.stopping import stop_on_signals
from semzoo.run.trainer import Trainer
from semzoo.runfiles import CONFIG_FILE, setting_text

GRID_KEYS = {"env": "use --envs", "algo": "use --algos", "seed": "use --seeds", "steps": "use --steps",
             "out": "use --out", "run_name": "each trial is named <env>_<algo>_seed<seed>"}
"""Config fields the grid sets for each trial, and how a sweep sets them instead of ``--set``."""
STOP_POLL_S = 1.0
"""How often the sweep's wait for its tasks looks for a stop signal (seconds)."""


@dataclass(frozen=True)
class Trial:
    config: TrainConfig

    @property
    def name(self) -> str:
        return self.config.run_name or default_run_name(self.config)

    @property
    def run_dir(self) -> Path:
        return Path(self.config.out) / self.name


@dataclass(frozen=True)
class PackedTrial:
    """The trials of one (env, algo) cell, trained together in one Ray task (``pack_seeds``); seed order kept."""

    trials: tuple[Trial, ...]

    @property
    def name(self) -> str:
        first = self.trials[0]
        prefix = first.name.removesuffix(f"seed{first.config.seed}")
        return f"{prefix}seeds{','.join(str(t.config.seed) for t in self.trials)}"


@dataclass
class SweepReport:
    """What a sweep did: run names that finished now, were already finished, or failed (with the error).

    A sweep stopped by a signal (``stopped_by``) lists its unfinished runs in ``stopped``: each running one
    checkpointed its last iteration, and re-running the sweep continues them all.
    """

    finished: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    stopped_by: int | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


def plan_trials(*, envs: Sequence[str], algos: Sequence[str], seeds: Sequence[int], steps: int, out: str | Path,
                overrides: dict[str, Any] | None = None,
                grid: Mapping[str, Sequence[Any]] | None = None) -> list[Trial]:
    """The grid as validated configs, env-major; ValueError on a bad env/algo/override before anything runs.

    ``grid`` adds axes: each combination of its values (``{"memory.lam": [0, 0.1, 0.3]}``) is a cell of every
    (env, algo). A trial is named ``<env>_<algo>[_<env arg>...][_<setting>...]_seed<seed>`` (``default_run_name``)
    with the grid settings that differ from the defaults (``smax_2s3z_sem-qmix_lam=0.3_seed0``), so the default
    value's trials are the plain sweep's runs. Memory axes leave algorithms without episodic memory at one cell.
    """
    if not envs or not algos or not seeds:
        raise ValueError(f"envs={list(envs)}, algos={list(algos)}, seeds={list(seeds)}: expected at least one of each")
    axes = dict(grid or {})
    for key in GRID_KEYS.keys() & (set(overrides or {}) | set(axes)):
        raise ValueError(f"config key {key!r}: the sweep sets it per trial; {GRID_KEYS[key]}")
    for key in set(overrides or {}) & set(axes):
        raise ValueError(f"config key {key!r} is both an override and a grid axis: give it once")
    for key, values in axes.items():
        if not values:
            raise ValueError(f"grid axis {key!r} has no values: expected KEY=V1,V2,... such as memory.lam=0,0.1,0.3")
    apply_overrides(TrainConfig().to_dict(), overrides or {})  # each override a config key (ValueError if not)
    defaults = {f.key: f.default for f in [*config_fields(), *component_fields()]}
    trials: list[Trial] = []
    names: dict[str, TrainConfig] = {}
    for env in envs:
        for algo in algos:
            # a component's own setting (curiosity.*, best.bonus) reaches the trials of the algorithms that use it
            given = {key: value for key, value in (overrides or {}).items() if _acts_in(key, algo)}
            base = apply_overrides(TrainConfig(algo=algo).to_dict(), given)
            for cell in _cells(axes, algo):
                for seed in seeds:
                    data = {**apply_overrides(base, cell), "env": env, "algo": algo, "seed": int(seed),
                            "steps": steps, "out": str(out), "run_name": None,
                            # set here: the runtime and the preset keep off them, as off flags typed in `train`
                            "pinned": sorted({*given.get("pinned", ()), *given, *cell} - {"pinned"})}
                    config = resolve(TrainConfig.from_dict(data)).config  # the id judged, the preset applied
                    resolved = config.to_dict()
                    variant = [setting_text(key, value) for key in cell
                               if (value := _value(resolved, key)) != defaults[key]]
                    config = dataclasses.replace(config, run_name=default_run_name(config, variant))
                    assert config.run_name is not None
                    if config.run_name in names:
                        if names[config.run_name] == config:
                            continue
                        raise ValueError(f"two trials would share the run directory {config.run_name}: give "
                                         "each grid axis distinct values")
                    names[config.run_name] = config
                    trials.append(Trial(config))
    return trials


def parse_grid(items: Sequence[str], flag: str = "--grid") -> dict[str, list[Any]]:
    """``["memory.lam=0,0.1,0.3"]`` -> ``{"memory.lam": [0, 0.1, 0.3]}``: comma-separated scalar values, each read
    as JSON (a bare word stays a string); ValueError naming the item when it is not KEY=V1,V2,..."""
    axes: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        values = [v.strip() for v in raw.split(",")] if sep else []
        if not key or not values or not all(values):
            raise ValueError(f"{flag} {item!r}: expected KEY=V1,V2,... such as {flag} memory.lam=0,0.1,0.3")
        if key in axes:
            raise ValueError(f"{flag} {key}: given twice; list all its values in one {flag} {key}=V1,V2,...")
        axes[key] = [_json_or_text(v) for v in values]
    return axes


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _cells(axes: Mapping[str, Sequence[Any]], algo: str) -> list[dict[str, Any]]:
    """Every combination of the grid's values as overrides; memory axes only for an algorithm with memory, the axes
    of a component's own settings (``best.bonus``) only for an algorithm that uses it."""
    if not parse_algorithm(algo).has_memory:
        axes = {key: values for key, values in axes.items() if not key.startswith("memory.")}
    axes = {key: values for key, values in axes.items() if _acts_in(key, algo)}
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def _acts_in(key: str, algo: str) -> bool:
    """Whether a config key is set in a run of ``algo``: a component's own setting only where the algorithm uses the
    component, every other key always."""
    owner = registered_components().get(key.partition(".")[0]) if "." in key else None
    return owner is None or owner.used_by(algo)


def _value(data: dict[str, Any], key: str) -> Any:
    section, _, name = key.rpartition(".")
    return data[section][name] if section else data[name]


def _group_key(config: TrainConfig) -> str:
    """Equal for configs that may train as one group (``multi.group_config``: all but the seed and run name)."""
    return json.dumps(group_config(config), sort_keys=True)


def pack_seeds(trials: Sequence[Trial]) -> list[PackedTrial]:
    """The trials grouped into cells of configs equal but for the seed (and run name), in plan order.

    A cell of two or more seeds takes the sequential loop (``sequential=True``), as a group of runs does.
    """
    cells: dict[str, list[Trial]] = {}
    for trial in trials:
        cells.setdefault(_group_key(trial.config), []).append(trial)
    packed = []
    for cell in cells.values():
        if len(cell) > 1:
            cell = [Trial(dataclasses.replace(t.config, sequential=True)) for t in cell]
        packed.append(PackedTrial(tuple(cell)))
    return packed


def _worker_trial(config_dict: dict[str, Any], threads: int) -> Trial:
    # The Trainer applies config.threads (torch.set_num_threads) for this worker process.
    return Trial(TrainConfig.from_dict({**config_dict, "threads": max(1, threads)}))


def _open_trainer(trial: Trial) -> Trainer:
    """The trial's Trainer: its run directory resumed to the trial's steps (and keep_checkpoints) when it holds a
    run, else a new run."""
    if (trial.run_dir / CONFIG_FILE).exists():
        return Trainer.resume(trial.run_dir, steps=trial.config.steps, keep_checkpoints=trial.config.keep_checkpoints)
    return Trainer(trial.config, run_dir=trial.run_dir)


def run_trial(config_dict: dict[str, Any], threads: int = 1) -> dict[str, Any]:
    """Train one trial to its steps, resuming its run directory when it holds one; returns the final evaluation."""
    trial = _worker_trial(config_dict, threads)
    if run_finished(trial.run_dir, trial.config.steps):
        return {"run": trial.name, "status": "skipped"}
    trainer = _open_trainer(trial)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return {"run": trial.name, "status": "finished", "result": result}


def run_packed_trial(config_dicts: Sequence[dict[str, Any]], threads: int = 1) -> list[dict[str, Any]]:
    """Train one cell's trials together in this process (``MultiTrainer``); one ``run_trial``-like result per trial.

    Finished runs are skipped; the others train as one group, each resumed from its run directory when it
    holds one (a group's checkpoints are taken together, so an interrupted cell continues exactly) and new
    otherwise. A run directory holding a run of another config (say, the overlapped loop of an unpacked
    sweep) cannot join the group: such runs continue after it, one group per config.
    """
    trials = [_worker_trial(d, threads) for d in config_dicts]
    outcomes: dict[str, dict[str, Any]] = {t.name: {"run": t.name, "status": "skipped"} for t in trials}
    trainers: list[Trainer] = []
    try:
        for trial in trials:
            if not run_finished(trial.run_dir, trial.config.steps):
                trainers.append(_open_trainer(trial))
        groups: dict[str, list[Trainer]] = {}
        for trainer in trainers:
            groups.setdefault(_group_key(trainer.config), []).append(trainer)
        for group in groups.values():
            for trainer, result in zip(group, MultiTrainer(group).run()):
                name = Path(trainer.run_dir or "").name
                outcomes[name] = {"run": name, "status": "finished", "result": result}
    finally:
        for trainer in trainers:
            trainer.close()
    return [outcomes[t.name] for t in trials]


RAY_TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
"""Ray (2.5x) warns on every start of a local instance that token authentication is on; that is the
secure default semzoo keeps, so the notice is silenced rather than the authentication turned off."""


def _quiet_ray_startup() -> None:
    logging.getLogger(RAY_TOKEN_LOGGER).setLevel(logging.ERROR)


def require_ray() -> Any:
    """The ``ray`` module; MissingDependency naming the extra where it is not installed."""
    try:
        import ray
    except ImportError:
        raise MissingDependency("sweeps run on Ray, which is not installed: pip install 'semzoo[ray]'") from None
    return ray


def run_sweep(trials: Sequence[Trial | PackedTrial], *, address: str | None = None, max_retries: int = 2,
              cpus_per_trial: float = 1, num_cpus: int | None = None, echo: Callable[[str], None] = print,
              progress_interval_s: float = SWEEP_PROGRESS_INTERVAL_S) -> SweepReport:
    """Run the unfinished ``trials`` on Ray; a local Ray with ``num_cpus`` (default all) unless ``address``.

    Each ``Trial`` is one Ray task, and so is each ``PackedTrial`` (``pack_seeds``): its unfinished runs
    train together. The report names runs either way. ``echo`` gets a line when a task ends and, every
    ``progress_interval_s``, one with the env steps logged across the runs, the rate and an ETA.
    """
    if max_retries < 0:
        raise ValueError(f"max_retries={max_retries}: expected >= 0")
    if cpus_per_trial <= 0:
        raise ValueError(f"cpus_per_trial={cpus_per_trial}: expected a positive number of CPUs")
    report = SweepReport()
    todo: list[Trial | PackedTrial] = []  # one Ray task each, packed ones holding their unfinished runs only
    for unit in trials:
        runs = unit.trials if isinstance(unit, PackedTrial) else (unit,)
        unfinished = tuple(t for t in runs if not run_finished(t.run_dir, t.config.steps))
        report.skipped.extend(t.name for t in runs if t not in unfinished)
        if unfinished:
            todo.append(PackedTrial(unfinished) if isinstance(unit, PackedTrial) else unit)
    if not todo:
        return report
    n_runs = sum(len(task.trials) if isinstance(task, PackedTrial) else 1 for task in todo)
    ray = require_ray()
    _quiet_ray_startup()
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            _connect(ray, address)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
    try:
        options = {"num_cpus": cpus_per_trial, "max_retries": max_retries, "retry_exceptions": True}
        single, packed = ray.remote(run_trial).options(**options), ray.remote(run_packed_trial).options(**options)
        threads = max(1, int(cpus_per_trial))
        pending: dict[Any, tuple[Trial, ...]] = {}
        for task in todo:
            if isinstance(task, PackedTrial):
                pending[packed.remote([t.config.to_dict() for t in task.trials], threads)] = task.trials
            else:
                pending[single.remote(task.config.to_dict(), threads)] = (task,)
        echo(f"sweep: {n_runs} trials to run in {len(todo)} Ray tasks, {len(report.skipped)} already finished")
        progress = SweepProgress([(t.run_dir, t.config.steps) for runs in pending.values() for t in runs], echo,
                                 interval_s=progress_interval_s)
        with stop_on_signals() as request:
            while pending and request.signum is None:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=STOP_POLL_S)
                for ref in done:
                    _collect(ray, ref, pending.pop(ref), report, n_runs, max_retries, echo)
                progress(len(report.finished) + len(report.failed))
            if request.signum is not None and pending:
                _stop_tasks(ray, pending, request.signum, report, echo)
    finally:
        if started_here:
            ray.shutdown()
    return report


def _collect(ray: Any, ref: Any, runs: tuple[Trial, ...], report: SweepReport, n_runs: int, max_retries: int,
             echo: Callable[[str], None]) -> None:
    """Record the outcome of the finished Ray task ``ref`` (its trials ``runs``) in ``report``."""
    try:
        ray.get(ref)
    except Exception as err:
        cause = getattr(err, "cause", None) or err
        error = f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1]}"
        for trial in runs:  # a packed task may have finished some of its runs before it failed
            if run_finished(trial.run_dir, trial.config.steps):
                report.finished.append(trial.name)
            else:
                report.failed[trial.name] = error
                echo(f"sweep: {trial.name} failed after {max_retries} retries: {error}")
    else:
        report.finished.extend(t.name for t in runs)
        echo(f"sweep: {', '.join(t.name for t in runs)} finished ({len(report.finished)}/{n_runs})")


def _stop_tasks(ray: Any, pending: dict[Any, tuple[Trial, ...]], signum: int, report: SweepReport,
                echo: Callable[[str], None]) -> None:
    """Stop the sweep on signal ``signum``: each running task checkpoints its iteration and stops, queued ones never start.

    ``ray.cancel`` (not forced) interrupts a running task's main thread as a SIGINT would, which its run
    takes as a stop request (``semzoo.run.stopping``); a second signal here stops at once.
    """
    echo(f"sweep: {signal.Signals(signum).name}: the running trials checkpoint their current iteration and stop "
         "(send it again to stop at once)")
    for ref in pending:
        ray.cancel(ref, force=False)
    for ref, runs in pending.items():
        with contextlib.suppress(Exception):  # a cancelled task raises TaskCancelledError or the RunStopped
            ray.get(ref)
        for trial in runs:
            (report.finished if run_finished(trial.run_dir, trial.config.steps) else report.stopped).append(trial.name)
    report.stopped_by = signum
    echo(f"sweep: stopped with {len(report.stopped)} runs unfinished: run the same command again to continue them")


def _connect(ray: Any, address: str) -> None:
    """Join the Ray cluster at ``address``; ValueError with a hint when there is none to join."""
    try:
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, TimeoutError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"cannot connect to a Ray cluster at --address {address!r} ({reason}): start one with "
                         "`ray start --head` on the head node, pass its address (e.g. ray://head:10001), or "
                         "leave out --address to run on an embedded local Ray") from None


__all__ = ["PackedTrial", "SweepReport", "Trial", "apply_overrides", "pack_seeds", "parse_grid", "plan_trials", "run_packed_trial",
           "run_sweep", "run_trial"]
