"""SMAX's sparse rewards (``--env-arg reward=...``): SMAC's reward_sparse (+1 win, -1 defeat, 0 otherwise) and LAGMA's
deaths-only reward, through ``semzoo.make_env`` and the CLI. The win flag keeps its meaning.

One env per reward plays three short episodes against a passive enemy (``enemy_shoots=False``): a win (attack the
nearest enemy, else walk east), a defeat (walk west into the map edge, which kills in SMAX) and a time limit (stop).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("jaxmarl")

from conftest import NO_ACTOR_FLAGS
from typer.testing import CliRunner

from semzoo import make_env
from semzoo.cli import app
from semzoo.envs.registry import make_vec_env
from semzoo.envs.smax import DEATH_VALUE, NEGATIVE_SCALE, SCALE_RATE, WIN_VALUE, SMAXVecEnv
from semzoo.runfiles import read_metrics, read_run_config

pytestmark = pytest.mark.smax

NOOP, STOP, EAST, WEST, FIRST_ATTACK = 0, 1, 4, 5, 6
MARINE_HEALTH = 45.0
MAX_REWARD_3M = DEATH_VALUE * 3 + WIN_VALUE + 3 * MARINE_HEALTH
"""SMAC's max_reward on 3m: 10 per enemy, 200 for the win, the enemies' full health (365)."""


def win(avail_AU: np.ndarray) -> np.ndarray:
    attack = avail_AU[:, FIRST_ATTACK:]
    act = np.where(avail_AU[:, EAST] == 1, EAST, STOP)
    act = np.where(attack.any(-1), FIRST_ATTACK + attack.argmax(-1), act)
    return np.where(avail_AU[:, NOOP] == 1, NOOP, act)


def lose(avail_AU: np.ndarray) -> np.ndarray:
    return np.where(avail_AU[:, NOOP] == 1, NOOP, np.where(avail_AU[:, WEST] == 1, WEST, STOP))


def time_out(avail_AU: np.ndarray) -> np.ndarray:
    return np.where(avail_AU[:, NOOP] == 1, NOOP, STOP)


def play(reward: str) -> dict[str, list[tuple[float, dict]]]:
    """(team reward, info) of every step of a won, a lost and a timed-out episode on smax:3m."""
    env = make_env("smax:3m", reward=reward, enemy_shoots=False)
    obs, _ = env.reset(seed=0)
    episodes = {}
    for name, policy in (("won", win), ("lost", lose), ("timed_out", time_out)):
        steps = []
        while env.agents:
            avail = np.stack([obs[a]["action_mask"] for a in env.agents])
            obs, rewards, _, _, infos = env.step(dict(zip(env.agents, policy(avail).tolist())))
            assert len(set(rewards.values())) == 1  # a team reward
            steps.append((next(iter(rewards.values())), next(iter(infos.values()))))
        episodes[name] = steps
        obs, _ = env.reset()
    last = {name: steps[-1][1] for name, steps in episodes.items()}
    assert last["won"]["battle_won"] and last["won"]["dead_enemies"] == 3
    assert not last["lost"]["battle_won"] and last["lost"]["dead_allies"] == 3
    assert last["timed_out"]["episode_limit"] and not last["timed_out"]["battle_won"]
    return episodes


def test_sparse_reward_is_plus_one_for_a_win_minus_one_for_a_defeat_and_zero_otherwise():
    episodes = play("sparse")
    returns = {name: sum(r for r, _ in steps) for name, steps in episodes.items()}
    assert returns == {"won": 1.0, "lost": -1.0, "timed_out": 0.0}
    assert all(r == 0.0 for steps in episodes.values() for r, _ in steps[:-1])  # every non-final step
    assert len(episodes["timed_out"]) == 100  # SMAX's limit: the whole episode pays nothing


def test_deaths_reward_pays_smacs_death_and_win_values_scaled_as_smac():
    """LAGMA's "sparse" SMAC: per step (10 per enemy killed - 5 per ally lost + 200 at a win) x 20 / max_reward."""
    episodes = play("deaths")
    for steps in episodes.values():
        enemies = allies = 0
        for reward, info in steps:
            killed, lost = info["dead_enemies"] - enemies, info["dead_allies"] - allies
            enemies, allies = info["dead_enemies"], info["dead_allies"]
            expected = (DEATH_VALUE * killed - DEATH_VALUE * NEGATIVE_SCALE * lost + WIN_VALUE * info["battle_won"])
            assert reward == pytest.approx(expected * SCALE_RATE / MAX_REWARD_3M, rel=1e-5)
    returns = {name: sum(r for r, _ in steps) for name, steps in episodes.items()}
    assert returns["won"] == pytest.approx((30 + 200) * SCALE_RATE / MAX_REWARD_3M, rel=1e-5)  # no ally lost
    assert returns["lost"] == pytest.approx(-15 * SCALE_RATE / MAX_REWARD_3M, rel=1e-5)  # the edge killed all 3
    assert returns["timed_out"] == 0.0


def test_an_unknown_reward_is_refused_in_one_line_by_every_entry_point(tmp_path):
    needle = "reward='shaped': expected one of dense, sparse, deaths"
    with pytest.raises(ValueError, match=needle) as single:
        make_env("smax:3m", reward="shaped")
    with pytest.raises(ValueError, match=needle) as vectorised:
        SMAXVecEnv("3m", 2, reward="shaped")
    assert str(single.value) == str(vectorised.value)
    result = CliRunner().invoke(app, ["train", "--env", "smax:3m", "--env-arg", "reward=shaped", "--steps", "10",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("Error: ") and needle in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_run_trains_on_the_sparse_reward_and_records_it(tmp_path):
    result = CliRunner().invoke(app, [
        "train", "--env", "smax:3m", "--env-arg", "profile=smax", "--env-arg", "reward=sparse", "--algo", "sem-qmix", "--steps", "300",
        "--out", str(tmp_path), "--run-name", "sparse", "--batch-size", "2", "--buffer-size", "8",
        "--test-interval", "300", "--test-episodes", "4", "--save-interval", "0", "--no-tensorboard",
        *NO_ACTOR_FLAGS])
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "sparse"
    assert json.loads((run_dir / "config.json").read_text())["env_args"] == {"profile": "smax", "reward": "sparse"}
    last = {row["name"]: row["value"] for row in read_metrics(run_dir)}
    assert last["test_win_rate"] - 1 <= last["test_return_mean"] <= last["test_win_rate"]  # P(win) - P(defeat)
    # the run's envs, built from its stored config as the run built them, pay the sparse reward: walking into
    # the map's edge is a defeat within a few steps, -1 at its last step and 0 before
    envs = make_vec_env(read_run_config(run_dir))
    arrays, rewards, done = envs.reset(seed=0), [], False
    while not done:
        arrays, reward, terminated, truncated, info = envs.step(lose(arrays.avail[0])[None])
        rewards.append(float(reward[0]))
        done = bool(terminated[0] or truncated[0])
    assert rewards[-1] == -1.0 and set(rewards[:-1]) == {0.0} and not info["battle_won"][0]
