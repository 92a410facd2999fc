"""`train --resume`, `evaluate`, `sweep`, `plot`, `table` on bad input: one-line errors, exit 1, no traceback."""

from __future__ import annotations

import shutil

import pytest
from conftest import NO_ACTOR_FLAGS, error_lines
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.run.rundir import run_finished

runner = CliRunner()
TINY = ["--steps", "40", "--n-envs", "4", "--batch-size", "4", "--buffer-size", "16", "--hidden-dim", "8",
        "--test-episodes", "4", "--log-interval", "20", "--test-interval", "20", "--save-interval", "20",
        "--memory-capacity", "1000", "--no-tensorboard", *NO_ACTOR_FLAGS]


def invoke(*args: str):
    return runner.invoke(app, list(args))


def tiny_run(out, algo="vdn", env="matrix:climbing", run_name="run"):
    result = invoke("train", "--env", env, "--algo", algo, "--out", str(out), "--run-name", run_name, *TINY)
    assert result.exit_code == 0, result.output
    return out / run_name


def assert_one_line_error(result, needle, code=1):
    text = result.output.strip()
    assert result.exit_code == code, text
    assert needle in text, text
    assert "Traceback" not in text and len(error_lines(text)) == 1, text


def test_resume_extends_a_finished_run(tmp_path):
    run_dir = tiny_run(tmp_path)
    result = invoke("train", "--resume", str(run_dir), "--steps", "80")
    assert result.exit_code == 0, result.output
    assert "resuming" in result.output and "after 80 steps" in result.output
    assert run_finished(run_dir, 80)


def test_resume_warns_and_uses_the_previous_checkpoint_when_the_last_is_corrupt(tmp_path):
    run_dir = tiny_run(tmp_path)
    newest, older = sorted((run_dir / "checkpoints").glob("*.ckpt"), reverse=True)
    newest.write_bytes(newest.read_bytes()[:100])
    result = invoke("train", "--resume", str(run_dir))
    assert result.exit_code == 0, result.output
    assert f"using the earlier {older.name}" in result.output and "Warning:" in result.output
    assert run_finished(run_dir, 40)


@pytest.mark.parametrize("command", [["train", "--resume"], ["evaluate"]])
def test_missing_run_directory(tmp_path, command):
    assert_one_line_error(invoke(*command, str(tmp_path / "nope")), "does not exist")


@pytest.mark.parametrize("command", [["train", "--resume"], ["evaluate"]])
def test_corrupt_checkpoint_with_no_earlier_one(tmp_path, command):
    run_dir = tiny_run(tmp_path)
    for path in (run_dir / "checkpoints").glob("*.ckpt"):
        path.write_bytes(path.read_bytes()[:-1])
    assert_one_line_error(invoke(*command, str(run_dir)), "no earlier valid checkpoint")


@pytest.mark.parametrize("command", [["train", "--resume"], ["evaluate"]])
@pytest.mark.parametrize(("other_algo", "other_env"), [("qmix", "matrix:climbing"), ("vdn", "matrix:penalty")])
def test_checkpoint_of_another_env_or_algorithm(tmp_path, command, other_algo, other_env):
    mine = tiny_run(tmp_path, run_name="mine")
    other = tiny_run(tmp_path, algo=other_algo, env=other_env, run_name="other")
    shutil.rmtree(mine / "checkpoints")
    shutil.copytree(other / "checkpoints", mine / "checkpoints")
    assert_one_line_error(invoke(*command, str(mine)), f"belongs to env {other_env!r} with algo {other_algo!r}")


def test_resume_cannot_shorten_a_run(tmp_path):
    run_dir = tiny_run(tmp_path)
    assert_one_line_error(invoke("train", "--resume", str(run_dir), "--steps", "10"), "steps=10 is fewer than")


@pytest.mark.parametrize("command", ["plot", "table"])
def test_unknown_metric(tmp_path, command):
    tiny_run(tmp_path)
    assert_one_line_error(invoke(command, str(tmp_path), "--metric", "nope"), "unknown metric 'nope'")


@pytest.mark.parametrize("command", ["plot", "table"])
def test_plot_and_table_of_a_missing_folder(tmp_path, command):
    assert_one_line_error(invoke(command, str(tmp_path / "nope")), "does not exist")


def test_fresh_train_into_a_finished_run_directory(tmp_path):
    tiny_run(tmp_path)
    result = invoke("train", "--env", "matrix:climbing", "--algo", "vdn", "--out", str(tmp_path), "--run-name", "run",
                    *TINY)
    assert_one_line_error(result, "--resume")


@pytest.mark.parametrize(("args", "needle", "code"), [
    (["--algos", "dqn"], "unknown algorithm 'dqn'", 2),
    (["--set", "learner.nope=1"], "learner.nope", 2),
    (["--seeds", "0"], "--seeds 0", 2),
])
def test_sweep_bad_input(tmp_path, args, needle, code):
    base = {"--envs": "matrix:climbing", "--algos": "vdn", "--out": str(tmp_path)}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    flat = [item for pair in base.items() for item in pair]
    assert_one_line_error(invoke("sweep", *flat), needle, code)


def test_a_bad_value_with_resume_is_a_usage_error_as_without_it(tmp_path):
    steps = "-5"
    run_dir = tiny_run(tmp_path)
    fresh = invoke("train", "--env", "matrix:climbing", "--out", str(tmp_path / "fresh"), "--steps", steps)
    resumed = invoke("train", "--resume", str(run_dir), "--steps", steps)
    assert fresh.exit_code == 2, fresh.output
    assert_one_line_error(resumed, "steps=", code=2)
    other = tiny_run(tmp_path, run_name="other")
    group = invoke("train", "--resume", str(run_dir), "--resume", str(other), "--keep-checkpoints", "-1")
    assert_one_line_error(group, "keep_checkpoints=-1", code=2)


@pytest.mark.parametrize("command", [["train", "--resume"], ["evaluate"]])
def test_a_file_given_as_a_run_directory_is_named_as_a_file(tmp_path, command):
    path = tmp_path / "metrics.csv"
    path.write_text("env_steps\n")
    assert_one_line_error(invoke(*command, str(path)), f"{path} is a file, not a run directory")
