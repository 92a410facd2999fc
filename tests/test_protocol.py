"""The evaluation protocol (`semzoo report`) on fixture runs whose statistics are worked out by hand."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("rliable")
pytest.importorskip("matplotlib")

from conftest import resolved_config

from semzoo.analysis.marl_eval import MARL_EVAL_FILE
from semzoo.analysis.memory_use import derived_merge_rate, memory_use
from semzoo.analysis.pairing import memory_pairs
from semzoo.analysis.protocol import ABSOLUTE_FILE, CURVES_FILE, PROFILE_FILE, REPORT_FILE, report
from semzoo.analysis.report import default_steps, load_runs
from semzoo.analysis.statistics import ALL_ENVS, aggregates, improvements, iqm_curve, metric_at
from semzoo.analysis.wall_cost import wall_costs
from semzoo.cli import app
from semzoo.config import MemoryConfig, TrainConfig
from semzoo.runfiles import METRIC_FIELDS

REPS = 200
TEST_INTERVAL = 100
"""The fixture runs evaluate every 100 env steps (their config says so: value_at reads evaluations by schedule)."""
"""Enough replications for CIs in tests; the point estimates do not depend on them."""
AT = 300
FINAL = {  # (env, algo) -> per seed the win rate at step 300
    # IQM of 8 seeds = mean of the middle four (2, 3, 4, 5) / 10 = 0.35; mean = 0.35 + 0.9/8 (the outlier)
    ("smax:3m", "qmix"): [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.6],
    ("smax:3m", "sem-qmix"): [0.8, 0.8, 0.8, 0.8, 0.9, 0.9, 0.9, 0.9],  # every run beats every qmix run but 1.6
    ("smax:2s3z", "qmix"): [0.5, 0.5, 0.5, 0.5],
    ("smax:2s3z", "sem-qmix"): [0.5, 0.5, 0.5, 0.5],  # equal scores: P(X > Y) = 0.5
}
EARLY = 100
EARLY_VALUE = 0.05
RETURN_SCALE = 20.0
"""test_return_mean = RETURN_SCALE x test_win_rate in every fixture row."""


def write_run(root, env, algo, seed, win_rate_by_step, preset="none", env_args=None, name=None):
    """A run directory with config.json and metrics.csv: test_win_rate and test_return_mean at each step. A ``smax:``
    run is on SMAX's own rules (``profile=smax``) unless ``env_args`` say otherwise, so its label is the bare env."""
    own = {"profile": "smax"} if env.startswith("smax:") else {}
    config = resolved_config(env=env, algo=algo, seed=seed, steps=max(win_rate_by_step), test_interval=TEST_INTERVAL,
                             preset=preset, env_args={**own, **(env_args or {})})  # as a run stores it
    name = name or f"{env.replace(':', '_')}_{algo}{'' if preset == 'none' else '_' + preset}"
    run_dir = root / f"{name}_seed{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(METRIC_FIELDS)
        for step, value in win_rate_by_step.items():
            writer.writerow([step, step // 2, step // 2, 0.1, "test_win_rate", value])
            writer.writerow([step, step // 2, step // 2, 0.1, "test_return_mean", RETURN_SCALE * value])
    return run_dir


@pytest.fixture
def runs_root(tmp_path):
    root = tmp_path / "runs"
    for (env, algo), finals in FINAL.items():
        for seed, final in enumerate(finals):
            write_run(root, env, algo, seed, {0: 0.0, EARLY: EARLY_VALUE + seed / 100, AT: final})
    return root


def by_key(rows):
    return {(r.env, r.algo): r for r in rows}


def test_iqm_and_mean_per_env_match_the_hand_computed_values(runs_root):
    rows = by_key(aggregates(load_runs(runs_root), metric_at("test_win_rate", AT), AT, reps=REPS))
    expected = {  # (env, algo) -> (IQM, mean, seeds)
        ("smax:3m", "qmix"): (0.35, 3.7 / 8, 8),
        ("smax:3m", "sem-qmix"): (0.85, 0.85, 8),
        ("smax:2s3z", "qmix"): (0.5, 0.5, 4),
        ("smax:2s3z", "sem-qmix"): (0.5, 0.5, 4),
    }
    for key, (iqm, mean, seeds) in expected.items():
        row = rows[key]
        assert row.iqm.value == pytest.approx(iqm, abs=1e-12), key
        assert row.mean.value == pytest.approx(mean, abs=1e-12), key
        assert row.seeds == seeds and row.envs == 1
        for estimate in (row.iqm, row.mean):
            assert estimate.low <= estimate.value <= estimate.high, key
    assert rows[("smax:3m", "qmix")].mean.high > rows[("smax:3m", "qmix")].mean.low  # spread seeds: a real interval
    assert rows[("smax:2s3z", "qmix")].iqm.low == rows[("smax:2s3z", "qmix")].iqm.high == 0.5  # equal seeds: none


def test_aggregate_across_envs_uses_the_smallest_seed_count_lowest_seeds_first(runs_root):
    rows = by_key(aggregates(load_runs(runs_root), metric_at("test_win_rate", AT), AT, reps=REPS))
    qmix = rows[(ALL_ENVS, "qmix")]
    assert (qmix.seeds, qmix.envs) == (4, 2)
    # seeds 0-3 of 3m (0.0-0.3) and of 2s3z (0.5 x4): sorted 0, .1, .2, .3, .5, .5, .5, .5 -> IQM of .2 .3 .5 .5
    assert qmix.iqm.value == pytest.approx(1.5 / 4, abs=1e-12)
    assert qmix.mean.value == pytest.approx(2.6 / 8, abs=1e-12)


def test_probability_of_improvement_is_one_when_all_greater_and_half_when_equal(runs_root):
    runs = load_runs(runs_root)
    pois = {r.env: r for r in improvements(runs, metric_at("test_win_rate", AT), AT, reps=REPS)}
    assert {(r.algo, r.base) for r in pois.values()} == {("sem-qmix", "qmix")}
    # 3m: sem-qmix's 8 runs beat qmix's 7 low runs and lose to its 1.6: 56 wins of 64 pairs
    assert pois["smax:3m"].probability.value == pytest.approx(56 / 64, abs=1e-12)
    assert pois["smax:2s3z"].probability.value == pytest.approx(0.5, abs=1e-12)
    # across envs (seeds 0-3 each): 3m gives 1.0 (0.8, 0.8, 0.8, 0.8 vs 0.0-0.3), 2s3z 0.5
    assert pois[ALL_ENVS].probability.value == pytest.approx(0.75, abs=1e-12)
    for r in pois.values():
        assert r.probability.low <= r.probability.value <= r.probability.high


def test_memory_pairs_match_each_variant_to_its_base():
    assert memory_pairs(["cw-qmix", "qmix", "saem-qmix", "sem-cw-qmix", "sem-vdn"]) == [
        ("saem-qmix", "qmix"), ("sem-cw-qmix", "cw-qmix")]


def test_memory_pairs_compare_every_other_memory_with_sem_too():
    labels = ["qmix", "sem-qmix", "emc-qmix", "emu-qmix", "emu-vdn", "saem-qmix lam=0.3", "emc-qplex"]
    assert memory_pairs(labels) == [
        ("emc-qmix", "qmix"), ("emu-qmix", "qmix"), ("saem-qmix lam=0.3", "qmix"), ("sem-qmix", "qmix"),
        # then over SEM: emu-vdn has no vdn or sem-vdn beside it, emc-qplex no qplex or sem-qplex
        ("emc-qmix", "sem-qmix"), ("emu-qmix", "sem-qmix"), ("saem-qmix lam=0.3", "sem-qmix")]


def write_final(root, env, algo, seed, wall_s, env_steps=300):
    run_dir = root / f"{env.replace(':', '_')}_{algo}_seed{seed}"
    (run_dir / "final.json").write_text(json.dumps({"env_steps": env_steps, "wall_time": wall_s, "updates": seed + 10}))


def test_wall_costs_read_finished_runs_and_compare_each_memory_with_its_base_and_sem(tmp_path):
    walls = {"qmix": [600, 1200, 900], "sem-qmix": [1200, 1500, 1800], "emc-qmix": [2400, 3000, None]}
    for algo, by_seed in walls.items():
        for seed, wall in enumerate(by_seed):
            write_run(tmp_path, "smax:2s3z", algo, seed, {0: 0.0, AT: 0.5})
            if wall is not None:  # seed 2 of emc-qmix has not finished: no final.json, no cost
                write_final(tmp_path, "smax:2s3z", algo, seed, wall)
    costs = {c.algo: c for c in wall_costs(load_runs(tmp_path))}
    assert (costs["qmix"].runs, costs["qmix"].median_min, costs["qmix"].low_min, costs["qmix"].high_min) == (3, 15, 10, 20)
    assert costs["qmix"].vs == {}
    assert costs["sem-qmix"].vs == {"qmix": pytest.approx(25 / 15)}
    assert costs["emc-qmix"].runs == 2 and costs["emc-qmix"].median_min == pytest.approx(45)
    assert costs["emc-qmix"].vs == {"qmix": pytest.approx(3.0), "sem-qmix": pytest.approx(45 / 25)}
    text = report(tmp_path, [AT], reps=REPS).markdown
    assert "## Wall-clock cost per run" in text
    assert "| smax:2s3z | emc-qmix | 2 | 300 | 10 (1) | 45 (40-50) | 3.00x qmix, 1.80x sem-qmix |" in text
    assert (costs["qmix"].updates, costs["qmix"].updates_per_episode) == (11, 1.0)  # median of 10, 11, 12
    assert "| emc-qmix | sem-qmix | 3 / 3 |" in text  # P(emc-qmix > sem-qmix) is reported too


def test_the_bootstrap_is_reproducible(runs_root):
    runs = load_runs(runs_root)
    first = aggregates(runs, metric_at("test_win_rate", AT), AT, reps=REPS)
    np.random.seed(123)  # the global RNG's state does not change the report
    assert aggregates(runs, metric_at("test_win_rate", AT), AT, reps=REPS) == first


def test_curve_counts_only_the_seeds_that_reached_each_step(tmp_path):
    for seed, values in enumerate([{0: 0.0, 100: 0.4, 200: 0.8}, {0: 0.2, 100: 0.6}]):
        write_run(tmp_path, "smax:3m", "qmix", seed, values)
    steps, iqm, low, high, seeds = iqm_curve(load_runs(tmp_path), "test_win_rate", reps=REPS)
    assert steps.tolist() == [0, 100, 200]
    assert seeds.tolist() == [2, 2, 1]
    assert iqm == pytest.approx([0.1, 0.5, 0.8])  # at 200 only seed 0: seed 1's 0.6 is not carried on
    assert np.all(low <= iqm) and np.all(iqm <= high)


def test_absolute_metric_is_read_from_absolute_json(runs_root):
    for run in load_runs(runs_root):
        if run.env == "smax:3m" and run.seed < 4:
            record = {"step": AT, "episodes": 320, "test_win_rate": 0.9 if run.algo == "sem-qmix" else 0.25,
                      "test_return_mean": 10.0}
            (run.run_dir / ABSOLUTE_FILE).write_text(json.dumps(record))
    done = report(runs_root, [AT], reps=REPS)
    absolute = by_key(a for a in done.aggregates if a.step == "absolute")
    assert set(absolute) == {("smax:3m", "qmix"), ("smax:3m", "sem-qmix")}
    assert absolute[("smax:3m", "qmix")].iqm.value == pytest.approx(0.25)
    assert absolute[("smax:3m", "qmix")].seeds == 4
    assert "Absolute test_win_rate" in done.markdown and "8 of 24 runs" in done.markdown


def test_marl_eval_export_has_its_layout_and_the_logged_values(runs_root):
    (next(runs_root.glob("smax_3m_sem-qmix_seed1")) / ABSOLUTE_FILE).write_text(json.dumps(
        {"step": AT, "episodes": 320, "test_win_rate": None, "test_return_mean": 7.5}))
    report(runs_root, [AT], reps=REPS)
    data = json.loads((runs_root / "report" / MARL_EVAL_FILE).read_text())
    assert list(data) == ["smax"]
    assert set(data["smax"]) == {"3m", "2s3z"}
    assert set(data["smax"]["3m"]) == {"qmix", "sem-qmix"}
    runs = data["smax"]["3m"]["sem-qmix"]
    assert set(runs) == {f"run_{seed}" for seed in range(8)}
    run1 = runs["run_1"]
    assert [run1[f"step_{k}"]["step_count"] for k in range(3)] == [0, EARLY, AT]
    assert run1["step_2"]["win_rate"] == [0.8]
    assert run1["step_1"]["win_rate"] == [pytest.approx(EARLY_VALUE + 0.01)]
    assert run1["step_2"]["return"] == [pytest.approx(RETURN_SCALE * 0.8)]
    assert run1["absolute_metrics"] == {"return": [7.5]}  # a null win rate (env without wins) is left out
    assert "absolute_metrics" not in runs["run_0"]


def test_report_writes_readable_figures_markdown_and_table(runs_root):
    done = report(runs_root, [EARLY, AT], reps=REPS)
    out = runs_root / "report"
    for name in (PROFILE_FILE, CURVES_FILE):
        assert (out / name).stat().st_size > 10_000, name
    text = (out / REPORT_FILE).read_text()
    assert text == done.markdown
    assert f"]({PROFILE_FILE})" in text and f"]({CURVES_FILE})" in text
    assert "| smax:3m | qmix | 8 | 0.350 [" in text
    assert "P(X > Y)" in text
    assert "mean over seeds" in text and "| sem-qmix |" in text  # the paper's Table 1 layout (score_table)


def test_a_single_evaluation_point_still_draws_a_curve(tmp_path):
    for seed in range(3):
        write_run(tmp_path, "matrix:two_step", "qmix", seed, {AT: 0.5 + seed / 10})
    report(tmp_path, [AT], reps=REPS)
    assert (tmp_path / "report" / CURVES_FILE).stat().st_size > 10_000


def cli(*args):
    return CliRunner().invoke(app, ["report", *map(str, args)])


def test_cli_prints_the_tables_and_names_the_files(runs_root, tmp_path):
    result = cli(runs_root, "--at", f"{EARLY},{AT}", "--reps", REPS, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "IQM [95 % CI]" in result.output and "Probability of improvement" in result.output
    assert f"wrote {tmp_path / 'out' / MARL_EVAL_FILE}" in result.output


def test_cli_names_the_furthest_step_when_no_run_reached_the_requested_one(runs_root):
    result = cli(runs_root, "--at", "500000", "--reps", REPS)
    assert result.exit_code == 1
    assert "the last test_win_rate value of any run is at 300 env steps" in result.output
    assert "Traceback" not in result.output


def test_cli_names_the_known_metrics_for_an_unknown_one(runs_root):
    result = cli(runs_root, "--at", AT, "--metric", "test_win", "--reps", REPS)
    assert result.exit_code == 1
    assert "unknown metric 'test_win'" in result.output and "test_win_rate" in result.output


def test_cli_compare_adds_the_probability_of_improvement_of_a_pair_it_does_not_compare_by_itself(runs_root, tmp_path):
    plain = cli(runs_root, "--at", AT, "--reps", REPS, "--out", tmp_path / "plain")
    assert plain.exit_code == 0, plain.output
    assert "| qmix | sem-qmix |" not in plain.output  # by itself a report asks only P(sem-qmix > qmix)
    result = cli(runs_root, "--at", AT, "--reps", REPS, "--out", tmp_path / "out", "--compare", "qmix vs sem-qmix")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.endswith("| qmix | sem-qmix | 8 / 8 |")]
    # 3m: qmix's 1.6 beats sem-qmix's 8 runs, its other 7 runs beat none: 8 wins of 64 pairs (1 - 56/64)
    assert len(rows) == 1 and rows[0].startswith(f"| smax:3m | {8 / 64:.3f} [")
    assert "| smax:2s3z | 0.500 [0.500, 0.500] | qmix | sem-qmix | 4 / 4 |" in result.output  # ties count a half
    assert "| smax:3m | 0.875 [" in result.output  # the report's own pair stays


def test_improvements_add_the_extra_pairs_once(runs_root):
    runs = load_runs(runs_root)
    pois = improvements(runs, metric_at("test_win_rate", AT), AT, reps=REPS,
                        extra=[("qmix", "sem-qmix"), ("sem-qmix", "qmix")])
    assert sorted({(r.algo, r.base) for r in pois}) == [("qmix", "sem-qmix"), ("sem-qmix", "qmix")]
    assert len(pois) == 6  # each pair on 3m, 2s3z and across the two envs, once
    reverse = {r.env: r.probability.value for r in pois if r.algo == "qmix"}
    assert reverse["smax:3m"] == pytest.approx(8 / 64, abs=1e-12)


@pytest.mark.parametrize(("text", "code", "says"), [
    ("qmix sem-qmix", 2, "expected two different run labels around ' vs '"),
    ("qmix vs qmix", 2, "expected two different run labels"),
    ("qmix vs sem-qmix vs vdn", 2, "expected two different run labels"),
    ("qmix td_lambda=0.6 vs qmix", 1, "no run is labelled 'qmix td_lambda=0.6'; the labels of these runs: qmix, sem-qmix"),
])
def test_cli_compare_rejects_a_malformed_pair_or_an_unknown_label_in_one_line(runs_root, text, code, says):
    result = cli(runs_root, "--at", AT, "--reps", REPS, "--compare", text)
    assert result.exit_code == code, result.output
    assert says in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("at", ["abc", "100,x", "-5"])
def test_cli_rejects_a_bad_at_as_a_usage_error(runs_root, at):
    result = cli(runs_root, "--at", at)
    assert result.exit_code == 2
    assert "--at" in result.output and "Traceback" not in result.output


def train_two_step_runs(root):
    """Seeds 0 and 1 of qmix and sem-qmix, 120 env steps each on the two-step game, under ``root``."""
    from semzoo import train_seeds
    from semzoo.config import AgentConfig, ExplorationConfig, LearnerConfig, MemoryConfig

    for algo in ("qmix", "sem-qmix"):
        config = TrainConfig(env="matrix:two_step", algo=algo, steps=120, n_envs=4, test_episodes=4, test_interval=40,
                             log_interval=40, save_interval=0, sequential=True, out=str(root),
                             agent=AgentConfig(hidden_dim=8), learner=LearnerConfig(batch_size=8, buffer_size=64),
                             exploration=ExplorationConfig(epsilon_anneal_steps=80),
                             memory=MemoryConfig(pending_size=40))
        train_seeds(config, [0, 1], progress=False)


def test_cli_absolute_re_evaluates_best_checkpoints_and_leaves_out_runs_without_one(tmp_path):
    root = tmp_path / "runs"
    train_two_step_runs(root)
    write_run(root, "matrix:two_step", "qmix", 7, {0: 0.0, 40: 1.0, 120: 1.0})  # old layout: no best.ckpt

    result = cli(root, "--at", 120, "--metric", "test_return_mean", "--reps", REPS, "--absolute",
                 "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    records = sorted(root.glob(f"*/{ABSOLUTE_FILE}"))
    assert len(records) == 4  # two seeds of each algorithm; the old run has none
    assert all(json.loads(p.read_text())["episodes"] == 40 for p in records)  # 10 x test_episodes
    assert "seed7" in result.output and "left out" in result.output
    assert "absolute" in (tmp_path / "out" / REPORT_FILE).read_text().lower()


def test_cli_without_rliable_names_the_extra(runs_root, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "rliable", None)  # `import rliable` now raises ImportError
    monkeypatch.setitem(sys.modules, "rliable.library", None)
    result = cli(runs_root, "--at", AT)
    assert result.exit_code == 1
    assert "pip install 'semzoo[report]'" in result.output
    assert len(result.output.strip().splitlines()) == 1


# ----- runs that log no win rate (matrix games, MPE): the test return, said so -------------------------------------


@pytest.fixture(scope="module")
def matrix_runs(tmp_path_factory):
    """Two seeds each of qmix and sem-qmix trained 120 env steps on the two-step game: no test_win_rate logged."""
    root = tmp_path_factory.mktemp("matrix") / "runs"
    train_two_step_runs(root)
    return root


FALLBACK_NOTE = "metric: test_return_mean (no run logs test_win_rate); choose another with --metric"


def test_report_on_runs_without_a_win_rate_reports_the_test_return_and_says_so(matrix_runs, tmp_path):
    result = cli(matrix_runs, "--at", 120, "--reps", REPS, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Evaluation report: test_return_mean")
    assert FALLBACK_NOTE in result.stderr.splitlines()
    assert "matrix:two_step" in result.stdout and (tmp_path / "out" / REPORT_FILE).exists()


def test_plot_and_table_on_runs_without_a_win_rate_use_the_test_return_and_say_so(matrix_runs, tmp_path):
    plotted = CliRunner().invoke(app, ["plot", str(matrix_runs), "--out", str(tmp_path / "p")])
    assert plotted.exit_code == 0, plotted.output
    assert (tmp_path / "p" / "test_return_mean.png").exists() and plotted.stderr.strip() == FALLBACK_NOTE
    tabled = CliRunner().invoke(app, ["table", str(matrix_runs), "--at", "120"])
    assert tabled.exit_code == 0, tabled.output
    assert tabled.stdout.startswith("test_return_mean at 120 env steps") and tabled.stderr.strip() == FALLBACK_NOTE


@pytest.mark.parametrize("command", ["report", "plot", "table"])
def test_an_explicit_metric_the_runs_do_not_log_is_one_line_listing_what_they_log(matrix_runs, tmp_path, command):
    extra = ["--at", "120"] if command != "plot" else ["--out", str(tmp_path / "p")]
    result = CliRunner().invoke(app, [command, str(matrix_runs), "--metric", "test_win_rate", *extra])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith("Error: unknown metric 'test_win_rate': the runs logged ")
    assert "test_return_mean" in lines[0] and "pick one with --metric" in lines[0]


def test_an_explicit_metric_wins_over_the_default(matrix_runs):
    result = CliRunner().invoke(app, ["table", str(matrix_runs), "--at", "120", "--metric", "return_mean"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("return_mean at 120 env steps") and result.stderr == ""


def test_runs_gathered_by_symbolic_links_are_found_once_each(tmp_path):
    """A comparison folder may link runs that live in other studies; a link back up the tree is not followed twice."""
    studies = tmp_path / "studies"
    for algo, win_rate in (("qmix", 0.2), ("sem-qmix", 0.6)):
        write_run(studies / algo, "smax:2s3z", algo, 0, {0: 0.0, AT: win_rate})
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    for algo in ("qmix", "sem-qmix"):
        (gathered / algo).symlink_to(studies / algo, target_is_directory=True)
    (gathered / "again").symlink_to(studies / "qmix", target_is_directory=True)  # the same run, linked twice
    (gathered / "loop").symlink_to(gathered, target_is_directory=True)
    runs = load_runs(gathered)
    assert sorted(run.algo for run in runs) == ["qmix", "sem-qmix"]
    assert {r.algo: r.value_at("test_win_rate", AT) for r in runs} == {"qmix": 0.2, "sem-qmix": 0.6}


# ----- steps without --at: the paper's where every run reached them, else what the runs reached ---------------------


def test_without_at_the_paper_steps_are_read_where_every_run_reached_them(tmp_path):
    for seed in range(2):
        write_run(tmp_path, "smax:3m", "qmix", seed, {0: 0.0, 250_000: 0.5, 500_000: 0.75 + seed / 10})
    assert default_steps(load_runs(tmp_path), "test_win_rate") == ([250_000, 500_000], None)


def test_without_at_short_runs_are_read_at_their_last_common_evaluation_and_its_half(runs_root):
    steps, note = default_steps(load_runs(runs_root), "test_win_rate")
    assert steps == [EARLY, AT]  # evaluations at 0, 100, 300: the last every run has, and the one at or below 150
    assert note is not None and note.startswith(f"steps: {EARLY} and {AT} env steps") and "--at" in note


@pytest.fixture(scope="module")
def short_matrix_runs(tmp_path_factory):
    """QMIX and SEM-QMIX trained 1,500 env steps on the two-step game by `semzoo train`, evaluated every 500."""
    root = tmp_path_factory.mktemp("short") / "runs"
    for algo in ("qmix", "sem-qmix"):
        trained = CliRunner().invoke(app, ["train", "--env", "matrix:two_step", "--algo", algo, "--steps", "1500",
                                           "--test-interval", "500", "--pending-size", "200", "--sequential",
                                           "--no-tensorboard", "--save-interval", "0", "--out", str(root)])
        assert trained.exit_code == 0, trained.output
    return root


SHORT_STEPS_NOTE = "steps: 500 and 1,500 env steps, the runs' last common evaluation and its half"


@pytest.mark.slow
def test_report_without_at_on_short_runs_exits_0_and_says_which_steps_it_chose(short_matrix_runs, tmp_path):
    result = cli(short_matrix_runs, "--reps", REPS, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert any(line.startswith(SHORT_STEPS_NOTE) for line in result.stderr.splitlines()), result.stderr
    assert "## test_return_mean at 500 env steps" in result.stdout
    assert "## test_return_mean at 1,500 env steps" in result.stdout


def test_table_without_at_on_short_runs_reads_the_steps_they_reached_and_says_so(short_matrix_runs):
    result = CliRunner().invoke(app, ["table", str(short_matrix_runs)])
    assert result.exit_code == 0, result.output
    assert any(line.startswith(SHORT_STEPS_NOTE) for line in result.stderr.splitlines()), result.stderr
    assert "test_return_mean at 1,500 env steps" in result.stdout and "n/a" not in result.stdout


# ----- a metrics.csv cut inside its last evaluation (a run killed while it wrote) -----------------------------------


def write_cut_run(root, seed=0):
    """Evaluations at 0, 100, 200 and 300; at 300 the test_return_mean row made it and the test_win_rate row was
    cut half-way (read_metrics skips it), as when a run is killed while it writes its last evaluation."""
    run_dir = write_run(root, "smax:3m", "qmix", seed, {0: 0.0, 100: 0.25, 200: 0.5})
    with (run_dir / "metrics.csv").open("a", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([300, 150, 150, 0.1, "loss", 0.01])
        writer.writerow([300, 150, 150, 0.1, "test_return_mean", RETURN_SCALE * 0.75])
        f.write("300,150,150,0.1,test_win_r")
    return run_dir


def test_a_step_whose_evaluation_was_cut_has_no_value_not_the_previous_evaluations(tmp_path):
    [run] = load_runs(write_cut_run(tmp_path).parent)
    assert np.isnan(run.value_at("test_win_rate", 300))  # not 0.5, the evaluation for 200
    assert run.value_at("test_return_mean", 300) == RETURN_SCALE * 0.75  # its row made it
    assert run.value_at("test_win_rate", 250) == 0.5  # between the evaluation for 200 and the next: that one


def test_without_at_a_cut_run_is_read_at_its_last_evaluation_of_the_metric(tmp_path):
    write_cut_run(tmp_path)
    steps, _ = default_steps(load_runs(tmp_path), "test_win_rate")
    assert steps == [100, 200]
    tabled = CliRunner().invoke(app, ["table", str(tmp_path)])
    assert tabled.exit_code == 0, tabled.output
    assert "test_win_rate at 200 env steps" in tabled.stdout and "at 300 env steps" not in tabled.stdout


def test_report_at_a_cut_step_names_the_last_evaluation_of_the_metric(tmp_path):
    write_cut_run(tmp_path)
    result = cli(tmp_path, "--at", 300, "--reps", REPS)
    assert result.exit_code == 1, result.output
    assert "no run has test_win_rate at 300 env steps" in result.output
    assert "the last test_win_rate value of any run is at 200 env steps" in result.output


@pytest.mark.parametrize("command", ["report", "table", "plot"])
def test_runs_whose_metrics_hold_no_metric_say_so(tmp_path, command):
    run_dir = write_run(tmp_path, "smax:3m", "qmix", 0, {0: 0.0})
    (run_dir / "metrics.csv").write_text(",".join(METRIC_FIELDS) + "\n")
    result = CliRunner().invoke(app, [command, str(tmp_path)])
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert "logged )" not in line and "hold no metric rows" in line, line


def write_memory_run(root, seed, capacity, rows):
    """A sem-qmix run from before ``memory_merge_rate`` was logged: (env steps, entries, pending steps) per row."""
    config = TrainConfig(env="smax:2s3z", algo="sem-qmix", seed=seed, steps=rows[-1][0],
                         test_interval=TEST_INTERVAL, memory=MemoryConfig(capacity=capacity))
    run_dir = root / f"smax_2s3z_sem-qmix_seed{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(METRIC_FIELDS)
        for step, entries, pending in rows:
            for name, value in (("memory_hit_rate", 0.9), ("memory_entries", entries),
                                ("memory_pending_steps", pending)):
                writer.writerow([step, step // 20, step // 20, 0.1, name, value])
    return run_dir


def test_memory_use_derives_the_merge_rate_of_a_run_that_did_not_log_it(tmp_path):
    # seed 0: 1000 steps, 200 pending, so 800 writes into 780 entries: 20 merges, 2.5 %
    write_memory_run(tmp_path, 0, 10_000, [(500, 300, 100), (1000, 780, 200)])
    # seed 1: 1000 writes into 990 entries, 1 %
    write_memory_run(tmp_path, 1, 10_000, [(1000, 990, 0)])
    runs = {run.seed: run for run in load_runs(tmp_path)}
    assert derived_merge_rate(runs[0]) == pytest.approx(0.025) and derived_merge_rate(runs[1]) == pytest.approx(0.01)
    (use,) = memory_use(list(runs.values()))
    assert use.figures["memory_merge_rate"] == pytest.approx((0.0175, 0.01, 0.025)) and use.derived_merge_runs == 2
    # a table filled to its capacity may have evicted: its entries no longer count the distinct keys written
    full = tmp_path / "full"
    write_memory_run(full, 2, 780, [(500, 300, 100), (1000, 780, 200)])
    (run,) = load_runs(full)
    assert derived_merge_rate(run) is None
    (use,) = memory_use([run])
    assert "memory_merge_rate" not in use.figures and use.derived_merge_runs == 0


# ----- threads: the report runs beside training runs --------------------------------------------------------------


@pytest.fixture
def torch_threads():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield torch
    torch.set_num_threads(before)


@pytest.mark.parametrize(("args", "threads"), [((), 1), (("--threads", "2"), 2)])
def test_report_runs_with_one_torch_thread_unless_told_otherwise(runs_root, tmp_path, torch_threads, args, threads):
    result = cli(runs_root, "--at", AT, "--reps", REPS, "--out", tmp_path / "out", *args)
    assert result.exit_code == 0, result.output
    assert torch_threads.get_num_threads() == threads


def write_provenance(run_dir, *commits: str):
    """A provenance.json whose sessions ran ``commits`` ('<sha>-dirty' for a checkout with changes)."""
    sessions = [{"semzoo": {"version": "0.2.0", "commit": c.removesuffix("-dirty"), "dirty": c.endswith("-dirty")}}
                for c in commits]
    (run_dir / "provenance.json").write_text(json.dumps({"sessions": sessions}))


def test_report_says_which_groups_hold_runs_of_different_commits(tmp_path):
    a, b = "a" * 40, "b" * 40
    root = tmp_path / "runs"
    for algo, commits in (("qmix", [[a], [b + "-dirty"], []]), ("vdn", [[a], [a, a]]), ("sem-qmix", [[a], [a, b]])):
        for seed, ran in enumerate(commits):
            write_run(root, "matrix:two_step", algo, seed, {AT: 0.5})
            if ran:
                write_provenance(root / f"matrix_two_step_{algo}_seed{seed}", *ran)
    result = cli(root, "--at", AT, "--reps", REPS, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "semzoo commits" in line]
    assert lines == [
        "matrix:two_step qmix: its runs come from 2 semzoo commits, aaaaaaaaaa (seed 0); bbbbbbbbbb-dirty (seed 1); "
        "no commit recorded (seed 2): compare them knowing the code changed (each run's provenance.json)",
        "matrix:two_step sem-qmix: its runs come from 2 semzoo commits, aaaaaaaaaa (seeds 0, 1); bbbbbbbbbb (seed 1): "
        "compare them knowing the code changed (each run's provenance.json)"]  # seed 1 was resumed under b
    report_md = (tmp_path / "out" / REPORT_FILE).read_text()
    assert "## Runs of one group from different code" in report_md and all(f"- {line}" in report_md for line in lines)


def test_env_args_in_labels_compare_runs_that_differ_only_by_env_arguments(tmp_path):
    """A factor study of an env's options (the SMAC profile with one part left out): apart, each set of env
    arguments is an env of its own and nothing is compared; with ``env_args_in_labels`` they are labels of one env,
    and each run is compared with the runs whose arguments it extends."""
    root = tmp_path / "runs"
    full, without = {"profile": "smac"}, {"profile": "smac", "attack": "unit_range"}
    for seed, (full_value, without_value) in enumerate([(0.9, 0.1), (0.8, 0.2)]):
        for name, env_args, value in (("full", full, full_value), ("no-attack", without, without_value)):
            write_run(root, "smax:2s3z", "qmix", seed, {EARLY: value, AT: value}, env_args=env_args, name=name)
    apart = load_runs(root)
    assert {r.env for r in apart} == {"smax:2s3z profile=smac", "smax:2s3z attack=unit_range profile=smac"}
    assert improvements(apart, metric_at("test_win_rate", AT), AT, reps=REPS) == []
    runs = load_runs(root, env_args_in_labels=True)
    assert {r.env for r in runs} == {"smax:2s3z"}
    assert {r.algo for r in runs} == {"qmix profile=smac", "qmix attack=unit_range profile=smac"}
    [poi] = [r for r in improvements(runs, metric_at("test_win_rate", AT), AT, reps=REPS) if r.env == "smax:2s3z"]
    assert (poi.algo, poi.base) == ("qmix attack=unit_range profile=smac", "qmix profile=smac")
    assert poi.probability.value == 0.0  # every run without the attack order below every run with the whole profile
    result = CliRunner().invoke(app, ["report", str(root), "--at", str(AT), "--reps", "50", "--env-args-in-labels",
                                      "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    assert "| smax:2s3z | 0.000 [0.000, 0.000] | qmix attack=unit_range profile=smac | qmix profile=smac |" in \
        result.output
