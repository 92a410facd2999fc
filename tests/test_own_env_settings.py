"""What a user's own env sets for a run: the team reward (sum or mean of the agents' rewards) and the episode limit
(``episode_limit``, ``max_cycles``, ``max_steps``, else 200, which the run's first lines then say)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from conftest import NO_ACTOR_FLAGS
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv
from typer.testing import CliRunner

import semzoo
from semzoo import TrainConfig
from semzoo.cli import app
from semzoo.envs.registry import make_vec_env


class ShortWalk(ParallelEnv):
    """Two agents, five steps, each paid 1 when it takes action 1; ``limit_name`` publishes the limit under that
    attribute (None: no limit published)."""

    metadata = {"name": "short_walk_v0"}

    def __init__(self, limit_name: str | None = None) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        self.state_space = spaces.Box(0.0, 1.0, (1,), np.float32)
        self._t = 0
        if limit_name is not None:
            setattr(self, limit_name, 5)

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), np.float32)

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(2)

    def state(self):
        return np.array([self._t / 5], np.float32)

    def reset(self, seed=None, options=None):
        self._t = 0
        self.agents = list(self.possible_agents)
        return {a: self.state() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self._t += 1
        done = self._t >= 5
        rewards = {a: float(actions[a] == 1) for a in self.agents}
        obs = {a: self.state() for a in self.agents}
        ends = {a: done for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, ends, {a: False for a in ends}, {a: {} for a in ends}


@pytest.mark.parametrize(("team_reward", "expected"), [("mean", 1.0), ("sum", 2.0), ("env", 1.0)])
def test_team_reward_is_the_mean_or_the_sum_of_the_agents_rewards(fresh_registries, team_reward, expected):
    semzoo.register_env("short_walk", functools.partial(ShortWalk, "episode_limit"))
    vec = make_vec_env(TrainConfig(env="short_walk", team_reward=team_reward))
    vec.reset(seed=0)
    _, reward, *_ = vec.step(np.ones((1, 2), np.int64))
    vec.close()
    assert reward.tolist() == [expected]


def test_config_json_records_the_team_reward_a_run_used(fresh_registries, tmp_path):
    semzoo.register_env("short_walk", functools.partial(ShortWalk, "episode_limit"))
    runner = CliRunner()
    for team_reward in ("sum", "env"):
        result = runner.invoke(app, ["train", "--env", "short_walk", "--algo", "vdn", "--steps", "40", "--out",
                                     str(tmp_path / team_reward), "--team-reward", team_reward, "--batch-size", "2",
                                     "--buffer-size", "8", "--test-episodes", "1", "--keep-checkpoints", "0",
                                     "--no-tensorboard", *NO_ACTOR_FLAGS])
        assert result.exit_code == 0, result.output
        (config_file,) = (tmp_path / team_reward).glob("*/config.json")
        assert json.loads(config_file.read_text())["team_reward"] == ("sum" if team_reward == "sum" else "mean")


def test_team_reward_sum_on_smax_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^team_reward='sum' on smax:3m: SMAX pays one team reward"):
        make_vec_env(TrainConfig(env="smax:3m", team_reward="sum"))


@pytest.mark.parametrize("limit_name", ["episode_limit", "max_cycles", "max_steps"])
def test_each_published_limit_attribute_is_read_without_a_note(fresh_registries, recwarn, limit_name):
    semzoo.register_env("short_walk", functools.partial(ShortWalk, limit_name))
    vec = make_vec_env(TrainConfig(env="short_walk"))
    vec.close()
    assert vec.episode_limit == 5
    assert not [w for w in recwarn if "episode limit" in str(w.message)]


def test_a_run_says_in_its_first_lines_when_it_falls_back_to_200_steps(fresh_registries, tmp_path):
    semzoo.register_env("short_walk", ShortWalk)
    result = CliRunner().invoke(app, ["train", "--env", "short_walk", "--algo", "vdn", "--steps", "20", "--out",
                                      str(tmp_path), "--batch-size", "2", "--buffer-size", "8", "--test-episodes",
                                      "1", "--keep-checkpoints", "0", "--no-tensorboard", *NO_ACTOR_FLAGS])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines()[:4] if "publishes no episode limit" in line]
    assert len(notes) == 1
    assert "cut at 200 steps" in notes[0] and "episode_limit, max_cycles, max_steps" in notes[0]
    assert "--episode-limit" in notes[0]


def test_an_episode_limit_given_to_the_run_needs_no_note(fresh_registries, recwarn):
    semzoo.register_env("short_walk", ShortWalk)
    make_vec_env(TrainConfig(env="short_walk", episode_limit=5)).close()
    assert not [w for w in recwarn if "episode limit" in str(w.message)]
