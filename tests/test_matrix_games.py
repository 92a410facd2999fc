"""Specification of the cooperative matrix games (semzoo.envs.matrix_game_v0)."""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test
from pettingzoo.utils.conversions import parallel_to_aec

from semzoo.envs import matrix_game_v0
from semzoo.envs.matrix_game_v0 import GAME_DESCRIPTIONS, GAMES, MatrixGameEnv, parallel_env

THREE_AGENT_PAYOFF = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4) - 10.0
CASES = {
    "climbing": dict(game="climbing"),
    "penalty": dict(game="penalty"),
    "penalty_k-10": dict(game="penalty", k=-10.0),
    "qtran": dict(game="qtran"),
    "additive": dict(game="additive"),
    "two_step": dict(game="two_step"),
    "m_step_4": dict(game="m_step", m=4),
    "custom_2_agents": dict(game="custom", payoff=[[1, 0], [0, 1], [2, -3]]),
    "custom_3_agents_unequal_actions": dict(game="custom", payoff=THREE_AGENT_PAYOFF),
}
# PettingZoo's checkers whitelist the dict-with-action_mask observation format only for its own
# classic envs by name; these warnings are about that format, every other warning fails a test.
DICT_OBSERVATION_WARNINGS = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be",
    "Agents have different observation space sizes",  # unequal action counts -> unequal mask sizes
)
N_EPISODES = 5


def make(case: str, **overrides) -> MatrixGameEnv:
    return parallel_env(**{**CASES[case], **overrides})


def random_legal_actions(env: MatrixGameEnv, obs: dict, rng: np.random.Generator) -> dict[str, int]:
    return {agent: int(rng.choice(np.flatnonzero(obs[agent]["action_mask"]))) for agent in env.agents}


def play_episode(env: MatrixGameEnv, joint_actions: list[tuple[int, ...]]) -> float:
    """Reset, play the given joint actions until the episode ends; return the shared return."""
    env.reset()
    episode_return = 0.0
    for joint in joint_actions:
        _, rewards, terminations, _, _ = env.step(dict(zip(env.agents, joint)))
        episode_return += rewards["agent_0"]
        if all(terminations.values()):
            break
    assert env.agents == []
    return episode_return


def fail_on_unexpected_warnings(caught: list[warnings.WarningMessage]) -> None:
    unexpected = [str(w.message) for w in caught if not str(w.message).startswith(DICT_OBSERVATION_WARNINGS)]
    assert unexpected == []


@pytest.mark.parametrize("case", CASES)
def test_passes_pettingzoo_parallel_api_test(case: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(make(case), num_cycles=10)
    fail_on_unexpected_warnings(caught)


@pytest.mark.parametrize("case", CASES)
def test_passes_pettingzoo_aec_api_test_after_conversion(case: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(parallel_to_aec(make(case)), num_cycles=10)
        api_test(matrix_game_v0.env(**CASES[case]), num_cycles=10)
    fail_on_unexpected_warnings(caught)


@pytest.mark.parametrize("case", CASES)
def test_state_and_observations_stay_in_their_spaces_every_step(case: str) -> None:
    env = make(case)
    rng = np.random.default_rng(0)
    for _ in range(N_EPISODES):
        obs, _ = env.reset()
        for step in range(1, env.episode_limit + 1):
            assert env.state_space.contains(env.state())
            for agent in env.agents:
                assert env.observation_space(agent).contains(obs[agent])
                np.testing.assert_array_equal(obs[agent]["observation"], env.state())
            obs, _, terminations, truncations, _ = env.step(random_legal_actions(env, obs, rng))
            assert env.state_space.contains(env.state())
            assert not any(truncations.values())
            ended = not env.agents
            assert terminations == dict.fromkeys(env.possible_agents, ended)
            if env.game != "m_step":  # the m-step game ends early on a miss; the others last episode_limit steps
                assert ended == (step == env.episode_limit)
            if ended:
                break
        assert env.agents == []


@pytest.mark.parametrize("case", CASES)
def test_same_seed_and_actions_give_identical_trajectories(case: str) -> None:
    env_a, env_b = make(case), make(case)
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    for episode in range(N_EPISODES):
        obs_a, _ = env_a.reset(seed=123 + episode)
        obs_b, _ = env_b.reset(seed=123 + episode)
        for _ in range(env_a.episode_limit):
            assert env_a.agents == env_b.agents
            for agent in env_a.agents:
                for key in ("observation", "action_mask"):
                    np.testing.assert_array_equal(obs_a[agent][key], obs_b[agent][key])
            np.testing.assert_array_equal(env_a.state(), env_b.state())
            obs_a, rew_a, term_a, trunc_a, _ = env_a.step(random_legal_actions(env_a, obs_a, rng_a))
            obs_b, rew_b, term_b, trunc_b, _ = env_b.step(random_legal_actions(env_b, obs_b, rng_b))
            assert (rew_a, term_a, trunc_a) == (rew_b, term_b, trunc_b)
        assert env_a.agents == env_b.agents == []


@pytest.mark.parametrize("case", CASES)
def test_optimal_return_is_best_return_over_all_joint_action_sequences(case: str) -> None:
    env = make(case)
    joint_actions = list(itertools.product(*(range(n) for n in env.n_actions)))
    returns = [
        play_episode(env, list(sequence))
        for sequence in itertools.product(joint_actions, repeat=env.episode_limit)
    ]
    assert env.optimal_return == max(returns)


def test_payoffs_match_the_literature() -> None:
    np.testing.assert_array_equal(parallel_env("climbing").payoff, [[11, -30, 0], [-30, 7, 6], [0, 0, 5]])
    np.testing.assert_array_equal(parallel_env("penalty").payoff, [[10, 0, -100], [0, 2, 0], [-100, 0, 10]])
    np.testing.assert_array_equal(
        parallel_env("penalty", k=-10).payoff, [[10, 0, -10], [0, 2, 0], [-10, 0, 10]]
    )
    np.testing.assert_array_equal(parallel_env("qtran").payoff, [[8, -12, -12], [-12, 0, 0], [-12, 0, 0]])
    np.testing.assert_array_equal(parallel_env("two_step").payoff, [[[7, 7], [7, 7]], [[0, 1], [1, 8]]])
    np.testing.assert_array_equal(parallel_env("m_step").payoff, [[1, 1], [1, 4]])  # MAVEN's last step on (0,0)
    games = ("climbing", "penalty", "qtran", "two_step", "m_step")
    assert [parallel_env(g).optimal_return for g in games] == [11, 10, 8, 8, 13]  # m_step: m + 3, MAVEN's m = 10


def test_additive_payoff_is_a_sum_of_agent_terms_with_unique_off_diagonal_optimum() -> None:
    payoff = parallel_env("additive").payoff
    assert payoff.shape == (3, 3)
    # payoff[i, j] = u_0[i] + u_1[j]  <=>  every 2x2 "interaction" term vanishes
    interaction = payoff - payoff[:, :1] - payoff[:1, :] + payoff[0, 0]
    np.testing.assert_array_equal(interaction, np.zeros((3, 3)))
    optima = np.argwhere(payoff == payoff.max())
    assert len(optima) == 1
    row, column = optima[0]
    assert row != column


ONE_STEP_CASES = ["climbing", "penalty_k-10", "qtran", "additive", "custom_3_agents_unequal_actions"]


@pytest.mark.parametrize("case", ONE_STEP_CASES)
def test_one_step_game_pays_every_agent_the_payoff_entry_then_ends(case: str) -> None:
    env = make(case)
    for joint in itertools.product(*(range(n) for n in env.n_actions)):
        env.reset()
        obs, rewards, terminations, truncations, _ = env.step(dict(zip(env.agents, joint)))
        assert rewards == {agent: env.payoff[joint] for agent in env.possible_agents}
        assert all(terminations.values()) and not any(truncations.values())
        assert set(obs) == set(env.possible_agents)
        assert env.agents == []


@pytest.mark.parametrize("agent_1_first_action", [0, 1])
def test_two_step_agent_0_first_action_picks_the_second_state(agent_1_first_action: int) -> None:
    env = parallel_env("two_step")
    start, state_2a, state_2b, end = np.eye(4, dtype=np.float32)
    branches = ((0, state_2a, [[7, 7], [7, 7]]), (1, state_2b, [[0, 1], [1, 8]]))
    for first_action, second_state, second_payoff in branches:
        for joint in itertools.product(range(2), range(2)):
            obs, _ = env.reset()
            np.testing.assert_array_equal(env.state(), start)
            first_joint = {"agent_0": first_action, "agent_1": agent_1_first_action}
            obs, rewards, terminations, _, _ = env.step(first_joint)
            assert rewards == {"agent_0": 0.0, "agent_1": 0.0}
            assert not any(terminations.values())
            np.testing.assert_array_equal(env.state(), second_state)
            np.testing.assert_array_equal(obs["agent_1"]["observation"], second_state)
            _, rewards, terminations, _, _ = env.step(dict(zip(env.agents, joint)))
            expected = second_payoff[joint[0]][joint[1]]
            assert rewards == {"agent_0": expected, "agent_1": expected}
            assert all(terminations.values())
            np.testing.assert_array_equal(env.state(), end)


def m_step_return(m: int, sequence: list[tuple[int, int]]) -> float:
    return play_episode(parallel_env("m_step", m=m), sequence)


@pytest.mark.parametrize("m", [2, 3, 10])
def test_m_step_pays_m_plus_3_only_for_00_to_the_end_then_11(m: int) -> None:
    chain_00, chain_11 = [(0, 0)] * (m - 1), [(1, 1)] * (m - 1)
    assert m_step_return(m, [*chain_00, (1, 1)]) == m + 3 == parallel_env("m_step", m=m).optimal_return
    for last in [(0, 0), (0, 1), (1, 0)]:  # the last step of branch (0,0) pays 1 for any other joint action
        assert m_step_return(m, [*chain_00, last]) == m
    assert m_step_return(m, [*chain_11, (1, 1)]) == m  # branch (1,1) pays 1 a step, no bonus
    assert m_step_return(m, [*chain_11, (0, 0)]) == m - 1


@pytest.mark.parametrize("first", [(0, 1), (1, 0)])
def test_m_step_branches_01_and_10_end_at_once_with_nothing(first: tuple[int, int]) -> None:
    env = parallel_env("m_step")
    env.reset()
    _, rewards, terminations, _, _ = env.step(dict(zip(env.agents, first)))
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0} and all(terminations.values()) and env.agents == []


def test_m_step_miss_ends_the_episode_with_zero_at_that_step() -> None:
    env = parallel_env("m_step", m=5)
    env.reset()
    for joint, reward, over in [((0, 0), 1.0, False), ((0, 0), 1.0, False), ((1, 1), 0.0, True)]:
        _, rewards, terminations, _, _ = env.step(dict(zip(env.agents, joint)))
        assert rewards["agent_0"] == reward and all(terminations.values()) == over


def test_m_step_state_is_the_step_and_the_branch_one_hot() -> None:
    m = 3
    env = parallel_env("m_step", m=m)
    step_slots = np.eye(m + 1, dtype=np.float32)  # steps 0..m-1, then "end"
    branch_slots = np.eye(4, dtype=np.float32)  # (0,0), (0,1), (1,0), (1,1)
    no_branch = np.zeros(4, np.float32)
    obs, _ = env.reset()
    np.testing.assert_array_equal(env.state(), np.concatenate([step_slots[0], no_branch]))
    np.testing.assert_array_equal(obs["agent_1"]["observation"], env.state())
    env.step({"agent_0": 1, "agent_1": 1})
    np.testing.assert_array_equal(env.state(), np.concatenate([step_slots[1], branch_slots[3]]))
    env.step({"agent_0": 1, "agent_1": 1})
    env.step({"agent_0": 1, "agent_1": 1})
    np.testing.assert_array_equal(env.state(), np.concatenate([step_slots[m], branch_slots[3]]))
    assert env.state_space.shape == (m + 1 + 4,)


@pytest.mark.parametrize(("kwargs", "needle"), [
    (dict(game="m_step", m=1), "m=1"),
    (dict(game="m_step", m=2.5), "m=2.5"),
    (dict(game="m_step", m=True), "m=True"),
    (dict(game="climbing", m=4), "m only applies to game 'm_step'"),
])
def test_m_step_length_is_checked(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        parallel_env(**kwargs)


def test_public_attributes_describe_the_game() -> None:
    env = parallel_env("custom", payoff=THREE_AGENT_PAYOFF)
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    assert env.n_actions == (2, 3, 4)
    assert [env.action_space(a).n for a in env.possible_agents] == [2, 3, 4]
    assert [env.observation_space(a)["action_mask"].shape for a in env.possible_agents] == [(2,), (3,), (4,)]
    assert env.episode_limit == 1 and parallel_env("two_step").episode_limit == 2
    assert parallel_env("two_step").n_actions == (2, 2)
    assert env.optimal_return == THREE_AGENT_PAYOFF.max()
    assert set(GAMES) == set(GAME_DESCRIPTIONS) and all("\n" not in d for d in GAME_DESCRIPTIONS.values())


def test_spaces_are_cached_objects() -> None:
    env = parallel_env("two_step")
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
    assert env.state_space is env.state_space


def test_payoff_is_read_only_and_copied_from_the_user() -> None:
    user_payoff = np.array([[1.0, 0.0], [0.0, 1.0]])
    env = parallel_env("custom", payoff=user_payoff)
    user_payoff[0, 0] = 99.0
    assert env.payoff[0, 0] == 1.0
    with pytest.raises(ValueError):
        env.payoff[0, 0] = 5.0
    with pytest.raises(ValueError):
        parallel_env("climbing").payoff[0, 0] = 5.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(game="chicken"), "expected one of"),
        (dict(game="climbing", payoff=[[1, 2], [3, 4]]), "only read by game 'custom'"),
        (dict(game="custom"), "needs payoff="),
        (dict(game="custom", payoff=[[1, 2], [3]]), "ragged"),
        (dict(game="custom", payoff=[["a", "b"], ["c", "d"]]), "expected real numbers"),
        (dict(game="custom", payoff=[[True, False], [False, True]]), "expected real numbers"),
        (dict(game="custom", payoff=[[1, None], [0, 1]]), "expected real numbers"),
        (dict(game="custom", payoff=[[1.0, np.nan], [0.0, 1.0]]), "finite"),
        (dict(game="custom", payoff=[[1.0, np.inf], [0.0, 1.0]]), "finite"),
        (dict(game="custom", payoff=[1.0, 2.0]), "ndim >= 2"),
        (dict(game="custom", payoff=np.zeros((2, 0))), "ndim >= 2"),
        (dict(game="penalty", k=float("nan")), "finite number"),
        (dict(game="penalty", k="-10"), "finite number"),
        (dict(game="climbing", k=-10.0), "only applies to game 'penalty'"),
        (dict(game="climbing", render_mode="rgb_array"), "render_mode"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        parallel_env(**kwargs)
    assert "\n" not in str(error.value)


def test_unknown_game_error_lists_every_game() -> None:
    with pytest.raises(ValueError) as error:
        parallel_env("chicken")
    assert all(game in str(error.value) for game in GAMES)


def test_illegal_or_missing_actions_raise_and_finished_episode_cannot_step() -> None:
    env = parallel_env("climbing")
    env.reset()
    with pytest.raises(ValueError, match="not in Discrete"):
        env.step({"agent_0": 3, "agent_1": 0})
    with pytest.raises(ValueError, match="expected exactly one action"):
        env.step({"agent_0": 0})
    env.step({"agent_0": np.int64(0), "agent_1": np.int32(0)})
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": 0, "agent_1": 0})


def test_human_render_prints_table_and_last_joint_action(capsys: pytest.CaptureFixture[str]) -> None:
    env = parallel_env("climbing", render_mode="human")
    env.reset()
    env.step({"agent_0": 1, "agent_1": 2})
    printed = capsys.readouterr().out
    assert "-30" in printed and "(1, 2)" in printed and "reward 6.0" in printed


def test_composes_with_supersuit_vector_env() -> None:
    supersuit = pytest.importorskip("supersuit")
    n_copies = 3
    vec_env = supersuit.pettingzoo_env_to_vec_env_v1(parallel_env("two_step"))
    vec_env = supersuit.concat_vec_envs_v1(vec_env, n_copies, num_cpus=0, base_class="gymnasium")
    obs, _ = vec_env.reset(seed=0)
    assert obs["observation"].shape == (2 * n_copies, 4)
    actions = np.ones(2 * n_copies, dtype=np.int64)  # agent 0 goes to 2B, then both take the optimum
    _, first_rewards, first_terms, _, _ = vec_env.step(actions)
    _, second_rewards, second_terms, _, _ = vec_env.step(actions)
    np.testing.assert_array_equal(first_rewards, np.zeros(2 * n_copies))
    np.testing.assert_array_equal(second_rewards, np.full(2 * n_copies, 8.0))
    assert not first_terms.any() and second_terms.all()
    vec_env.close()


@pytest.mark.parametrize("case", CASES)
def test_box_format_passes_parallel_api_test_with_flat_cached_spaces(case: str) -> None:
    """obs_format="box": the observation alone (no PettingZoo warning about dict observations), mask in infos."""
    env = make(case, obs_format="box")
    assert env.observation_space("agent_0") is env.observation_space("agent_0")
    assert env.observation_space("agent_0") == make(case).observation_space("agent_0")["observation"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(env, num_cycles=10)
    assert [str(w.message) for w in caught if "Agents have different observation space sizes" not in str(w.message)] == []
    obs, infos = env.reset()
    while env.agents:
        for agent in env.agents:
            assert obs[agent] in env.observation_space(agent)
            assert infos[agent]["action_mask"].tolist() == [1] * env.action_space(agent).n
        obs, _, _, _, infos = env.step({agent: 0 for agent in env.agents})


def test_box_format_gives_the_ctde_adapter_the_same_arrays_as_the_dict_format() -> None:
    from semzoo.wrappers.ctde import CTDEEnv

    box, dict_ = CTDEEnv(parallel_env("two_step", obs_format="box")), CTDEEnv(parallel_env("two_step"))
    for (box_arrays, _), (dict_arrays, _) in [(box.reset(), dict_.reset()), (box.step([1, 1])[::4], dict_.step([1, 1])[::4])]:
        for key in ("obs", "state", "avail", "alive"):
            np.testing.assert_array_equal(box_arrays[key], dict_arrays[key])


def test_no_action_step_after_the_end_is_an_empty_no_op() -> None:
    """PettingZoo's MPE answers it so, and SuperSuit's black_death_v3 takes such a step to end an episode."""
    env = parallel_env("climbing")
    env.reset()
    env.step({"agent_0": 0, "agent_1": 0})
    assert env.step({}) == ({}, {}, {}, {}, {})


def test_a_box_format_run_logs_the_rows_of_the_dict_format_run(tmp_path) -> None:
    """`--env-arg obs_format=box` trains: the CTDE adapter reads the masks from the infos, so nothing changes."""
    import csv

    from conftest import NO_ACTOR

    import semzoo
    from semzoo.config import LearnerConfig, TrainConfig

    def rows(obs_format: str) -> list[tuple[str, str, str]]:
        config = TrainConfig(**NO_ACTOR, env="matrix:two_step", env_args={"obs_format": obs_format}, algo="qmix",
                             steps=128, n_envs=4, test_episodes=4, out=str(tmp_path / obs_format),
                             learner=LearnerConfig(batch_size=4, buffer_size=32))
        run_dir, _ = semzoo.train(config, tensorboard=False)
        with open(run_dir / "metrics.csv", newline="") as f:
            return [(r["env_steps"], r["name"], r["value"]) for r in csv.DictReader(f)
                    if not r["name"].endswith("_s")]  # timings

    box_rows = rows("box")
    assert any(name == "loss_td" for _, name, _ in box_rows)
    assert box_rows == rows("dict")
