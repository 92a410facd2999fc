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
