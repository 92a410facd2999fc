"""`train`'s options, generated from the config fields: their flags, types, help text and panels."""

from __future__ import annotations

import inspect
import types
import typing
from collections import Counter
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperCommand

from semzoo.cli.base import CLI_ONLY_OPTIONS, RESUME_FLAGS, parse_env_args, whole_number
from semzoo.config import (
    CLI,
    FLAG,
    RANGE,
    SECTIONS,
    ConfigField,
    Range,
    builtin_fields,
)

# ----- `train --help` in panels ------------------------------------------------------------------------------------

RUN_PANEL, ALGORITHM_PANEL, MEMORY_PANEL, CURIOSITY_PANEL = "Run", "Algorithm", "Memory", "Curiosity"
LEARNER_PANEL, EXPLORATION_PANEL, RUNTIME_PANEL, SPEED_PANEL = "Learner", "Exploration", "Runtime", "Speed"
OUTPUT_PANEL, OTHER_PANEL = "Output", "Other"
SECTION_PANELS = {"agent": ALGORITHM_PANEL, "qmix": ALGORITHM_PANEL, "qplex": ALGORITHM_PANEL,
                  "wqmix": ALGORITHM_PANEL, "memory": MEMORY_PANEL, "emc": "EMC",
                  "emu": "EMU", "lagma": "LAGMA", "curiosity": CURIOSITY_PANEL, "learner": LEARNER_PANEL,
                  "exploration": EXPLORATION_PANEL}
"""Config section -> its panel; a section not named here gets a panel of its own name (``panel_of``)."""
FIELD_PANELS = {
    "env": RUN_PANEL, "env_args": RUN_PANEL, "algo": RUN_PANEL, "steps": RUN_PANEL, "seed": RUN_PANEL,
    "seeds": RUN_PANEL, "resume": RUN_PANEL, "episode_limit": RUN_PANEL, "team_reward": RUN_PANEL,
    "preset": ALGORITHM_PANEL, "set": ALGORITHM_PANEL,
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
        plugin_rows = plugin_help_rows()
        if plugin_rows:
            with formatter.section(f"{PLUGIN_PANEL} (from --plugin; a setting is given with --set KEY=VALUE)"):
                formatter.write_dl(plugin_rows)


PLUGIN_PANEL = "Plugin memories and settings"


def plugin_help_rows() -> list[tuple[str, str]]:
    """`train --help`'s rows for what the plugins imported add: each memory not semzoo's own (its ids' prefix,
    description and module) and each setting of a plugin's memory or mixer (its --set key, help, range and default), as `semzoo algos` lists
    them."""
    from semzoo.config import BUILTIN_COMPONENTS, component_fields
    from semzoo.episodic.memory import is_builtin_memory, memory_class, memory_description, memory_names

    rows = [(f"--algo {name}-<base>", f"{memory_description(name)} (module {memory_class(name).__module__})")
            for name in memory_names() if not is_builtin_memory(name)]
    for f in component_fields():
        if f.section not in BUILTIN_COMPONENTS:
            rows.append((f"--set {f.key}=VALUE", f"{setting_help(f)}  [default: {f.default}]"))
    return rows


def setting_help(f: ConfigField) -> str:
    """A setting's help: its docstring and, for a number, its range (as a flag's in `train --help`)."""
    text = f.help.rstrip()
    if RANGE in f.metadata:
        text += f"{'' if text.endswith('.') or not text else '.'} Range: {range_text(f.metadata[RANGE])}."
    return text


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


def _is_int(kind: Any) -> bool:
    """Whether a config field's type is ``int`` or ``int | None``."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        kind = next(arg for arg in args if arg is not type(None))
    return kind is int


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
        parser = whole_number if _is_int(f.type) else None  # 1e6 is 1000000, as the docs write |Q^S|
        option = typer.Option(default, *decls, help=help_text, metavar=_metavar(f.type), rich_help_panel=panel_of(f),
                              parser=parser)
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
    params.append(inspect.Parameter("set", keyword, annotation=list[str], default=typer.Option(
        [], "--set", metavar="KEY=VALUE", rich_help_panel=FIELD_PANELS["set"],
        help="A config setting by its key (VALUE parsed as JSON), e.g. learner.lr=0.001, or a setting of a plugin's "
        "memory or mixer (<name>.<field>, `semzoo algos` lists them); repeatable; a setting with a flag of its own "
        "is given once, by either.")))
    params.append(inspect.Parameter("tensorboard", keyword, annotation=bool, default=typer.Option(
        True, rich_help_panel=FIELD_PANELS["tensorboard"],
        help="Also write TensorBoard events (when tensorboard is installed).")))
    return params


def _param_name(f: ConfigField) -> str:
    """The Python name of a field's option: its key with the section joined by '__' (``learner__lr``)."""
    return f.key.replace(".", "__")


def _config_data(options: dict[str, Any], fields: Sequence[ConfigField], flags: dict[str, str]) -> dict[str, Any]:
    """The parsed options as a ``TrainConfig.to_dict()``-shaped dict; the sections of the components the algorithm does
    not use come at their defaults, and the config drops them."""
    data: dict[str, Any] = {section: {} for section in SECTIONS}
    for f in fields:
        value = options[_param_name(f)]
        if _is_dict(f.type):
            value = parse_env_args(value, flags[f.key])
        (data.setdefault(f.section, {}) if f.section is not None else data)[f.name] = value
    return data


TRAIN_FIELDS = [f for f in builtin_fields() if f.metadata.get(CLI, True)]
TRAIN_FLAGS = option_flags(TRAIN_FIELDS)
