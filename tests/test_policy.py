"""A trained run's agents as a policy in plain PettingZoo loops: the same returns as `semzoo evaluate`."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from conftest import NO_ACTOR
from mpe2 import simple_spread_v3
from pettingzoo.utils.conversions import parallel_to_aec

import semzoo
from semzoo.config import ExplorationConfig, LearnerConfig, TrainConfig

ENV_ID = "pz:mpe2.simple_spread_v3:parallel_env"
N_ENVS = 4
TEST_EPISODES = 8


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A short QMIX run on MPE simple_spread (3 agents, 25 steps per episode)."""
    config = TrainConfig(**NO_ACTOR, env=ENV_ID, algo="qmix", steps=400, seed=3, n_envs=N_ENVS, test_episodes=TEST_EPISODES,
                         test_interval=10**9, log_interval=200, out=str(tmp_path_factory.mktemp("runs")),
                         exploration=ExplorationConfig(epsilon_anneal_steps=200),
                         learner=LearnerConfig(batch_size=4, buffer_size=32))
    run_dir, _ = semzoo.train(config, tensorboard=False)
    return run_dir


def env_seeds(run_dir) -> list[int]:
    """The env seed of each episode `semzoo evaluate` plays: batch i of N envs starts at seeds(i)."""
    from semzoo.run.evaluation import eval_env_seeds
    from semzoo.run.rundir import load_run_config

    config = load_run_config(run_dir)
    seeds = eval_env_seeds(config.seed, config.n_envs)
    return [seeds(k // config.n_envs) + k % config.n_envs for k in range(config.test_episodes)]


def semzoo_episode_returns(run_dir) -> list[float]:
    """Per-episode returns of `semzoo evaluate`'s episodes (its runner, env seeds and agent)."""
    from semzoo.agents.rnn import RNNAgent
    from semzoo.envs.registry import make_vec_env
    from semzoo.run.checkpoint import CheckpointManager
    from semzoo.run.evaluation import eval_env_seeds
    from semzoo.run.rundir import load_run_config
    from semzoo.run.runner import EpisodeRunner

    config = load_run_config(run_dir)
    env = make_vec_env(config)
    agent = RNNAgent.for_env(env, config.agent)
    agent.load_state_dict(CheckpointManager(run_dir).load_latest()[1]["learner"]["agent"])
    runner = EpisodeRunner(env, agent, device=torch.device("cpu"))
    seeds = eval_env_seeds(config.seed, config.n_envs)
    returns = []
    for i in range(config.test_episodes // config.n_envs):
        returns.extend(runner.run(epsilon=0.0, seed=seeds(i), generator=torch.Generator())[1].returns.tolist())
    env.close()
    return returns


def play_parallel(policy, seed: int, *, max_cycles: int = 25) -> float:
    """One episode in a plain parallel loop; team reward per step = mean over the agents that acted."""
    env = simple_spread_v3.parallel_env(max_cycles=max_cycles)
    observations, infos = env.reset(seed=seed)
    policy.reset()
    episode_return = 0.0
    while env.agents:
        actions = policy.act(observations, infos=infos)
        observations, rewards, _terminations, _truncations, infos = env.step(actions)
        episode_return += float(np.mean([rewards[agent] for agent in actions]))
    env.close()
    return episode_return


def play_aec(policy, seed: int) -> float:
    """One episode through the AEC view; every agent acts every cycle here, so the team return is the agents' mean."""
    env = parallel_to_aec(simple_spread_v3.parallel_env(max_cycles=25))
    env.reset(seed=seed)
    policy.reset()
    totals = dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        observation, reward, termination, truncation, _info = env.last()
        totals[agent] += reward
        env.step(None if termination or truncation else policy.act_one(agent, observation))
    env.close()
    return float(np.mean(list(totals.values())))


def test_policy_in_a_plain_parallel_loop_matches_semzoo_evaluate(run_dir):
    policy = semzoo.load_policy(run_dir)
    seeds = env_seeds(run_dir)
    ours = [play_parallel(policy, seed) for seed in seeds]
    reference = semzoo_episode_returns(run_dir)
    assert len(ours) == len(reference) == TEST_EPISODES
    np.testing.assert_allclose(ours, reference, rtol=1e-5)
    assert len(set(np.round(ours, 4))) > 1  # the seeds matter: a wrong seed would show
    _, result, _ = semzoo.evaluate_run(run_dir)
    assert result.episodes == TEST_EPISODES
    assert np.mean(ours) == pytest.approx(result.return_mean, rel=1e-5)


def test_policy_through_the_aec_view_matches_the_parallel_loop(run_dir):
    policy = semzoo.load_policy(run_dir)
    seeds = env_seeds(run_dir)
    np.testing.assert_allclose([play_aec(policy, s) for s in seeds], [play_parallel(policy, s) for s in seeds],
                               rtol=1e-5)


def test_aec_and_parallel_explore_identically_with_the_same_seed(run_dir):
    def actions_parallel():
        policy, env = semzoo.load_policy(run_dir, epsilon=0.5, seed=11), simple_spread_v3.parallel_env()
        observations, _ = env.reset(seed=5)
        taken = []
        while env.agents:
            actions = policy.act(observations)
            taken.append(actions)
            observations, *_ = env.step(actions)
        return taken

    def actions_aec():
        policy, env = semzoo.load_policy(run_dir, epsilon=0.5, seed=11), parallel_to_aec(simple_spread_v3.parallel_env())
        env.reset(seed=5)
        taken, step = [], {}
        for agent in env.agent_iter():
            observation, _, termination, truncation, _ = env.last()
            action = None if termination or truncation else policy.act_one(agent, observation)
            if action is not None:
                step[agent] = action
                if len(step) == len(env.possible_agents):
                    taken.append(step)
                    step = {}
            env.step(action)
        return taken

    assert actions_parallel() == actions_aec()


def test_policy_masks_unavailable_actions_and_pads_agents_that_left(run_dir):
    policy = semzoo.load_policy(run_dir)
    names = policy.agent_names
    env = simple_spread_v3.parallel_env()
    observations, _ = env.reset(seed=0)
    mask = np.zeros(5, np.int8)
    mask[3] = 1
    actions = policy.act({names[0]: {"observation": observations[names[0]], "action_mask": mask},
                          names[1]: observations[names[1]]})
    assert set(actions) == {names[0], names[1]} and actions[names[0]] == 3
    # The absent agent is padded as training pads a dead one: zero observation, only the no-op.
    expected = semzoo_padded_q(policy, observations, names)
    torch.testing.assert_close(policy.last_q, expected)


def semzoo_padded_q(policy, observations, names) -> torch.Tensor:
    from semzoo.wrappers.ctde import CTDEEnv

    ctde = CTDEEnv(simple_spread_v3.parallel_env())
    ctde.reset(seed=0)  # the adapter reads the state too
    arrays = ctde._arrays({names[0]: observations[names[0]], names[1]: observations[names[1]]})
    assert not arrays["obs"][2].any() and arrays["avail"][2].tolist() == [1, 0, 0, 0, 0]
    obs = torch.as_tensor(arrays["obs"])[None, None]
    q, _ = policy.agent(policy.agent.build_inputs(obs, torch.full((1, 1, 3), -1)))
    return q[0, 0]


def test_exported_torchscript_gives_the_policy_q_values_without_semzoo(run_dir, tmp_path):
    policy = semzoo.load_policy(run_dir)
    path = policy.export(tmp_path / "agents.pt")
    env = simple_spread_v3.parallel_env()
    observations, _ = env.reset(seed=1)
    a, h = policy.agent.n_agents, policy.agent.hidden_dim
    obs_seq, q_seq = [], []
    last_action, hidden = torch.full((1, a), -1), torch.zeros(1, a, h)
    module = torch.jit.load(str(path))
    for _ in range(5):
        obs = torch.as_tensor(np.stack([observations[name] for name in policy.agent_names]))[None]
        actions = policy.act(observations)
        q, hidden = module(obs, last_action, hidden)
        torch.testing.assert_close(q[0], policy.last_q)
        last_action = torch.tensor([[actions[name] for name in policy.agent_names]])
        obs_seq.append(obs)
        q_seq.append(q)
        observations, *_ = env.step(actions)
    torch.save({"obs": torch.cat(obs_seq), "q": torch.cat(q_seq)}, tmp_path / "io.pt")
    # A fresh interpreter where importing semzoo fails runs the file from the same inputs.
    script = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "semzoo":
                    raise ImportError("semzoo is blocked")
        sys.meta_path.insert(0, Block())
        import torch
        module = torch.jit.load({str(path)!r})
        io = torch.load({str(tmp_path / "io.pt")!r})
        last_action, hidden = torch.full((1, {a}), -1), torch.zeros(1, {a}, {h})
        for t in range(io["obs"].shape[0]):
            q, hidden = module(io["obs"][t:t + 1], last_action, hidden)
            torch.testing.assert_close(q, io["q"][t:t + 1])
            last_action = q.argmax(-1)
        assert "semzoo" not in sys.modules
        print("ok", module.n_agents, module.obs_dim, module.n_actions, module.hidden_dim)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "3", "18", "5", str(h)]


def test_a_policy_builds_its_runs_env_and_names_it_when_given_another_envs_observations(run_dir):
    policy = semzoo.load_policy(run_dir)
    env = policy.make_env()
    observations, _ = env.reset(seed=0)
    assert tuple(env.possible_agents) == policy.agent_names and len(policy.act(observations)) == len(observations)
    policy.reset()
    shorter = {agent: obs[:-1] for agent, obs in observations.items()}  # another env's (or profile's) observation
    with pytest.raises(ValueError, match=r"^the observation of 'agent_0' has 17 values: expected 18, .*; the agents "
                                         rf"were trained on make_env\('{ENV_ID}'\), which policy.make_env\(\) builds$"):
        policy.act(shorter)
