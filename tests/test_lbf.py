"""Level-Based Foraging as ``lbf:<task>``: EPyMARL's gymma choices, PettingZoo's checkers, the CLI and the remedy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pettingzoo.test import parallel_api_test, parallel_seed_test
from typer.testing import CliRunner

from semzoo import TrainConfig, train
from semzoo.cli import app
from semzoo.envs.registry import make_env, make_vec_env
from semzoo.mixers.qmix import QMixer
from semzoo.runfiles import read_metrics

pytest.importorskip("lbforaging")

TASK = "lbf:Foraging-8x8-2p-2f-coop-v3"
runner = CliRunner()


@pytest.mark.parametrize("state", ["raw", "scaled"])
def test_lbf_passes_pettingzoo_parallel_api_test(state):
    parallel_api_test(make_env(TASK, state=state, obs=state), num_cycles=60)


def test_lbf_passes_pettingzoo_parallel_seed_test():
    parallel_seed_test(lambda: make_env(TASK))


def test_lbf_state_is_the_agents_observations_concatenated():
    env = make_env(TASK)
    obs, _ = env.reset(seed=3)
    expected = np.concatenate([obs[agent] for agent in env.possible_agents])
    np.testing.assert_array_equal(env.state(), expected)
    assert env.state_space.shape == expected.shape == (24,)  # 2 foods x 3 + 2 agents x 3, per agent
    assert env.state().max() > 1.0  # LBF's own scale: grid coordinates and levels


def test_lbf_scaled_state_lies_in_its_space_within_minus_one_and_one():
    env = make_env(TASK, state="scaled")  # observations stay raw: the state is theirs, each entry over its bound
    scale = make_env(TASK).state_space.high.clip(min=1)
    obs, _ = env.reset(seed=5)
    for _ in range(20):
        raw = np.concatenate([obs[agent] for agent in env.possible_agents])
        assert env.state_space.contains(env.state())
        assert np.abs(env.state()).max() <= 1.0
        np.testing.assert_allclose(env.state() * scale, raw, rtol=1e-6)
        obs, *_ = env.step({agent: 1 for agent in env.possible_agents})
    assert raw.max() > 1.0


def test_a_seeded_reset_gives_the_same_start_whatever_episode_came_before():
    env = make_env(TASK)
    first, _ = env.reset(seed=5)
    again, _ = env.reset(seed=5)  # lbforaging alone spawns around the last episode's player positions: not the same
    unseeded_before = make_env(TASK)
    unseeded_before.reset()
    other, _ = unseeded_before.reset(seed=5)
    for agent in env.possible_agents:
        np.testing.assert_array_equal(first[agent], again[agent])
        np.testing.assert_array_equal(first[agent], other[agent])


def test_lbf_step_limit_truncates_with_food_left():
    env = make_env(TASK)
    env.reset(seed=0)
    assert env.episode_limit == 50
    for step in range(1, 51):
        _, _, terms, truncs, _ = env.step({agent: 0 for agent in env.possible_agents})  # no-op: the food stays
        assert not any(terms.values())
        assert all(truncs.values()) == (step == 50)
    assert env.agents == []


def test_lbf_terminates_when_the_food_is_gone():
    env = make_env(TASK)
    env.reset(seed=0)
    env.unwrapped._env.field[:] = 0  # the last food loaded: LBF ends the episode on the next step
    _, _, terms, truncs, _ = env.step({agent: 0 for agent in env.possible_agents})
    assert all(terms.values()) and not any(truncs.values())


def test_lbf_run_sums_the_agents_rewards_and_config_json_says_so(tmp_path):
    result = runner.invoke(app, ["train", "--env", TASK, "--algo", "qmix", "--steps", "120", "--out", str(tmp_path),
                                 "--batch-size", "2", "--buffer-size", "8", "--test-episodes", "1",
                                 "--test-interval", "100", "--log-interval", "100", "--keep-checkpoints", "0",
                                 "--no-tensorboard"])
    assert result.exit_code == 0, result.output
    (config_file,) = tmp_path.glob("*/config.json")
    stored = json.loads(config_file.read_text())
    assert stored["team_reward"] == "sum"
    assert stored["env_args"] == {}


def test_team_reward_mean_can_be_asked_for_on_lbf():
    vec = make_vec_env(TrainConfig(env=TASK, team_reward="mean"))
    assert vec._vec.envs[0].unwrapped.reward_reduction == "mean"
    vec.close()


def test_envs_lists_epymarls_lbf_tasks():
    result = runner.invoke(app, ["envs"])
    assert result.exit_code == 0, result.output
    assert "lbf:Foraging-8x8-2p-2f-coop-v3" in result.output
    assert "lbf:Foraging-15x15-4p-5f-v3" in result.output


def test_a_bad_lbf_task_is_one_line_exit_2_naming_the_closest(tmp_path):
    result = runner.invoke(app, ["train", "--env", "lbf:Foraging-8x8-2p-2f-cop-v3", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "Foraging-8x8-2p-2f-coop-v3" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_bad_lbf_scaling_is_one_line_exit_2(tmp_path):
    result = runner.invoke(app, ["train", "--env", TASK, "--env-arg", "state=unit", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "state='unit'" in result.output and "scaled" in result.output


def test_lbf_without_the_extra_names_the_extra(monkeypatch, tmp_path):
    from semzoo.envs import lbf

    monkeypatch.setattr(lbf, "_IMPORT_ERROR", ImportError("No module named 'lbforaging'"))
    lbf.available_tasks.cache_clear()
    try:
        result = runner.invoke(app, ["train", "--env", TASK, "--out", str(tmp_path)])
        listing = runner.invoke(app, ["envs"])
    finally:
        lbf.available_tasks.cache_clear()
    assert result.exit_code == 1
    assert "pip install 'semzoo[lbf]'" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert listing.exit_code == 0 and "semzoo[lbf]" in listing.output


def lbf_states(state: str, n: int = 300) -> torch.Tensor:
    """States of random play on the 8x8 task: [n, 24]."""
    env = make_env(TASK, state=state)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    states = []
    for _ in range(n):
        if not env.agents:
            env.reset()
        states.append(env.state())
        env.step({agent: int(rng.integers(6)) for agent in env.possible_agents})
    return torch.from_numpy(np.stack(states))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_qmix_starts_far_above_lbfs_returns_on_its_raw_state_and_within_them_scaled(seed):
    """The cause: QMIX's hypernetworks read the state's scale, so before any learning (agent utilities 0) its Q_tot
    on LBF's raw state (coordinates up to 7) is many times the largest return, 1.0; scaled, it is about the returns'
    size. A state with no time, stored as terminal only at the limit, unlearns such an offset slowly."""
    raw, scaled = lbf_states("raw"), lbf_states("scaled")
    values = {}
    for name, states in (("raw", raw), ("scaled", scaled)):
        torch.manual_seed(seed)
        mixer = QMixer(n_agents=2, state_dim=24, n_actions=6)
        with torch.no_grad():
            values[name] = mixer(torch.zeros(1, len(states), 2), states[None]).abs().mean().item()
    assert values["raw"] > 3.0
    assert values["scaled"] < 1.0
    assert values["raw"] > 5 * values["scaled"]


@pytest.mark.slow
def test_qmix_q_tot_stays_near_the_return_range_only_with_the_scaled_state(tmp_path):
    """The remedy, through a short run each: QMIX's logged Q_tot on the raw state stays several times the largest
    return (1.0), on ``state=scaled`` within [-1, 1]."""
    last = {}
    for state in ("raw", "scaled"):
        run_dir, _ = train(TrainConfig(env=TASK, env_args={"state": state}, algo="qmix", steps=6000, out=str(tmp_path),
                                       test_interval=6000, test_episodes=2, keep_checkpoints=0), progress=False,
                           tensorboard=False)
        rows = [row for row in read_metrics(run_dir) if row["name"] == "q_tot"]
        last[state] = rows[-1]["value"]
    assert last["raw"] > 2.0
    assert -1.0 <= last["scaled"] <= 1.0
