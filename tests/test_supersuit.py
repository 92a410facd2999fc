"""SuperSuit pipelines train through semzoo with the global state intact (heterogeneous MPE speaker-listener)."""

from __future__ import annotations

import numpy as np
import pytest

supersuit = pytest.importorskip("supersuit")
pytest.importorskip("mpe2")
from conftest import NO_ACTOR  # noqa: E402
from mpe2 import simple_speaker_listener_v4  # noqa: E402

import semzoo  # noqa: E402
from semzoo.config import LearnerConfig, TrainConfig  # noqa: E402
from semzoo.envs.registry import make_env  # noqa: E402
from semzoo.wrappers.ctde import CTDEEnv  # noqa: E402

MAX_CYCLES = 25


def speaker_listener_pipeline(max_cycles: int = MAX_CYCLES, scale: float = 0.1):
    """Speaker (obs 3, 3 actions) and listener (obs 11, 5 actions) made uniform by SuperSuit wrappers."""
    env = simple_speaker_listener_v4.parallel_env(max_cycles=max_cycles)
    env = supersuit.pad_observations_v0(env)
    env = supersuit.pad_action_space_v0(env)
    env = supersuit.agent_indicator_v0(env)  # + one-hot agent type: obs 11 -> 13
    env = supersuit.black_death_v3(env)
    env = supersuit.reward_lambda_v0(env, lambda reward: reward * scale)
    env = supersuit.clip_reward_v0(env, -1.0, 1.0)
    return supersuit.dtype_v0(env, np.float32)


semzoo.register_env("supersuit_speaker_listener", speaker_listener_pipeline)


def test_wrapped_env_keeps_the_unwrapped_global_state():
    env = make_env("supersuit_speaker_listener")
    raw = env.unwrapped
    assert env.state_space.shape == raw.state_space.shape == (14,)
    ctde = CTDEEnv(env)
    assert (ctde.obs_dim, ctde.n_actions, ctde.state_dim, ctde.episode_limit) == (13, 5, 14, MAX_CYCLES)
    arrays, _ = ctde.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(MAX_CYCLES):
        np.testing.assert_array_equal(arrays["state"], np.asarray(raw.state(), np.float32))
        assert arrays["avail"].all()  # pad_action_space_v0: the speaker's actions 3, 4 act as action 0
        arrays, reward, terminated, truncated, _ = ctde.step(rng.integers(0, 5, 2))
        assert -1.0 <= reward <= 1.0
        if terminated or truncated:
            break
    assert truncated and not terminated  # MPE's time limit bootstraps


def test_semzoo_pads_the_raw_heterogeneous_env_without_supersuit():
    """What pad_observations_v0 / pad_action_space_v0 do, the CTDE adapter does by itself, with masks."""
    ctde = CTDEEnv(simple_speaker_listener_v4.parallel_env())
    arrays, _ = ctde.reset(seed=0)
    assert (ctde.obs_dim, ctde.n_actions) == (11, 5)
    assert arrays["avail"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]  # speaker's padded actions unavailable


def test_supersuit_pipeline_trains_and_its_policy_plays(tmp_path):
    config = TrainConfig(**NO_ACTOR, env="supersuit_speaker_listener", algo="sem-qmix", steps=300, n_envs=4, test_episodes=4,
                         out=str(tmp_path), learner=LearnerConfig(batch_size=4, buffer_size=32))
    run_dir, result = semzoo.train(config, tensorboard=False)
    assert np.isfinite(result["test_return_mean"])
    policy = semzoo.load_policy(run_dir)
    env = speaker_listener_pipeline()
    observations, _ = env.reset(seed=0)
    steps = 0
    while env.agents:
        observations, *_ = env.step(policy.act(observations))
        steps += 1
    assert steps >= MAX_CYCLES


# SuperSuit's observation wrappers take Box spaces only; semzoo's envs give them with obs_format="box".
BOX_ONLY_WRAPPERS = ("pad_observations_v0", "black_death_v3", "agent_indicator_v0")


def semzoo_box_envs() -> list:
    from semzoo.envs import matrix_game_v0

    envs = [pytest.param(lambda: matrix_game_v0.parallel_env("two_step", obs_format="box"), id="matrix:two_step"),
            pytest.param(lambda: matrix_game_v0.parallel_env("custom", payoff=np.zeros((2, 3)), obs_format="box"),
                         id="matrix:custom_2x3")]
    smax_env = pytest.param(lambda: smax_parallel_env("3m", episode_limit=12, obs_format="box"), id="smax:3m",
                            marks=pytest.mark.smax)
    return [*envs, smax_env]


def smax_parallel_env(*args, **kwargs):
    pytest.importorskip("jaxmarl")
    from semzoo.envs import smax

    return smax.parallel_env(*args, **kwargs)


def last_available_action(info: dict) -> int:
    return int(np.flatnonzero(info["action_mask"])[-1])


@pytest.mark.parametrize("wrapper", BOX_ONLY_WRAPPERS)
@pytest.mark.parametrize("make", semzoo_box_envs())
def test_box_only_wrappers_run_whole_episodes_on_box_format_envs(make, wrapper):
    env = getattr(supersuit, wrapper)(make())
    for seed in (0, 1):
        obs, infos = env.reset(seed=seed)
        steps = 0
        while env.agents:
            for agent in env.agents:
                assert obs[agent] in env.observation_space(agent)
            # black_death_v3 keeps dead agents with empty infos; the env ignores their actions
            actions = {a: last_available_action(infos[a]) if infos.get(a) else 0 for a in env.agents}
            obs, _, _, _, infos = env.step(actions)
            steps += 1
        assert 1 <= steps <= 13  # black_death_v3 takes one empty step after the end


@pytest.mark.parametrize("wrapper", BOX_ONLY_WRAPPERS)
def test_box_only_wrappers_pass_pettingzoo_parallel_api_test_on_a_matrix_game(wrapper):
    from pettingzoo.test import parallel_api_test

    from semzoo.envs import matrix_game_v0

    parallel_api_test(getattr(supersuit, wrapper)(matrix_game_v0.parallel_env("two_step", obs_format="box")),
                      num_cycles=20)


@pytest.mark.parametrize("wrapper", BOX_ONLY_WRAPPERS)
def test_box_only_wrappers_refuse_the_default_dict_observations(wrapper):
    """What docs/policy.md says: these wrappers need obs_format="box"."""
    from semzoo.envs import matrix_game_v0

    with pytest.raises(AssertionError, match="Box"):
        getattr(supersuit, wrapper)(matrix_game_v0.parallel_env("two_step")).reset()


def test_agent_indicator_adds_a_one_hot_to_the_box_observation():
    from semzoo.envs import matrix_game_v0

    env = supersuit.agent_indicator_v0(matrix_game_v0.parallel_env("two_step", obs_format="box"))
    obs, _ = env.reset()
    assert obs["agent_0"].tolist() == [1, 0, 0, 0, 1, 0] and obs["agent_1"].tolist() == [1, 0, 0, 0, 0, 1]


@pytest.mark.parametrize("obs_format", ["dict", "box"])
def test_pad_action_space_and_parallel_to_aec_take_both_formats(obs_format):
    from pettingzoo.utils.conversions import parallel_to_aec

    from semzoo.envs import matrix_game_v0

    def make():
        return matrix_game_v0.parallel_env("custom", payoff=np.zeros((2, 3)), obs_format=obs_format)

    env = supersuit.pad_action_space_v0(make())
    assert env.action_space("agent_0").n == 3
    env.reset(seed=0)
    _, rewards, terminations, _, _ = env.step({"agent_0": 2, "agent_1": 2})  # agent_0's padded action acts as 0
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0} and all(terminations.values()) and not env.agents
    aec = parallel_to_aec(make())
    aec.reset(seed=0)
    acted = 0
    for _ in aec.agent_iter():
        *_, termination, truncation, _ = aec.last()
        aec.step(None if termination or truncation else 0)
        acted += not (termination or truncation)
    assert acted == 2


@pytest.mark.smax
def test_concat_vec_envs_clones_a_smax_pipeline_and_steps_it_with_sampled_actions():
    """concat_vec_envs_v1 clones the env with cloudpickle; its callers sample actions without the mask."""
    env = supersuit.black_death_v3(smax_parallel_env("3m", obs_format="box", episode_limit=10,
                                                     unavailable_action="stop"))
    vec = supersuit.concat_vec_envs_v1(supersuit.pettingzoo_env_to_vec_env_v1(env), 2, num_cpus=0,
                                       base_class="gymnasium")
    observations, _ = vec.reset(seed=0)
    assert observations.shape == (2 * 3, env.unwrapped.obs_dim)  # 2 envs x 3 marines
    ends = 0
    for _ in range(24):
        actions = np.array([vec.action_space.sample() for _ in range(vec.num_envs)])
        observations, rewards, terminations, truncations, _ = vec.step(actions)
        assert np.isfinite(rewards).all() and observations.shape == (6, env.unwrapped.obs_dim)
        ends += int(np.sum(terminations | truncations))
    assert ends >= 6  # every env ended an episode (the limit is 10 steps) and was reset by the vector env


@pytest.mark.smax
def test_sticky_actions_play_whole_smax_episodes_with_unavailable_actions_as_stop():
    """sticky_actions_v0 repeats an agent's last action, which may have become unavailable since."""
    env = supersuit.sticky_actions_v0(smax_parallel_env("3m", unavailable_action="stop"), repeat_action_probability=0.9)
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        observations, _ = env.reset(seed=seed)
        while env.agents:
            actions = {a: int(rng.choice(np.flatnonzero(observations[a]["action_mask"]))) for a in env.agents}
            observations, *_ = env.step(actions)
