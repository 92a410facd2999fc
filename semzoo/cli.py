"""The ``semzoo`` command line: thin wrappers that build a config and call the library.

Exit codes: 0 success, 1 domain error (bad run directory, environment failure, a missing optional part:
an extra, StarCraft II, a plugin module), 2 usage error (bad flag value). Errors are one line on stderr,
never a traceback.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
import types
import typing
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from semzoo.config import CLI, FLAG, RANGE, SECTIONS, ConfigField, Range, TrainConfig, config_fields
from semzoo.errors import MissingDependency
from semzoo.run.progress import ConsoleProgress as _Progress


class _Commands(TyperGroup):
    """The command group: the one place where a missing optional part becomes one line and exit status 1.

    Every command, the --plugin callback included, runs inside ``invoke``; an ImportError there is the user's
    environment (an extra, StarCraft II, a plugin module), not a bug to show as a traceback.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MissingDependency as err:
            fail(str(err).strip().splitlines()[0] if str(err).strip() else repr(err))
        except ImportError as err:  # an import outside semzoo's optional-import sites (a user's factory, say)
            reason = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
            fail(f"{reason}: a module did not import; install it (or put it on PYTHONPATH) and run again")


app = typer.Typer(
    cls=_Commands,
    name="semzoo",
    help="State-based episodic memory for cooperative multi-agent RL: train VDN, QMIX, QPLEX and CW/OW-QMIX, "
    "each alone or with an episodic memory (SEM, SAEM, EMC, EMU, LAGMA; mc- the own-return ablation), on matrix games, MPE, SMAX "
    "and SMAC.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain click help: rich's boxed tables cut long flag names (--target-update-episodes) at 80 columns. `train`
    # shows its options in panels all the same (_PanelledCommand).
    rich_markup_mode=None,
)

USAGE_ERROR = 2
DOMAIN_ERROR = 1
BUILD_LINES = 20
"""A --seeds group says when each run is built, in at most this many lines."""
DEFAULT_STEPS = TrainConfig.steps
"""The README's main job: SEM-QMIX on SMAX 3m, about 3 minutes on 2 cores, win rate rising to ~0.8."""


AT_HELP = ("Default: 250000,500000 (the paper's) where every run reached them, else the runs' last common "
           "evaluation and its half (a line on stderr says so).")
METRIC_HELP = ("Metric, e.g. test_win_rate, test_return_mean. Default: test_win_rate where the runs log it, "
               "else test_return_mean (matrix games, MPE; a line on stderr says so).")


def fail(message: str, code: int = DOMAIN_ERROR) -> NoReturn:
    """Print one line to stderr and exit with ``code``."""
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def _exit_when_stopped() -> Iterator[None]:
    """A run stopped by SIGINT/SIGTERM (after its checkpoint): its one line, and the signal's exit status (130, 143)."""
    from semzoo.run.stopping import RunStopped

    try:
        yield
    except RunStopped as stop:
        typer.echo(str(stop), err=True)
        raise typer.Exit(stop.exit_code) from None


def parse_env_args(pairs: list[str], flag: str = "--env-arg") -> dict[str, Any]:
    """['payoff=[[1,0],[0,1]]', 'k=-10'] -> {'payoff': [[1, 0], [0, 1]], 'k': -10}.

    Values are JSON; a value that is not JSON is kept as a string, so a bare word such as
    ``attack_mode=random`` needs no quotes. An env that then rejects such a string names the
    argument (``_string_arg_hint``). A value that opens a list, an object or a quoted string and does not
    parse is a usage error naming the broken JSON.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            fail(f"{flag} {pair!r}: expected KEY=VALUE, e.g. {flag} 'k=-10'", USAGE_ERROR)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError as err:
            if raw.lstrip()[:1] in JSON_OPENERS:  # meant as JSON (a list, an object, a quoted string), but broken
                fail(f"{flag} {pair!r}: {key}={raw} is not valid JSON ({err.msg} at character {err.pos}); close every "
                     f"bracket and quote, e.g. {flag} '{key}=[[1,0],[0,1]]'", USAGE_ERROR)
            out[key] = raw
    return out


JSON_OPENERS = ("[", "{", '"')
"""The first characters of a value that can only be meant as JSON: one that then does not parse is a typo, not a word."""


def _string_arg_hint(env_args: dict[str, Any], message: str) -> str:
    """' (note: --env-arg N=abc was read as a string ...)' for string-valued env args ``message`` does not name."""
    strings = [f"{key}={value}" for key, value in env_args.items()
               if isinstance(value, str) and not (key in message and value in message)
               and not _names_as_unknown(message, key)]
    if not strings:
        return ""
    return (f" (note: --env-arg {', '.join(strings)} {'was' if len(strings) == 1 else 'were'} read as "
            f"{'a string' if len(strings) == 1 else 'strings'}: values are JSON, so write a number as 3 or 0.5, "
            "a list as [1,2], a boolean as true)")


def _names_as_unknown(message: str, key: str) -> bool:
    """Whether ``message`` refuses the argument ``key`` itself (an unknown argument): its value's type is not the
    problem, so a note about strings would point the wrong way."""
    return "unknown" in message and (f"'{key}'" in message or f'"{key}"' in message)


def _build(factory: Callable[..., Any], **kwargs: Any) -> Any:
    try:
        return factory(**kwargs)
    except (ValueError, TypeError) as err:
        fail(str(err), USAGE_ERROR)


@contextmanager
def _warnings_now() -> Iterator[None]:
    """Every warning raised inside, printed on stderr as one line when it arises: not after a long run, and not lost
    when the run fails."""
    def show(message: Warning | str, *_: Any, **__: Any) -> None:
        typer.echo(f"Warning: {message}", err=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


CLI_ONLY_OPTIONS = ("resume", "seeds", "tensorboard")
"""Options of `train` that are not config fields (they say how to run, not what)."""
RESUME_FLAGS = ("steps", "keep_checkpoints")
"""Config fields that ``train --resume`` takes from the command line (the rest come from the run's config.json)."""

# ----- `train --help` in panels ------------------------------------------------------------------------------------

RUN_PANEL, ALGORITHM_PANEL, MEMORY_PANEL, CURIOSITY_PANEL = "Run", "Algorithm", "Memory", "Curiosity"
LEARNER_PANEL, EXPLORATION_PANEL, RUNTIME_PANEL, SPEED_PANEL = "Learner", "Exploration", "Runtime", "Speed"
OUTPUT_PANEL, OTHER_PANEL = "Output", "Other"
SECTION_PANELS = {"agent": ALGORITHM_PANEL, "mixer": ALGORITHM_PANEL, "memory": MEMORY_PANEL, "emc": "EMC",
                  "emu": "EMU", "lagma": "LAGMA", "curiosity": CURIOSITY_PANEL, "learner": LEARNER_PANEL,
                  "exploration": EXPLORATION_PANEL}
"""Config section -> its panel; a section not named here gets a panel of its own name (``panel_of``)."""
FIELD_PANELS = {
    "env": RUN_PANEL, "env_args": RUN_PANEL, "algo": RUN_PANEL, "steps": RUN_PANEL, "seed": RUN_PANEL,
    "seeds": RUN_PANEL, "resume": RUN_PANEL, "episode_limit": RUN_PANEL,
    "preset": ALGORITHM_PANEL,
    "runtime": RUNTIME_PANEL, "n_envs": RUNTIME_PANEL, "sequential": RUNTIME_PANEL,
    "device": SPEED_PANEL, "threads": SPEED_PANEL, "group_collect": SPEED_PANEL, "compile_update": SPEED_PANEL,
    "out": OUTPUT_PANEL, "run_name": OUTPUT_PANEL, "test_interval": OUTPUT_PANEL, "test_episodes": OUTPUT_PANEL,
    "log_interval": OUTPUT_PANEL, "save_interval": OUTPUT_PANEL, "keep_checkpoints": OUTPUT_PANEL,
    "tensorboard": OUTPUT_PANEL,
}
"""Top-level config field (or CLI-only option) -> its panel, in the order a panel lists them (a section's fields
follow). The runtime panel holds what changes how episodes are collected (and so the run); the speed panel what
only changes how fast the same run goes."""
PANEL_ORDER = (RUN_PANEL, ALGORITHM_PANEL, MEMORY_PANEL, "EMC", "EMU", "LAGMA", CURIOSITY_PANEL, LEARNER_PANEL,
               EXPLORATION_PANEL, RUNTIME_PANEL, SPEED_PANEL, OUTPUT_PANEL, OTHER_PANEL)
"""The panels of `train --help`, in order (docs/cli.md follows it); a new section's panel comes after the memories'."""
PANEL_NOTES = {MEMORY_PANEL: "SEM, SAEM; --proj-dim and --memory-capacity: every memory",
               CURIOSITY_PANEL: "EMC, EMU", RUNTIME_PANEL: "how episodes are collected",
               SPEED_PANEL: "how fast the same run goes", OUTPUT_PANEL: "evaluations, logs, checkpoints"}


def panel_of(f: ConfigField) -> str:
    """The panel of a config field's option: its section's (a new section's is its name in capitals, ``LAGMA``),
    or for a top-level field ``FIELD_PANELS``' (``Other`` for one not named there)."""
    if f.section is not None:
        return SECTION_PANELS.get(f.section, f.section.replace("_", " ").upper())
    return FIELD_PANELS.get(f.name, OTHER_PANEL)


def panel_rank(panel: str) -> float:
    """Where ``panel`` comes in `train --help`: ``PANEL_ORDER``, a panel of a new section right after the memories'."""
    if panel in PANEL_ORDER:
        return PANEL_ORDER.index(panel)
    return PANEL_ORDER.index(CURIOSITY_PANEL) + 0.5


def range_text(allowed: Range) -> str:
    """A field's range as its help states it: '[0, 1]', '(0, 1]', '>= 1', 'any finite number'."""
    return str(allowed).removeprefix("in ") or "any finite number"


class _PanelledCommand(TyperCommand):
    """A command whose options are listed in sections, one per ``rich_help_panel`` ("Run options:", ...), in plain
    click text: rich's boxed tables would cut long flag names at 80 columns."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        panels: dict[str, list[tuple[int, tuple[str, str]]]] = {}
        listed = list(FIELD_PANELS)
        for i, param in enumerate(self.get_params(ctx)):
            record = param.get_help_record(ctx)
            if record is not None:
                place = listed.index(param.name) if param.name in listed else len(listed) + i
                panels.setdefault(getattr(param, "rich_help_panel", None) or OTHER_PANEL, []).append((place, record))
        for panel in sorted(panels, key=panel_rank):
            note = PANEL_NOTES.get(panel)
            with formatter.section(f"{panel} options" + (f" ({note})" if note else "")):
                formatter.write_dl([record for _, record in sorted(panels[panel])])


def option_flags(fields: Sequence[ConfigField]) -> dict[str, str]:
    """Config key -> its `train` flag.

    The rule: a field's own name in kebab case (``learner.batch_size`` -> ``--batch-size``); a section
    field whose name occurs more than once in the tree is prefixed with its section (``agent.x`` and
    ``mixer.x`` -> ``--agent-x``, ``--mixer-x``; a top-level ``x`` keeps ``--x``); a field's
    ``metadata['flag']`` names it outright (``memory.capacity`` -> ``--memory-capacity``).
    """
    counts = Counter(f.name for f in fields)
    flags = {}
    for f in fields:
        if FLAG in f.metadata:
            name = f.metadata[FLAG]
        elif f.section is not None and counts[f.name] > 1:
            name = f"{f.section}_{f.name}"
        else:
            name = f.name
        flags[f.key] = "--" + name.replace("_", "-")
    taken = Counter([*flags.values(), *(f"--{name}" for name in CLI_ONLY_OPTIONS)])
    clashes = sorted(flag for flag, n in taken.items() if n > 1)
    if clashes:
        raise ValueError(f"config fields share the flags {clashes}: give one of them metadata={{'flag': ...}}")
    return flags


def _is_dict(kind: Any) -> bool:
    return (typing.get_origin(kind) or kind) is dict


METAVARS = {int: "INTEGER", float: "FLOAT", str: "TEXT"}
"""The placeholder of a value in the help: click's words, in capitals like KEY=VALUE and MODULE."""


def _metavar(kind: Any) -> str | None:
    """A config field's placeholder in `train --help`: INTEGER, FLOAT, TEXT, [a|b] or KEY=VALUE (None for a flag)."""
    if _is_dict(kind):
        return "KEY=VALUE"
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        kind = next(arg for arg in args if arg is not type(None))
    if typing.get_origin(kind) is typing.Literal:
        return f"[{'|'.join(map(str, typing.get_args(kind)))}]"
    return METAVARS.get(kind)


def _train_parameters(fields: Sequence[ConfigField], flags: dict[str, str]) -> list[inspect.Parameter]:
    """One typer option per config field (type, default and help from the field), then the CLI-only ones."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    for f in fields:
        flag = flags[f.key]
        annotation, default, help_text, decls = f.type, f.default, f.help, [flag]
        if _is_dict(f.type):  # a dict field is a repeatable KEY=VALUE option
            annotation, default = list[str], []
            help_text += " KEY=VALUE, VALUE parsed as JSON (else a string); repeatable."
        elif f.type is bool:
            decls = [f"{flag}/--no-{flag[2:]}"]
        if RANGE in f.metadata:
            help_text += f" Range: {range_text(f.metadata[RANGE])}."
        option = typer.Option(default, *decls, help=help_text, metavar=_metavar(f.type), rich_help_panel=panel_of(f))
        params.append(inspect.Parameter(_param_name(f), keyword, default=option, annotation=annotation))
    resume_flags = ", ".join(flags[key] for key in RESUME_FLAGS if key in flags)
    params.append(inspect.Parameter("resume", keyword, annotation=list[str], default=typer.Option(
        [], metavar="RUN_DIR", rich_help_panel=FIELD_PANELS["resume"],
        help=f"Continue the run in this run directory from its last checkpoint with its own config.json; only "
        f"{resume_flags} and --tensorboard apply (--steps as the new total). Repeat it for every run directory of "
        "a --seeds group to continue the group in one process, exactly.")))
    params.append(inspect.Parameter("seeds", keyword, annotation=str | None, default=typer.Option(
        None, metavar="SPEC", rich_help_panel=FIELD_PANELS["seeds"],
        help="Train one run per seed in one process, their updates vectorised (e.g. 0-9, 0,3,5, 0-4,7); "
        "each run is the --seed run of that seed, in its default run directory. Instead of --seed.")))
    params.append(inspect.Parameter("tensorboard", keyword, annotation=bool, default=typer.Option(
        True, rich_help_panel=FIELD_PANELS["tensorboard"],
        help="Also write TensorBoard events (when tensorboard is installed).")))
    return params


def _param_name(f: ConfigField) -> str:
    """The Python name of a field's option: its key with the section joined by '__' (``learner__lr``)."""
    return f.key.replace(".", "__")


def _config_data(options: dict[str, Any], fields: Sequence[ConfigField], flags: dict[str, str]) -> dict[str, Any]:
    """The parsed options as a ``TrainConfig.to_dict()``-shaped dict."""
    data: dict[str, Any] = {section: {} for section in SECTIONS}
    for f in fields:
        value = options[_param_name(f)]
        if _is_dict(f.type):
            value = parse_env_args(value, flags[f.key])
        (data[f.section] if f.section is not None else data)[f.name] = value
    return data


TRAIN_FIELDS = [f for f in config_fields(TrainConfig) if f.metadata.get(CLI, True)]
TRAIN_FLAGS = option_flags(TRAIN_FIELDS)


def train(ctx: typer.Context, **options: Any) -> None:
    """Train an algorithm on an environment.

    Writes <out>/<run>/ (config.json, metrics.csv, checkpoints/).

    With no flags: the README's main job, SEM-QMIX on SMAX 3m for 100k env steps (TrainConfig()).
    """
    from semzoo.algos import parse_algorithm
    from semzoo.run.device import resolve_device
    from semzoo.run.trainer import train as run_training

    sources = {f.key: ctx.get_parameter_source(_param_name(f)) for f in TRAIN_FIELDS}
    given = {key for key, source in sources.items() if source is not None and source.name != "DEFAULT"}
    if options["resume"]:
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
    # a flag typed keeps its value against the runtime and the preset, even where it equals the default
    data = {**_config_data(options, TRAIN_FIELDS, TRAIN_FLAGS), "pinned": sorted(given)}
    config = _build(TrainConfig.from_dict, data=data)
    _build(parse_algorithm, algo_id=config.algo)  # the algorithm table judges --algo: a usage error
    _build(resolve_device, name=config.device)  # a device this machine lacks is a bad --device: usage error
    _check_env(config)
    _memory_plan(config, runs=len(seeds) if seeds is not None else 1)
    if seeds is not None:
        _train_group(config, seeds, options["tensorboard"])
        return
    progress = _Progress(config.steps)
    with _exit_when_stopped():  # outside: the progress line is closed before the stop's line
        try:
            with _warnings_now():
                run_dir, result = run_training(config, progress=progress, tensorboard=options["tensorboard"])
        except (ValueError, TypeError) as err:
            fail(_run_error(err, config.env_args))
        finally:
            progress.close()
    _report(config, run_dir, result)


train.__signature__ = inspect.Signature(_train_parameters(TRAIN_FIELDS, TRAIN_FLAGS))  # type: ignore[attr-defined]
app.command(cls=_PanelledCommand)(train)


def _check_run_directory(path: str) -> None:
    """One line (exit 1) for a path that is a file where a run directory is expected; a missing one is left to the
    reader, which says so."""
    if Path(path).exists() and not Path(path).is_dir():
        fail(f"{path} is a file, not a run directory: expected a folder made by `semzoo train` (holding config.json)")


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


def _train_group(config: TrainConfig, seeds: list[int], tensorboard: bool) -> None:
    """``train --seeds``: one run per seed in one process, one progress line, one report line per run."""
    from semzoo.run.multi import MultiTrainer

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
            group = MultiTrainer.create(config, seeds, tensorboard=tensorboard, on_built=built)
        except (ValueError, TypeError) as err:
            fail(_run_error(err, config.env_args))
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
    progress = _Progress(sum(t.config.steps for t in trainers), start=sum(t.counters.env_steps for t in trainers),
                         label=f"train x{len(trainers)}")
    group.progress = progress
    with _exit_when_stopped():
        try:
            results = group.run()
        except (ValueError, TypeError) as err:
            fail(_run_error(err, trainers[0].config.env_args))
        finally:
            group.close()
            progress.close()
    for trainer, result in zip(trainers, results):
        _report(trainer.config, trainer.run_dir, result)


def _run_error(err: ValueError | TypeError, env_args: dict[str, Any]) -> str:
    """The one line for an error raised during a run: a TypeError there is often a string env arg deep in the env."""
    message = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
    return message + _string_arg_hint(env_args, message) if isinstance(err, TypeError) else message


def _check_env(config: TrainConfig) -> None:
    """Build one env up front so a bad id or argument is a one-line usage error."""
    from semzoo.envs.registry import make_env

    try:
        _check_run_env_args(config.env, config.env_args)
        make_env(config.env, **config.env_args).close()
    except (ValueError, TypeError) as err:
        message = str(err).splitlines()[0] if str(err) else repr(err)
        fail(message + _string_arg_hint(config.env_args, message), USAGE_ERROR)


def _memory_plan(config: TrainConfig, runs: int = 1, label: str = "") -> None:
    """Print the memory plan of ``runs`` runs of ``config`` (one line, stderr); exit 1 when its worst case cannot fit."""
    from semzoo.episodic.memory import MemoryDoesNotFitEnv
    from semzoo.mixers.qplex import MissingStateLayout
    from semzoo.run import memory_plan

    try:
        plan, available, device_available = memory_plan.check(config, memory_plan.env_sizes(config), runs=runs)
    except memory_plan.MemoryPlanRefused as refused:
        fail(label + str(refused))
    except (MissingStateLayout, MemoryDoesNotFitEnv) as err:  # a flag (or preset) the env cannot serve: a usage error
        fail(label + str(err), USAGE_ERROR)
    typer.echo(label + plan.line(available, device_available), err=True)


def _check_run_env_args(env_id: str, env_args: dict[str, Any]) -> None:
    """ValueError for env args that a run sets itself (SMAX: seed, episode_limit), naming the flag to use."""
    if env_id.partition(":")[0] == "smax":
        from semzoo.envs.smax import check_run_env_args

        check_run_env_args(env_args)


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
        progress = _Progress(trainer.config.steps, start=trainer.counters.env_steps)
        trainer.progress = progress
        typer.echo(f"resuming {run_dir} at {trainer.counters.env_steps:,} env steps", err=True)
        with _exit_when_stopped():
            try:
                result = trainer.run()
            except (ValueError, TypeError) as err:
                fail(_run_error(err, trainer.config.env_args))
            finally:
                trainer.close()
                progress.close()
    _report(trainer.config, Path(run_dir), result)


@app.command()
def evaluate(
    run_dir: str = typer.Argument(..., help="A run directory made by `semzoo train`."),
    episodes: int | None = typer.Option(None, metavar="INTEGER",
                                        help="Greedy episodes (default: the run's test_episodes)."),
    seed: int | None = typer.Option(None, metavar="INTEGER",
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


def _split(value: str, flag: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        fail(f"{flag} {value!r}: expected a comma-separated list", USAGE_ERROR)
    return items


@app.command()
def sweep(
    envs: str = typer.Option(..., metavar="ENV,ENV,...", help="Comma-separated env ids, e.g. matrix:climbing,smax:3m."),
    algos: str = typer.Option(..., metavar="ALGO,ALGO,...", help="Comma-separated algorithm ids, e.g. qmix,sem-qmix."),
    seeds: int = typer.Option(5, metavar="INTEGER", help="Seeds per (env, algo): 0 .. seeds-1."),
    steps: int = typer.Option(DEFAULT_STEPS, metavar="INTEGER", help="Environment steps per trial."),
    out: str = typer.Option("runs/sweep", metavar="DIR",
                            help="Folder of the trials' run directories (shared by all nodes)."),
    address: str | None = typer.Option(None, metavar="ADDRESS",
                                       help="Ray cluster address (e.g. auto, ray://head:10001); "
                                          "default: an embedded local Ray."),
    max_retries: int = typer.Option(2, metavar="INTEGER",
                                    help="Retries of a failed trial, each from its last checkpoint."),
    cpus_per_trial: float = typer.Option(1.0, metavar="FLOAT",
                                         help="CPUs reserved per trial (torch threads = its integer part)."),
    num_cpus: int | None = typer.Option(None, metavar="INTEGER", help="CPUs of the embedded local Ray (default: all)."),
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
    from semzoo.run.multi import group_config

    seen = set()
    for task in tasks:
        configs = [t.config for t in task.trials] if hasattr(task, "trials") else [task.config]
        key = json.dumps([group_config(configs[0]), len(configs)], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            _memory_plan(configs[0], runs=len(configs), label=f"sweep: trial {configs[0].env} {configs[0].algo}: ")


def _at_steps(at: str | None) -> list[int] | None:
    """The env steps of --at (None when not given); a usage error for anything but non-negative integers."""
    if at is None:
        return None
    try:
        steps = [int(item.replace("_", "")) for item in _split(at, "--at")]
    except ValueError:
        fail(f"--at {at!r}: expected comma-separated integers, e.g. 250000,500000", USAGE_ERROR)
    if any(step < 0 for step in steps):
        fail(f"--at {at!r}: expected non-negative env-step counts, e.g. 250000,500000", USAGE_ERROR)
    return steps


@app.command()
def plot(
    folder: str = typer.Argument(..., help="A folder of run directories (searched recursively for config.json)."),
    metric: str | None = typer.Option(None, metavar="NAME", help=METRIC_HELP, show_default=False),
    out: str | None = typer.Option(None, metavar="DIR", help="Folder of the PNGs (default: FOLDER/plots)."),
) -> None:
    """Plot learning curves of the runs under a folder.

    Per env, the median and 25-75 % band per algorithm across seeds, plus y / E / Q_tot when logged.
    """
    from semzoo.analysis.report import plot_runs

    with _warnings_now():
        try:
            written = plot_runs(folder, metric=metric, out=out, echo=lambda line: typer.echo(line, err=True))
        except (ValueError, TypeError) as err:
            fail(str(err))
    for path in written:
        typer.echo(str(path))


@app.command()
def table(
    folder: str = typer.Argument(..., help="A folder of run directories (searched recursively for config.json)."),
    at: str | None = typer.Option(None, metavar="STEP,STEP,...",
                                  help="Comma-separated env steps at which to read the scores. " + AT_HELP,
                                  show_default=False),
    metric: str | None = typer.Option(None, metavar="NAME", help=METRIC_HELP, show_default=False),
    csv_path: str | None = typer.Option(None, "--csv", metavar="FILE", help="Also write the table to this CSV file."),
) -> None:
    """Print the score table of the runs under a folder.

    Per env the mean over seeds at each step, then the mean and median across envs per algorithm.

    A mean or median is n/a unless every env has a value; a table with no value at all is an error.
    """
    from semzoo.analysis.report import (
        SUMMARY_ENVS,
        default_steps,
        furthest_step,
        load_runs,
        metric_note,
        missing_cells,
        resolve_metric,
        score_table,
        table_markdown,
        write_table_csv,
    )

    steps = _at_steps(at)
    steps_note = None
    with _warnings_now():
        try:
            runs = load_runs(folder)
            given, metric = metric, resolve_metric(runs, metric)
            if steps is None:
                steps, steps_note = default_steps(runs, metric)
            rows = score_table(runs, steps, metric)
        except (ValueError, TypeError) as err:
            fail(str(err))
    missing, cells = missing_cells(rows), sum(r.env not in SUMMARY_ENVS for r in rows)
    furthest = furthest_step(runs)
    if missing == cells:
        fail(f"no run has a {metric} value at env steps {', '.join(f'{s:,}' for s in steps)}: the furthest step any "
             f"run reached is {furthest:,} (a run has a value at t once it trained to t and was evaluated by then)")
    typer.echo(table_markdown(rows, metric))
    for note in (metric_note(metric) if given is None else None, steps_note):
        if note:
            typer.echo(note, err=True)
    if missing:
        typer.echo(f"Hint: {missing} of {cells} cells are n/a: no seed of that env and algorithm trained to the step "
                   f"(the furthest any run reached is {furthest:,}) or evaluated by then; a mean or median across "
                   "envs is n/a unless every env has a value", err=True)
    if csv_path is not None:
        typer.echo(f"\nwrote {write_table_csv(rows, csv_path)}")


@app.command()
def report(
    folder: str = typer.Argument(..., help="A folder of run directories (searched recursively for config.json)."),
    at: str | None = typer.Option(None, metavar="STEP,STEP,...",
                                  help="Comma-separated env steps at which to compare the runs. " + AT_HELP,
                                  show_default=False),
    metric: str | None = typer.Option(None, metavar="NAME", help=METRIC_HELP, show_default=False),
    out: str | None = typer.Option(None, metavar="DIR",
                                   help="Folder of report.md, the PNGs and marl_eval.json (default: "
                                   "FOLDER/report)."),
    reps: int = typer.Option(2000, metavar="INTEGER", help="Bootstrap replications of each confidence interval."),
    absolute: bool = typer.Option(False, "--absolute", help="First re-evaluate each run's best checkpoint on 10x "
                                  "the test episodes (the absolute metric, cached in <run>/absolute.json)."),
    threads: int = typer.Option(1, metavar="INTEGER",
                                help="torch CPU threads (its OpenMP pool) of this command; 0 keeps torch's "
                                "default (one per core). One leaves the other cores to training runs beside it."),
    compare: list[str] | None = typer.Option(
        None, metavar="'X vs Y'", show_default=False,
        help="Also report P(X > Y) for these two run labels (as the tables name them), e.g. 'qmix td_lambda=0.6 "
        "vs sem-qmix'; repeat for more pairs. The report compares a memory with its base and SEM, and a setting "
        "with the runs it departs from, by itself."),
) -> None:
    """Write the evaluation-protocol report of the runs.

    The protocol of Gorsane et al. (2022): IQM and mean with bootstrap CIs, probability of improvement,
    performance profiles, sample-efficiency curves, the paper's table and a marl-eval JSON export.
    """
    from semzoo.analysis.protocol import parse_compare
    from semzoo.analysis.protocol import report as protocol_report

    steps = _at_steps(at)
    if reps < 1:
        fail(f"--reps {reps}: expected a positive number of bootstrap replications, e.g. 2000", USAGE_ERROR)
    try:
        pairs = [parse_compare(text) for text in compare or []]
    except ValueError as err:
        fail(str(err), USAGE_ERROR)
    _set_threads(threads)
    with _warnings_now():
        try:
            done = protocol_report(folder, steps, metric=metric, out=out, reps=reps,
                                   absolute=_compute_absolute() if absolute else None,
                                   echo=lambda line: typer.echo(line, err=True), compare=pairs)
        except (ValueError, TypeError) as err:
            fail(str(err))
    typer.echo(done.markdown)
    for path in done.files:
        typer.echo(f"wrote {path}")


def _set_threads(threads: int) -> None:
    """``--threads N``: torch's CPU threads for the rest of the command (0: leave torch's default)."""
    if threads < 0:
        fail(f"--threads {threads}: expected a number of threads, e.g. 1 (0 keeps torch's default)", USAGE_ERROR)
    if threads > 0:
        import torch

        torch.set_num_threads(threads)


def _compute_absolute() -> Callable[..., int]:
    """The training side's re-evaluation of best checkpoints (``report --absolute``): the analysis runs no policy."""
    from semzoo.run.evaluation import compute_absolute

    return compute_absolute


def _print_version(value: bool) -> None:
    if value:
        from semzoo import __version__

        typer.echo(f"semzoo {__version__}")
        raise typer.Exit()


@app.callback()
def _plugins(
    plugin: list[str] = typer.Option([], "--plugin", help="Import this module first (it may register mixers, "
                                     "algorithms or envs); repeatable. Also read from SEMZOO_PLUGINS.", metavar="MODULE"),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print semzoo's version and exit."),
) -> None:
    """State-based episodic memory for cooperative multi-agent RL."""
    from semzoo.plugins import add_plugin, load_plugins

    try:
        for module in plugin:
            add_plugin(module)  # also names it in SEMZOO_PLUGINS, so sweep workers import it too
        load_plugins()
    except (ValueError, TypeError) as err:  # a registration the plugin's code made was refused
        fail(str(err).strip().splitlines()[0] if str(err).strip() else repr(err))


@app.command()
def algos() -> None:
    """List the algorithm ids.

    Each row of the table (mixer, learner), and the episodic memories that prefix it.
    """
    from semzoo.algos import NO_MEMORY, algorithm_ids, parse_algorithm
    from semzoo.episodic.memory import memory_class, memory_names

    rows = [parsed for parsed in map(parse_algorithm, algorithm_ids()) if parsed.memory == NO_MEMORY]
    width = max(len(r.id) for r in rows) + 2
    typer.echo("Algorithm ids: <base>, or <memory>-<base> with an episodic memory (sem-qmix, saem-vdn, ...).")
    typer.echo(f"  {'base':<{width}}{'mixer':<10}{'learner':<14}description")
    for r in rows:
        learner = r.algorithm.learner.rpartition(":")[2]
        typer.echo(f"  {r.id:<{width}}{r.mixer:<10}{learner:<14}{r.algorithm.description}")
    typer.echo("")
    memories = memory_names()
    width = max(len("memory"), *(len(m) + 1 for m in memories)) + 2
    typer.echo(f"  {'memory':<{width}}description")
    for name in memories:
        cls = memory_class(name)
        summary = cls.description or (cls.__doc__ or "").strip().partition("\n")[0]
        typer.echo(f"  {name + '-':<{width}}{summary}")
    typer.echo("")
    from semzoo.presets import describe_presets

    typer.echo("Runtimes (`semzoo train --runtime NAME`) and presets (`--preset NAME`); each fills the fields it "
               "names that are left at their defaults, a flag typed keeps its value:")
    for line in describe_presets():
        typer.echo(f"  {line}")
    typer.echo("  (every other id: nothing; the defaults are the PyMARL setup its authors ran on SMAC)")
    typer.echo("")
    typer.echo("Register your own with semzoo.register_mixer / semzoo.register_algorithm / semzoo.register_memory "
               "in a module, then `semzoo --plugin MODULE ...` (see docs/architecture.md).")


@app.command()
def envs() -> None:
    """List the environment ids.

    The matrix games, and the SMAC/SMAX maps with their agents, actions, state size and episode limit.
    """
    from semzoo.envs import matrix_game_v0
    from semzoo.envs.maps import map_table

    typer.echo("Matrix games (matrix:<game>):")
    for name in matrix_game_v0.GAMES:
        typer.echo(f"  matrix:{name:<12} {matrix_game_v0.GAME_DESCRIPTIONS.get(name, '')}")
    typer.echo("")
    typer.echo("SMAC maps: smax:<map> (JaxMARL SMAX, extra semzoo[smax]) and smac:<map> (StarCraft II).")
    typer.echo("Sizes are per backend: SMAC (StarCraft II) / SMAX; * = one of the paper's eight maps.")
    rows = map_table()

    def pair(sc2: object, smax: object) -> str:
        return f"{'-' if sc2 is None else sc2}/{'-' if smax is None else smax}"

    names = [str(row["map"]) + ("*" if row.get("paper") else "") for row in rows]
    width = max(len("map"), *(len(n) for n in names)) + 2
    typer.echo(f"  {'map':<{width}}{'backends':<10}{'agents':>6} {'actions':>7} {'state (sc2/smax)':>17} "
               f"{'limit (sc2/smax)':>17}  units")
    for name, row in zip(names, rows):
        typer.echo(f"  {name:<{width}}{row['backends']:<10}{row['agents']:>6} {row['actions']:>7} "
                   f"{pair(row['state_dim'], row.get('smax_state_dim')):>17} "
                   f"{pair(row['episode_limit'], row.get('smax_episode_limit')):>17}  {row['units']}")
    typer.echo("")
    typer.echo("Any PettingZoo ParallelEnv factory with state() (pz:<module>:<factory>), e.g.:")
    typer.echo("  pz:mpe2.simple_spread_v3:parallel_env   MPE2 cooperative navigation (extra semzoo[mpe])")


@app.command("memory-cost")
def memory_cost(
    target: str | None = typer.Argument(None, help="A SMAC map (2c_vs_64zg, 27m_vs_30m, ...) or an env id "
                                           "(matrix:climbing, pz:<module>:<factory>); or give --agents/--actions/--state-size."),
    agents: int | None = typer.Option(None, metavar="INTEGER", help="Number of agents n (instead of a map or env id)."),
    actions: int | None = typer.Option(None, metavar="INTEGER",
                                       help="Actions per agent |U| (instead of a map or env id)."),
    state_size: int | None = typer.Option(None, metavar="INTEGER",
                                          help="Global state size F (instead of a map or env id)."),
    obs_size: int | None = typer.Option(None, metavar="INTEGER",
                                        help="One agent's observation size, for the curiosity networks of EMC "
                                        "and EMU (with --agents/--actions/--state-size; default: the state size F)."),
    capacity: float = typer.Option(1e6, "--memory-capacity", metavar="FLOAT", help="Entries per table |Q|, as `train "
                                   "--memory-capacity` (the paper: 1e6; scientific notation allowed)."),
    proj_dim: int = typer.Option(4, metavar="INTEGER",
                                 help="Random-projection size D, as `train --proj-dim` (the paper: 4)."),
    env_arg: list[str] = typer.Option([], metavar="KEY=VALUE", help="Passed to the env factory (VALUE parsed as "
                                      "JSON, else a string); repeatable."),
) -> None:
    """Print the storage each episodic memory needs.

    SEM and SAEM in the paper's layout (|U|^n tables for SAEM) next to semzoo's, then every registered memory.
    """

    from semzoo.episodic.cost import (
        RAW_STATE_BYTES_PER_DIM,
        EnvSizes,
        format_gb,
        memory_costs,
        paper_n_tables,
        sizes_of,
        state_keys_bytes,
        storage_comparison,
    )
    from semzoo.episodic.tables import projection_bytes

    from semzoo.config import MEMORY_CAPACITY

    if capacity not in MEMORY_CAPACITY or not float(capacity).is_integer():  # inf and nan are not in the range
        fail(f"--memory-capacity {capacity:g}: expected a whole number of entries {MEMORY_CAPACITY} "
             f"({MEMORY_CAPACITY.note}), e.g. 1e6", USAGE_ERROR)
    explicit = {"--agents": agents, "--actions": actions, "--state-size": state_size}
    given = [flag for flag, value in explicit.items() if value is not None]
    if target is not None and given:
        fail(f"got {target!r} and {', '.join(given)}: give a map or env id, or --agents/--actions/--state-size, not both",
             USAGE_ERROR)
    if target is None:
        missing = [flag for flag, value in explicit.items() if value is None]
        if missing:
            fail(f"missing {', '.join(missing)}: give a map or env id (e.g. 2c_vs_64zg, matrix:climbing) "
                 "or all of --agents, --actions, --state-size", USAGE_ERROR)
        n_agents, n_actions, state_dim = int(agents), int(actions), int(state_size)  # type: ignore[arg-type]
        obs_dim, source = (state_dim if obs_size is None else obs_size), "given"
    else:
        if obs_size is not None:
            fail(f"--obs-size {obs_size} with {target!r}: the map or env gives the observation size; drop --obs-size",
                 USAGE_ERROR)
        try:
            n_agents, n_actions, state_dim, obs_dim, source = sizes_of(target, parse_env_args(env_arg))
        except (ValueError, TypeError) as err:
            fail(str(err).splitlines()[0] if str(err) else repr(err), USAGE_ERROR)
    if state_dim <= 0:
        fail(f"--state-size {state_dim}: expected a positive state size F", USAGE_ERROR)
    if obs_dim <= 0:
        fail(f"--obs-size {obs_dim}: expected a positive observation size", USAGE_ERROR)
    try:
        cost = storage_comparison(n_agents, n_actions, capacity=capacity, proj_dim=proj_dim)
        saem_tables = paper_n_tables("saem", n_agents, n_actions)
    except ValueError as err:
        fail(f"{err} (check --agents, --actions, --memory-capacity, --proj-dim)", USAGE_ERROR)
    entries = int(capacity)
    tables = f"{n_actions}^{n_agents} = {saem_tables:,}" if saem_tables < 10**9 else f"{n_actions}^{n_agents} = {saem_tables:.2e}"
    typer.echo(f"{source}: n = {n_agents} agents, |U| = {n_actions} actions, state size F = {state_dim}; "
               f"|Q| = {entries:,} entries, D = {proj_dim}")
    typer.echo(f"{'':6}{'paper layout':<52}semzoo (one table each)")
    typer.echo(f"{'SEM':<6}{'1 table: ' + format_gb(cost['paper_sem']):<52}{format_gb(cost['semzoo_sem'])}  ({cost['semzoo_sem']:,} bytes)")
    typer.echo(f"{'SAEM':<6}{tables + ' tables: ' + format_gb(cost['paper_saem']):<52}{format_gb(cost['semzoo_saem'])}  "
               f"({cost['semzoo_saem']:,} bytes)")
    typer.echo(f"projection V: D x F = {proj_dim} x {state_dim} float64 = {projection_bytes(proj_dim, state_dim):,} bytes "
               "(shared by SEM and SAEM)")
    typer.echo(f"state keys in the replay buffer: D int32 = {state_keys_bytes(1, proj_dim)} bytes per slot, "
               "an episode of L steps stores L + 1 slots (phi(s) of each stored state, projected once)")
    costs = memory_costs(EnvSizes(n_agents, n_actions, state_dim, obs_dim, source), capacity=capacity,
                         proj_dim=proj_dim)
    typer.echo(f"every memory at its largest (|Q| entries, its networks and optimisers; observation size {obs_dim}), "
               "as the memory plan of `semzoo train` counts it:")
    for name, nbytes in costs.items():
        typer.echo(f"  {name:<6}{format_gb(nbytes):<12}({nbytes:,} bytes)")
    raw = RAW_STATE_BYTES_PER_DIM * state_dim
    if "emu" in costs:
        typer.echo(f"of which EMU's raw states (kept to re-embed its keys): F float32 = {raw:,} bytes per entry, "
                   f"{format_gb(raw * entries)} at |Q| = {entries:,}")


def _click_exceptions() -> Any:
    """The click exception classes typer raises: recent typer vendors click as ``typer._click``."""
    import importlib

    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:  # typer versions that use the click package itself
        return importlib.import_module("click.exceptions")


VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")
"""What pydantic (which recent typer uses to convert option values) puts before a validator's own message."""


def _without_validator_prefix(message: str) -> str:
    """A usage error's message without pydantic's 'Value error, ' before the validator's own words."""
    for prefix in VALIDATOR_PREFIXES:
        message = message.replace(": " + prefix, ": ")
    return message


def main() -> None:
    """Console entry point: like ``app()``, but click's usage errors are one line (exit 2), not a box."""
    ex = _click_exceptions()
    try:
        code = app(standalone_mode=False)
    except ex.UsageError as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # bare `semzoo`: the help, as before
            typer.echo(err.ctx.get_help() if err.ctx is not None else err.format_message())
            sys.exit(0)
        where = err.ctx.command_path if err.ctx is not None else "semzoo"
        typer.echo(f"Error: {_without_validator_prefix(err.format_message())} (see '{where} --help')", err=True)
        sys.exit(USAGE_ERROR)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(DOMAIN_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
