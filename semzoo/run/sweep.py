"""A grid of runs (env x algorithm x seed) on Ray: local by default, a cluster with ``address``.

Each trial trains in its own run directory ``<out>/<env>_<algo>_seed<seed>``. A trial that raises is
retried (at most ``max_retries`` times) and continues from its last checkpoint. Trials whose run
directory holds ``final.json`` for at least the requested steps are skipped, so an interrupted
sweep continues when the same command is run again. On a cluster ``out`` must be a folder every
node sees (a shared filesystem).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semzoo.config import SECTIONS, TrainConfig, config_fields
from semzoo.run.rundir import CONFIG_FILE, default_run_name, run_finished
from semzoo.run.trainer import Trainer

GRID_KEYS = {"env": "use --envs", "algo": "use --algos", "seed": "use --seeds", "steps": "use --steps",
             "out": "use --out", "run_name": "each trial is named <env>_<algo>_seed<seed>"}
"""Config fields the grid sets for each trial, and how a sweep sets them instead of ``--set``."""


@dataclass(frozen=True)
class Trial:
    config: TrainConfig

    @property
    def name(self) -> str:
        return self.config.run_name or default_run_name(self.config)

    @property
    def run_dir(self) -> Path:
        return Path(self.config.out) / self.name


@dataclass
class SweepReport:
    """What a sweep did: run names that finished now, were already finished, or failed (with the error)."""

    finished: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def apply_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``{'learner.batch_size': 8, 'test_interval': 500}`` applied to a ``TrainConfig.to_dict()``.

    Keys are those of ``semzoo.config.config_fields``: ``<field>`` or ``<section>.<field>``.
    """
    keys = {f.key for f in config_fields()}
    out = {k: (dict(v) if isinstance(v, dict) and k in SECTIONS else v) for k, v in base.items()}
    for key, value in overrides.items():
        if key not in keys:
            raise ValueError(f"config key {key!r}: expected <field> such as test_interval or <section>.<field> "
                             f"such as learner.batch_size, sections {', '.join(SECTIONS)} "
                             "(`semzoo train --help` lists the fields)")
        section, _, name = key.rpartition(".")
        if section:
            out.setdefault(section, {})[name] = value
        else:
            out[key] = value
    return out


def plan_trials(*, envs: Sequence[str], algos: Sequence[str], seeds: Sequence[int], steps: int, out: str | Path,
                overrides: dict[str, Any] | None = None) -> list[Trial]:
    """The grid as validated configs, env-major; ValueError on a bad env/algo/override before anything runs."""
    if not envs or not algos or not seeds:
        raise ValueError(f"envs={list(envs)}, algos={list(algos)}, seeds={list(seeds)}: expected at least one of each")
    for key in GRID_KEYS.keys() & set(overrides or {}):
        raise ValueError(f"config key {key!r}: the sweep sets it per trial; {GRID_KEYS[key]}")
    base = apply_overrides(TrainConfig().to_dict(), overrides or {})
    trials = []
    for env in envs:
        for algo in algos:
            for seed in seeds:
                data = {**base, "env": env, "algo": algo, "seed": int(seed), "steps": steps, "out": str(out),
                        "run_name": None}
                config = TrainConfig.from_dict(data)
                trials.append(Trial(dataclasses.replace(config, run_name=default_run_name(config))))
    return trials


def run_trial(config_dict: dict[str, Any], threads: int = 1) -> dict[str, Any]:
    """Train one trial to its steps, resuming its run directory when it holds one; returns the final evaluation."""
    # The Trainer applies config.threads (torch.set_num_threads) for this worker process.
    trial = Trial(TrainConfig.from_dict({**config_dict, "threads": max(1, threads)}))
    run_dir = trial.run_dir
    if run_finished(run_dir, trial.config.steps):
        return {"run": trial.name, "status": "skipped"}
    if (run_dir / CONFIG_FILE).exists():
        trainer = Trainer.resume(run_dir, steps=trial.config.steps)
    else:
        trainer = Trainer(trial.config, run_dir=run_dir)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return {"run": trial.name, "status": "finished", "result": result}


RAY_TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
"""Ray (2.5x) warns on every start of a local instance that token authentication is on; that is the
secure default semzoo keeps, so the notice is silenced rather than the authentication turned off."""


def _quiet_ray_startup() -> None:
    logging.getLogger(RAY_TOKEN_LOGGER).setLevel(logging.ERROR)


def run_sweep(trials: Sequence[Trial], *, address: str | None = None, max_retries: int = 2, cpus_per_trial: float = 1,
              num_cpus: int | None = None, echo: Callable[[str], None] = print) -> SweepReport:
    """Run the unfinished ``trials`` on Ray; a local Ray with ``num_cpus`` (default all) unless ``address``."""
    if max_retries < 0:
        raise ValueError(f"max_retries={max_retries}: expected >= 0")
    if cpus_per_trial <= 0:
        raise ValueError(f"cpus_per_trial={cpus_per_trial}: expected a positive number of CPUs")
    report = SweepReport()
    todo = []
    for trial in trials:
        if run_finished(trial.run_dir, trial.config.steps):
            report.skipped.append(trial.name)
        else:
            todo.append(trial)
    if not todo:
        return report
    try:
        import ray
    except ImportError:
        raise ValueError("sweeps run on Ray, which is not installed: pip install 'semzoo[ray]'") from None
    _quiet_ray_startup()
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            _connect(ray, address)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
    try:
        remote = ray.remote(run_trial).options(num_cpus=cpus_per_trial, max_retries=max_retries,
                                               retry_exceptions=True)
        threads = max(1, int(cpus_per_trial))
        pending = {remote.remote(t.config.to_dict(), threads): t for t in todo}
        echo(f"sweep: {len(todo)} trials to run, {len(report.skipped)} already finished")
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                trial = pending.pop(ref)
                try:
                    ray.get(ref)
                except Exception as err:
                    cause = getattr(err, "cause", None) or err
                    report.failed[trial.name] = f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1]}"
                    echo(f"sweep: {trial.name} failed after {max_retries} retries: {report.failed[trial.name]}")
                else:
                    report.finished.append(trial.name)
                    echo(f"sweep: {trial.name} finished ({len(report.finished)}/{len(todo)})")
    finally:
        if started_here:
            ray.shutdown()
    return report


def _connect(ray: Any, address: str) -> None:
    """Join the Ray cluster at ``address``; ValueError with a hint when there is none to join."""
    try:
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, TimeoutError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"cannot connect to a Ray cluster at --address {address!r} ({reason}): start one with "
                         "`ray start --head` on the head node, pass its address (e.g. ray://head:10001), or "
                         "leave out --address to run on an embedded local Ray") from None


__all__ = ["SweepReport", "Trial", "apply_overrides", "plan_trials", "run_sweep", "run_trial"]
