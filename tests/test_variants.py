"""Runs that vary a setting (the paper's lambda sweep): their labels, their names in a sweep's grid, and a
report that keeps each setting apart and pairs every memory variant with its base algorithm.
"""

from __future__ import annotations

import csv
import json

import pytest
from conftest import NO_ACTOR, resolved_config
from typer.testing import CliRunner

from semzoo.analysis.pairing import compared_pairs, memory_pairs, setting_pairs
from semzoo.analysis.report import load_runs, score_table
from semzoo.cli import app
from semzoo.config import LearnerConfig, MemoryConfig, TrainConfig
from semzoo.mixers.settings import QPLEXSettings
from semzoo.run.rundir import default_run_name
from semzoo.run.sweep import parse_grid, plan_trials
from semzoo.runfiles import METRIC_FIELDS, run_labels, run_variant

LAMS = [0, 0.05, 0.1, 0.3, 0.5, 1]


def test_a_run_at_the_paper_defaults_is_labelled_by_its_algorithm_alone():
    assert run_labels([TrainConfig(), TrainConfig(algo="qmix")]) == ["sem-qmix", "qmix"]
    assert run_variant(TrainConfig(algo="qmix")) == {}


def test_settings_that_differ_among_the_runs_join_their_labels_in_config_order():
    configs = [TrainConfig(), TrainConfig(memory=MemoryConfig(lam=0.3, miss_rule="zero"), learner=LearnerConfig(lr=1e-3)),
               TrainConfig(memory=MemoryConfig(lam=0)), TrainConfig(memory=MemoryConfig(lam=1))]
    assert run_labels(configs) == ["sem-qmix", "sem-qmix lam=0.3 miss_rule=zero lr=0.001", "sem-qmix lam=0",
                                   "sem-qmix lam=1"]


def test_a_setting_every_run_shares_names_nothing_apart():
    small = LearnerConfig(batch_size=8)
    configs = [TrainConfig(algo="qmix", learner=small), TrainConfig(learner=small),
               TrainConfig(learner=small, memory=MemoryConfig(lam=0.5))]
    assert run_variant(configs[0]) == {"learner.batch_size": 8}
    assert run_labels(configs) == ["qmix", "sem-qmix", "sem-qmix lam=0.5"]


def test_memory_settings_do_not_label_an_algorithm_without_memory():
    configs = [TrainConfig(algo="qmix", memory=MemoryConfig(lam=0.3)), TrainConfig(algo="saem-vdn"),
               TrainConfig(algo="saem-vdn", memory=MemoryConfig(lam=0.3))]
    assert run_labels(configs) == ["qmix", "saem-vdn", "saem-vdn lam=0.3"]


def test_a_preset_labels_its_runs_by_its_name_and_they_pair_with_their_base_in_the_preset():
    """``--preset authors-smac`` sets eight QPLEX fields; a report names it once, and a field given another
    value than the preset's still shows. A preset that sets nothing for an algorithm (QMIX) names nothing."""
    configs = [TrainConfig(algo="qplex"), TrainConfig(algo="sem-qplex"),
               resolved_config(algo="qplex", preset="authors-smac"), resolved_config(algo="sem-qplex", preset="authors-smac"),
               resolved_config(algo="qplex", preset="authors-smac", components={"qplex": QPLEXSettings(qatten_heads=8)}),
               resolved_config(algo="qmix", preset="authors-smac")]
    labels = run_labels(configs)
    assert labels == ["qplex", "sem-qplex", "qplex preset=authors-smac", "sem-qplex preset=authors-smac",
                      "qplex preset=authors-smac qatten_heads=8", "qmix"]
    assert run_variant(configs[2]) == {"preset": "authors-smac"}
    assert configs[2].learner.updates_per_episode == 2 and configs[2].settings("qplex").qplex_transformation == "qatten"
    assert sorted(memory_pairs(labels)) == [("sem-qplex", "qplex"),
                                            ("sem-qplex preset=authors-smac", "qplex preset=authors-smac")]


def test_a_grid_axis_names_its_runs_and_keeps_the_default_value_at_the_plain_name(tmp_path):
    trials = plan_trials(envs=["smax:2s3z"], algos=["qmix", "sem-qmix"], seeds=[0, 1], steps=1000, out=tmp_path,
                         grid={"memory.lam": LAMS})
    names = [t.name for t in trials]
    assert names[:2] == ["smax_2s3z_qmix_seed0", "smax_2s3z_qmix_seed1"]  # one cell: qmix has no memory
    assert [n for n in names if n.endswith("seed0")][1:] == [
        "smax_2s3z_sem-qmix_lam=0_seed0", "smax_2s3z_sem-qmix_lam=0.05_seed0", "smax_2s3z_sem-qmix_seed0",
        "smax_2s3z_sem-qmix_lam=0.3_seed0", "smax_2s3z_sem-qmix_lam=0.5_seed0", "smax_2s3z_sem-qmix_lam=1_seed0"]
    assert len(trials) == 2 + 2 * len(LAMS)
    lam_of = {t.name: t.config.memory.lam for t in trials}
    assert lam_of["smax_2s3z_sem-qmix_lam=0.3_seed1"] == 0.3 and lam_of["smax_2s3z_sem-qmix_seed1"] == 0.1
    plain = plan_trials(envs=["smax:2s3z"], algos=["sem-qmix"], seeds=[0], steps=1000, out=tmp_path)
    assert plain[0].name == default_run_name(plain[0].config) == "smax_2s3z_sem-qmix_seed0"
    # env arguments typed are in the name, after the algorithm; the profile a map gets by default is not
    own_rules = plan_trials(envs=["smax:2s3z"], algos=["sem-qmix"], seeds=[0], steps=1000, out=tmp_path,
                            overrides={"env_args": {"profile": "smax", "fixed_starts": True}}, grid={"memory.lam": [0.3]})
    assert own_rules[0].name == "smax_2s3z_sem-qmix_fixed_starts=true_profile=smax_lam=0.3_seed0"


def test_two_axes_make_their_product(tmp_path):
    trials = plan_trials(envs=["matrix:climbing"], algos=["sem-vdn"], seeds=[0], steps=100, out=tmp_path,
                         grid={"memory.lam": [0.1, 0.5], "learner.lr": [5e-4, 1e-3]})
    assert [t.name for t in trials] == [
        "matrix_climbing_sem-vdn_seed0", "matrix_climbing_sem-vdn_lr=0.001_seed0",
        "matrix_climbing_sem-vdn_lam=0.5_seed0", "matrix_climbing_sem-vdn_lam=0.5_lr=0.001_seed0"]


@pytest.mark.parametrize(("grid", "overrides", "message"), [
    ({"memory.nope": [1]}, {}, "config key 'memory.nope'"),
    ({"seed": [1, 2]}, {}, "use --seeds"),
    ({"memory.lam": []}, {}, "has no values"),
    ({"memory.lam": [0.3]}, {"memory.lam": 0.5}, "both an override and a grid axis"),
    ({"memory.lam": [-1.0]}, {}, "lam"),
])
def test_a_bad_grid_is_refused_before_anything_runs(tmp_path, grid, overrides, message):
    with pytest.raises(ValueError, match=message):
        plan_trials(envs=["matrix:climbing"], algos=["sem-vdn"], seeds=[0], steps=100, out=tmp_path,
                    overrides=overrides, grid=grid)


def test_parse_grid_reads_json_values_and_bare_words():
    assert parse_grid(["memory.lam=0,0.05,1", "memory.miss_rule=zero,target"]) == {
        "memory.lam": [0, 0.05, 1], "memory.miss_rule": ["zero", "target"]}
    for bad in ["memory.lam", "memory.lam=", "=1,2", "memory.lam=1,,2"]:
        with pytest.raises(ValueError, match="expected KEY=V1,V2"):
            parse_grid([bad])
    with pytest.raises(ValueError, match="given twice"):
        parse_grid(["memory.lam=0", "memory.lam=1"])


def test_cli_sweep_refuses_a_malformed_grid_with_a_usage_error(tmp_path):
    out = CliRunner().invoke(app, ["sweep", "--envs", "matrix:climbing", "--algos", "sem-vdn", "--steps", "100",
                                   "--out", str(tmp_path), "--grid", "memory.lam"])
    assert out.exit_code == 2 and "expected KEY=V1,V2" in out.output and "Traceback" not in out.output


def test_memory_pairs_pair_each_variant_with_its_base():
    labels = ["qmix", "sem-qmix", "sem-qmix lam=0.3", "sem-qmix lam=0", "qmix lr=0.001", "sem-qmix lr=0.001",
              "saem-vdn lam=0.5"]
    assert memory_pairs(labels) == [("sem-qmix", "qmix"), ("sem-qmix lam=0", "qmix"), ("sem-qmix lam=0.3", "qmix"),
                                    ("sem-qmix lr=0.001", "qmix lr=0.001")]


def write_run(root, trial, win_rate: float) -> None:
    run_dir = trial.run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(trial.config.to_dict()))
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(METRIC_FIELDS)
        writer.writerow([1000, 10, 10, 0.1, "test_win_rate", win_rate])


def test_the_report_keeps_each_lambda_apart(tmp_path):
    trials = plan_trials(envs=["smax:2s3z"], algos=["qmix", "sem-qmix"], seeds=[0, 1], steps=1000, out=tmp_path,
                         grid={"memory.lam": [0.1, 0.5]})
    for trial in trials:
        lam = trial.config.memory.lam if trial.config.algo == "sem-qmix" else 0.0
        write_run(tmp_path, trial, win_rate=lam + trial.config.seed / 10)
    rows = {(r.algo, r.env): r for r in score_table(load_runs(tmp_path), [1000], "test_win_rate")}
    assert rows[("qmix", "smax:2s3z profile=smac")].value == pytest.approx(0.05)
    assert rows[("sem-qmix", "smax:2s3z profile=smac")].value == pytest.approx(0.15)
    assert rows[("sem-qmix lam=0.5", "smax:2s3z profile=smac")].value == pytest.approx(0.55)
    assert all(r.seeds == 2 for (_, env), r in rows.items() if env == "smax:2s3z profile=smac")


def test_the_report_keeps_runs_with_other_env_arguments_apart(tmp_path):
    trials = plan_trials(envs=["smax:2s3z"], algos=["qmix"], seeds=[0, 1], steps=1000, out=tmp_path / "random")
    trials += plan_trials(envs=["smax:2s3z"], algos=["qmix"], seeds=[0, 1], steps=1000, out=tmp_path / "fixed",
                          overrides={"env_args": {"fixed_starts": True}})
    for trial in trials:
        write_run(tmp_path, trial, win_rate=(0.5 if "fixed_starts" in trial.config.env_args else 0.0)
                  + trial.config.seed / 10)
    rows = {(r.algo, r.env): r for r in score_table(load_runs(tmp_path), [1000], "test_win_rate")}
    assert rows[("qmix", "smax:2s3z profile=smac")].value == pytest.approx(0.05)  # SMAC's rules, the default on 2s3z
    assert rows[("qmix", "smax:2s3z fixed_starts=true profile=smac")].value == pytest.approx(0.55)
    assert {r.seeds for r in rows.values()} == {2}


@pytest.mark.ray
def test_a_cli_sweep_with_a_grid_trains_each_value_and_the_table_shows_them_apart(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    sets = {"n_envs": 4, "test_interval": 40, "test_episodes": 4, "log_interval": 20, "save_interval": 0,
            "learner.batch_size": 8, "learner.buffer_size": 32, "memory.capacity": 1000,
            "memory.pending_size": 20, "agent.hidden_dim": 8, **NO_ACTOR}
    args = ["sweep", "--envs", "matrix:climbing", "--algos", "vdn,sem-vdn", "--seeds", "1", "--steps", "80",
            "--out", str(out), "--num-cpus", "2", "--grid", "memory.lam=0.1,0.5"]
    for key, value in sets.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    runner = CliRunner()
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3 trials in" in result.output
    assert sorted(p.parent.name for p in out.glob("*/final.json")) == [
        "matrix_climbing_sem-vdn_lam=0.5_seed0", "matrix_climbing_sem-vdn_seed0", "matrix_climbing_vdn_seed0"]
    assert json.loads((out / "matrix_climbing_sem-vdn_lam=0.5_seed0" / "config.json").read_text())["memory"]["lam"] == 0.5
    table = runner.invoke(app, ["table", str(out), "--at", "80", "--metric", "test_return_mean"])
    assert table.exit_code == 0, table.output
    assert "| sem-vdn lam=0.5 |" in table.output and "| sem-vdn |" in table.output and "| vdn |" in table.output


def test_the_report_draws_and_tabulates_the_sensitivity_to_the_swept_setting(tmp_path):
    pytest.importorskip("rliable")
    from semzoo.analysis.protocol import report
    from semzoo.analysis.sensitivity import sensitivities

    root = tmp_path / "runs"
    trials = plan_trials(envs=["smax:2s3z"], algos=["qmix", "sem-qmix"], seeds=range(4), steps=1000, out=root,
                         grid={"memory.lam": [0, 0.1, 0.5]})
    for trial in trials:  # seeds score lam + 0.1, + 0.2, + 0.3, + 0.4 (qmix: as lam 0): IQM = lam + 0.25
        lam = trial.config.memory.lam if trial.config.algo == "sem-qmix" else 0.0
        write_run(root, trial, win_rate=lam + (trial.config.seed + 1) / 10)
    (found,) = sensitivities(load_runs(root))
    assert (found.algo, found.key, found.name, found.base) == ("sem-qmix", "memory.lam", "lam", "qmix")
    assert found.values == {"sem-qmix lam=0": 0.0, "sem-qmix": 0.1, "sem-qmix lam=0.5": 0.5}
    done = report(root, [1000], reps=50, out=tmp_path / "report")
    table = done.markdown.split("## Sensitivity of sem-qmix to lam")[1]
    rows = [line for line in table.splitlines() if line.startswith("| smax:2s3z")]
    assert [row.split("|")[2].strip() for row in rows] == ["0", "0.1", "0.5", "qmix (no memory)"]
    assert [row.split("|")[3].split("[")[0].strip() for row in rows] == ["0.250", "0.350", "0.750", "0.250"]
    figure = tmp_path / "report" / "sensitivity_sem-qmix_lam.png"
    assert figure in done.files and figure.stat().st_size > 10_000
    # each lambda against the default's runs: lam 0.5's seeds (0.6-0.9) beat every default seed (0.2-0.5)
    poi = {(row.algo, row.base): row.probability.value for row in done.improvements if row.step == 1000}
    assert poi[("sem-qmix lam=0.5", "sem-qmix")] == 1.0 and poi[("sem-qmix lam=0", "sem-qmix")] < 0.5
    assert "| 1.000 [1.000, 1.000] | sem-qmix lam=0.5 | sem-qmix | 4 / 4 |" in done.markdown


def test_a_full_grid_gives_each_settings_slice_through_the_defaults_of_the_others(tmp_path):
    from semzoo.analysis.sensitivity import sensitivities

    trials = plan_trials(envs=["smax:2s3z"], algos=["qmix", "sem-qmix"], seeds=range(2), steps=1000, out=tmp_path,
                         grid={"memory.lam": [0.1, 0.5], "learner.lr": [5e-4, 1e-3]})
    for trial in trials:
        write_run(tmp_path, trial, win_rate=0.5)
    found = {(s.algo, s.key): s for s in sensitivities(load_runs(tmp_path))}
    assert sorted(found) == [("qmix", "learner.lr"), ("sem-qmix", "learner.lr"), ("sem-qmix", "memory.lam")]
    assert found[("qmix", "learner.lr")].values == {"qmix": 5e-4, "qmix lr=0.001": 1e-3}
    # lam at the default lr (5e-4): "sem-qmix lam=0.5 lr=0.001" is in neither slice
    assert found[("sem-qmix", "memory.lam")].values == {"sem-qmix": 0.1, "sem-qmix lam=0.5": 0.5}
    assert found[("sem-qmix", "memory.lam")].base == "qmix"
    assert found[("sem-qmix", "learner.lr")].values == {"sem-qmix": 5e-4, "sem-qmix lr=0.001": 1e-3}
    assert found[("sem-qmix", "learner.lr")].base is None  # its two labels pair with qmix and qmix lr=0.001


def test_a_sensitivity_of_another_memory_is_drawn_against_its_base_not_sem(tmp_path):
    from semzoo.analysis.sensitivity import sensitivities

    trials = plan_trials(envs=["smax:2s3z"], algos=["qmix", "sem-qmix", "emc-qmix"], seeds=range(2), steps=1000,
                         out=tmp_path, grid={"memory.lam": [0.1, 0.5]})
    for trial in trials:
        write_run(tmp_path, trial, win_rate=0.5)
    found = {s.algo: s for s in sensitivities(load_runs(tmp_path))}
    assert found["emc-qmix"].base == "qmix" and found["sem-qmix"].base == "qmix"


def test_lambda_and_table_size_swept_apart_in_one_folder_give_both_figures(tmp_path):
    """Issue 26's sensitivity study: lambda around |Q^S| = 1e6 and |Q^S| around lambda = 0.1, two sweeps, one folder."""
    pytest.importorskip("rliable")
    from semzoo.analysis.protocol import report
    from semzoo.analysis.sensitivity import sensitivities

    root = tmp_path / "runs"
    lam = plan_trials(envs=["smax:2s3z"], algos=["qmix", "sem-qmix"], seeds=range(3), steps=1000, out=root,
                      grid={"memory.lam": [0.05, 0.1, 0.5]})
    size = plan_trials(envs=["smax:2s3z"], algos=["sem-qmix"], seeds=range(3), steps=1000, out=root,
                       grid={"memory.capacity": [10_000, 1_000_000]})
    written = set()
    for trial in [*lam, *size]:
        if trial.run_dir in written:  # lambda 0.1 with |Q^S| 1e6 is in both sweeps: one run
            continue
        written.add(trial.run_dir)
        memory = trial.config.memory
        score = 0.2 if trial.config.algo == "qmix" else memory.lam + (0.0 if memory.capacity == 10_000 else 0.3)
        write_run(root, trial, win_rate=score + trial.config.seed / 100)
    found = {s.key: s for s in sensitivities(load_runs(root))}
    assert found["memory.lam"].values == {"sem-qmix lam=0.05": 0.05, "sem-qmix": 0.1, "sem-qmix lam=0.5": 0.5}
    assert found["memory.capacity"].values == {"sem-qmix capacity=10000": 1e4, "sem-qmix": 1e6}
    assert found["memory.lam"].base == found["memory.capacity"].base == "qmix"
    done = report(root, [1000], reps=50, out=tmp_path / "report")
    for name in ("lam", "capacity"):
        assert f"## Sensitivity of sem-qmix to {name}" in done.markdown
        assert (tmp_path / "report" / f"sensitivity_sem-qmix_{name}.png").stat().st_size > 10_000


def test_a_settings_variant_pairs_with_the_runs_it_departs_from():
    """The runtime study's labels: the former runtime and a factor run each against the runs they depart from; a
    lambda sweep's variant against its default (and, as a memory variant, against the base)."""
    labels = ["qmix", "qmix runtime=semzoo-0.2", "qmix runtime=semzoo-0.2 timeout_as_terminal=true",
              "sem-qmix", "sem-qmix lam=0.3"]
    assert sorted(setting_pairs(labels)) == [
        ("qmix runtime=semzoo-0.2", "qmix"),
        ("qmix runtime=semzoo-0.2 timeout_as_terminal=true", "qmix"),
        ("qmix runtime=semzoo-0.2 timeout_as_terminal=true", "qmix runtime=semzoo-0.2"),
        ("sem-qmix lam=0.3", "sem-qmix")]
    pairs = compared_pairs(labels)
    assert len(pairs) == len(set(pairs)) and ("sem-qmix lam=0.3", "qmix") in pairs and ("sem-qmix", "qmix") in pairs
