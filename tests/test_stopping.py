"""SIGINT or SIGTERM during training: the run checkpoints the iteration it arrives in and stops; resume is exact.

The signal is sent from the run's own progress callback, so it arrives at a known iteration (here one that
is not a periodic checkpoint's), and the resumed run is compared with the run that was never stopped.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time

import pytest
from golden_runs import metric_rows
from test_checkpoint import assert_same, comparable_rows
from test_kill_resume import child_env, cli
from test_multi import SEEDS, config_of
from test_overlap import acting_threads, resumable_config

from semzoo import resume, resume_seeds, train, train_seeds
from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.rundir import logged_steps, run_finished
from semzoo.run.stopping import RunStopped, stop_on_signals

TOTAL = 240
STOP_AT = 130  # two_step, 4 envs: 8 env steps an iteration, so the stop lands at 136, between saves at 120 and 160
START_TIMEOUT_S = 300  # a Ray start under a loaded machine can take minutes
STOP_TIMEOUT_S = 60


def signal_at(env_steps: int, *signums: int):
    """A progress callback that sends ``signums`` to this process once the run reaches ``env_steps``."""
    sent = []

    def progress(state):
        if state["env_steps"] >= env_steps and not sent:
            sent.append(state["env_steps"])
            for signum in signums:
                os.kill(os.getpid(), signum)

    return progress


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("sequential", [False, True], ids=["overlapped", "sequential"])
def test_a_stopped_run_checkpoints_its_iteration_and_resumes_to_the_run_never_stopped(tmp_path, sequential, signum):
    straight_dir, _ = train(resumable_config(tmp_path / "straight", steps=TOTAL, sequential=sequential),
                            progress=False, tensorboard=False)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(RunStopped) as stopped:
        train(resumable_config(tmp_path / "split", steps=TOTAL, sequential=sequential),
              progress=signal_at(STOP_AT, signum), tensorboard=False)
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # the run's handlers are gone
    assert acting_threads() == []
    split_dir = tmp_path / "split" / "run"
    stop = stopped.value
    assert stop.exit_code == 128 + signum and stop.run_dirs == [split_dir]
    assert f"--resume {split_dir}" in str(stop) and signal.Signals(signum).name in str(stop)
    _, payload = CheckpointManager(split_dir).load_latest()
    counters = payload["counters"]
    assert counters["env_steps"] == stop.env_steps[0] == 136  # the iteration the signal arrived in
    assert counters["last_save"] == 120  # off the periodic schedule, which stays as it was
    assert not run_finished(split_dir)

    resume(split_dir, progress=False, tensorboard=False)
    _, straight = CheckpointManager(straight_dir).load_latest()
    _, split = CheckpointManager(split_dir).load_latest()
    for key in ("learner", "buffer", "memory", "rng", "loop", "counters", "best", *(() if sequential else ("acting",))):
        if key == "counters":
            straight[key].pop("wall_time"), split[key].pop("wall_time")
        assert_same(straight[key], split[key], key)
    rows = comparable_rows(straight_dir)
    assert len(rows) > 50 and rows == comparable_rows(split_dir)
    # the resumed run saved where the run never stopped did (the stop's own checkpoint pruned as an old one)
    assert [p.name for p in CheckpointManager(split_dir).paths()] == [p.name for p in CheckpointManager(straight_dir).paths()]


def test_a_second_signal_stops_at_once_without_a_checkpoint(tmp_path):
    with pytest.raises(KeyboardInterrupt) as stopped:
        train(resumable_config(tmp_path, steps=TOTAL, sequential=True),
              progress=signal_at(STOP_AT, signal.SIGTERM, signal.SIGINT), tensorboard=False)
    assert not isinstance(stopped.value, RunStopped)
    _, payload = CheckpointManager(tmp_path / "run").load_latest()
    assert payload["counters"]["env_steps"] == 120  # the last periodic checkpoint: none at the stop


def test_a_group_checkpoints_every_run_at_one_iteration_and_resumes_bit_for_bit(tmp_path):
    config = config_of("matrix:two_step", "sem-qmix", save_interval=60)
    longer = train_seeds(dataclasses.replace(config, out=str(tmp_path / "longer")), SEEDS, progress=False,
                         tensorboard=False)
    with pytest.raises(RunStopped) as stopped:
        train_seeds(dataclasses.replace(config, out=str(tmp_path / "split")), SEEDS, tensorboard=False,
                    progress=signal_at(len(SEEDS) * 90, signal.SIGTERM))  # the group's progress sums its runs
    stop = stopped.value
    assert sorted(stop.run_dirs) == sorted(tmp_path / "split" / run_dir.name for run_dir, _ in longer)
    assert len(set(stop.env_steps)) == 1 and stop.env_steps[0] % 60 != 0
    episodes = {CheckpointManager(d).load_latest()[1]["counters"]["episodes"] for d in stop.run_dirs}
    assert len(episodes) == 1  # one iteration of the group: its resume is exact
    resumed = resume_seeds(stop.run_dirs, progress=False, tensorboard=False)
    by_name = {run_dir.name: result for run_dir, result in longer}
    for run_dir, result in resumed:
        assert metric_rows(run_dir) == metric_rows(tmp_path / "longer" / run_dir.name)
        assert result == by_name[run_dir.name]


def test_outside_the_main_thread_nothing_is_installed():
    import threading

    seen = []
    before = signal.getsignal(signal.SIGINT)

    def body():
        with stop_on_signals() as request:
            seen.append((request.signum, signal.getsignal(signal.SIGINT)))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [(None, before)]


def signal_once_training(args: list[str], run_dir, signum: int) -> subprocess.CompletedProcess:
    """Run ``semzoo ARGS``, send ``signum`` once ``run_dir`` has logged 40 env steps, and wait for the exit."""
    proc = subprocess.Popen(cli(*args), env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while logged_steps(run_dir) < 40:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not start training"
        time.sleep(0.05)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=STOP_TIMEOUT_S)
    assert "Traceback" not in stderr
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_cli_train_stopped_by_sigterm_exits_143_with_one_line_and_a_resumable_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    args = ["--env", "matrix:two_step", "--algo", "qmix", "--steps", "1000000", "--n-envs", "2", "--batch-size", "4",
            "--buffer-size", "32", "--hidden-dim", "8", "--log-interval", "4", "--test-interval", "100000",
            "--save-interval", "100000", "--no-tensorboard", "--sequential", "--run-name", "run"]
    done = signal_once_training(["train", "--out", str(tmp_path), *args], run_dir, signal.SIGTERM)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM; checkpoint saved for") and f"--resume {run_dir}`" in last
    _, payload = CheckpointManager(run_dir).load_latest()
    steps = payload["counters"]["env_steps"]
    assert f"{steps:,} env steps" in last and steps >= 40


def test_a_sweep_stopped_by_sigint_checkpoints_its_running_trials_and_exits_130(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    args = ["sweep", "--envs", "matrix:two_step", "--algos", "qmix", "--seeds", "1", "--steps", "1000000",
            "--out", str(out), "--num-cpus", "1", "--set", "save_interval=100000", "--set", "test_interval=100000",
            "--set", "log_interval=4", "--set", "sequential=true"]
    run_dir = out / "matrix_two_step_qmix_seed0"
    done = signal_once_training(args, run_dir, signal.SIGINT)
    assert done.returncode == 128 + signal.SIGINT, done.stdout + done.stderr
    assert "1 stopped" in done.stdout and "run the same command again to continue" in done.stderr
    _, payload = CheckpointManager(run_dir).load_latest()  # the trial checkpointed its last iteration
    assert payload["counters"]["env_steps"] >= 40 and not run_finished(run_dir)


def test_a_plugin_memorys_run_stopped_by_sigint_resumes_with_the_printed_command(tmp_path):
    import shlex
    from pathlib import Path

    from semzoo.runfiles import PLUGINS_FILE

    plugins = str(Path(__file__).parent / "plugins")
    env = {**child_env(), "PYTHONPATH": os.pathsep.join([plugins, os.environ.get("PYTHONPATH", "")])}
    run_dir = tmp_path / "run"
    args = ["--plugin", "toy_memory_plugin", "train", "--out", str(tmp_path), "--env", "matrix:two_step", "--algo",
            "best-qmix", "--steps", "1000000", "--n-envs", "2", "--batch-size", "4", "--buffer-size", "32",
            "--hidden-dim", "8", "--log-interval", "4", "--test-interval", "100000", "--save-interval", "100000",
            "--no-tensorboard", "--sequential", "--run-name", "run"]
    proc = subprocess.Popen(cli(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while logged_steps(run_dir) < 40:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not start training"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=STOP_TIMEOUT_S)
    assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in stderr, stderr
    assert (run_dir / PLUGINS_FILE).is_file()
    printed = stderr.strip().splitlines()[-1].split("`")[1]
    assert printed == f"semzoo --plugin toy_memory_plugin train --resume {run_dir}"
    # without the plugin, reading the run names the module in the first line (and imports nothing on its own)
    bare = subprocess.run(cli("evaluate", str(run_dir)), env=env, capture_output=True, text=True,
                          timeout=START_TIMEOUT_S, check=False)
    assert bare.returncode == 1 and bare.stderr.startswith(
        "Error: this run's memory comes from module toy_memory_plugin: add --plugin toy_memory_plugin"), bare.stderr
    _, payload = CheckpointManager(run_dir).load_latest()
    stopped_at = payload["counters"]["env_steps"]
    resumed = subprocess.run([*cli(*shlex.split(printed)[1:]), "--steps", str(stopped_at + 8)], env=env,
                             capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {run_dir} at {stopped_at:,} env steps" in resumed.stderr
    assert run_finished(run_dir)
