"""scripts/state_repeats.py: a buffer's repeated states sorted into those of the own episode and of other episodes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from script_modules import SCRIPTS, load_script

from semzoo import TrainConfig, train
from semzoo.config import LearnerConfig

SCRIPT = SCRIPTS / "state_repeats.py"
state_repeats = load_script("state_repeats")


def packed(*episodes: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """A packed buffer of one-feature states: each episode's states s_0..s_L (L + 1 of them, the last no step)."""
    length = np.array([len(e) - 1 for e in episodes])
    state = np.concatenate([np.asarray(e, np.float32) for e in episodes])[:, None]
    return length, state


def test_steps_are_sorted_by_where_their_state_recurs():
    # episode 0 steps: 1, 1, 2 (then 9); episode 1 steps: 3, 2 (then 1: an end state, no step); episode 2: 4 (then 4)
    r = state_repeats.classify(*packed([1, 1, 2, 9], [3, 2, 1], [4, 4]))
    assert (r.episodes, r.steps) == (3, 6)
    # unique: 3 and 4; own episode only: the two 1s of episode 0; other episodes: the 2 of episodes 0 and 1
    assert r.unique == pytest.approx(2 / 6) and r.own_episode == pytest.approx(2 / 6)
    assert r.other_episodes == pytest.approx(2 / 6)
    assert r.same_as_previous == pytest.approx(1 / 6)  # episode 0's second 1; an end state is no step
    assert r.merge_rate == pytest.approx((6 - 4) / 6)  # distinct step states 1, 2, 3, 4
    assert r.shared_states == pytest.approx(1 / 4)


def test_a_state_that_recurs_in_its_own_episode_is_not_counted_as_another_episodes():
    stand_still = state_repeats.classify(*packed([5, 5, 5, 5, 6], [7, 7, 7, 8]))
    assert stand_still.other_episodes == 0.0 and stand_still.own_episode == 1.0
    assert stand_still.merge_rate == pytest.approx(5 / 7) and stand_still.same_as_previous == pytest.approx(5 / 7)
    shared = state_repeats.classify(*packed([5, 6], [5, 7]))
    assert shared.other_episodes == 1.0 and shared.own_episode == 0.0 and shared.same_as_previous == 0.0


def test_a_buffer_that_is_not_packed_is_refused():
    length, state = packed([1, 2], [3, 4])
    with pytest.raises(ValueError, match=r"state has shape \(3, 1\), expected \[sum\(length \+ 1\) = 4, F\]"):
        state_repeats.classify(length, state[:3])


def test_a_runs_checkpoint_is_read_and_a_run_without_one_is_a_one_line_error(tmp_path):
    config = TrainConfig(env="matrix:two_step", algo="qmix", steps=64, n_envs=4, test_interval=64, test_episodes=2,
                         log_interval=64, save_interval=0, keep_checkpoints=1, sequential=True, out=str(tmp_path),
                         run_name="kept", learner=LearnerConfig(batch_size=4, buffer_size=64))
    run_dir, _ = train(config, progress=False, tensorboard=False)
    done = subprocess.run([sys.executable, str(SCRIPT), str(run_dir)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[-1].split(" | ")
    # the two-step game: every episode's states are the start and one of two second states, all shared
    assert row[0] == "| kept" and row[2] == "32" and row[3] == "64" and row[6] == "100.0%"
    gone = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nothing")], capture_output=True, text=True,
                          check=False)
    assert gone.returncode == 1 and "no checkpoint" in gone.stderr and "Traceback" not in gone.stderr
