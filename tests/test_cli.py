"""The command line through typer's CliRunner."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.run.rundir import read_metrics

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_short_train_run_writes_metrics(tmp_path):
    result = invoke("train", "--env", "matrix:climbing", "--algo", "vdn", "--steps", "200", "--out", str(tmp_path),
                    "--batch-size", "8", "--buffer-size", "64", "--test-episodes", "8", "--log-interval", "100")
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "matrix_climbing_vdn_seed0"
    assert {"loss", "test_return_mean"} <= {r["name"] for r in read_metrics(run_dir)}
    assert "greedy return" in result.output and "optimum 11" in result.output


def test_custom_payoff_passes_through_env_arg(tmp_path):
    result = invoke("train", "--env", "matrix:custom", "--env-arg", "payoff=[[8,-12],[-12,0]]", "--algo", "qmix",
                    "--steps", "100", "--out", str(tmp_path), "--batch-size", "4", "--buffer-size", "32",
                    "--test-episodes", "8")
    assert result.exit_code == 0, result.output
    assert "optimum 8" in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--env", "nope:thing"), "unknown env id 'nope:thing'"),
        (("--env", "matrix:not_a_game"), "not_a_game"),
        (("--algo", "dqn"), "unknown algorithm 'dqn'"),
        (("--steps", "-5"), "steps=-5"),
        (("--batch-size", "64", "--buffer-size", "32"), "batch_size=64 is larger than buffer_size=32"),
        (("--lam", "2"), "lam=2"),
        (("--env-arg", "oops"), "KEY=VALUE"),
    ],
)
def test_bad_input_is_a_one_line_error_without_traceback(tmp_path, args, needle):
    env = () if "--env" in args else ("--env", "matrix:climbing")
    result = invoke("train", "--out", str(tmp_path), *env, *args)
    assert result.exit_code in (1, 2)
    text = result.output.strip()
    assert needle in text
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text


def test_envs_lists_matrix_games():
    result = invoke("envs")
    assert result.exit_code == 0
    for game in ("climbing", "penalty", "qtran", "additive", "two_step"):
        assert f"matrix:{game}" in result.output


@pytest.mark.parametrize(("args", "needle"), [(("train", "--bogus-flag"), "No such option: --bogus-flag"),
                                              (("train", "--steps", "abc"), "--steps")])
def test_console_usage_errors_are_one_line_with_exit_2(args, needle):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "semzoo.cli", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
