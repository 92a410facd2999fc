"""`semzoo train`, `evaluate` and `sweep`: the commands that build runs and train or replay them."""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from semzoo.cli.base import (
    BUILD_LINES,
    DEFAULT_STEPS,
    USAGE_ERROR,
    _build,
    _check_run_directory,
    _exit_when_stopped,
    _split,
    _string_arg_hint,
    _warnings_now,
    app,
    fail,
    integer_option,
    parse_env_args,
)
from semzoo.cli.options import (
    RESUME_FLAGS,
    TRAIN_FIELDS,
    TRAIN_FLAGS,
    _config_data,
    _PanelledCommand,
    _param_name,
    _train_parameters,
)
from semzoo.config import TrainConfig, apply_overrides, is_smax

if TYPE_CHECKING:
    from semzoo.resolution import ResolvedRun


def _console_progress(config: TrainConfig, total: int, **kwargs: Any) -> Any:
    """A run's progress on stderr (``semzoo.run.progress.ConsoleProgress``), imported when a command trains: the
    run package imports torch. ``config``: the run's (a group's first run's), for the one-off work it names."""
    from semzoo.run.progress import ConsoleProgress, one_off_work

    return ConsoleProgress(total, first_iteration=one_off_work(config), **kwargs)


def train(ctx: typer.Context, **options: Any) -> None:
    """Train an algorithm on an environment.

    Writes <out>/<run>/ (config.json, metrics.csv, checkpoints/).

    With no flags: the README's main job, SEM-QMIX on SMAX 3m for 20k env steps (TrainConfig()).
    """
    from semzoo.resolution import resolve

    sources = {f.key: ctx.get_parameter_source(_param_name(f)) for f in TRAIN_FIELDS}
    given = {key for key, source in sources.items() if source is not None and source.name != "DEFAULT"}
    if options["resume"]:
        if options["set"]:
            fail(f"--set {options['set'][0]} with --resume: a run continues with its own config.json; only "
                 f"{', '.join(TRAIN_FLAGS[key] for key in RESUME_FLAGS)} may change", USAGE_ERROR)
        if options["seeds"] is not None:
            fail("--seeds with --resume: a group continues with the seeds it was started with; "
                 "give --resume once per run directory of the group and drop --seeds", USAGE_ERROR)
        for run_dir in options["resume"]:
            _check_run_directory(run_dir)
        _check_distinct_runs(options["resume"])
        changes = {key: options[key] for key in RESUME_FLAGS if key in given}
        _build(TrainConfig.from_dict, data=changes)  # a value out of range is a usage error, as without --resume
        ignored = [TRAIN_FLAGS[f.key] for f in TRAIN_FIELDS if f.key in given and f.key not in RESUME_FLAGS]
        if ignored:
            typer.echo(f"Warning: --resume trains with the run's own config.json; ignoring {', '.join(ignored)}",
                       err=True)
        if len(options["resume"]) == 1:
            _resume(options["resume"][0], changes, options["tensorboard"])
        else:
            _resume_group(options["resume"], changes, options["tensorboard"])
        return
    seeds = None
    if options["seeds"] is not None:
        from semzoo.run.multi import parse_seeds

        if "seed" in given:
            fail(f"--seed {options['seed']} and --seeds {options['seeds']} together: give one of them "
                 "(--seeds 0-9 trains ten runs, --seed 3 one)", USAGE_ERROR)
        seeds = _build(parse_seeds, spec=options["seeds"])
    settings = parse_env_args(options["set"], "--set")
    twice = sorted(key for key in settings if key in given)
    if twice:
        fail(f"--set {twice[0]}={json.dumps(settings[twice[0]])} and {TRAIN_FLAGS[twice[0]]} both given: give the "
             "setting once", USAGE_ERROR)
    # a setting typed keeps its value against the runtime and the preset, even where it equals the default
    data = _build(apply_overrides, base=_config_data(options, TRAIN_FIELDS, TRAIN_FLAGS), overrides=settings)
    asked = _build(TrainConfig.from_dict, data={**data, "pinned": sorted(given | settings.keys())})
    # the run resolved once: the algorithm table judges --algo, the preset its map (usage errors)
    run = _build(resolve, config=asked)
    config = run.config
    typed = _typed_env_args(config, asked.env_args)
    _check_env_args(config, typed)  # before torch and JAX import: a bad env argument is refused at once
    from semzoo.run.device import resolve_device  # the training stack (torch) from here on
    from semzoo.run.trainer import train as run_training

    _build(resolve_device, name=config.device)  # a device this machine lacks is a bad --device: usage error
    _check_env(config, typed)
    run = _memory_plan(run, runs=len(seeds) if seeds is not None else 1)
    config = run.config
    if seeds is not None:
        _train_group(run, seeds, options["tensorboard"])
        return
    progress = _console_progress(config, config.steps)
    with _exit_when_stopped():  # outside: the progress line is closed before the stop's line
        try:
            with _warnings_now():
                run_dir, result = run_training(run, progress=progress, tensorboard=options["tensorboard"])
        except (ValueError, TypeError) as err:
            fail(_run_error(err, typed))
        finally:
            progress.close()
    _report(config, run_dir, result)


train.__signature__ = inspect.Signature(_train_parameters(TRAIN_FIELDS, TRAIN_FLAGS))  # type: ignore[attr-defined]
app.command(cls=_PanelledCommand)(train)


def _check_distinct_runs(run_dirs: list[str]) -> None:
    """A usage error for a run directory given to --resume twice (two names for one folder included)."""
    seen: dict[Path, str] = {}
    for run_dir in run_dirs:
        real = Path(run_dir).resolve()
        if real in seen:
            same = "" if seen[real] == run_dir else f" (as {seen[real]})"
            fail(f"--resume {run_dir} is given twice{same}: a run continues once; give each run directory of the group "
                 "once", USAGE_ERROR)
        seen[real] = run_dir


def _train_group(run: ResolvedRun, seeds: list[int], tensorboard: bool) -> None:
    """``train --seeds``: one run per seed in one process, one progress line, one report line per run."""
    from semzoo.run.multi import MultiTrainer

    config = run.config
    if config.run_name and len(seeds) > 1:
        fail(f"--run-name {config.run_name} names one run; the runs of --seeds take the default names "
             "<env>_<algo>_seed<seed> under --out: drop --run-name", USAGE_ERROR)
    k = len(seeds)
    typer.echo(f"building {k} runs of {config.algo} on {config.env} (seeds {seeds[0]}..{seeds[-1]})", err=True)
    every = max(1, math.ceil(k / BUILD_LINES))

    def built(i: int, trainer: Any) -> None:
        if i % every == 0 or i == k:
            typer.echo(f"built run {i}/{k}: {trainer.run_dir}", err=True)

    with _warnings_now():
        try:
            group = MultiTrainer.create(run, seeds, tensorboard=tensorboard, on_built=built)
        except (ValueError, TypeError) as err:
            fail(_run_error(err, _typed_env_args(config)))
        _run_group(group)


def _resume_group(run_dirs: list[str], changes: dict[str, Any], tensorboard: bool) -> None:
    """``train --resume A --resume B ...``: continue a --seeds group in one process."""
    from semzoo.run.multi import MultiTrainer

    with _warnings_now():
        try:
            group = MultiTrainer.resume(run_dirs, **changes, tensorboard=tensorboard)
        except (ValueError, TypeError) as err:
            fail(str(err))
        for trainer in group.trainers:
            typer.echo(f"resuming {trainer.run_dir} at {trainer.counters.env_steps:,} env steps", err=True)
        _run_group(group)


def _run_group(group: Any) -> None:
    trainers = group.trainers
    progress = _console_progress(trainers[0].config, sum(t.config.steps for t in trainers),
                                 start=sum(t.counters.env_steps for t in trainers), label=f"train x{len(trainers)}")
    group.progress = progress
    with _exit_when_stopped():
        try:
            results = group.run()
        except (ValueError, TypeError) as err:
            fail(_run_error(err, _typed_env_args(trainers[0].config)))
        finally:
            group.close()
            progress.close()
    for trainer, result in zip(trainers, results):
        _report(trainer.config, trainer.run_dir, result)


def _run_error(err: ValueError | TypeError, env_args: dict[str, Any]) -> str:
    """The one line for an error raised during a run: a TypeError there is often a string env arg deep in the env."""
    message = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
    return message + _string_arg_hint(env_args, message) if isinstance(err, TypeError) else message


def _typed_env_args(config: TrainConfig, typed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The env arguments the note on strings may name: those the user typed (``typed``; by default the run's, less the
    profile a ``smax:<map>`` run names itself: ``semzoo.resolution.with_env_profile``), less a SMAX argument whose
    values are words (``semzoo.envs.smax_args.WORD_ARGS``: profile=smac is never a misread number)."""
    args = config.env_args if typed is None else typed
    if not is_smax(config.env):
        return dict(args)
    from semzoo.envs.smax_args import WORD_ARGS

    return {key: value for key, value in args.items() if key not in WORD_ARGS}


def _check_env_args(config: TrainConfig, typed: dict[str, Any]) -> None:
    """A usage error for env arguments that can be judged without building the env (``smax:<map>``'s, checked with
    no JAX import: ``semzoo.envs.smax_args``); the note on strings names only arguments in ``typed``."""
    if not is_smax(config.env):
        return
    from semzoo.envs.smax_args import check_env_args, check_run_env_args

    try:
        check_run_env_args(config.env_args)
        check_env_args(config.env, config.env_args)
    except (ValueError, TypeError) as err:
        message = str(err).splitlines()[0] if str(err) else repr(err)
        fail(message + _string_arg_hint(typed, message), USAGE_ERROR)


def _check_env(config: TrainConfig, typed: dict[str, Any] | None = None) -> None:
    """Build one env up front so a bad id or argument is a one-line usage error; its note on env arguments read as
    strings names only those in ``typed`` (default ``_typed_env_args``)."""
    from semzoo.envs.registry import make_env

    typed = _typed_env_args(config) if typed is None else typed
    _check_env_args(config, typed)
    try:
        make_env(config.env, **config.env_args).close()
    except (ValueError, TypeError) as err:
        message = str(err).splitlines()[0] if str(err) else repr(err)
        fail(message + _string_arg_hint(typed, message), USAGE_ERROR)


def _memory_plan(run: ResolvedRun, runs: int = 1, label: str = "") -> ResolvedRun:
    """Print the memory plan of ``runs`` runs of ``run`` (one line, stderr); exit 1 when its worst case cannot fit.
    Returns ``run`` fitted to the env's sizes (``memory_plan.fit_to_env``, its change said in one line)."""
    from semzoo.episodic.memory import MemoryDoesNotFitEnv
    from semzoo.mixers.qplex import MissingStateLayout
    from semzoo.run import memory_plan

    try:
        sizes = memory_plan.env_sizes(run.config)
        with _warnings_now():
            run = memory_plan.fit_to_env(run, sizes)
        plan, available, device_available = memory_plan.check(run, sizes, runs=runs)
    except memory_plan.MemoryPlanRefused as refused:
        fail(label + str(refused))
    except (MissingStateLayout, MemoryDoesNotFitEnv) as err:  # a flag (or preset) the env cannot serve: a usage error
        fail(label + str(err), USAGE_ERROR)
    typer.echo(label + plan.line(available, device_available), err=True)
    return run


def _optimum(config: TrainConfig) -> float | None:
    from semzoo.envs.registry import make_env

    env = make_env(config.env, **config.env_args)
    try:
        return getattr(env, "optimal_return", None)
    finally:
        env.close()


def _report(config: TrainConfig, run_dir: Any, result: dict[str, float]) -> None:
    typer.echo(f"run directory: {run_dir}")
    line = f"{config.algo} on {config.env} after {config.steps:,} steps: greedy return {result['test_return_mean']:.3f}"
    optimum = _optimum(config)
    if optimum is not None:
        line += f" (optimum {optimum:g})"
    if "test_win_rate" in result:
        line += f", win rate {result['test_win_rate']:.2f}"
    from semzoo.run.memory_plan import gb, peak_rss_bytes

    typer.echo(line + f"; peak RSS {gb(peak_rss_bytes())}")


def _resume(run_dir: str, changes: dict[str, Any], tensorboard: bool) -> None:
    """``train --resume``: continue a run from its last valid checkpoint, reporting skipped corrupt files."""
    from semzoo.run.trainer import Trainer

    with _warnings_now():
        try:
            trainer = Trainer.resume(run_dir, **changes, tensorboard=tensorboard)
        except (ValueError, TypeError) as err:
            fail(str(err))
        progress = _console_progress(trainer.config, trainer.config.steps, start=trainer.counters.env_steps)
        trainer.progress = progress
        typer.echo(f"resuming {run_dir} at {trainer.counters.env_steps:,} env steps", err=True)
        with _exit_when_stopped():
            try:
                result = trainer.run()
            except (ValueError, TypeError) as err:
                fail(_run_error(err, _typed_env_args(trainer.config)))
            finally:
                trainer.close()
                progress.close()
    _report(trainer.config, Path(run_dir), result)


@app.command()
def evaluate(
    run_dir: str = typer.Argument(..., help="A run directory made by `semzoo train`."),
    episodes: int | None = integer_option(None,
                                        help="Greedy episodes (default: the run's test_episodes)."),
    seed: int | None = integer_option(None,
                                    help="Seed of the evaluation episodes (default: the run's test stream)."),
    device: str | None = typer.Option(None, metavar="DEVICE", help="auto, cpu, cuda (default: the run's)."),
    best: bool = typer.Option(False, "--best", help="Evaluate the run's best checkpoint (best.ckpt: the agent of "
                              "its best test evaluation) instead of the last."),
) -> None:
    """Replay a run's checkpoint greedily and print its scores.

    The last checkpoint (or, with --best, the best one), epsilon 0: the mean return and, where the env
    reports it, the win rate.
    """
    from semzoo.run.evaluation import evaluate_run

    _check_run_directory(run_dir)
    if episodes is not None and episodes <= 0:
        fail(f"--episodes {episodes}: expected a positive number of episodes", USAGE_ERROR)
    if device is not None:
        from semzoo.run.device import resolve_device

        try:
            resolve_device(device)
        except ValueError as err:
            fail(str(err), USAGE_ERROR)
    with _warnings_now():
        try:
            config, result, at_steps = evaluate_run(run_dir, episodes=episodes, seed=seed, device=device,
                                                      best=best)
        except (ValueError, TypeError) as err:
            fail(str(err).strip().splitlines()[0] if str(err).strip() else repr(err))
    which = "best checkpoint" if best else "checkpoint"
    line = (f"{config.algo} on {config.env}, {which} at {at_steps:,} env steps, {result.episodes} greedy episodes: "
            f"return {result.return_mean:.3f} +- {result.return_std:.3f}")
    optimum = _optimum(config)
    if optimum is not None:
        line += f" (optimum {optimum:g})"
    if result.win_rate is not None:
        line += f", win rate {result.win_rate:.3f}"
    typer.echo(line)


@app.command()
def sweep(
    envs: str = typer.Option(..., metavar="ENV,ENV,...", help="Comma-separated env ids, e.g. matrix:climbing,smax:3m."),
    algos: str = typer.Option(..., metavar="ALGO,ALGO,...", help="Comma-separated algorithm ids, e.g. qmix,sem-qmix."),
    seeds: int = integer_option(5, help="Seeds per (env, algo): 0 .. seeds-1."),
    steps: int = integer_option(DEFAULT_STEPS, help="Environment steps per trial."),
    out: str = typer.Option("runs/sweep", metavar="DIR",
                            help="Folder of the trials' run directories (shared by all nodes)."),
    address: str | None = typer.Option(None, metavar="ADDRESS",
                                       help="Ray cluster address (e.g. auto, ray://head:10001); "
                                          "default: an embedded local Ray."),
    max_retries: int = integer_option(2,
                                    help="Retries of a failed trial, each from its last checkpoint."),
    cpus_per_trial: float = typer.Option(1.0, metavar="FLOAT",
                                         help="CPUs reserved per trial (torch threads = its integer part)."),
    num_cpus: int | None = integer_option(None, help="CPUs of the embedded local Ray (default: all)."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="A config override (VALUE parsed as "
                                   "JSON), e.g. test_interval=5000 or learner.batch_size=16; repeatable."),
    grid: list[str] = typer.Option([], "--grid", metavar="KEY=V1,V2,...",
                                   help="A config axis: every (env, algo) runs each "
                                   "value, e.g. memory.lam=0,0.1,0.3 (memory axes skip algorithms without memory); "
                                   "run names gain the settings off the defaults (..._sem-qmix_lam=0.3_seed0); "
                                   "repeatable (the product of the axes)."),
    pack_seeds: bool = typer.Option(False, "--pack-seeds", help="Train each (env, algo)'s seeds together in one "
                                    "Ray trial (one process, as `train --seeds`; the sequential loop), in the same "
                                    "run directories; --cpus-per-trial then counts per (env, algo)."),
) -> None:
    """Run a grid of env x algo x seed on Ray.

    --grid adds config axes. Re-running the same command skips finished trials and continues the rest.
    """
    from semzoo.run import sweep as sweeps

    if seeds <= 0:
        fail(f"--seeds {seeds}: expected a positive number of seeds", USAGE_ERROR)
    overrides = parse_env_args(set_, "--set")
    try:
        trials = sweeps.plan_trials(envs=_split(envs, "--envs"), algos=_split(algos, "--algos"), seeds=range(seeds),
                                    steps=steps, out=out, overrides=overrides, grid=sweeps.parse_grid(grid))
    except (ValueError, TypeError) as err:
        fail(str(err), USAGE_ERROR)
    _check_sweep_envs(trials)
    tasks = sweeps.pack_seeds(trials) if pack_seeds else trials
    sweeps.require_ray()  # before the plan lines: a sweep without Ray says only that
    _sweep_memory_plans(tasks)
    try:
        report = sweeps.run_sweep(tasks, address=address, max_retries=max_retries, cpus_per_trial=cpus_per_trial,
                                  num_cpus=num_cpus, echo=lambda line: typer.echo(line, err=True))
    except (ValueError, TypeError) as err:
        fail(str(err))
    typer.echo(f"{len(trials)} trials in {out}: {len(report.finished)} finished now, {len(report.skipped)} already "
               f"finished, {len(report.failed)} failed" + (f", {len(report.stopped)} stopped" if report.stopped_by else ""))
    if report.stopped_by is not None:
        from semzoo.run.stopping import signal_exit_code

        raise typer.Exit(signal_exit_code(report.stopped_by))
    if not report.ok:
        fail(f"{len(report.failed)} trial(s) failed: {', '.join(report.failed)}; run the same command again to retry")


def _check_sweep_envs(trials: list[Any]) -> None:
    """Build the env of each unfinished trial once per (env id, env args), so a bad one is refused before Ray starts."""
    from semzoo.run.rundir import run_finished

    checked = set()
    for trial in trials:
        key = (trial.config.env, json.dumps(trial.config.env_args, sort_keys=True))
        if key not in checked and not run_finished(trial.run_dir, trial.config.steps):
            checked.add(key)
            _check_env(trial.config)


def _sweep_memory_plans(tasks: Sequence[Any]) -> None:
    """The memory plan of each distinct trial (a packed trial's runs together), one line each; exit 1 if one cannot fit."""
    from semzoo.resolution import resolve
    from semzoo.run.multi import group_config

    seen = set()
    for task in tasks:
        configs = [t.config for t in task.trials] if hasattr(task, "trials") else [task.config]
        key = json.dumps([group_config(configs[0]), len(configs)], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            _memory_plan(resolve(configs[0]), runs=len(configs), label=f"sweep: trial {configs[0].env} {configs[0].algo}: ")
