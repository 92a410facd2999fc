"""The ``semzoo`` command line: thin wrappers that build a config and call the library.

Exit codes: 0 success, 1 domain error (bad run directory, environment failure, a missing optional part:
an extra, StarCraft II, a plugin module), 2 usage error (bad flag value). Errors are one line on stderr,
never a traceback.

The command group and what every command shares (one-line errors, warnings as they arise, env args); the commands
live beside it, one module per group: training.py (train, evaluate, sweep), runs.py (plot, table, report) and
listing.py (algos, envs, memory-cost). Each imports the training stack (torch) inside the command that needs it, so
``semzoo --help`` and ``--version`` load none of it.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from semzoo.config import TrainConfig
from semzoo.errors import MissingDependency


class _Commands(TyperGroup):
    """The command group: the one place where a missing optional part becomes one line and exit status 1.

    Every command, the --plugin callback included, runs inside ``invoke``; an ImportError there is the user's
    environment (an extra, StarCraft II, a plugin module), not a bug to show as a traceback.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """``--plugin MODULE`` is the group's option, and may also come after the command (``semzoo algos --plugin
        X``): each is moved before it, in order."""
        if args and args[-1] == PLUGIN_FLAG:
            ctx.fail(f"{PLUGIN_FLAG} needs a value: a module name or a Python file, e.g. {PLUGIN_FLAG} my_memory")
        return super().parse_args(ctx, _plugins_first(args))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MissingDependency as err:
            fail(str(err).strip().splitlines()[0] if str(err).strip() else repr(err))
        except ImportError as err:  # an import outside semzoo's optional-import sites (a user's factory, say)
            reason = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
            fail(f"{reason}: a module did not import; install it (or put it on PYTHONPATH) and run again")


PLUGIN_FLAG = "--plugin"


def _plugins_first(args: list[str]) -> list[str]:
    """``args`` with every ``--plugin X`` / ``--plugin=X`` moved to the front, in order (up to a ``--``)."""
    plugins: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg == PLUGIN_FLAG and i + 1 < len(args):
            plugins += args[i:i + 2]
            i += 2
            continue
        if arg.startswith(PLUGIN_FLAG + "="):
            plugins.append(arg)
        else:
            rest.append(arg)
        i += 1
    return plugins + rest


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


INTEGER = "INTEGER"
"""The placeholder of an integer flag's value in the help."""


def whole_number(value: Any) -> int:
    """An integer flag's value: an integer (``5000``, ``5_000``) or a number written as a float that is whole
    (``5e3``, ``1e6``, as the docs write |Q^S|); anything else is a usage error naming the value."""
    if isinstance(value, int) and not isinstance(value, bool):  # a default
        return value
    text = str(value).strip().replace("_", "")
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a number: expected a whole number such as 5000 or 5e3") from None
    if not number.is_integer():  # 1.5e0, inf, nan
        raise typer.BadParameter(f"{value} is not a whole number: expected an integer such as 5000 or 5e3")
    return int(number)


def integer_option(default: Any, *flags: str, **kwargs: Any) -> Any:
    """``typer.Option`` for an integer flag: its value read by ``whole_number`` (so 1e6 is 1000000), INTEGER in the
    help."""
    return typer.Option(default, *flags, parser=whole_number, metavar=INTEGER, **kwargs)


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


CLI_ONLY_OPTIONS = ("resume", "seeds", "set", "tensorboard")
"""Options of `train` that are not config fields (they say how to run, not what)."""
RESUME_FLAGS = ("steps", "keep_checkpoints")
"""Config fields that ``train --resume`` takes from the command line (the rest come from the run's config.json)."""


def _check_run_directory(path: str) -> None:
    """One line (exit 1) for a path that is a file where a run directory is expected; a missing one is left to the
    reader, which says so."""
    if Path(path).exists() and not Path(path).is_dir():
        fail(f"{path} is a file, not a run directory: expected a folder made by `semzoo train` (holding config.json)")


def _split(value: str, flag: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        fail(f"{flag} {value!r}: expected a comma-separated list", USAGE_ERROR)
    return items


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
