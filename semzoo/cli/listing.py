"""`semzoo algos`, `envs` and `memory-cost`: what semzoo can train, and what each memory would cost."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Callable

import typer

from semzoo.cli.base import (
    USAGE_ERROR,
    app,
    fail,
    integer_option,
    parse_env_args,
)
from semzoo.config import MemoryConfig


def _wrapped_echo(ctx: typer.Context) -> Callable[..., None]:
    """``echo(text, hang=0)``: ``text`` wrapped to the width of the help (`train --help`'s: the terminal's, at most
    80 columns), its later lines indented by ``hang`` (the column its description starts at)."""
    width = ctx.make_formatter().width or HELP_WIDTH

    def echo(text: str, hang: int = 0) -> None:
        if not text:
            typer.echo("")
            return
        typer.echo(textwrap.fill(text, width=max(width, hang + MIN_TEXT_COLUMNS), subsequent_indent=" " * hang,
                                 break_long_words=False, break_on_hyphens=False))

    return echo


HELP_WIDTH = 78
"""Click's help width where the terminal's is unknown."""
MIN_TEXT_COLUMNS = 30
"""A wrapped description keeps at least this many columns, however narrow the terminal."""


@app.command()
def algos(ctx: typer.Context) -> None:
    """List the algorithm ids.

    Each row of the table (mixer, learner), and the episodic memories that prefix it.
    """
    from semzoo.algos import NO_MEMORY, algorithm_ids, parse_algorithm
    from semzoo.cli.options import setting_help
    from semzoo.config import BUILTIN_COMPONENTS, component_fields, registered_components
    from semzoo.episodic.memory import memory_description, memory_names

    echo = _wrapped_echo(ctx)
    rows = [parsed for parsed in map(parse_algorithm, algorithm_ids()) if parsed.memory == NO_MEMORY]
    width = max(len(r.id) for r in rows) + 2
    echo("Algorithm ids: <base>, or <memory>-<base> with an episodic memory (sem-qmix, saem-vdn, ...).")
    typer.echo(f"  {'base':<{width}}{'mixer':<10}{'learner':<14}description")
    for r in rows:
        learner = r.algorithm.learner.rpartition(":")[2]
        echo(f"  {r.id:<{width}}{r.mixer:<10}{learner:<14}{r.algorithm.description}", hang=2 + width + 24)
    typer.echo("")
    memories = memory_names()
    width = max(len("memory"), *(len(m) + 1 for m in memories)) + 2
    typer.echo(f"  {'memory':<{width}}description")
    for name in memories:
        echo(f"  {name + '-':<{width}}{memory_description(name)}", hang=2 + width)
    typer.echo("")
    echo("Settings of the memories and mixers that declare their own, a section of the configs of the ids that use "
         "them; the built-in ones' are flags of `semzoo train` (its help lists them), a plugin's are `--set "
         "KEY=VALUE`:")
    for name, component in registered_components().items():
        if name in BUILTIN_COMPONENTS:
            fields = [f.name for f in dataclasses.fields(component.settings)]
            if component.kind == "mixer":  # the bases on it, each also with a memory
                users = ", ".join(r.id for r in rows if component.used_by(r.id)) + ", with or without a memory"
            else:
                users = ", ".join(f"{user}-" for user in component.users or (name,))
            echo(f"  {name:<{width + 16}}{component.settings.__name__} ({users}): {', '.join(fields)}",
                 hang=2 + width + 16)
    for f in component_fields():
        if f.section not in BUILTIN_COMPONENTS:
            shown = f"{f.key}={json.dumps(f.default)}"
            echo(f"  {shown:<{width + 16}}{setting_help(f)}", hang=2 + width + 16)
    typer.echo("")
    from semzoo.presets import describe_presets

    echo("Runtimes (`semzoo train --runtime NAME`) and presets (`--preset NAME`); each fills the fields it "
               "names that are left at their defaults, a flag typed keeps its value:")
    for line in describe_presets():
        echo(f"  {line}", hang=4)
    echo("  (every other id: nothing; the defaults are the PyMARL setup its authors ran on SMAC)")
    typer.echo("")
    echo("Register your own with semzoo.register_mixer / semzoo.register_algorithm / semzoo.register_memory "
               "in a module, then `semzoo --plugin MODULE ...` (see docs/architecture.md).")


@app.command()
def envs() -> None:
    """List the environment ids.

    The matrix games, the SMAC/SMAX maps with their agents, actions, state size and episode limit, and the envs
    registered with semzoo.register_env (by a --plugin module before the command, SEMZOO_PLUGINS or an installed
    plugin).
    """
    from semzoo.envs import matrix_game_v0, smac_rules
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
    for line in smac_rules.profile_lines():
        typer.echo(line)
    typer.echo("")
    _echo_lbf()
    typer.echo("")
    typer.echo("Any PettingZoo ParallelEnv factory with state() (pz:<module>:<factory>), e.g.:")
    typer.echo("  pz:mpe2.simple_spread_v3:parallel_env   MPE2 cooperative navigation (extra semzoo[mpe])")
    typer.echo("")
    _echo_registered_envs()


def _echo_registered_envs() -> None:
    """The names given to ``semzoo.register_env`` (by ``--plugin`` modules, SEMZOO_PLUGINS and installed plugins),
    each with its factory's arguments and the first line of its docstring; or how to add one."""
    import inspect

    from semzoo.envs.registry import registered_envs, registered_factory

    names = registered_envs()
    if not names:
        typer.echo("Your own envs: none registered. semzoo.register_env(NAME, FACTORY) in a module, then")
        typer.echo("  `semzoo --plugin MODULE envs` lists them and `semzoo --plugin MODULE train --env NAME` trains one.")
        return
    typer.echo("Registered envs (semzoo.register_env, from plugins; --env NAME, arguments with --env-arg):")
    width = max(len(name) for name in names) + 2
    for name in names:
        factory = registered_factory(name)
        try:
            arguments = ", ".join(p.name for p in inspect.signature(factory).parameters.values()
                                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        except (TypeError, ValueError):  # no signature to read (some builtins)
            arguments = "?"
        doc = (inspect.getdoc(factory) or "").strip().splitlines()
        summary = f"  {doc[0]}" if doc else ""
        typer.echo(f"  {name:<{width}}({arguments}){summary}")


def _echo_lbf() -> None:
    """The Level-Based Foraging lines of `envs`: EPyMARL's benchmark tasks, or the extra that gives them."""
    from semzoo.envs import lbf
    from semzoo.errors import MissingDependency

    typer.echo("Level-Based Foraging: lbf:<task> (lbforaging, extra semzoo[lbf]), as EPyMARL's gymma wrapper runs it: "
               "team reward the sum of the agents', 50-step limit; --env-arg state=scaled scales the state.")
    try:
        count = len(lbf.available_tasks())
    except MissingDependency:
        typer.echo(f"  not installed: {lbf.INSTALL_HINT}")
        return
    typer.echo(f"  {count} tasks: Foraging[-2s]-<size>x<size>-<n>p-<m>f[-coop]-v3; EPyMARL's benchmark:")
    for task in lbf.PAPER_TASKS:
        typer.echo(f"  lbf:{task}")


@app.command("memory-cost")
def memory_cost(
    target: str | None = typer.Argument(None, help="A SMAC map (2c_vs_64zg, 27m_vs_30m, ...) or an env id "
                                           "(matrix:climbing, pz:<module>:<factory>); or give --agents/--actions/--state-size."),
    agents: int | None = integer_option(None, help="Number of agents n (instead of a map or env id)."),
    actions: int | None = integer_option(None,
                                       help="Actions per agent |U| (instead of a map or env id)."),
    state_size: int | None = integer_option(None,
                                          help="Global state size F (instead of a map or env id)."),
    obs_size: int | None = integer_option(None,
                                        help="One agent's observation size, for the curiosity networks of EMC "
                                        "and EMU (with --agents/--actions/--state-size; default: the state size F)."),
    capacity: float = typer.Option(float(MemoryConfig.capacity), "--memory-capacity", metavar="FLOAT",
                                   help="Entries per table |Q|, as `train --memory-capacity` (the paper: 1e6; "
                                   "scientific notation allowed)."),
    proj_dim: int = integer_option(MemoryConfig.proj_dim,
                                 help="Random-projection size D, as `train --proj-dim` (the paper: 4)."),
    env_arg: list[str] = typer.Option([], metavar="KEY=VALUE", help="Passed to the env factory (VALUE parsed as "
                                      "JSON, else a string); repeatable."),
) -> None:
    """Print the storage each episodic memory needs.

    SEM and SAEM in the paper's layout (|U|^n tables for SAEM) next to semzoo's, then every registered memory.
    """

    from semzoo.config import MEMORY_CAPACITY
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
    from semzoo.episodic.plans import projection_bytes

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
    column = max(len("memory"), *(len(name) for name in costs)) + 2  # a plugin's name may be longer than sem's
    for name, nbytes in costs.items():
        typer.echo(f"  {name:<{column}}{format_gb(nbytes):<12}({nbytes:,} bytes)")
    raw = RAW_STATE_BYTES_PER_DIM * state_dim
    if "emu" in costs:
        typer.echo(f"of which EMU's raw states (kept to re-embed its keys): F float32 = {raw:,} bytes per entry, "
                   f"{format_gb(raw * entries)} at |Q| = {entries:,}")
