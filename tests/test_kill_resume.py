"""SIGKILL at random moments, then `semzoo train --resume`: every run finishes, losing at most one save interval;
a ``--seeds`` group killed between its saves continues bit for bit."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from golden_runs import metric_rows

from semzoo.run.checkpoint import CheckpointManager
from semzoo.run.rundir import logged_steps, run_finished
from semzoo.runfiles import read_metrics

KILLS = 5
PARALLEL_RUNS = 2
SEED = 1234
STEPS = 400
SAVE_INTERVAL = 60
STEPS_PER_ITERATION = 4  # two_step episodes last 2 steps, 2 envs
START_TIMEOUT_S = 60
KILL_BEFORE_FRACTION = 0.8
POLL_S = 0.01
MAX_EXTRA_DELAY_S = 0.05
RUN_TIMEOUT_S = 120
ARGS = ["--env", "matrix:two_step", "--algo", "sem-qmix", "--steps", str(STEPS), "--n-envs", "2",
        "--batch-size", "4", "--buffer-size", "32", "--hidden-dim", "8", "--pending-size", "20", "--memory-capacity", "1000",
        "--target-update-episodes", "20", "--updates-per-episode", "0.25", "--log-interval", str(STEPS_PER_ITERATION), "--test-interval", "100",
        "--test-episodes", "4", "--save-interval", str(SAVE_INTERVAL), "--no-tensorboard", "--run-name", "run"]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "semzoo.cli", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def kill_at_random_moment(run_dir: Path, rng: random.Random) -> int:
    """Start a run, SIGKILL it at a random point of its training; returns the env steps logged at the kill."""
    proc = subprocess.Popen(cli("train", "--out", str(run_dir.parent), *ARGS), env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = rng.randint(STEPS_PER_ITERATION, int(STEPS * KILL_BEFORE_FRACTION))
    deadline = time.monotonic() + START_TIMEOUT_S
    while logged_steps(run_dir) < target:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run did not reach the kill point"
        time.sleep(POLL_S)
    time.sleep(rng.uniform(0.0, MAX_EXTRA_DELAY_S))  # any phase of an iteration: collecting, learning, saving
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not run_finished(run_dir), "killed too late: raise STEPS"
    return logged_steps(run_dir)


def kill_resume_and_check(run_dir: Path, seed: int) -> None:
    at_kill = kill_at_random_moment(run_dir, random.Random(seed))
    done = subprocess.run(cli("train", "--resume", str(run_dir)), env=child_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "corrupt" not in done.stderr  # atomic writes: never a partial checkpoint
    match = re.search(r"resuming \S+ at ([\d,]+) env steps", done.stderr)
    resumed_at = int(match.group(1).replace(",", "")) if match else 0  # 0: killed before the first checkpoint
    assert at_kill - resumed_at <= SAVE_INTERVAL, (at_kill, resumed_at)
    assert run_finished(run_dir, STEPS)
    rows = read_metrics(run_dir)
    keys = Counter((r["env_steps"], r["name"]) for r in rows)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:5]
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and steps[-1] >= STEPS


@pytest.mark.slow
def test_runs_killed_at_random_moments_resume_and_finish(tmp_path):
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        futures = [pool.submit(kill_resume_and_check, tmp_path / f"kill{i}" / "run", SEED + i) for i in range(KILLS)]
        outcomes = [f.exception() for f in futures]
    failures = [repr(e) for e in outcomes if e is not None]
    assert not failures, failures
    assert len(outcomes) == KILLS


GROUP_ARGS = [arg for arg in ARGS if arg not in ("--run-name", "run")] + ["--seeds", "0-1"]
GROUP_TRIES = 3


def group_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("*/config.json"))


@pytest.mark.slow
def test_a_group_killed_at_a_random_moment_resumes_bit_for_bit(tmp_path):
    """SIGKILL a `--seeds 0-1` group between saves, `--resume` each of its runs: the runs' metric rows are those of
    the group trained without a stop (a kill in the middle of the group's save, which leaves the runs' last
    checkpoints apart, is drawn again: that case resumes within float tolerance, with a warning)."""
    whole = subprocess.run(cli("train", "--out", str(tmp_path / "whole"), *GROUP_ARGS), env=child_env(),
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert whole.returncode == 0, whole.stderr
    wanted = {d.name: metric_rows(d) for d in group_dirs(tmp_path / "whole")}
    assert len(wanted) == 2
    rng = random.Random(SEED)
    for attempt in range(GROUP_TRIES):
        out = tmp_path / f"killed{attempt}"
        proc = subprocess.Popen(cli("train", "--out", str(out), *GROUP_ARGS), env=child_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = rng.randint(SAVE_INTERVAL + STEPS_PER_ITERATION, int(STEPS * KILL_BEFORE_FRACTION))
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(group_dirs(out)) < 2 or min(logged_steps(d) for d in group_dirs(out)) < target:
            assert proc.poll() is None, "the group ended before it could be killed"
            assert time.monotonic() < deadline, "the group did not reach the kill point"
            time.sleep(POLL_S)
        time.sleep(rng.uniform(0.0, MAX_EXTRA_DELAY_S))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        runs = group_dirs(out)
        assert not any(run_finished(d) for d in runs), "killed too late: raise STEPS"
        latest = [CheckpointManager(d).load_latest() for d in runs]
        if None in latest or len({state["counters"]["episodes"] for _, state in latest}) > 1:
            continue  # killed while the group was saving: its runs' checkpoints come from different iterations
        resumed = subprocess.run(cli("train", *[arg for d in runs for arg in ("--resume", str(d))]), env=child_env(),
                                 capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        assert resumed.returncode == 0, resumed.stderr
        assert "different iterations" not in resumed.stderr
        for run in runs:
            assert run_finished(run, STEPS)
            assert metric_rows(run) == wanted[run.name], run.name
        return
    raise AssertionError(f"every one of {GROUP_TRIES} kills fell in a group save: draw the kill points again")
