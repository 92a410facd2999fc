"""Curves and score tables from fixture metric files with known values."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from semzoo.analysis.report import load_runs, plot_runs, score_table, table_markdown, write_table_csv
from semzoo.cli import app
from semzoo.config import TrainConfig
from semzoo.runfiles import METRIC_FIELDS

STEPS = (0, 100, 200, 300)
TEST_INTERVAL = 100
"""The fixture runs evaluate every 100 env steps (their config says so: value_at reads evaluations by schedule)."""
FILLER = {0: 0.0, 200: 0.99}
"""Values at steps the table never reads at t = 150 or 300: a wrong lookup shows."""
WIN_RATE = {  # (env, algo) -> per seed (value at 100, value at 300)
    ("matrix:climbing", "qmix"): [(0.1, 0.5), (0.2, 0.5), (0.6, 0.8)],
    ("matrix:climbing", "sem-qmix"): [(0.4, 0.9), (0.4, 1.0), (0.4, 0.8)],
    ("matrix:penalty", "qmix"): [(0.0, 0.2), (0.0, 0.2), (0.3, 0.2)],
    ("matrix:penalty", "sem-qmix"): [(0.5, 0.7), (0.6, 0.7), (0.7, 1.0)],
    ("matrix:qtran", "qmix"): [(0.9, 0.0), (0.9, 0.0), (0.9, 0.0)],
    ("matrix:qtran", "sem-qmix"): [(1.0, 0.1), (1.0, 0.1), (1.0, 0.1)],
}
SHORT_SEED_VALUE_AT_100 = 0.1
"""A 4th penalty/qmix seed that stopped at step 200: it counts at t = 150 but not at t = 300."""


def write_run(root, env, algo, seed, values_by_step, memory=False):
    config = TrainConfig(env=env, algo=algo, seed=seed, steps=max(values_by_step), test_interval=TEST_INTERVAL)
    run_dir = root / f"{env.replace(':', '_')}_{algo}_seed{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(METRIC_FIELDS)
        for step, value in values_by_step.items():
            writer.writerow([step, step // 2, step // 2, 0.1, "return_mean", 1.0])
            writer.writerow([step, step // 2, step // 2, 0.1, "test_win_rate", value])
            if memory:
                for i, name in enumerate(("target_y", "target_e", "q_tot")):
                    writer.writerow([step, step // 2, step // 2, 0.1, name, step / 100 + i + seed])


@pytest.fixture
def runs_root(tmp_path):
    root = tmp_path / "sweep"
    for (env, algo), seeds in WIN_RATE.items():
        for seed, (at100, at300) in enumerate(seeds):
            write_run(root, env, algo, seed, {0: FILLER[0], 100: at100, 200: FILLER[200], 300: at300},
                      memory=algo.startswith("sem"))
    write_run(root, "matrix:penalty", "qmix", 3, {0: 0.0, 100: SHORT_SEED_VALUE_AT_100, 200: FILLER[200]})
    return root


def table_values(rows):
    return {(r.step, r.algo, r.env): (r.value, r.seeds) for r in rows}


def test_table_reads_the_last_evaluation_at_or_before_each_step(runs_root):
    got = table_values(score_table(load_runs(runs_root), [150, 300]))
    expected = {
        (150, "qmix", "matrix:climbing"): (0.3, 3), (150, "qmix", "matrix:penalty"): (0.1, 4),
        (150, "qmix", "matrix:qtran"): (0.9, 3), (150, "qmix", "mean"): (1.3 / 3, 3), (150, "qmix", "median"): (0.3, 3),
        (150, "sem-qmix", "matrix:climbing"): (0.4, 3), (150, "sem-qmix", "matrix:penalty"): (0.6, 3),
        (150, "sem-qmix", "matrix:qtran"): (1.0, 3), (150, "sem-qmix", "mean"): (2.0 / 3, 3),
        (150, "sem-qmix", "median"): (0.6, 3),
        (300, "qmix", "matrix:climbing"): (0.6, 3), (300, "qmix", "matrix:penalty"): (0.2, 3),
        (300, "qmix", "matrix:qtran"): (0.0, 3), (300, "qmix", "mean"): (0.8 / 3, 3), (300, "qmix", "median"): (0.2, 3),
        (300, "sem-qmix", "matrix:climbing"): (0.9, 3), (300, "sem-qmix", "matrix:penalty"): (0.8, 3),
        (300, "sem-qmix", "matrix:qtran"): (0.1, 3), (300, "sem-qmix", "mean"): (1.8 / 3, 3),
        (300, "sem-qmix", "median"): (0.8, 3),
    }
    assert got.keys() == expected.keys()
    for key, (value, seeds) in expected.items():
        assert got[key][0] == pytest.approx(value, abs=1e-12), key
        assert got[key][1] == seeds, key


def test_a_test_metric_is_read_at_the_step_its_evaluation_was_scheduled_for(tmp_path):
    # The trainer tests at the first iteration past each test_interval: the evaluation for 10,000 sits
    # at 10,122. Reading "at 10,000" must give it, not the one before; and a curve shows it at 10,000.
    root = tmp_path / "runs"
    run_dir = root / "run"
    run_dir.mkdir(parents=True)
    config = TrainConfig(env="matrix:climbing", algo="qmix", seed=0, steps=20_000, test_interval=10_000)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(METRIC_FIELDS)
        for step, value in ((10_122, 0.25), (20_253, 0.75), (20_253, 0.5)):  # a re-run final test: the last row
            writer.writerow([step, 1, 1, 0.1, "test_win_rate", value])
            writer.writerow([step, 1, 1, 0.1, "loss_td", value])
    (run,) = load_runs(root)
    assert run.value_at("test_win_rate", 10_000) == 0.25
    assert run.value_at("test_win_rate", 15_000) == 0.25  # between scheduled points: the last before
    assert run.value_at("test_win_rate", 20_000) == 0.5
    assert run.value_at("loss_td", 20_000) == 0.25  # other metrics: the last row at or before
    assert list(run.scheduled_steps("test_win_rate")) == [10_000, 20_000]


def test_table_markdown_and_csv(runs_root, tmp_path):
    rows = score_table(load_runs(runs_root), [150])
    text = table_markdown(rows, "test_win_rate")
    assert "| algo | matrix:climbing | matrix:penalty | matrix:qtran | mean | median |" in text
    assert "| qmix | 0.300 | 0.100 | 0.900 | 0.433 | 0.300 |" in text
    assert "| sem-qmix | 0.400 | 0.600 | 1.000 | 0.667 | 0.600 |" in text
    path = write_table_csv(rows, tmp_path / "t.csv")
    with path.open() as f:
        read = list(csv.DictReader(f))
    assert len(read) == 2 * 5
    assert {(r["algo"], r["env"]): float(r["value"]) for r in read}[("qmix", "median")] == 0.3


def test_steps_past_every_run_give_no_value(runs_root):
    got = table_values(score_table(load_runs(runs_root), [10_000]))
    assert np.isnan(got[(10_000, "qmix", "mean")][0]) and got[(10_000, "qmix", "matrix:climbing")][1] == 0
    assert "n/a" in table_markdown(score_table(load_runs(runs_root), [10_000]), "test_win_rate")


def distinct_colours(path) -> int:
    import matplotlib.image

    pixels = matplotlib.image.imread(str(path))[..., :3].reshape(-1, 3)
    return len(np.unique((pixels * 255).round().astype(np.uint8), axis=0))


def test_plot_writes_curves_and_targets_pngs(runs_root, tmp_path):
    written = plot_runs(runs_root, metric="test_win_rate", out=tmp_path / "plots")
    assert [p.name for p in written] == ["test_win_rate.png", "targets.png"]
    for path in written:
        assert path.stat().st_size > 20_000
        assert distinct_colours(path) > 20  # two algorithm colours, their bands, antialiasing, text


def test_plot_and_table_commands(runs_root, tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["table", str(runs_root), "--at", "150,300", "--csv", str(tmp_path / "t.csv")])
    assert out.exit_code == 0, out.output
    assert "| sem-qmix | 0.900 | 0.800 | 0.100 | 0.600 | 0.800 |" in out.output and (tmp_path / "t.csv").exists()
    out = runner.invoke(app, ["plot", str(runs_root), "--metric", "test_win_rate", "--out", str(tmp_path / "p")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "p" / "test_win_rate.png").exists()


def damage_three_runs(root) -> list:
    """A bad config.json, a metrics.csv of garbage text and one of binary junk, each in its own run directory."""
    bad_config = root / "bad_config"
    bad_config.mkdir()
    (bad_config / "config.json").write_text("{not json")
    (bad_config / "metrics.csv").write_text(",".join(METRIC_FIELDS) + "\n")
    garbage_text = root / "garbage_text"
    write_run(garbage_text, "matrix:climbing", "qmix", 7, {0: 0.5})
    next(garbage_text.glob("*/metrics.csv")).write_text("hello world\nthis is not a metrics file\n")
    garbage_bytes = root / "garbage_bytes"
    write_run(garbage_bytes, "matrix:climbing", "qmix", 8, {0: 0.5})
    next(garbage_bytes.glob("*/metrics.csv")).write_bytes(bytes(range(128, 256)) * 4)
    return [bad_config, next(garbage_text.iterdir()), next(garbage_bytes.iterdir())]


def test_a_damaged_run_directory_is_skipped_with_a_warning_naming_it(runs_root):
    from semzoo.analysis.report import SkippedRunWarning

    intact = table_values(score_table(load_runs(runs_root), [150, 300]))
    damaged = damage_three_runs(runs_root)
    with pytest.warns(SkippedRunWarning) as caught:
        runs = load_runs(runs_root)
    assert sorted(str(w.message).split(":")[0] for w in caught) == sorted(f"skipping {d}" for d in damaged)
    assert table_values(score_table(runs, [150, 300])) == intact


def test_plot_and_table_commands_skip_damaged_runs_with_one_line_each(runs_root, tmp_path):
    damaged = damage_three_runs(runs_root)
    runner = CliRunner()
    for args in (["table", str(runs_root), "--at", "150,300"],
                 ["plot", str(runs_root), "--out", str(tmp_path / "p")]):
        out = runner.invoke(app, args)
        assert out.exit_code == 0, out.output
        # The plot also warns once that penalty/qmix's curve is cut where its short seed stopped.
        lines = [line for line in out.stderr.strip().splitlines() if "curve ends at" not in line]
        assert len(lines) == len(damaged) and "Traceback" not in out.output
        for line, run_dir in zip(lines, sorted(damaged)):
            assert line.startswith(f"Warning: skipping {run_dir}: ")
    assert "| sem-qmix | 0.900 | 0.800 | 0.100 | 0.600 | 0.800 |" in runner.invoke(app, ["table", str(runs_root),
                                                                                      "--at", "150,300"]).stdout


@pytest.fixture
def saved_figures(monkeypatch):
    """The matplotlib figures the plot functions save, kept open for inspection."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figures = []
    real_savefig = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def test_a_curve_of_one_evaluation_is_drawn_with_markers_a_long_one_without(tmp_path, saved_figures):
    for seed in range(2):
        write_run(tmp_path, "matrix:climbing", "qmix", seed, {100: 0.5 + seed / 10}, memory=True)
        write_run(tmp_path, "matrix:climbing", "vdn", seed, dict.fromkeys(range(0, 700, 100), 0.1))
    plot_runs(tmp_path, metric="test_win_rate", out=tmp_path / "plots")
    lines = {(fig_index, line.get_label()): line for fig_index, fig in enumerate(saved_figures)
             for ax in fig.axes for line in ax.get_lines()}
    one_point = [line for (_, label), line in lines.items() if label.startswith("qmix")]
    assert len(one_point) == 4  # the win rate, then y, E and Q_tot
    for line in one_point:
        assert len(line.get_xdata()) == 1 and line.get_marker() not in ("None", "", None)
    long = lines[(0, "vdn (2 seeds)")]
    assert len(long.get_xdata()) == 7 and long.get_marker() in ("None", "", None)


def test_a_curve_stops_at_the_step_every_seed_reached_and_says_so(runs_root, saved_figures):
    """penalty/qmix: seeds 0-2 reached 300, seed 3 stopped at 200; before, the curve went on to 300 on 3 seeds."""
    from semzoo.analysis.report import CutCurveWarning, curve

    runs = load_runs(runs_root)
    penalty_qmix = [r for r in runs if (r.env, r.algo) == ("matrix:penalty", "qmix")]
    steps, mid, _, _ = curve(penalty_qmix, "test_win_rate")
    assert list(steps) == [0, 100, 200] and mid[-1] == FILLER[200]
    with pytest.warns(CutCurveWarning, match=r"matrix:penalty qmix: the seeds stopped between env step 200 and 300"):
        plot_runs(runs_root, metric="test_win_rate", out=runs_root / "plots")
    labels = {line.get_label(): max(line.get_xdata()) for ax in saved_figures[0].axes for line in ax.get_lines()}
    assert labels["qmix (4 seeds, cut at 200)"] == 200 and labels["qmix (3 seeds)"] == 300


def test_table_at_steps_no_run_reached_fails_naming_the_furthest_step(runs_root):
    out = CliRunner().invoke(app, ["table", str(runs_root), "--at", "10000,20000"])
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert out.stderr.strip().count("\n") == 0
    assert "no run has a test_win_rate value at env steps 10,000, 20,000" in out.stderr
    assert "the furthest step any run reached is 300" in out.stderr


def test_table_with_some_cells_missing_shows_n_a_and_prints_a_hint(runs_root):
    out = CliRunner().invoke(app, ["table", str(runs_root), "--at", "300,10000"])
    assert out.exit_code == 0, out.output
    assert "| sem-qmix | 0.900 | 0.800 | 0.100 | 0.600 | 0.800 |" in out.stdout and "| qmix | n/a |" in out.stdout
    assert out.stderr.startswith("Hint: 6 of 12 cells are n/a") and "furthest any run reached is 300" in out.stderr
    complete = CliRunner().invoke(app, ["table", str(runs_root), "--at", "300"])
    assert complete.exit_code == 0 and complete.stderr == ""


def test_mean_and_median_across_envs_are_n_a_unless_every_env_has_a_value(runs_root, tmp_path):
    write_run(runs_root, "matrix:climbing", "vdn", 0, {0: 0.0, 100: 0.5, 300: 0.7})
    write_run(runs_root, "matrix:penalty", "vdn", 0, {0: 0.0, 100: 0.25, 300: 0.9})
    rows = score_table(load_runs(runs_root), [300])
    got = table_values(rows)
    assert got[(300, "vdn", "matrix:climbing")] == (0.7, 1) and np.isnan(got[(300, "vdn", "matrix:qtran")][0])
    for summary in ("mean", "median"):
        value, envs = got[(300, "vdn", summary)]
        assert np.isnan(value) and envs == 2  # not the mean of climbing and penalty alone
    assert got[(300, "qmix", "mean")][0] == pytest.approx(0.8 / 3)  # complete rows keep their summaries
    assert "| vdn | 0.700 | 0.900 | n/a | n/a (2/3 envs) | n/a (2/3 envs) |" in table_markdown(rows, "test_win_rate")
    with write_table_csv(rows, tmp_path / "t.csv").open() as f:
        read = {(r["algo"], r["env"]): r for r in csv.DictReader(f)}
    assert read[("vdn", "mean")]["value"] == "" and read[("vdn", "mean")]["seeds"] == "2"


def test_a_copied_run_counts_as_one_seed_and_the_copy_is_named_in_one_line(runs_root, tmp_path):
    import shutil

    original = runs_root / "matrix_climbing_qmix_seed0"
    copy = runs_root / "z_copies" / "matrix_climbing_qmix_seed0"  # found after the original (paths sorted)
    shutil.copytree(original, copy)
    result = CliRunner().invoke(app, ["report", str(runs_root), "--at", "100,300", "--reps", "20",
                                      "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "same run" in line]
    assert warned == [f"Warning: skipping {copy}: the same run as {original} (qmix on matrix:climbing, seed 0), which "
                      "trained to 300 env steps; a seed counts once: move one of them out of the folder"]
    from semzoo.analysis.report import DuplicateRunWarning

    with pytest.warns(DuplicateRunWarning):
        runs = [r for r in load_runs(runs_root) if (r.env, r.algo) == ("matrix:climbing", "qmix")]
    assert sorted(r.seed for r in runs) == list(range(len(WIN_RATE["matrix:climbing", "qmix"])))


def test_a_metrics_file_cut_mid_row_is_named_in_one_line(runs_root, tmp_path):
    cut_run = runs_root / "matrix_climbing_qmix_seed0"
    path = cut_run / "metrics.csv"
    text = path.read_text()
    path.write_text(text[: len(text) - 7])  # the last row (test_win_rate at 300) cut inside its value
    result = CliRunner().invoke(app, ["report", str(runs_root), "--at", "100,300", "--reps", "20",
                                      "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "ends inside a row" in line]
    assert len(warned) == 1 and str(path) in warned[0] and "rows up to env step 300 are read" in warned[0]


def test_a_metrics_file_cut_inside_its_header_is_named_not_read_as_a_run_without_the_metric(tmp_path):
    write_run(tmp_path, "matrix:climbing", "qmix", 0, {0: 0.5, 100: 0.7})
    path = next(tmp_path.glob("*/metrics.csv"))
    path.write_text(path.read_text()[:20])
    result = CliRunner().invoke(app, ["table", str(tmp_path), "--at", "100"])
    assert f"{path} ends inside a row" in result.stderr and "it holds no full row" in result.stderr, result.output


def test_a_garbage_row_of_metrics_is_named_by_file_and_line_and_the_other_rows_are_read(tmp_path):
    write_run(tmp_path, "matrix:climbing", "qmix", 0, {0: 0.5, 100: 0.7})
    path = next(tmp_path.glob("*/metrics.csv"))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], "garbage,row,here\n", *lines[2:]]))  # line 3
    for command in (["table", str(tmp_path), "--at", "100"], ["plot", str(tmp_path), "--out", str(tmp_path / "p")]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0, result.output
        warned = [line for line in result.stderr.splitlines() if "not a metrics row" in line]
        assert warned == [f"Warning: {path} line 3: 'garbage,row,here' is not a metrics row (expected "
                          "env_steps,episodes,updates,wall_time,name,value with numbers); it is left out: mend or "
                          "delete the line, or re-copy the file"], result.stderr
    assert "0.700" in CliRunner().invoke(app, ["table", str(tmp_path), "--at", "100"]).output


def test_a_metrics_file_cut_before_its_evaluations_names_the_file_and_line_in_the_error(tmp_path):
    write_run(tmp_path, "matrix:climbing", "qmix", 0, {0: 0.5, 100: 0.7})
    path = next(tmp_path.glob("*/metrics.csv"))
    text = path.read_text()
    path.write_text(text[: text.index("test_win_rate") - 3])  # cut inside line 3, before the first evaluation row
    for command in (["table", str(tmp_path), "--at", "100"], ["plot", str(tmp_path), "--out", str(tmp_path / "p")]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 1, result.output
        error = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
        assert len(error) == 1 and f"{path} ends inside line 3" in error[0], result.stderr


def test_a_row_cut_inside_its_value_is_left_out_not_read_as_a_shorter_number(tmp_path):
    write_run(tmp_path, "matrix:climbing", "qmix", 0, {0: 0.5, 100: 0.75})
    path = next(tmp_path.glob("*/metrics.csv"))
    path.write_text(path.read_text().rstrip("\n")[:-1])  # the last row's 0.75 cut to 0.7
    with pytest.warns(UserWarning, match="line 5"):
        run = load_runs(tmp_path)[0]
    assert list(run.metrics["test_win_rate"][1]) == [0.5]
