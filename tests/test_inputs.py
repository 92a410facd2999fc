"""Inputs that cannot hurt a run (issue 9, item 5), each through the command line.

A usage error (a bad flag value) exits 2, a domain error (a run directory in use, a file where a
folder should be) exits 1; either way the user sees one line ``Error: ...`` naming the value, what
was expected and the fix, never a traceback.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import NO_ACTOR_FLAGS, error_lines
from typer.testing import CliRunner

from semzoo.cli import app
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.rundir import run_finished
from semzoo.runfiles import LOCK_FILE

USAGE_ERROR = 2
DOMAIN_ERROR = 1
FAST = ["--env", "matrix:two_step", "--algo", "vdn", "--n-envs", "2", "--batch-size", "4", "--buffer-size", "32",
        "--hidden-dim", "8", "--log-interval", "20", "--test-interval", "100", "--test-episodes", "4",
        "--no-tensorboard", "--run-name", "run", *NO_ACTOR_FLAGS]
"""A run of a few seconds; with --save-interval 60 it keeps checkpoints a few steps apart."""
SAVE_INTERVAL = 60
FOREVER = 10**9
START_TIMEOUT_S = 120
POLL_S = 0.05

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def assert_one_line_error(result, code: int, *needles: str) -> str:
    """The command exited ``code`` with exactly one stderr line ``Error: ...`` holding every needle (warnings, printed
    when they arise, may come before it)."""
    assert result.exit_code == code, result.output
    lines = [line for line in error_lines(result.stderr) if not line.startswith("Warning: ")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ----- the run-directory lock: separate processes, as two users would start them -----------------------------------


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "semzoo.cli", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(cli(*args), env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), env=child_env(), capture_output=True, text=True, timeout=START_TIMEOUT_S,
                          check=False)


def wait_until_writing(proc: subprocess.Popen, run_dir: Path) -> None:
    """Until ``proc`` holds the run's lock (RunLock writes its pid there) and has saved a checkpoint."""
    deadline = time.monotonic() + START_TIMEOUT_S
    lock = run_dir / LOCK_FILE
    while not (lock.exists() and lock.read_text().strip() == str(proc.pid) and CheckpointManager(run_dir).paths()):
        assert proc.poll() is None, f"the run ended early (exit {proc.returncode})"
        assert time.monotonic() < deadline, "the run did not start writing"
        time.sleep(POLL_S)


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def assert_refused(done: subprocess.CompletedProcess, run_dir: Path) -> None:
    assert done.returncode == DOMAIN_ERROR, done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"Error: run directory {run_dir} is in use by another semzoo process"), lines[0]


@pytest.mark.slow
def test_a_second_writer_of_a_run_directory_is_refused_and_a_killed_run_leaves_it_free(tmp_path):
    run_dir = tmp_path / "run"
    first = start("train", "--out", str(tmp_path), *FAST, "--steps", str(FOREVER), "--save-interval",
                  str(SAVE_INTERVAL))
    try:
        wait_until_writing(first, run_dir)
        assert_refused(run("train", "--out", str(tmp_path), *FAST, "--steps", "100"), run_dir)
        assert_refused(run("train", "--resume", str(run_dir)), run_dir)
        assert first.poll() is None, "the first run must still be running, untouched"
    finally:
        kill(first)

    # SIGKILL: the kernel drops the lock, so the run resumes; and a second --resume is refused meanwhile.
    resumed = start("train", "--resume", str(run_dir))
    try:
        wait_until_writing(resumed, run_dir)
        assert_refused(run("train", "--resume", str(run_dir)), run_dir)
    finally:
        kill(resumed)
    saved = max(int(p.stem.removeprefix("step_")) for p in CheckpointManager(run_dir).paths())
    done = run("train", "--resume", str(run_dir), "--steps", str(saved + SAVE_INTERVAL))
    assert done.returncode == 0, done.stderr
    assert run_finished(run_dir, saved + SAVE_INTERVAL)


# ----- --out ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["is_a_file", "under_a_file"])
def test_out_that_cannot_hold_a_run_directory_is_a_one_line_error(tmp_path, where):
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a folder")
    out = a_file if where == "is_a_file" else a_file / "runs"
    result = invoke("train", "--out", str(out), *FAST, "--steps", "20")
    assert_one_line_error(result, DOMAIN_ERROR, f"cannot create run directory {out / 'run'}", "choose another --out")
    assert a_file.read_text() == "not a folder"


# ----- env args -------------------------------------------------------------------------------------------------------


def test_a_word_where_the_penalty_game_wants_a_number_names_k(tmp_path):
    result = invoke("train", "--out", str(tmp_path), "--env", "matrix:penalty", "--env-arg", "k=abc", "--steps", "20")
    assert_one_line_error(result, USAGE_ERROR, "k='abc'", "expected a float")


def test_a_word_where_a_payoff_table_is_expected_names_payoff_and_the_json_rule(tmp_path):
    result = invoke("train", "--out", str(tmp_path), "--env", "matrix:custom", "--env-arg", "payoff=abc")
    assert_one_line_error(result, USAGE_ERROR, "payoff", "--env-arg payoff=abc was read as a string",
                          "values are JSON")


def test_a_string_env_arg_that_fails_deep_in_a_pettingzoo_env_is_named(tmp_path):
    pytest.importorskip("mpe2")
    env = ("--env", "pz:mpe2.simple_spread_v3:parallel_env")
    up_front = invoke("train", "--out", str(tmp_path), *env, "--env-arg", "N=abc", "--steps", "20")
    assert_one_line_error(up_front, USAGE_ERROR, "--env-arg N=abc was read as a string")
    # max_cycles passes the up-front build and fails on the first step: the error still names it.
    later = invoke("train", "--out", str(tmp_path), *env, "--env-arg", "max_cycles=abc", "--steps", "20",
                   "--no-tensorboard")
    assert_one_line_error(later, DOMAIN_ERROR, "--env-arg max_cycles=abc was read as a string")


@pytest.mark.smax
@pytest.mark.parametrize(("env_arg", "needles"), [
    ("seed=3", ("--env-arg seed=3", "use --seed 3")),
    ("episode_limit=50", ("--env-arg episode_limit=50", "use --episode-limit 50")),
    ("attack_mode=nope", ("attack_mode='nope'", "closest, random")),
    ("enemy_shoots=1", ("enemy_shoots=1", "expected true or false")),
])
def test_smax_env_args_that_would_fail_in_the_vectorised_env_are_refused_up_front(tmp_path, env_arg, needles):
    pytest.importorskip("jaxmarl")
    result = invoke("train", "--out", str(tmp_path), "--env", "smax:3m", "--env-arg", env_arg, "--steps", "20")
    assert_one_line_error(result, USAGE_ERROR, *needles)
    assert not list(tmp_path.glob("smax_3m_*"))  # no run directory, whatever its env arguments make its name


SMAX_TYPOS = [
    (("--env", "smax:3mm"), ("SMAX has no map '3mm'", "smac:3mm")),
    (("--env", "smax:3m", "--env-arg", "reward=sprase"), ("reward='sprase'", "dense, sparse")),
    (("--env", "smax:3m", "--env-arg", "fixed_start=true"), ("unknown env argument 'fixed_start'", "fixed_starts")),
    (("--env", "smax:3m", "--env-arg", "fixed_starts=yes"), ("fixed_starts='yes'", "true or false")),
    (("--env", "smax:3m", "--env-arg", "time_limit=50"), ("time_limit=50", "smax, smac")),
    (("--env", "smax:3m", "--env-arg", "spawn=left"), ("spawn='left'", "smax, smac")),
    (("--env", "smax:smacv2_5_units", "--env-arg", "profile=smac"), ("has no StarCraft II SMAC map",)),
]
"""A typo in a SMAX env, and what its one line names."""


@pytest.mark.parametrize(("args", "needles"), SMAX_TYPOS, ids=lambda x: " ".join(x) if x[0].startswith("-") else "")
def test_a_smax_typo_is_one_line_without_a_note_on_the_profile_the_run_added(tmp_path, args, needles):
    result = invoke("train", "--out", str(tmp_path), *args, "--steps", "20")
    line = assert_one_line_error(result, USAGE_ERROR, *needles)
    assert "note" not in line


def test_a_smax_argument_whose_values_are_words_gets_no_note_on_strings(tmp_path):
    result = invoke("train", "--out", str(tmp_path), "--env", "smax:3m", "--env-arg", "profile=smac",
                    "--env-arg", "attack_mode=random", "--env-arg", "enemy_shoots=1")
    line = assert_one_line_error(result, USAGE_ERROR, "enemy_shoots=1")
    assert "note" not in line  # profile=smac and attack_mode=random are words by design, not misread numbers


SMAX_CHECK_SCRIPT = """
import sys
from semzoo.cli import main
sys.argv = ["semzoo", "train", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    print(stop.code, *sorted(name for name in ("jax", "jaxmarl", "torch") if name in sys.modules))
"""


@pytest.mark.parametrize("args", [("--env", "smax:3mm"), ("--env", "smax:3m", "--env-arg", "reward=sprase")])
def test_a_smax_typo_is_refused_before_torch_or_jax_import(tmp_path, args):
    done = subprocess.run([sys.executable, "-c", SMAX_CHECK_SCRIPT, *args, "--out", str(tmp_path)], env=child_env(),
                          capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
    assert done.stdout.split() == [str(USAGE_ERROR)], (done.stdout, done.stderr)  # no module of the training stack
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: "), done.stderr


# ----- a corrupt checkpoint header -----------------------------------------------------------------------------------


def test_a_garbage_checkpoint_header_falls_back_to_the_previous_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    trained = invoke("train", "--out", str(tmp_path), *FAST, "--steps", "200", "--save-interval", str(SAVE_INTERVAL))
    assert trained.exit_code == 0, trained.output
    newest, previous = CheckpointManager(run_dir).paths()
    magic, _, rest = newest.read_bytes().split(b" ", 2)
    newest.write_bytes(magic + b" v1? " + rest)  # the format field is no longer a number
    previous_steps = int(previous.stem.removeprefix("step_"))
    warning = f"Warning: checkpoint {newest} is corrupt"

    evaluated = invoke("evaluate", str(run_dir), "--episodes", "4")
    assert evaluated.exit_code == 0, evaluated.output
    assert warning in evaluated.stderr and f"using the earlier {previous.name}" in evaluated.stderr
    assert f"checkpoint at {previous_steps:,} env steps" in evaluated.stdout

    resumed = invoke("train", "--resume", str(run_dir), "--steps", "260")
    assert resumed.exit_code == 0, resumed.output
    assert warning in resumed.stderr and f"resuming {run_dir} at {previous_steps:,} env steps" in resumed.stderr
    assert run_finished(run_dir, 260)


# ----- sweeps --------------------------------------------------------------------------------------------------------


def sweep(out: Path, envs: str, *extra: str):
    return invoke("sweep", "--envs", envs, "--algos", "vdn", "--seeds", "1", "--steps", "20", "--out", str(out), *extra)


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if the sweep gets as far as starting Ray."""
    import semzoo.run.sweep

    def run_sweep(*args, **kwargs):
        raise AssertionError("the sweep started Ray before refusing its input")

    monkeypatch.setattr(semzoo.run.sweep, "run_sweep", run_sweep)


@pytest.mark.parametrize(("envs", "extra", "code", "needles"), [
    ("matrix:climbing,nope:x", (), USAGE_ERROR, ("unknown env id 'nope:x'",)),
    # A package that is not installed is the user's environment (exit 1); a misspelt module of one is bad input.
    ("pz:no_such_module:env", (), DOMAIN_ERROR, ("cannot import module 'no_such_module'", "install it")),
    ("pz:pettingzoo.no_such_env_v0:parallel_env", (), USAGE_ERROR,
     ("cannot import module 'pettingzoo.no_such_env_v0'", "check the module's spelling")),
    ("matrix:penalty", ("--set", 'env_args={"k": "abc"}'), USAGE_ERROR, ("k='abc'",)),
])
def test_sweep_refuses_a_bad_env_before_ray_starts(tmp_path, no_ray, envs, extra, code, needles):
    assert_one_line_error(sweep(tmp_path, envs, *extra), code, *needles)


@pytest.mark.smax
def test_sweep_refuses_a_smax_env_arg_that_a_run_owns(tmp_path, no_ray):
    pytest.importorskip("jaxmarl")
    result = sweep(tmp_path, "smax:3m", "--set", 'env_args={"seed": 3}')
    assert_one_line_error(result, USAGE_ERROR, "use --seed 3")


@pytest.mark.ray
def test_sweep_address_auto_without_a_cluster_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from ray._private import services

    # Other test processes on this machine may run a local Ray, which 'auto' would join: hide them.
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_gcs_addresses", functools.lru_cache(list))  # Ray clears its cache
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)
    result = sweep(tmp_path, "matrix:climbing", "--address", "auto")
    assert_one_line_error(result, DOMAIN_ERROR, "cannot connect to a Ray cluster at --address 'auto'",
                          "Could not find any running Ray instance", "ray start --head")
    import ray

    assert not ray.is_initialized()



@pytest.mark.parametrize("device", ["tpu", "cuda:banana"])
def test_evaluate_with_a_bad_device_is_a_usage_error(tmp_path, device):
    assert_one_line_error(invoke("evaluate", str(tmp_path), "--device", device), USAGE_ERROR, f"device {device!r}")


def test_a_smax_run_from_python_refuses_the_env_args_it_sets_itself():
    pytest.importorskip("jaxmarl")
    from semzoo import TrainConfig, Trainer

    for key, flag in (("episode_limit", "--episode-limit"), ("seed", "--seed")):
        with pytest.raises(ValueError, match=f"--env-arg {key}=50.*use {flag}"):
            Trainer(TrainConfig(env="smax:3m", env_args={key: 50}, n_envs=1, device="cpu"))
