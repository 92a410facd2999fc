"""The ``semzoo`` command line: thin wrappers that build a config and call the library.

Exit codes: 0 success, 1 domain error (bad run directory, environment failure), 2 usage error
(bad flag value). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from collections.abc import Callable
from typing import Any, NoReturn, Optional

import typer

from semzoo.config import (AgentConfig, ExplorationConfig, LearnerConfig, MemoryConfig, MixerConfig, TrainConfig)

app = typer.Typer(
    name="semzoo",
    help="State-based episodic memory for cooperative multi-agent RL: train VDN, QMIX, QPLEX and WQMIX "
    "(with or without SEM/SAEM) on matrix games, MPE, SMAX and SMAC.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

USAGE_ERROR = 2
DOMAIN_ERROR = 1
DEFAULT_STEPS = 100_000
"""The README's main job: SEM-QMIX on SMAX 3m, about 3 minutes on 2 cores, win rate rising to ~0.8."""
PROGRESS_BAR_WIDTH = 24


def fail(message: str, code: int = DOMAIN_ERROR) -> NoReturn:
    """Print one line to stderr and exit with ``code``."""
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(code)


def parse_env_args(pairs: list[str], flag: str = "--env-arg") -> dict[str, Any]:
    """['payoff=[[1,0],[0,1]]', 'k=-10'] -> {'payoff': [[1, 0], [0, 1]], 'k': -10}.

    Values are JSON; a value that is not JSON is kept as a string, so a bare word such as
    ``attack_mode=random`` needs no quotes. An env that then rejects such a string names the
    argument (``_string_arg_hint``).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            fail(f"{flag} {pair!r}: expected KEY=VALUE, e.g. {flag} 'k=-10'", USAGE_ERROR)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _string_arg_hint(env_args: dict[str, Any], message: str) -> str:
    """' (note: --env-arg N=abc was read as a string ...)' for string-valued env args ``message`` does not name."""
    strings = [f"{key}={value}" for key, value in env_args.items()
               if isinstance(value, str) and not (key in message and value in message)]
    if not strings:
        return ""
    return (f" (note: --env-arg {', '.join(strings)} {'was' if len(strings) == 1 else 'were'} read as "
            f"{'a string' if len(strings) == 1 else 'strings'}: values are JSON, so write a number as 3 or 0.5, "
            "a list as [1,2], a boolean as true)")


def _build(factory: Callable[..., Any], **kwargs: Any) -> Any:
    try:
        return factory(**kwargs)
    except (ValueError, TypeError) as err:
        fail(str(err), USAGE_ERROR)


class _Progress:
    """A rich progress bar on a terminal (env steps, steps/s, ETA, last test figure); plain lines every ~10 % otherwise."""

    def __init__(self, total: int, *, start: int = 0, label: str = "train") -> None:
        self.total = max(total, 1)
        self.start = start
        self.label = label
        self.started = time.perf_counter()
        self.interactive = sys.stderr.isatty()
        self._next_line = start
        self._bar = None
        if self.interactive:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn(f"[bold]{label}"), BarColumn(bar_width=PROGRESS_BAR_WIDTH),
                                 TextColumn("{task.completed:,}/{task.total:,} steps"),
                                 TextColumn("{task.fields[rate]:,.0f} steps/s"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), TextColumn("{task.fields[test]}"),
                                 console=Console(stderr=True), transient=False)
            self._task = self._bar.add_task(label, total=self.total, completed=min(start, self.total), rate=0.0,
                                            test="")
            self._bar.start()

    @staticmethod
    def _test_text(info: dict[str, Any]) -> str:
        if "test_win_rate" in info:
            return f"test win rate {info['test_win_rate']:.2f}"
        if "test_return_mean" in info:
            return f"test return {info['test_return_mean']:.3f}"
        return ""

    def __call__(self, info: dict[str, Any]) -> None:
        steps = info["env_steps"]
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = (steps - self.start) / elapsed
        if self._bar is not None:
            self._bar.update(self._task, completed=min(steps, self.total), rate=rate, test=self._test_text(info))
        elif steps >= self._next_line:
            eta = (self.total - steps) / rate if rate > 0 else float("nan")
            typer.echo(f"[{self.label}] {steps:,}/{self.total:,} steps  {rate:,.0f} steps/s  ETA {eta:,.0f} s  "
                       f"eps {info['epsilon']:.3f}  {self._test_text(info)}".rstrip(), err=True)
            self._next_line = steps + self.total / 10

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _echo_warnings(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        typer.echo(f"Warning: {w.message}", err=True)


@app.command()
def train(
    env: str = typer.Option("smax:3m", help="Environment id: matrix:<game>, smax:<map>, smac:<map>, pz:<module>:<factory>."),
    algo: str = typer.Option("sem-qmix", help="vdn, qmix, qplex, cw-qmix, ow-qmix, or sem-/saem-<mixer>."),
    steps: Optional[int] = typer.Option(None, help="Environment steps to train for (default 100000); with --resume, "
                                        "the new total (the run is extended)."),
    seed: int = typer.Option(0, help="Seed of networks, exploration, replay sampling, envs and the random projection."),
    out: str = typer.Option("runs", help="Parent folder of the run directory."),
    run_name: Optional[str] = typer.Option(None, help="Run directory name (default <env>_<algo>_seed<seed>)."),
    env_arg: list[str] = typer.Option([], help="KEY=VALUE passed to the env factory (VALUE parsed as JSON); repeatable."),
    device: str = typer.Option("auto", help="auto (GPU when present), cpu, cuda, cuda:N."),
    threads: int = typer.Option(1, help="torch CPU threads (0: torch's default); 1 is fastest for small networks."),
    n_envs: int = typer.Option(8, help="Environments stepped in parallel."),
    episode_limit: Optional[int] = typer.Option(None, help="Maximum steps per episode (default: the env's own)."),
    test_interval: int = typer.Option(10_000, help="Env steps between greedy evaluations."),
    test_episodes: int = typer.Option(32, help="Greedy episodes per evaluation."),
    log_interval: int = typer.Option(2_000, help="Env steps between training-metric rows."),
    save_interval: int = typer.Option(50_000, help="Env steps between checkpoints (0: only at the end)."),
    hidden_dim: int = typer.Option(64, help="GRU hidden size of the agent network."),
    lr: float = typer.Option(5e-4, help="RMSprop learning rate."),
    gamma: float = typer.Option(0.99, help="Discount factor."),
    batch_size: int = typer.Option(32, help="Episodes per update."),
    buffer_size: int = typer.Option(5000, help="Replay capacity in episodes."),
    target_update_episodes: int = typer.Option(200, help="Episodes between hard target updates."),
    grad_clip: float = typer.Option(10.0, help="Global gradient-norm clip."),
    double_q: bool = typer.Option(True, help="Double Q-learning target."),
    updates_per_episode: float = typer.Option(1.0, help="Gradient updates per collected episode."),
    timeout_as_terminal: bool = typer.Option(False, help="PyMARL behaviour: no bootstrap at a time limit."),
    epsilon_start: float = typer.Option(1.0),
    epsilon_finish: float = typer.Option(0.05),
    epsilon_anneal_steps: int = typer.Option(50_000, help="Env steps over which epsilon falls linearly."),
    embed_dim: int = typer.Option(32, help="QMIX mixing embedding size."),
    hypernet_dim: int = typer.Option(64, help="QMIX hypernetwork hidden size."),
    qplex_heads: int = typer.Option(4, help="QPLEX attention heads."),
    wqmix_alpha: float = typer.Option(0.75, help="WQMIX weight alpha."),
    lam: float = typer.Option(0.1, help="Episodic-memory weight lambda (sem-/saem- algorithms)."),
    proj_dim: int = typer.Option(4, help="Random-projection size D of the memory key."),
    memory_capacity: int = typer.Option(1_000_000, help="Episodic table entries |Q^S|."),
    pending_size: int = typer.Option(5000, help="Env steps |M| gathered between table updates."),
    miss_rule: str = typer.Option("target", help="On a table miss: 'target' (E = y, the paper) or 'zero' (EMC)."),
    resume: Optional[str] = typer.Option(None, help="Continue the run in this run directory from its last checkpoint "
                                         "(its config.json is used; only --steps, --tensorboard apply)."),
    tensorboard: bool = typer.Option(True, help="Also write TensorBoard events (when tensorboard is installed)."),
) -> None:
    """Train an algorithm on an environment; writes <out>/<run>/ (config.json, metrics.csv, checkpoints/)."""
    from semzoo.run.trainer import train as run_training

    if resume is not None:
        _resume(resume, steps, tensorboard)
        return
    config = _build(
        TrainConfig, env=env, env_args=parse_env_args(env_arg), algo=algo, steps=DEFAULT_STEPS if steps is None else steps, seed=seed, out=out,
        run_name=run_name, device=device, threads=threads, n_envs=n_envs, episode_limit=episode_limit, test_interval=test_interval,
        test_episodes=test_episodes, log_interval=log_interval, save_interval=save_interval,
        agent=_build(AgentConfig, hidden_dim=hidden_dim),
        mixer=_build(MixerConfig, embed_dim=embed_dim, hypernet_dim=hypernet_dim, qplex_heads=qplex_heads, wqmix_alpha=wqmix_alpha),
        memory=_build(MemoryConfig, lam=lam, proj_dim=proj_dim, capacity=memory_capacity, pending_size=pending_size, miss_rule=miss_rule),
        learner=_build(LearnerConfig, gamma=gamma, lr=lr, batch_size=batch_size, buffer_size=buffer_size,
                       target_update_episodes=target_update_episodes, grad_clip=grad_clip, double_q=double_q,
                       updates_per_episode=updates_per_episode, timeout_as_terminal=timeout_as_terminal),
        exploration=_build(ExplorationConfig, epsilon_start=epsilon_start, epsilon_finish=epsilon_finish,
                           epsilon_anneal_steps=epsilon_anneal_steps),
    )
    _check_env(config)
    progress = _Progress(config.steps)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_dir, result = run_training(config, progress=progress, tensorboard=tensorboard)
    except (ValueError, TypeError) as err:
        fail(_run_error(err, config.env_args))
    finally:
        progress.close()
    _echo_warnings(caught)
    _report(config, run_dir, result)


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
    except (ValueError, TypeError, ImportError) as err:
        message = str(err).splitlines()[0] if str(err) else repr(err)
        fail(message + _string_arg_hint(config.env_args, message), USAGE_ERROR)


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
    typer.echo(line)


def _resume(run_dir: str, steps: int | None, tensorboard: bool) -> None:
    """``train --resume``: continue a run from its last valid checkpoint, reporting skipped corrupt files."""
    from semzoo.run.trainer import Trainer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trainer = Trainer.resume(run_dir, steps=steps, tensorboard=tensorboard)
        except (ValueError, TypeError) as err:
            _echo_warnings(caught)
            fail(str(err))
        _echo_warnings(caught)
        caught.clear()
        progress = _Progress(trainer.config.steps, start=trainer.counters.env_steps)
        trainer.progress = progress
        typer.echo(f"resuming {run_dir} at {trainer.counters.env_steps:,} env steps", err=True)
        try:
            result = trainer.run()
        except (ValueError, TypeError) as err:
            fail(_run_error(err, trainer.config.env_args))
        finally:
            trainer.close()
            progress.close()
    _echo_warnings(caught)
    _report(trainer.config, Path(run_dir), result)


@app.command()
def evaluate(
    run_dir: str = typer.Argument(..., help="A run directory made by `semzoo train`."),
    episodes: Optional[int] = typer.Option(None, help="Greedy episodes (default: the run's test_episodes)."),
    seed: Optional[int] = typer.Option(None, help="Seed of the evaluation episodes (default: the run's test stream)."),
    device: Optional[str] = typer.Option(None, help="auto, cpu, cuda (default: the run's)."),
) -> None:
    """Replay a run's last checkpoint greedily (epsilon 0): mean return and, where reported, win rate."""
    from semzoo.run.evaluation import evaluate_run

    if episodes is not None and episodes <= 0:
        fail(f"--episodes {episodes}: expected a positive number of episodes", USAGE_ERROR)
    if device is not None:
        from semzoo.run.device import resolve_device

        try:
            resolve_device(device)
        except ValueError as err:
            fail(str(err), USAGE_ERROR)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config, result, at_steps = evaluate_run(run_dir, episodes=episodes, seed=seed, device=device)
        except (ValueError, TypeError, ImportError) as err:
            _echo_warnings(caught)
            fail(str(err).strip().splitlines()[0] if str(err).strip() else repr(err))
    _echo_warnings(caught)
    line = (f"{config.algo} on {config.env}, checkpoint at {at_steps:,} env steps, {result.episodes} greedy episodes: "
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
    envs: str = typer.Option(..., help="Comma-separated env ids, e.g. matrix:climbing,smax:3m."),
    algos: str = typer.Option(..., help="Comma-separated algorithm ids, e.g. qmix,sem-qmix."),
    seeds: int = typer.Option(5, help="Seeds per (env, algo): 0 .. seeds-1."),
    steps: int = typer.Option(DEFAULT_STEPS, help="Environment steps per trial."),
    out: str = typer.Option("runs/sweep", help="Folder of the trials' run directories (shared by all nodes)."),
    address: Optional[str] = typer.Option(None, help="Ray cluster address (e.g. auto, ray://head:10001); "
                                          "default: an embedded local Ray."),
    max_retries: int = typer.Option(2, help="Retries of a failed trial, each from its last checkpoint."),
    cpus_per_trial: float = typer.Option(1.0, help="CPUs reserved per trial (torch threads = its integer part)."),
    num_cpus: Optional[int] = typer.Option(None, help="CPUs of the embedded local Ray (default: all)."),
    set_: list[str] = typer.Option([], "--set", help="KEY=VALUE config override (JSON value), e.g. "
                                   "test_interval=5000 or learner.batch_size=16; repeatable."),
) -> None:
    """Run the grid env x algo x seed on Ray; re-running the same command skips finished trials."""
    from semzoo.run.sweep import plan_trials, run_sweep

    if seeds <= 0:
        fail(f"--seeds {seeds}: expected a positive number of seeds", USAGE_ERROR)
    overrides = parse_env_args(set_, "--set")
    try:
        trials = plan_trials(envs=_split(envs, "--envs"), algos=_split(algos, "--algos"), seeds=range(seeds),
                             steps=steps, out=out, overrides=overrides)
    except (ValueError, TypeError) as err:
        fail(str(err), USAGE_ERROR)
    _check_sweep_envs(trials)
    try:
        report = run_sweep(trials, address=address, max_retries=max_retries, cpus_per_trial=cpus_per_trial,
                           num_cpus=num_cpus, echo=lambda line: typer.echo(line, err=True))
    except (ValueError, TypeError) as err:
        fail(str(err))
    typer.echo(f"{len(trials)} trials in {out}: {len(report.finished)} finished now, {len(report.skipped)} already "
               f"finished, {len(report.failed)} failed")
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


@app.command()
def plot(
    folder: str = typer.Argument(..., help="A folder of run directories (searched recursively for config.json)."),
    metric: str = typer.Option("test_win_rate", help="Metric of the curves, e.g. test_win_rate, test_return_mean."),
    out: Optional[str] = typer.Option(None, help="Folder of the PNGs (default: FOLDER/plots)."),
) -> None:
    """Curves per env: median and 25-75 % band per algorithm across seeds, plus y / E / Q_tot when logged."""
    from semzoo.run.report import plot_runs

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            written = plot_runs(folder, metric=metric, out=out)
        except (ValueError, TypeError) as err:
            _echo_warnings(caught)
            fail(str(err))
    _echo_warnings(caught)
    for path in written:
        typer.echo(str(path))


@app.command()
def table(
    folder: str = typer.Argument(..., help="A folder of run directories (searched recursively for config.json)."),
    at: str = typer.Option("250000,500000", help="Comma-separated env steps at which to read the scores."),
    metric: str = typer.Option("test_win_rate", help="Metric of the table."),
    csv_path: Optional[str] = typer.Option(None, "--csv", help="Also write the table to this CSV file."),
) -> None:
    """Score table: per env the mean over seeds at each step, then mean and median across envs per algorithm."""
    from semzoo.run.report import load_runs, score_table, table_markdown, write_table_csv

    try:
        steps = [int(item.replace("_", "")) for item in _split(at, "--at")]
    except ValueError:
        fail(f"--at {at!r}: expected comma-separated integers, e.g. 250000,500000", USAGE_ERROR)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rows = score_table(load_runs(folder), steps, metric)
        except (ValueError, TypeError) as err:
            _echo_warnings(caught)
            fail(str(err))
    _echo_warnings(caught)
    typer.echo(table_markdown(rows, metric))
    if csv_path is not None:
        typer.echo(f"\nwrote {write_table_csv(rows, csv_path)}")


@app.command()
def envs() -> None:
    """List the environment ids semzoo knows, with SMAC/SMAX map facts."""
    from semzoo.envs import matrix_game_v0
    from semzoo.envs.maps import map_table

    typer.echo("Matrix games (matrix:<game>):")
    for name in matrix_game_v0.GAMES:
        typer.echo(f"  matrix:{name:<12} {matrix_game_v0.GAME_DESCRIPTIONS.get(name, '')}")
    typer.echo("")
    typer.echo("SMAC maps: smax:<map> (JaxMARL SMAX, extra semzoo[smax]) and smac:<map> (StarCraft II).")
    typer.echo("Sizes are per backend: SMAC (StarCraft II) / SMAX; * = one of the paper's eight maps.")
    header = f"  {'map':<14} {'backends':<9} {'agents':>6} {'actions':>7} {'state (sc2/smax)':>17} {'limit (sc2/smax)':>17}  units"
    typer.echo(header)
    for row in map_table():
        smax_state = row.get("smax_state_dim") or "-"
        smax_limit = row.get("smax_episode_limit") or "-"
        star = "*" if row.get("paper") else " "
        typer.echo(f"  {row['map'] + star:<14} {row['backends']:<9} {row['agents']:>6} {row['actions']:>7} "
                   f"{str(row['state_dim']) + '/' + str(smax_state):>17} {str(row['episode_limit']) + '/' + str(smax_limit):>17}"
                   f"  {row['units']}")
    typer.echo("")
    typer.echo("Any PettingZoo ParallelEnv factory with state() (pz:<module>:<factory>), e.g.:")
    typer.echo("  pz:mpe2.simple_spread_v3:parallel_env   MPE2 cooperative navigation (extra semzoo[mpe])")


PROJECTION_BYTES_PER_ENTRY = 8
"""semzoo draws V as float64 (numpy's standard_normal) and projects in float64."""


def _smac_facts(name: str) -> tuple[int, int, int] | None:
    """(n_agents, n_actions, state_dim) of a SMAC map from semzoo.envs.maps (no StarCraft needed); None if unknown."""
    from semzoo.envs import maps

    try:
        m = maps.smac_map(name)
    except maps.UnknownMapError:
        return None
    return m.n_agents, m.n_actions, m.state_dim


def _env_facts(env_id: str, env_args: dict[str, Any]) -> tuple[int, int, int]:
    """(n_agents, n_actions, state_dim) of an env id, read from its CTDE adapter."""
    from semzoo.envs.registry import make_env
    from semzoo.wrappers.ctde import CTDEEnv

    kind, _, name = env_id.partition(":")
    if kind == "smac" and not env_args and _smac_facts(name) is not None:
        return _smac_facts(name)  # type: ignore[return-value]  # no StarCraft II needed
    try:
        ctde = CTDEEnv(make_env(env_id, **env_args))
    except (ValueError, TypeError, ImportError) as err:
        fail(str(err).splitlines()[0] if str(err) else repr(err), USAGE_ERROR)
    try:
        return ctde.n_agents, ctde.n_actions, ctde.state_dim
    finally:
        ctde.close()


def _gb(n_bytes: int) -> str:
    """Bytes as the paper's GB (1e9), exact for any Python int (36^27 tables do not fit a float's range)."""
    from decimal import Decimal

    from semzoo.episodic.cost import GB

    value = Decimal(n_bytes) / Decimal(GB)
    return f"{value:.3g} GB" if value < Decimal(10) ** 6 else f"{value:.2e} GB"


@app.command("memory-cost")
def memory_cost(
    target: Optional[str] = typer.Argument(None, help="A SMAC map (2c_vs_64zg, 27m_vs_30m, ...) or an env id "
                                           "(matrix:climbing, pz:<module>:<factory>); or give --agents/--actions/--state-size."),
    agents: Optional[int] = typer.Option(None, help="Number of agents n (instead of a map or env id)."),
    actions: Optional[int] = typer.Option(None, help="Actions per agent |U| (instead of a map or env id)."),
    state_size: Optional[int] = typer.Option(None, help="Global state size F (instead of a map or env id)."),
    capacity: float = typer.Option(1e6, help="Entries per table |Q| (the paper: 1e6)."),
    proj_dim: int = typer.Option(4, help="Random-projection size D (the paper: 4)."),
    env_arg: list[str] = typer.Option([], help="KEY=VALUE passed to the env factory (VALUE parsed as JSON); repeatable."),
) -> None:
    """Storage of SEM and SAEM: the paper's layout (|U|^n tables for SAEM) next to what semzoo allocates."""
    from semzoo.episodic.cost import paper_n_tables, storage_comparison

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
        source = "given"
    elif ":" in target:
        n_agents, n_actions, state_dim = _env_facts(target, parse_env_args(env_arg))
        source = f"env {target}"
    else:
        facts = _smac_facts(target)
        if facts is None:
            from semzoo.envs.maps import PAPER_MAPS

            fail(f"unknown map {target!r}: expected a SMAC map (the paper's: {', '.join(PAPER_MAPS)}; "
                 "`semzoo envs` lists all) or an env id such as matrix:climbing", USAGE_ERROR)
        n_agents, n_actions, state_dim = facts
        source = f"SMAC map {target}"
    if state_dim <= 0:
        fail(f"--state-size {state_dim}: expected a positive state size F", USAGE_ERROR)
    try:
        cost = storage_comparison(n_agents, n_actions, capacity=capacity, proj_dim=proj_dim)
        saem_tables = paper_n_tables("saem", n_agents, n_actions)
    except ValueError as err:
        fail(f"{err} (check --agents, --actions, --capacity, --proj-dim)", USAGE_ERROR)
    entries = int(capacity)
    projection = proj_dim * state_dim * PROJECTION_BYTES_PER_ENTRY
    tables = f"{n_actions}^{n_agents} = {saem_tables:,}" if saem_tables < 10**9 else f"{n_actions}^{n_agents} = {saem_tables:.2e}"
    typer.echo(f"{source}: n = {n_agents} agents, |U| = {n_actions} actions, state size F = {state_dim}; "
               f"|Q| = {entries:,} entries, D = {proj_dim}")
    typer.echo(f"{'':6}{'paper layout':<52}semzoo (one table each)")
    typer.echo(f"{'SEM':<6}{'1 table: ' + _gb(cost['paper_sem']):<52}{_gb(cost['semzoo_sem'])}  ({cost['semzoo_sem']:,} bytes)")
    typer.echo(f"{'SAEM':<6}{tables + ' tables: ' + _gb(cost['paper_saem']):<52}{_gb(cost['semzoo_saem'])}  "
               f"({cost['semzoo_saem']:,} bytes)")
    typer.echo(f"projection V: D x F = {proj_dim} x {state_dim} float64 = {projection:,} bytes (shared by SEM and SAEM)")


def _click_exceptions() -> Any:
    """The click exception classes typer raises: recent typer vendors click as ``typer._click``."""
    try:
        from typer._click import exceptions
    except ImportError:  # typer versions that use the click package itself
        from click import exceptions
    return exceptions


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
        typer.echo(f"Error: {err.format_message()} (see '{where} --help')", err=True)
        sys.exit(USAGE_ERROR)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(DOMAIN_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
