"""`semzoo plot`, `table` and `report`: the analysis of finished runs (semzoo.analysis)."""

from __future__ import annotations

from collections.abc import Callable

import typer

from semzoo.cli.base import (
    AT_HELP,
    METRIC_HELP,
    USAGE_ERROR,
    _at_steps,
    _warnings_now,
    app,
    fail,
    integer_option,
)


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
    reps: int = integer_option(2000, help="Bootstrap replications of each confidence interval."),
    absolute: bool = typer.Option(False, "--absolute", help="First re-evaluate each run's best checkpoint on 10x "
                                  "the test episodes (the absolute metric, cached in <run>/absolute.json)."),
    threads: int = integer_option(1,
                                help="torch CPU threads (its OpenMP pool) of this command; 0 keeps torch's "
                                "default (one per core). One leaves the other cores to training runs beside it."),
    compare: list[str] | None = typer.Option(
        None, metavar="'X vs Y'", show_default=False,
        help="Also report P(X > Y) for these two run labels (as the tables name them), e.g. 'qmix td_lambda=0.6 "
        "vs sem-qmix'; repeat for more pairs. The report compares a memory with its base and SEM, and a setting "
        "with the runs it departs from, by itself."),
    env_args_in_labels: bool = typer.Option(
        False, "--env-args-in-labels", help="Group runs by env id alone and put their env arguments in their "
        "labels (qmix attack=unit_range profile=smac), so runs that differ only by env arguments are compared "
        "as settings: each against the runs whose arguments it extends."),
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
                                   echo=lambda line: typer.echo(line, err=True), compare=pairs,
                                   env_args_in_labels=env_args_in_labels)
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
