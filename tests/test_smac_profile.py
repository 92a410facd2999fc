"""SMAC on SMAX (``--env-arg profile=smac`` and its parts): SMAC's dense reward, episode limits, attacks within 6 with
the attack order's walk, the map edge, SMAC's observation and state, each formula checked by hand on a constructed
SMAX state, and each option through ``semzoo.make_env``, ``SMAXVecEnv`` and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("jaxmarl")

import jax
import jax.numpy as jnp
from typer.testing import CliRunner

from semzoo import make_env
from semzoo.cli import app
from semzoo.envs import smac_jax, smac_rules
from semzoo.envs.maps import SMAC_MAPS
from semzoo.envs.smax import SMAXVecEnv, _core, resolve_options

pytestmark = pytest.mark.smax

NOOP, STOP, NORTH, SOUTH, EAST, WEST, FIRST_ATTACK = 0, 1, 2, 3, 4, 5, 6


def smax_state(map_name: str, positions: list[tuple[float, float]], health: list[float] | None = None,
               alive: list[bool] | None = None, **option_values: str):
    """(core, SMAX State) of ``map_name`` with the units placed at ``positions`` (allies first) and the given health
    (SMAX's: hit points plus shields) and liveness."""
    core = _core(map_name, None, True, "closest", resolve_options("smac", **option_values))
    carry, _ = core.reset(jax.random.PRNGKey(0))
    s = carry[0].state
    health_U = s.unit_health if health is None else jnp.asarray(health, jnp.float32)
    alive_U = s.unit_alive if alive is None else jnp.asarray(alive)
    s = s.replace(unit_positions=jnp.asarray(positions, jnp.float32), unit_health=health_U * alive_U,
                  unit_alive=alive_U)
    return core, s


def facts(core, map_name: str):
    return smac_rules.unit_facts(map_name, list(core.env.unit_type_names), np.asarray(core.env.unit_type_health))


TWO_S3Z_START = [(8, 16), (8, 17), (8, 18), (8, 19), (8, 20), (24, 16), (24, 17), (24, 18), (24, 19), (24, 20)]


def test_smac_dense_reward_on_a_constructed_2s3z_step_is_the_hand_computed_value():
    """SMAC: (|damage to the enemy's health and shields + 10 per kill| + 200 at a win) x 20 / max_reward, with
    max_reward = 10 x 5 + 200 + 2 x 160 + 3 x 150 = 1020 on 2s3z (SMAX's health is SC2's hit points plus shields)."""
    core, before = smax_state("2s3z", TWO_S3Z_START)
    after = before.replace(unit_health=before.unit_health.at[5].set(100.0).at[7].set(0.0).at[0].set(110.0),
                           unit_alive=before.unit_alive.at[7].set(False))
    # the enemy stalker loses 60, the enemy zealot dies (150 and a kill); the ally's 50 lost do not count
    expected = (60.0 + 150.0 + 10.0) * 20.0 / 1020.0
    assert float(smac_jax.reward(core.env, before, after)) == pytest.approx(expected, rel=1e-6)
    # the last enemy, at 30, dies: its 30, the kill and the win
    last = before.replace(unit_alive=jnp.asarray([True] * 5 + [False] * 4 + [True]),
                          unit_health=jnp.asarray([160.0, 160, 150, 150, 150, 0, 0, 0, 0, 30]))
    won = last.replace(unit_alive=last.unit_alive.at[9].set(False), unit_health=last.unit_health.at[9].set(0.0))
    assert float(smac_jax.reward(core.env, last, won)) == pytest.approx((30 + 10 + 200) * 20.0 / 1020.0, rel=1e-6)
    # a draw (both teams gone in the step) pays no win, as SMAC's game end code 0
    draw = won.replace(unit_alive=jnp.zeros(10, bool), unit_health=jnp.zeros(10))
    assert float(smac_jax.reward(core.env, last, draw)) == pytest.approx((30 + 10) * 20.0 / 1020.0, rel=1e-6)


def test_a_won_episode_on_the_smac_reward_returns_smacs_maximum_of_20():
    env = make_env("smax:3m", reward="smac", enemy_shoots=False)
    obs, _ = env.reset(seed=0)
    total, info = 0.0, {}
    while env.agents:
        avail = np.stack([obs[a]["action_mask"] for a in env.agents])
        attack = avail[:, FIRST_ATTACK:]
        act = np.where(attack.any(-1), FIRST_ATTACK + attack.argmax(-1), np.where(avail[:, EAST] == 1, EAST, STOP))
        act = np.where(avail[:, NOOP] == 1, NOOP, act)
        obs, rewards, _, _, infos = env.step(dict(zip(env.agents, act.tolist())))
        total += next(iter(rewards.values()))
        info = next(iter(infos.values()))
    assert info["battle_won"] and info["dead_allies"] == 0
    assert total == pytest.approx(20.0, rel=1e-5)  # all the enemies' health, every kill and the win


def test_smac_observation_on_a_constructed_3m_state_is_the_hand_computed_vector():
    # agent 0 at (10, 16); ally 1 3 north of it; ally 2 dead; enemy 0 4 east (30 of 45 health, attackable within 6),
    # enemy 1 10 east (out of sight 9), enemy 2 at (13, 12): 5 away, attackable
    positions = [(10, 16), (10, 19), (5, 5), (14, 16), (20, 16), (13, 12)]
    core, s = smax_state("3m", positions, health=[45, 45, 45, 30, 45, 45], alive=[True, True, False, True, True, True])
    attacks = smac_jax.attacks_available(s, 3)
    moves = smac_jax.moves_available(s, 3, jnp.asarray([32.0, 32.0]))
    obs = np.asarray(smac_jax.observation(s, facts(core, "3m"), 3, moves, attacks))
    expected = np.concatenate([
        [1, 1, 1, 1],  # north, south, east, west
        [1, 4 / 9, 4 / 9, 0, 30 / 45],  # enemy 0
        [0, 0, 0, 0, 0],  # enemy 1: out of sight
        [1, 5 / 9, 3 / 9, -4 / 9, 1],  # enemy 2
        [1, 3 / 9, 0, 3 / 9, 1],  # ally 1
        [0, 0, 0, 0, 0],  # ally 2: dead
        [1],  # own health
    ])
    assert obs.shape == (3, SMAC_MAPS["3m"].obs_dim)
    np.testing.assert_allclose(obs[0], expected, atol=1e-6)
    assert not obs[2].any()  # a dead agent sees nothing


def test_smac_observation_splits_protoss_health_into_hit_points_and_shields_with_smacs_type_bits():
    # 2s3z: ally 2 a zealot at 120 (hit points 100 of 100, shield 20 of 50); enemy 0 a stalker at 60 (hit points 60
    # of 80, no shield left) 3 east of it. SMAC's type bits: allies stalker 0, zealot 1; enemies zealot 0, stalker 1.
    positions = [(2, 2), (2, 30), (10, 16), (30, 2), (30, 30), (13, 16), (30, 10), (30, 12), (30, 14), (30, 20)]
    health = [160, 160, 120, 150, 150, 60, 160, 150, 150, 150]
    core, s = smax_state("2s3z", positions, health=health)
    attacks = smac_jax.attacks_available(s, 5)
    moves = smac_jax.moves_available(s, 5, jnp.asarray([32.0, 32.0]))
    obs = np.asarray(smac_jax.observation(s, facts(core, "2s3z"), 5, moves, attacks))[2]
    enemy_block = 4 + 1 + 1 + 2  # flag, distance, dx, dy, health, shield, 2 type bits
    np.testing.assert_allclose(obs[4:4 + enemy_block], [1, 3 / 9, 3 / 9, 0, 60 / 80, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(obs[-4:], [100 / 100, 20 / 50, 0, 1], atol=1e-6)  # own: health, shield, zealot
    assert obs.shape == (SMAC_MAPS["2s3z"].obs_dim,)


def test_smac_state_on_a_constructed_3m_state_has_relative_positions_cooldowns_and_last_actions():
    positions = [(10, 16), (16, 24), (5, 5), (20, 8), (24, 16), (13, 12)]
    core, s = smax_state("3m", positions, health=[45, 45, 45, 9, 45, 45], alive=[True, True, False, True, True, True])
    s = s.replace(unit_weapon_cooldowns=jnp.asarray([0.305, -0.2, 0, 0, 0, 0], jnp.float32))
    last = jax.nn.one_hot(jnp.asarray([STOP, FIRST_ATTACK + 2, NOOP]), 9)
    state = np.asarray(smac_jax.state(s, facts(core, "3m"), 3, jnp.asarray([32.0, 32.0]), last))
    # health, cooldown (0.305 s x 22.4 loops/s over a marine's 15 loops; SMAX's -0.2 s is SC2's 0), x, y; ally 2 dead
    expected_allies = [1, 0.305 * 22.4 / 15, -6 / 32, 0, 1, 0, 0, 8 / 32, 0, 0, 0, 0]
    expected_enemies = [9 / 45, 4 / 32, -8 / 32, 1, 8 / 32, 0, 1, -3 / 32, -4 / 32]  # health, x, y
    expected_last = np.eye(9)[[STOP, FIRST_ATTACK + 2, NOOP]].reshape(-1)
    np.testing.assert_allclose(state, np.concatenate([expected_allies, expected_enemies, expected_last]), atol=1e-6)
    assert state.shape == (SMAC_MAPS["3m"].state_dim,)


def test_the_profile_gives_smacs_sizes_limits_and_state_layout_on_every_paper_map_smax_has():
    for map_name in ("3m", "2s3z", "3s5z"):
        env = make_env(f"smax:{map_name}", profile="smac")
        info, agent = SMAC_MAPS[map_name], env.possible_agents[0]
        assert env.observation_space(agent)["observation"].shape == (info.obs_dim,)
        assert env.state_space.shape == (info.state_dim,)
        assert env.unwrapped.episode_limit == info.episode_limit  # 60, 120, 150
        obs, _ = env.reset(seed=3)
        assert env.state_space.contains(env.state()) and env.observation_space(agent).contains(obs[agent])
    assert make_env("smax:2s3z").unwrapped.episode_limit == 100  # SMAX's own, by default
    assert make_env("smax:2s3z", time_limit="smac").unwrapped.episode_limit == 120


def test_state_carries_the_last_actions_the_agents_took():
    env = make_env("smax:3m", state="smac", fixed_starts=True)
    env.reset(seed=0)
    n_actions = SMAC_MAPS["3m"].n_actions
    assert not env.state()[-3 * n_actions:].any()  # nothing played yet
    env.step({agent: action for agent, action in zip(env.agents, (STOP, NORTH, EAST))})
    np.testing.assert_array_equal(env.state()[-3 * n_actions:], np.eye(n_actions)[[STOP, NORTH, EAST]].reshape(-1))


def test_attack_is_available_within_6_and_the_attack_order_walks_a_zealot_at_its_target():
    # a zealot (range 2) 5 from an enemy: SMAX's own rule gives no attack, SMAC's does
    positions = [(2, 2), (2, 30), (10, 16), (30, 2), (30, 30), (15, 16), (30, 10), (30, 12), (30, 14), (30, 20)]
    core, s = smax_state("2s3z", positions)
    assert bool(smac_jax.attacks_available(s, 5)[2, 0]) and not bool(smac_jax.attacks_available(s, 5)[2, 1])
    full_step = 3.15 * 8 / 22.4  # a zealot's speed x 8 world steps of 1/22.4 s (step_time=smac)
    smax_attack_on_0 = smac_jax.SMAX_N_MOVEMENT + 0
    attack_A = jnp.asarray([4, 4, smax_attack_on_0, 4, 4])
    move = np.asarray(smac_jax.walk_at_targets(core.env._env, s, jnp.zeros((5, 2)), attack_A))
    np.testing.assert_allclose(move[2], [1.0, 0.0], atol=1e-6)  # full speed, straight at it
    near = s.replace(unit_positions=s.unit_positions.at[2].set(jnp.asarray([12.2, 16.0])))  # 2.8 away
    move = np.asarray(smac_jax.walk_at_targets(core.env._env, near, jnp.zeros((5, 2)), attack_A))
    np.testing.assert_allclose(move[2], [(2.8 - 2 + smac_rules.ATTACK_STOP_INSIDE) / full_step, 0.0], atol=1e-5)
    inside = s.replace(unit_positions=s.unit_positions.at[2].set(jnp.asarray([13.5, 16.0])))  # in its own range
    assert not np.asarray(smac_jax.walk_at_targets(core.env._env, inside, jnp.zeros((5, 2)), attack_A)).any()


def test_an_attacking_zealot_closes_in_and_hits_under_the_attack_option():
    """Through the env (2s3z, SMAC's observation): the zealots walk east until an attack is available, then attack
    that enemy. The first attack is chosen from beyond the zealot's own range 2, and it lands: the target loses
    shields or health."""
    env = make_env("smax:2s3z", attack="smac", obs="smac", enemy_shoots=False, fixed_starts=True)
    obs, _ = env.reset(seed=0)
    zealots, block = env.agents[2:], 8  # per enemy: attackable, distance / 9, dx, dy, health, shield, 2 type bits
    targets: dict[str, int] = {}
    for _ in range(60):
        acts = {agent: STOP for agent in env.agents}
        for agent in zealots:
            mask, features = obs[agent]["action_mask"], obs[agent]["observation"]
            if agent not in targets and mask[FIRST_ATTACK:].any():
                targets[agent] = int(np.argmax(mask[FIRST_ATTACK:]))
                assert features[4 + block * targets[agent] + 1] * 9 > 2.0  # chosen from outside its own range
            acts[agent] = FIRST_ATTACK + targets[agent] if agent in targets else EAST
            if not mask[acts[agent]]:
                acts[agent] = STOP
        obs, _, _, _, _ = env.step(acts)
        hurt = [obs[z]["observation"][4 + block * k + 4: 4 + block * k + 6].sum() < 2 for z, k in targets.items()]
        if any(hurt):
            return
    pytest.fail(f"no zealot's target was hit in 60 steps (targets {targets})")


@pytest.mark.slow  # two 3m cores and two long episodes
def test_walls_option_masks_moves_into_the_edge_and_kills_nobody():
    env = make_env("smax:3m", walls="smac", enemy_shoots=False)
    obs, _ = env.reset(seed=0)
    for _ in range(30):
        avail = np.stack([obs[a]["action_mask"] for a in env.agents])
        act = np.where(avail[:, WEST] == 1, WEST, STOP)
        obs, _, _, _, infos = env.step(dict(zip(env.agents, act.tolist())))
    assert next(iter(infos.values()))["dead_allies"] == 0
    assert all(obs[a]["action_mask"][WEST] == 0 for a in env.agents)  # all at the edge, west masked
    default = make_env("smax:3m", enemy_shoots=False)  # SMAX's: the edge kills
    obs, _ = default.reset(seed=0)
    while default.agents:
        obs, _, _, _, infos = default.step({a: WEST for a in default.agents})
    assert next(iter(infos.values()))["dead_allies"] == 3


def test_a_given_option_keeps_its_value_against_the_profile_and_defaults_stay_smaxs():
    assert make_env("smax:3m").unwrapped.smac_env.options == smac_rules.Options()
    options = make_env("smax:3m", profile="smac", reward="dense", fixed_starts=False).unwrapped.smac_env.options
    assert (options.reward, options.fixed_starts) == ("dense", False)
    assert (options.time_limit, options.step_time, options.attack, options.walls, options.obs,
            options.state, options.spawn) == ("smac",) * 7
    assert SMAXVecEnv("3m", 2, profile="smac", obs="smax").options == options.__class__(
        reward="smac", time_limit="smac", step_time="smac", attack="smac", walls="smac", obs="smax", state="smac",
        spawn="smac", fixed_starts=True)


@pytest.mark.slow  # compiles the vectorised 2s3z core with SMAC's rules (25 s or more on 2 busy cores)
def test_the_vector_env_plays_the_profile_as_the_single_env_does():
    vec = SMAXVecEnv("2s3z", 2, profile="smac")
    arrays = vec.reset(seed=5)
    single = make_env("smax:2s3z", profile="smac").unwrapped.smac_env
    single.seed(6)
    obs, state = single.reset()
    np.testing.assert_array_equal(arrays.obs[1], obs)
    np.testing.assert_array_equal(arrays.state[1], state)
    rng = np.random.default_rng(0)
    for _ in range(10):
        act = np.stack([[rng.choice(np.flatnonzero(row)) for row in avail] for avail in arrays.avail])
        arrays, reward, _, _, _ = vec.step(act)
        r, _, _ = single.step(act[1])
        np.testing.assert_array_equal(arrays.state[1], single.get_state())
        assert reward[1] == pytest.approx(r)


@pytest.mark.parametrize(("arg", "message"), [
    ("attack=melee", "attack='melee': expected one of unit_range, smac (default unit_range)"),
    ("profile=sc2", "profile='sc2': expected one of smax, smac (default smax; a training run's smac on a map"),
    ("walls=soft", "walls='soft': expected one of death, smac (default death)"),
    ("time_limit=10", "time_limit=10: expected one of smax, smac (default smax)"),
])
def test_a_bad_option_is_one_line_naming_the_argument_the_values_and_the_default(arg, message, tmp_path):
    key, value = arg.split("=")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_env("smax:3m", **{key: json.loads(value) if value.isdigit() else value})
    result = CliRunner().invoke(app, ["train", "--env", "smax:3m", "--env-arg", arg, "--steps", "10",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_smacs_rules_refuse_a_smax_only_map_in_one_line():
    with pytest.raises(ValueError, match="smax:smacv2_5_units has no StarCraft II SMAC map"):
        make_env("smax:smacv2_5_units", profile="smac")


def test_envs_lists_the_smac_profile_and_what_it_sets():
    result = CliRunner().invoke(app, ["envs"])
    assert result.exit_code == 0, result.output
    assert "profile=smac" in result.output
    for name in smac_rules.OPTIONS:
        assert f"  {name}=" in result.output


@pytest.mark.slow  # about 26 s of CPU: SMAX runs compiled for two profiles
def test_a_run_on_a_smac_map_trains_on_the_profile_unless_its_env_arguments_name_another(tmp_path):
    def trained(*flags: str) -> dict:
        result = CliRunner().invoke(app, ["train", "--env", "smax:3m", "--algo", "qmix", "--steps", "30",
                                          "--test-interval", "30", "--test-episodes", "1", "--no-tensorboard",
                                          "--out", str(tmp_path), *flags])
        assert result.exit_code == 0, result.output
        return json.loads((tmp_path / result.output.split("run directory: ")[1].split()[0] / "config.json")
                          .read_text().replace(str(tmp_path), ""))

    default, smax_own, one_part = trained(), trained("--env-arg", "profile=smax"), trained("--env-arg", "walls=death")
    assert default["env_args"] == {"profile": "smac"}
    assert smax_own["env_args"] == {"profile": "smax"}
    assert one_part["env_args"] == {"profile": "smac", "walls": "death"}  # the profile with one part left out


def test_a_run_stored_without_a_profile_reads_as_smaxs_own_rules_and_keeps_its_label(tmp_path):
    from semzoo import runfiles
    from semzoo.config import TrainConfig
    from semzoo.resolution import resolve
    from semzoo.runfiles import env_label, read_run_config

    assert resolve(TrainConfig(env="smax:smacv2_5_units")).config.env_args == {"profile": "smax"}  # no SMAC map
    assert resolve(TrainConfig(env="matrix:two_step")).config.env_args == {}
    stored = TrainConfig(env="smax:2s3z", env_args={"fixed_starts": True}).to_dict()  # as config.json held it
    (tmp_path / "config.json").write_text(json.dumps(stored))
    config = read_run_config(tmp_path)
    assert config.env_args == {"fixed_starts": True, "profile": "smax"}
    assert resolve(config).config.env_args == config.env_args  # resumed on the rules it trained on
    assert env_label(config) == "smax:2s3z fixed_starts=true"
    assert env_label(resolve(TrainConfig(env="smax:2s3z")).config) == "smax:2s3z profile=smac"
    assert runfiles.SMAX_OWN_PROFILE == smac_rules.SMAX  # written out there: the readers import nothing of the envs


def test_smac_state_reads_a_cooldown_as_smacs_game_loops_over_the_per_type_maximum_unclipped():
    # 2s3z: stalkers 0-1 and zealots 2-4; SMAC's unit_max_cooldown: stalker 35 loops, zealot 22 loops
    core, s = smax_state("2s3z", TWO_S3Z_START)
    cooldowns = [1.87 + 2 / 22.4, 0.5, 0.86, 0.0, -1.0, 0, 0, 0, 0, 0]  # s, SMAX's: a stalker that has just fired first
    s = s.replace(unit_weapon_cooldowns=jnp.asarray(cooldowns, jnp.float32))
    state = np.asarray(smac_jax.state(s, facts(core, "2s3z"), 5, jnp.asarray([32.0, 32.0]),
                                      jnp.zeros((5, SMAC_MAPS["2s3z"].n_actions))))
    ally_dim = 4 + 1 + 2  # health, cooldown, x, y, shield, 2 type bits
    read = state[1:5 * ally_dim:ally_dim]
    expected = [(1.87 * 22.4 + 2) / 35, 0.5 * 22.4 / 35, 0.86 * 22.4 / 22, 0.0, 0.0]
    np.testing.assert_allclose(read, expected, rtol=1e-5)
    assert read[0] > 1.0  # unclipped, as SMAC's get_state
    env = make_env("smax:2s3z", profile="smac")
    assert env.state_space.high.max() == pytest.approx((1.87 + 2 / 22.4) * 22.4 / 35, rel=1e-5)


def test_a_marine_that_has_just_fired_reads_about_0_9_to_1_0_as_in_smac_not_a_clipped_1():
    env = make_env("smax:3m", profile="smac")
    obs, _ = env.reset(seed=0)
    seen = []
    for step in range(60):
        if not env.agents:
            obs, _ = env.reset(seed=step)
        actions = {}
        for agent in env.agents:
            mask = np.asarray(obs[agent]["action_mask"])
            attacks = np.flatnonzero(mask[FIRST_ATTACK:])
            actions[agent] = FIRST_ATTACK + int(attacks[0]) if len(attacks) else EAST
        obs, *_ = env.step(actions)
        if env.agents:
            seen.extend(env.state()[1:12:4])  # the allies' cooldowns
    fired = [c for c in seen if c > 0.5]
    assert fired, seen
    # read after the step that fired: (0.61 s x 22.4 + SMAX's deviation of -1 to 2 loops - the loops since) / 15
    assert max(seen) <= (0.61 * 22.4 + 2) / 15 + 1e-5 and max(fired) > 0.75


def test_the_profile_starts_the_teams_around_smacs_spawn_points_with_their_centroids_on_them():
    for map_name, n_allies in (("3m", 3), ("2s3z", 5), ("3s5z", 8)):
        core = _core(map_name, None, True, "closest", resolve_options("smac"))
        smax_own = _core(map_name, None, True, "closest", resolve_options("smac", spawn="smax"))
        for seed in (0, 7):
            s = core.reset(jax.random.PRNGKey(seed))[0][0].state
            pos = np.asarray(s.unit_positions)
            np.testing.assert_allclose(pos[:n_allies].mean(axis=0), [9, 16], atol=1e-5)
            np.testing.assert_allclose(pos[n_allies:].mean(axis=0), [23, 16], atol=1e-5)
            # each unit keeps its offset from its team's centroid in SMAX's own draw (around (8, 16) and (24, 16))
            own = np.asarray(smax_own.reset(jax.random.PRNGKey(seed))[0][0].state.unit_positions)
            for team in (slice(0, n_allies), slice(n_allies, None)):
                np.testing.assert_allclose(pos[team] - pos[team].mean(axis=0), own[team] - own[team].mean(axis=0),
                                           atol=1e-5)
    # in SMAC's state a team's mean x relative to the centre is (9 - 16) / 32 and (23 - 16) / 32
    env = make_env("smax:3m", profile="smac")
    env.reset(seed=0)
    state = env.state()
    assert np.mean(state[2:12:4]) == pytest.approx((9 - 16) / 32, abs=1e-6)
    assert np.mean(state[13:21:3]) == pytest.approx((23 - 16) / 32, abs=1e-6)


def test_smaxs_own_profile_keeps_smaxs_spawn_points():
    core = _core("3m", None, True, "closest", resolve_options("smax", fixed_starts=True))
    pos = np.asarray(core.reset(jax.random.PRNGKey(0))[0][0].state.unit_positions)
    assert abs(pos[:3, 0].mean() - 8) < 2 and abs(pos[3:, 0].mean() - 24) < 2
    assert resolve_options("smac").spawn == "smac" and resolve_options("smax").spawn == "smax"
