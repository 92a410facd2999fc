"""SMAX through the SMAC interface: PettingZoo API, seeding, wins and timeouts, the vectorized env,
and a soak of random episodes."""

from __future__ import annotations

import copy
import pickle
import re

import numpy as np
import pytest

pytest.importorskip("jaxmarl")

from pettingzoo.test import api_test, parallel_api_test
from pettingzoo.utils.conversions import parallel_to_aec

from semzoo.envs.maps import PAPER_MAPS, SMAC_MAPS, SMAX_BACKEND, UnknownMapError
from semzoo.envs.smax import SMAXEnv, SMAXVecEnv, available_maps, parallel_env
from semzoo.types import VecCTDEEnv

pytestmark = pytest.mark.smax

MAPS = ["3m", "2s3z", "3s5z"]  # homogeneous, heterogeneous, heterogeneous and larger
SOAK_EPISODES = 1000
SHORT_SOAK_EPISODES = 100
SOAK_ENVS = 100
NOOP, STOP, EAST = 0, 1, 4
FIRST_ATTACK = 6


def random_actions(env, obs, rng):
    return {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}


def random_vec_actions(avail_NAU: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random available action per agent [N, A]."""
    return (rng.random(avail_NAU.shape) * avail_NAU).argmax(-1)


def attack_or_advance(avail_AU: np.ndarray) -> np.ndarray:
    """Attack the first enemy in range, else walk east towards the enemy team [A]."""
    attack = avail_AU[:, FIRST_ATTACK:]
    act = np.where(avail_AU[:, EAST] == 1, EAST, STOP)
    act = np.where(attack.any(-1), FIRST_ATTACK + attack.argmax(-1), act)
    return np.where(avail_AU[:, NOOP] == 1, NOOP, act)


@pytest.mark.parametrize("map_name", MAPS)
def test_parallel_api_test_passes(map_name):
    parallel_api_test(parallel_env(map_name), num_cycles=200)


@pytest.mark.parametrize("map_name", MAPS)
def test_aec_api_test_passes(map_name):
    api_test(parallel_to_aec(parallel_env(map_name)), num_cycles=200)


@pytest.mark.parametrize("map_name", MAPS)
def test_state_and_obs_stay_in_their_spaces_every_step(map_name):
    env = parallel_env(map_name)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=1)
    for _ in range(3):
        assert env.state() in env.state_space
        while env.agents:
            obs, *_ = env.step(random_actions(env, obs, rng))
            assert env.state() in env.state_space
            assert all(o in env.observation_space(a) for a, o in obs.items())
        obs, _ = env.reset()


def play(env, seed: int, n_episodes: int) -> list:
    """Random play from a fixed action seed: the trace of every step of n_episodes."""
    rng = np.random.default_rng(123)
    trace = []
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        while env.agents:
            obs, rew, term, trunc, _info = env.step(random_actions(env, obs, rng))
            trace.append(
                (
                    {a: o["observation"].copy() for a, o in obs.items()},
                    env.state().copy(),
                    rew,
                    term,
                    trunc,
                )
            )
        obs, _ = env.reset()
    return trace


def traces_equal(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for (oa, sa, ra, ta, ua), (ob, sb, rb, tb, ub) in zip(a, b):
        if oa.keys() != ob.keys() or (ra, ta, ua) != (rb, tb, ub) or not np.array_equal(sa, sb):
            return False
        if not all(np.array_equal(oa[k], ob[k]) for k in oa):
            return False
    return True


@pytest.mark.parametrize("map_name", ["3m", "2s3z"])
def test_same_seed_gives_same_episodes_and_other_seed_differs(map_name):
    first = play(parallel_env(map_name), seed=5, n_episodes=3)
    again = play(parallel_env(map_name), seed=5, n_episodes=3)
    other = play(parallel_env(map_name), seed=6, n_episodes=3)
    assert traces_equal(first, again)
    assert not traces_equal(first, other)


@pytest.mark.parametrize("map_name", ["1c3s5z", "2s_vs_1sc", "2c_vs_64zg", "MMM2", "bane_vs_bane"])
def test_paper_map_missing_from_smax_lists_available_maps(map_name):
    assert map_name in PAPER_MAPS
    with pytest.raises(UnknownMapError, match=r"available: .*2s3z.*3m"):
        parallel_env(map_name)


def test_agent_names_carry_unit_types():
    assert parallel_env("2s3z").possible_agents == ["stalker_0", "stalker_1", "zealot_0", "zealot_1", "zealot_2"]
    assert parallel_env("3m").possible_agents == ["marine_0", "marine_1", "marine_2"]


def test_win_terminates_with_battle_won_and_win_bonus():
    env = SMAXEnv("3m", seed=0, enemy_shoots=False)
    env.reset()
    done, info, reward = False, {}, 0.0
    while not done:
        reward, done, info = env.step(attack_or_advance(np.array(env.get_avail_actions())))
    assert info["battle_won"] and "episode_limit" not in info
    assert info["dead_enemies"] == 3 and info["dead_allies"] == 0
    assert reward >= 1.0  # SMAX's win bonus
    assert env.get_stats()["battles_won"] == 1


def test_wrapper_reports_win_as_termination():
    env = parallel_env("3m", enemy_shoots=False)
    obs, _ = env.reset(seed=0)
    while env.agents:
        avail = np.stack([obs[a]["action_mask"] for a in env.agents])
        acts = dict(zip(env.agents, attack_or_advance(avail).tolist()))
        obs, _, term, trunc, infos = env.step(acts)
    assert all(term.values()) and not any(trunc.values())
    assert all(i["battle_won"] for i in infos.values())


def test_time_limit_is_truncation_not_termination():
    env = parallel_env("3m", episode_limit=5)
    env.reset(seed=0)
    steps = 0
    while env.agents:
        _, _, term, trunc, infos = env.step({a: STOP for a in env.agents})
        steps += 1
    assert steps == 5
    assert all(trunc.values()) and not any(term.values())
    assert all(i["episode_limit"] and not i["battle_won"] for i in infos.values())


def test_illegal_action_is_rejected_with_the_legal_ones():
    env = SMAXEnv("3m")
    env.reset()
    with pytest.raises(ValueError, match="cannot take action 0"):
        env.step([0, 1, 1])  # the no-op is for dead agents only


def test_an_unavailable_action_is_refused_naming_the_agent_by_its_pettingzoo_name():
    env = parallel_env("3m")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"^marine_1 cannot take action 6; available: \[1, 2, 3, 4, 5\]; .*"
                                         r"unavailable_action='stop'"):
        env.step({"marine_0": STOP, "marine_1": FIRST_ATTACK, "marine_2": STOP})  # the enemy is out of range


@pytest.mark.parametrize("obs_format", ["dict", "box"])
def test_unavailable_action_stop_plays_the_units_stop(obs_format):
    env, twin = parallel_env("3m", obs_format=obs_format, unavailable_action="stop"), parallel_env("3m")
    env.reset(seed=1)
    twin_obs, _ = twin.reset(seed=1)
    for _ in range(3):  # out of range (attack) and the no-op of a live unit: both stop it, as the twin's stop does
        obs, rewards, *_ = env.step({a: FIRST_ATTACK if i % 2 else NOOP for i, a in enumerate(env.agents)})
        twin_obs, twin_rewards, *_ = twin.step({a: STOP for a in twin.agents})
        for a in twin_obs:
            np.testing.assert_array_equal(obs[a] if obs_format == "box" else obs[a]["observation"],
                                          twin_obs[a]["observation"])
        np.testing.assert_array_equal(env.state(), twin.state())
        assert rewards == twin_rewards


def test_vec_env_refuses_an_unavailable_action_by_agent_name_or_plays_stop():
    vec, stopped, twin = SMAXVecEnv("3m", 2), SMAXVecEnv("3m", 2, unavailable_action="stop"), SMAXVecEnv("3m", 2)
    for env in (vec, stopped, twin):
        env.reset(seed=0)
    attack = np.full((2, 3), FIRST_ATTACK)
    with pytest.raises(ValueError, match=r"^env 0: marine_0 cannot take action 6; available: \[1, 2, 3, 4, 5\]"):
        vec.step(attack)
    arrays, *_ = stopped.step(attack)
    np.testing.assert_array_equal(arrays.state, twin.step(np.full((2, 3), STOP))[0].state)
    with pytest.raises(ValueError, match=r"^env 0: marine_0: action 9 is outside its action space"):
        stopped.step(np.full((2, 3), 9))


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))], ids=["deepcopy", "pickle"])
def test_a_copied_or_unpickled_env_plays_on_exactly_as_the_original(clone):
    env = parallel_env("3m", episode_limit=40, fixed_starts=True, obs_format="box")
    _, infos = env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(3):
        _, _, _, _, infos = env.step({a: int(rng.choice(np.flatnonzero(infos[a]["action_mask"]))) for a in env.agents})
    twin = clone(env)
    assert twin.smac_env is not env.smac_env and twin.smac_env._options == env.smac_env._options
    twin_steps = 0
    while env.agents:  # the rest of the episode, then a whole new one: the key stream carries over too
        assert twin.agents == env.agents
        actions = {a: int(rng.choice(np.flatnonzero(infos[a]["action_mask"]))) for a in env.agents}
        _, rewards, terms, truncs, infos = env.step(actions)
        assert twin.step(actions)[1:4] == (rewards, terms, truncs)
        np.testing.assert_array_equal(twin.state(), env.state())
        twin_steps += 1
    np.testing.assert_array_equal(env.reset()[0]["marine_0"], twin.reset()[0]["marine_0"])
    assert twin_steps > 0 and env.get_stats() == twin.get_stats()


def test_vec_env_implements_protocol_with_fixed_shapes():
    vec = SMAXVecEnv("3m", 4)
    assert isinstance(vec, VecCTDEEnv)
    arrays = vec.reset(seed=0)
    n, a, u = 4, vec.n_agents, vec.n_actions
    assert arrays.obs.shape == (n, a, vec.obs_dim) and arrays.obs.dtype == np.float32
    assert arrays.state.shape == (n, vec.state_dim) and arrays.state.dtype == np.float32
    assert arrays.avail.shape == (n, a, u) and arrays.avail.dtype == bool
    assert arrays.alive.shape == (n, a) and arrays.alive.all()
    assert vec.agent_names == ["marine_0", "marine_1", "marine_2"]
    _out, reward, term, trunc, info = vec.step(random_vec_actions(arrays.avail, np.random.default_rng(0)))
    assert reward.shape == term.shape == trunc.shape == info["battle_won"].shape == (n,)


def test_vec_env_freezes_finished_envs_until_reset():
    vec = SMAXVecEnv("3m", 2, episode_limit=3)
    arrays = vec.reset(seed=0)
    for _ in range(3):
        arrays, reward, term, trunc, _ = vec.step(np.full((2, 3), STOP))
    assert trunc.all() and not term.any()
    final_state = arrays.state.copy()
    arrays, reward, term, trunc, _ = vec.step(np.full((2, 3), STOP))
    assert not (term | trunc).any() and (reward == 0).all()
    np.testing.assert_array_equal(arrays.state, final_state)


@pytest.mark.parametrize("map_name", ["3m", "2s3z"])
def test_vec_env_follows_the_single_env_trajectories(map_name):
    n, seed = 3, 10
    vec = SMAXVecEnv(map_name, n)
    singles = [SMAXEnv(map_name) for _ in range(n)]
    rng = np.random.default_rng(0)
    for episode in range(2):
        arrays = vec.reset(seed=seed if episode == 0 else None)
        for i, env in enumerate(singles):
            if episode == 0:
                env.seed(seed + i)
            env.reset()
        done = np.zeros(n, dtype=bool)
        while not done.all():
            for i, env in enumerate(singles):
                if not done[i]:
                    np.testing.assert_array_equal(arrays.obs[i], np.stack(env.get_obs()))
                    np.testing.assert_array_equal(arrays.state[i], env.get_state())
                    np.testing.assert_array_equal(arrays.avail[i], np.array(env.get_avail_actions(), dtype=bool))
            actions = random_vec_actions(arrays.avail, rng)
            arrays, reward, term, trunc, info = vec.step(actions)
            for i, env in enumerate(singles):
                if done[i]:
                    continue
                r, ended, inf = env.step(actions[i])
                assert r == pytest.approx(float(reward[i]), abs=1e-6)
                assert ended == bool(term[i] or trunc[i])
                assert inf["battle_won"] == bool(info["battle_won"][i])
                assert inf.get("episode_limit", False) == bool(trunc[i])
            done |= term | trunc


def same_carry(x, y) -> bool:
    """Two env carries (SMAX state and PRNG key) equal bit for bit."""
    import jax

    leaves_x, leaves_y = jax.tree.leaves(x), jax.tree.leaves(y)
    return len(leaves_x) == len(leaves_y) and all(np.array_equal(np.asarray(a), np.asarray(b))
                                                  for a, b in zip(leaves_x, leaves_y))


def test_vec_envs_stepped_together_give_their_own_steps_bit_for_bit():
    """K = 3 vec envs in one call (``step_together``) against the same envs stepped one by one, over two episodes
    (the second continues each env's key stream): the same arrays, rewards and flags, and the same carries. A group
    whose episodes all ended is stepped on (by None, or by actions into its frozen envs) and changes in nothing."""
    k, n, seed = 3, 2, 10
    together = [SMAXVecEnv("3m", n, episode_limit=40) for _ in range(k)]
    alone = [SMAXVecEnv("3m", n, episode_limit=40) for _ in range(k)]
    rng = np.random.default_rng(0)
    ended_at = set()
    for episode in range(2):
        seeds = [seed + n * j if episode == 0 else None for j in range(k)]
        arrays = [env.reset(seed=s) for env, s in zip(together, seeds)]
        for env, s, want in zip(alone, seeds, arrays):
            got = env.reset(seed=s)
            assert all(np.array_equal(getattr(got, f), getattr(want, f)) for f in ("obs", "state", "avail", "alive"))
        ended = np.zeros((k, n), dtype=bool)
        going = [True] * k
        for t in range(together[0].episode_limit):
            # a finished group: group 0 is left out (None), the others get no-ops into their frozen envs
            actions = [random_vec_actions(arrays[j].avail, rng) if going[j] else None if j == 0
                       else np.zeros((n, 3), np.int64) for j in range(k)]
            results = SMAXVecEnv.step_together(together, actions)
            assert (results[0] is None) == (not going[0])
            for j in range(k):
                if not going[j]:
                    continue
                got, want = results[j], alone[j].step(actions[j])
                for field in ("obs", "state", "avail", "alive"):
                    assert np.array_equal(getattr(got[0], field), getattr(want[0], field)), (episode, t, j, field)
                assert all(np.array_equal(g, w) for g, w in zip(got[1:4], want[1:4])), (episode, t, j)
                assert np.array_equal(got[4]["battle_won"], want[4]["battle_won"])
                arrays[j] = got[0]
                ended[j] |= got[2] | got[3]
                if ended[j].all():
                    going[j] = False
                    ended_at.add(t)
            if not any(going):
                break
        for env, want in zip(together, alone):
            assert same_carry(env._carry, want._carry) and np.array_equal(env._frozen_N, want._frozen_N)
            assert np.array_equal(env._arrays.state, want._arrays.state)
    assert len(ended_at) > 1, "every group ended at the same step: no group was stepped on after its end"
    # two of the three (a group whose runs finished training): padded to the compiled size, the same steps
    arrays = [env.reset(seed=seed) for env in together[:2] + alone[:2]][:2]
    actions = [random_vec_actions(a.avail, rng) for a in arrays]
    got = SMAXVecEnv.step_together(together[:2], actions)
    wants = [env.step(act) for env, act in zip(alone[:2], actions)]
    assert all(np.array_equal(g[0].state, w[0].state) and np.array_equal(g[1], w[1]) for g, w in zip(got, wants))
    assert 2 not in together[0]._core.group_sizes, "a smaller group compiled a step of its own"


def same_reset(env: SMAXVecEnv, want_env: SMAXVecEnv, got, want) -> bool:
    """Two resets left the same env: returned arrays, stored arrays, carry (state and PRNG key), no env frozen."""
    fields = ("obs", "state", "avail", "alive")
    return (all(np.array_equal(getattr(got, f), getattr(want, f)) for f in fields)
            and all(np.array_equal(getattr(env._arrays, f), getattr(want, f)) for f in fields)
            and same_carry(env._carry, want_env._carry) and np.array_equal(env._frozen_N, want_env._frozen_N)
            and not env._frozen_N.any())


@pytest.mark.slow
def test_vec_envs_reset_together_are_left_as_their_own_resets_bit_for_bit():
    """K = 3 vec envs reset in one call (``reset_together``) against the same envs reset one by one: with seeds,
    without one on an env never reset (seeded from 0 as ``reset`` does), and without seeds after an episode that
    froze every env (each env's key stream goes on, unfrozen); a grouped step after a grouped reset is the step
    after the env's own reset; two of the three, padded to the compiled K, likewise."""
    k, n, limit = 3, 2, 4
    together = [SMAXVecEnv("3m", n, episode_limit=limit) for _ in range(k)]
    alone = [SMAXVecEnv("3m", n, episode_limit=limit) for _ in range(k)]
    rng = np.random.default_rng(0)
    for seeds in ([10, None, 2**31 - 1], [None, 7, None]):  # 2**31 - 1: the last env's second seed wraps in int32
        got = SMAXVecEnv.reset_together(together, seeds)
        want = [env.reset(seed=seed) for env, seed in zip(alone, seeds)]
        assert all(same_reset(*four) for four in zip(together, alone, got, want)), seeds
        for t in range(limit):  # to the limit: every env frozen before the next reset
            actions = [random_vec_actions(arrays.avail, rng) for arrays in got]
            stepped = SMAXVecEnv.step_together(together, actions)
            for j, (env, act) in enumerate(zip(alone, actions)):
                result = stepped[j]
                assert result is not None
                assert np.array_equal(result[0].state, env.step(act)[0].state), (seeds, t, j)
                got[j] = result[0]
        assert all(env._frozen_N.all() for env in together)
    got = SMAXVecEnv.reset_together(together[:2], [3, None])
    want = [alone[0].reset(seed=3), alone[1].reset()]
    assert all(same_reset(*four) for four in zip(together, alone, got, want))
    assert 2 not in together[0]._core.group_sizes, "a smaller group compiled a reset of its own"


def test_agent_inputs_are_jax_buffers_handed_to_torch_on_the_cpu():
    """JAX 0.10 on the CPU hands its buffers to torch through DLPack without a copy: env k's tensors of a grouped
    reset or step are row k of the call's K-stacked arrays; their values are the host arrays'."""
    import torch

    cpu = torch.device("cpu")
    envs = [SMAXVecEnv("3m", 2), SMAXVecEnv("3m", 2)]

    def handed_over(env: SMAXVecEnv, arrays, k: int) -> bool:
        got = env.agent_inputs(cpu)
        assert got is not None
        obs, avail = got
        inputs, row = env._handed
        assert row == (None if k < 0 else k)
        at = max(k, 0)
        return (obs.dtype == torch.float32 and avail.dtype == torch.bool
                and torch.equal(obs, torch.from_numpy(arrays.obs)) and torch.equal(avail, torch.from_numpy(arrays.avail))
                and obs.data_ptr() == inputs.obs.unsafe_buffer_pointer() + at * obs.nbytes
                and avail.data_ptr() == inputs.avail.unsafe_buffer_pointer() + at * avail.nbytes)

    rng = np.random.default_rng(0)
    arrays = envs[0].reset(seed=0)
    assert handed_over(envs[0], arrays, -1)
    arrays = envs[0].step(random_vec_actions(arrays.avail, rng))[0]
    assert handed_over(envs[0], arrays, -1)
    grouped = SMAXVecEnv.reset_together(envs, [0, 2])
    assert all(handed_over(env, a, k) for k, (env, a) in enumerate(zip(envs, grouped)))
    results = SMAXVecEnv.step_together(envs, [random_vec_actions(a.avail, rng) for a in grouped])
    assert all(r is not None and handed_over(env, r[0], k) for k, (env, r) in enumerate(zip(envs, results)))
    assert envs[0].agent_inputs(torch.device("meta")) is None  # JAX's arrays are not there: the runner converts
    envs[0].hand_over_inputs = False
    assert envs[0].agent_inputs(cpu) is None


def test_vec_envs_that_cannot_step_together_are_refused_naming_why():
    env, other = SMAXVecEnv("3m", 2), SMAXVecEnv("3m", 2)
    assert SMAXVecEnv.why_not_together([env, other]) is None
    with pytest.raises(ValueError, match="some env was not reset"):
        SMAXVecEnv.step_together([env, other], [None, None])
    for envs, why in [([env, SMAXVecEnv("3m", 3)], "the envs differ in n_envs ([2, 3])"),
                      ([env, SMAXVecEnv("3m", 2, episode_limit=7)], "the envs differ in map, episode limit or SMAX options"),
                      ([env, SMAXVecEnv("2s3z", 2)], "the envs differ in map, episode limit or SMAX options"),
                      ([env, env], "an env is given twice"), ([env, SMAXEnv("3m")], "not all envs are SMAXVecEnvs"),
                      ([], "no envs given")]:
        assert SMAXVecEnv.why_not_together(envs) == why
        with pytest.raises(ValueError, match=f"^SMAXVecEnv.step_together: {re.escape(why)}$"):
            SMAXVecEnv.step_together(envs, [None] * len(envs))
        with pytest.raises(ValueError, match=f"^SMAXVecEnv.reset_together: {re.escape(why)}$"):
            SMAXVecEnv.reset_together(envs, [0] * len(envs))
    with pytest.raises(ValueError, match=r"^SMAXVecEnv.reset_together: 2 envs with 1 seeds: give one seed"):
        SMAXVecEnv.reset_together([env, other], [0])
    arrays = [env.reset(seed=0), other.reset(seed=2)]
    with pytest.raises(ValueError, match="2 envs with 1 actions"):
        SMAXVecEnv.step_together([env, other], [None])
    illegal = random_vec_actions(arrays[1].avail, np.random.default_rng(0))
    illegal[1, 2] = NOOP  # the no-op is for dead agents only: the error of other.step, naming the env
    state_before = env._arrays.state.copy()
    with pytest.raises(ValueError, match=r"^envs\[1\]: env 1: marine_2 cannot take action 0; available: "):
        SMAXVecEnv.step_together([env, other], [random_vec_actions(arrays[0].avail, np.random.default_rng(1)), illegal])
    assert np.array_equal(env._arrays.state, state_before)  # nothing stepped
    with pytest.raises(TypeError, match=r"^envs\[0\]: actions must be integers"):
        SMAXVecEnv.step_together([env, other], [np.zeros((2, 3)), None])


SOAK_CASES = [
    ("3m", SOAK_EPISODES),
    ("2s3z", SHORT_SOAK_EPISODES),
    ("3s5z", SHORT_SOAK_EPISODES),
    pytest.param("2s3z", SOAK_EPISODES, marks=pytest.mark.long),
    pytest.param("3s5z", SOAK_EPISODES, marks=pytest.mark.long),
    pytest.param("27m_vs_30m", SOAK_EPISODES, marks=pytest.mark.long),
]


@pytest.mark.parametrize(("map_name", "n_episodes"), SOAK_CASES)
def test_soak_random_episodes_stay_legal_finite_and_in_bounds(map_name, n_episodes):
    """Random episodes in the vectorized env, SOAK_ENVS at a time.

    Default suite: 1000 on 3m, 100 on 2s3z and 3s5z; with -m long: 1000 on 2s3z, 3s5z, 27m_vs_30m.
    """
    vec = SMAXVecEnv(map_name, SOAK_ENVS)
    rng = np.random.default_rng(0)
    episodes = 0
    batch = 0
    while episodes < n_episodes:
        arrays = vec.reset(seed=batch * SOAK_ENVS)
        running = np.ones(SOAK_ENVS, dtype=bool)
        for _ in range(vec.episode_limit):
            check_arrays(arrays, running)
            arrays, reward, term, trunc, _ = vec.step(random_vec_actions(arrays.avail, rng))
            assert np.isfinite(reward).all()
            running &= ~(term | trunc)
            if not running.any():
                break
        assert not running.any(), "an episode outlived the episode limit"
        check_arrays(arrays, np.ones(SOAK_ENVS, dtype=bool))
        episodes += SOAK_ENVS
        batch += 1


def check_arrays(arrays, running: np.ndarray) -> None:
    obs, state, avail, alive = arrays.obs[running], arrays.state[running], arrays.avail[running], arrays.alive[running]
    assert np.isfinite(obs).all() and np.isfinite(state).all()
    assert obs.min() >= -1.0 and obs.max() <= 1.0
    assert state.min() >= 0.0 and state.max() <= 1.0
    assert avail.any(-1).all(), "an agent without a legal action"
    np.testing.assert_array_equal(avail[..., NOOP], ~alive)  # the no-op is the dead agents' only action
    assert not avail[~alive][:, 1:].any()
    assert not obs[~alive].any()


def test_wrapper_soak_keys_are_the_live_agents():
    env = parallel_env("3m")
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    for _ in range(100):
        live = set(env.agents)
        assert set(obs) == live
        while env.agents:
            obs, rew, term, trunc, info = env.step(random_actions(env, obs, rng))
            assert set(obs) == set(rew) == set(term) == set(trunc) == set(info) == live
            assert all(o in env.observation_space(a) for a, o in obs.items())
            assert np.isfinite(env.state()).all()
            live = set(env.agents)
            assert all(o["action_mask"].any() for a, o in obs.items() if a in live)
        obs, _ = env.reset()


def test_map_table_smax_sizes_match_what_smax_reports():
    smax_maps = {m.name for m in SMAC_MAPS.values() if SMAX_BACKEND in m.backends}
    assert smax_maps == {m for m in available_maps() if not m.startswith("smacv2")}
    for name in ["3m", "2s3z", "3s5z", "27m_vs_30m", "6h_vs_8z"]:
        env = SMAXEnv(name)
        m = SMAC_MAPS[name]
        assert (env.get_obs_size(), env.get_state_size(), env.n_actions) == (
            m.smax_obs_dim,
            m.smax_state_dim,
            m.n_actions,
        )
        assert env.n_agents == m.n_agents and env.n_enemies == m.n_enemies


@pytest.mark.parametrize(("options", "needle"), [({"attack_mode": "nearest"}, "attack_mode='nearest'"),
                                                 ({"enemy_shoots": "yes"}, "enemy_shoots='yes'"),
                                                 ({"episode_limit": True}, "episode_limit"),
                                                 ({"unavailable_action": "noop"}, "unavailable_action='noop'")])
def test_single_and_vectorised_env_refuse_the_same_bad_options(options, needle):
    with pytest.raises((ValueError, TypeError), match=needle) as single:
        parallel_env("3m", **options)
    with pytest.raises((ValueError, TypeError), match=needle) as vectorised:
        SMAXVecEnv("3m", 2, **options)
    assert str(single.value) == str(vectorised.value)


def test_the_jax_free_smax_tables_match_jaxmarl_and_the_factory():
    import inspect

    from semzoo.envs import smax_args

    assert set(smax_args.SMAX_MAPS) == set(available_maps())
    assert tuple(inspect.signature(parallel_env).parameters)[1:] == smax_args.FACTORY_ARGS


@pytest.mark.parametrize("env_args", [{"reward": "sprase"}, {"fixed_start": True}, {"fixed_starts": "yes"},
                                      {"time_limit": 50}, {"spawn": "left"}, {"profile": "sc2"},
                                      {"obs_format": "flat"}, {"unavailable_action": "skip"}, {"enemy_shoots": 1},
                                      {"attack_mode": "wild"}, {"episode_limit": 0}, {"profile": "smac", "obs": 1}])
def test_the_jax_free_smax_check_refuses_as_the_factory_does(env_args):
    from semzoo.envs.registry import make_env
    from semzoo.envs.smax_args import check_env_args

    with pytest.raises((ValueError, TypeError)) as built:
        make_env("smax:3m", **env_args)
    with pytest.raises(type(built.value)) as checked:
        check_env_args("smax:3m", env_args)
    assert str(checked.value) == str(built.value)


@pytest.mark.parametrize("env_id", ["smax:3mm", "smax:smacv2_5_units"])
def test_the_jax_free_smax_check_refuses_a_map_as_the_factory_does(env_id):
    from semzoo.envs.registry import make_env
    from semzoo.envs.smax_args import check_env_args

    env_args = {"profile": "smac"}
    with pytest.raises(ValueError) as built:
        make_env(env_id, **env_args)
    with pytest.raises(ValueError) as checked:
        check_env_args(env_id, env_args)
    assert str(checked.value) == str(built.value)


def test_a_run_refuses_the_env_args_it_sets_itself_naming_the_flag():
    from semzoo.envs.smax import check_run_env_args

    check_run_env_args({"attack_mode": "random", "enemy_shoots": False})
    with pytest.raises(ValueError, match="use --seed 3"):
        check_run_env_args({"seed": 3})
    with pytest.raises(ValueError, match="use --episode-limit 50"):
        check_run_env_args({"episode_limit": 50})


@pytest.mark.parametrize("obs_format", ["dict", "box"])
def test_reset_infos_have_the_keys_step_returns_with_start_values(obs_format):
    env = parallel_env("3m", obs_format=obs_format)
    _, reset_infos = env.reset(seed=0)
    assert not any(info["battle_won"] or info["dead_allies"] or info["dead_enemies"] for info in reset_infos.values())
    _, _, _, _, step_infos = env.step({a: STOP for a in env.agents})
    assert {a: set(i) for a, i in reset_infos.items()} == {a: set(i) for a, i in step_infos.items()}
    assert ("action_mask" in reset_infos["marine_0"]) == (obs_format == "box")


def test_box_format_carries_the_mask_in_infos_and_wins_like_the_dict_format():
    env, dict_env = parallel_env("3m", obs_format="box"), parallel_env("3m")
    assert env.observation_space("marine_0") is env.observation_space("marine_0")
    obs, infos = env.reset(seed=2)
    dict_obs, _ = dict_env.reset(seed=2)
    while env.agents:
        assert set(obs) == set(dict_obs)
        for a in obs:
            np.testing.assert_array_equal(obs[a], dict_obs[a]["observation"])
            np.testing.assert_array_equal(infos[a]["action_mask"], dict_obs[a]["action_mask"])
        avail_AU = np.stack([infos[a]["action_mask"] for a in env.agents])
        actions = dict(zip(env.agents, attack_or_advance(avail_AU).tolist()))
        obs, _, _, _, infos = env.step(actions)
        dict_obs, *_ = dict_env.step(actions)
    assert any(info["battle_won"] for info in infos.values())


def test_vec_env_checks_the_obs_format_of_a_runs_env_args():
    SMAXVecEnv("3m", n_envs=1, obs_format="box")  # a run passes smax:<map> env args here; arrays have no format
    with pytest.raises(ValueError, match="obs_format='flat'"):
        SMAXVecEnv("3m", n_envs=1, obs_format="flat")


def test_torchrl_pettingzoo_wrapper_sees_battle_won_in_its_info_spec():
    """TorchRL builds its info spec from the infos of reset(): battle_won must be there from the start."""
    pytest.importorskip("torchrl")
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    env = PettingZooWrapper(parallel_env("3m", episode_limit=20), use_mask=True, categorical_actions=True)
    info_spec = env.observation_spec["marine", "info"]
    assert {"battle_won", "dead_allies", "dead_enemies", "episode_limit"} <= set(info_spec.keys())
    rollout = env.rollout(3)
    assert rollout["next", "marine", "info", "battle_won"].shape == (3, 3)
