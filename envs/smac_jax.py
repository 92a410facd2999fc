"""SMAC's rules on SMAX's state as traced JAX functions: available actions, observation, state, reward, attack order.

Each function reads a JaxMARL SMAX ``State`` (``s``: unit_positions [U, 2], unit_health [U], unit_alive [U],
unit_types [U], unit_weapon_cooldowns [U]; the A allies first, then the E enemies) and the SMAC facts of the map
(``semzoo.envs.smac_rules.UnitFacts``). Formulas are SMAC's (oxwhirl/smac ``starcraft2.py``: ``get_obs_agent``,
``get_state``, ``get_avail_agent_actions``, ``can_move``, ``reward_battle``); ``semzoo.envs.smac_rules`` names them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from semzoo.envs.smac_rules import (
    ATTACK_STOP_INSIDE,
    DEATH_VALUE,
    MOVE_PROBE,
    SC2_LOOPS_PER_SECOND,
    SCALE_RATE,
    SHOOT_RANGE,
    SIGHT_RANGE,
    WIN_VALUE,
    UnitFacts,
)

SMAC_MOVES = np.asarray([[0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 0.0]], np.float32)
"""SMAC's move slots 2-5 (north, south, east, west) as unit vectors."""
SMAX_N_MOVEMENT = 5
"""SMAX's four moves and stop: its attack on enemy k is action 5 + k."""


def moves_available(s: Any, n_allies: int, map_size: jax.Array) -> jax.Array:
    """SMAC's ``can_move`` on SMAX's open map [A, 4] (north, south, east, west): the cell one unit ahead (SMAC's
    ``int()`` truncation) lies inside the map."""
    ahead = s.unit_positions[:n_allies, None, :] + MOVE_PROBE * jnp.asarray(SMAC_MOVES)[None]
    cell = jnp.trunc(ahead)
    return jnp.all((cell >= 0) & (cell < map_size), axis=-1)


def attacks_available(s: Any, n_allies: int) -> jax.Array:
    """SMAC's attack availability [A, E]: the enemy is alive and within ``SHOOT_RANGE`` (<=) of a live agent."""
    pos = s.unit_positions
    dist_AE = jnp.linalg.norm(pos[:n_allies, None, :] - pos[None, n_allies:, :], axis=-1)
    return (dist_AE <= SHOOT_RANGE) & s.unit_alive[None, n_allies:] & s.unit_alive[:n_allies, None]


def split_health(s: Any, facts: UnitFacts) -> tuple[jax.Array, jax.Array]:
    """(hit points / max, shield / max) per unit [U]: SMAX's health is SC2's hit points plus shields, and shields take
    damage first, so shield = clip(health - hit points max, 0, shield max). Units without shields get 0."""
    hp_max = jnp.asarray(facts.hp_max)[s.unit_types]
    shield_max = jnp.asarray(facts.shield_max)[s.unit_types]
    hp = jnp.minimum(s.unit_health, hp_max)
    shield = jnp.clip(s.unit_health - hp_max, 0.0, shield_max)
    return hp / hp_max, jnp.where(shield_max > 0, shield / jnp.maximum(shield_max, 1.0), 0.0)


def type_bits(s: Any, facts: UnitFacts, n_allies: int) -> jax.Array:
    """SMAC's unit-type one-hot per unit [U, type_bits] (allies' and enemies' bits as SMAC numbers them)."""
    n_units = s.unit_types.shape[0]
    is_ally = jnp.arange(n_units) < n_allies
    bit = jnp.where(is_ally, jnp.asarray(facts.ally_type_bit)[s.unit_types],
                    jnp.asarray(facts.enemy_type_bit)[s.unit_types])
    return jax.nn.one_hot(bit, facts.type_bits)  # a bit of -1 (no such type) gives zeros


def observation(s: Any, facts: UnitFacts, n_allies: int, moves_AM: jax.Array, attack_AE: jax.Array) -> jax.Array:
    """SMAC's agent observations [A, O] (obs_all_health, no last actions, no pathing or height features):

        move flags [4] | per enemy [attackable, d/9, dx/9, dy/9, health, (shield), type bits] if d < 9 and alive |
        per other ally [visible, d/9, dx/9, dy/9, health, (shield), type bits] if d < 9 and alive |
        own [health, (shield), type bits]

    a dead agent's observation is all zeros. ``moves_AM`` [A, 4] and ``attack_AE`` [A, E] are its available moves
    and attacks (the observation's first flags are the agent's available actions, as in SMAC).
    """
    pos, alive = s.unit_positions, s.unit_alive
    n_units = pos.shape[0]
    health, shield = split_health(s, facts)
    bits = type_bits(s, facts, n_allies)
    others_np = np.asarray([[j for j in range(n_allies) if j != i] for i in range(n_allies)], np.int32)
    others = jnp.asarray(others_np.reshape(n_allies, n_allies - 1))

    def unit_block(i: jax.Array, j: jax.Array, flag: jax.Array, with_shield: bool) -> jax.Array:
        delta = pos[j] - pos[i]
        dist = jnp.linalg.norm(delta)
        visible = (dist < SIGHT_RANGE) & alive[j]
        parts = [flag[None], (dist / SIGHT_RANGE)[None], delta / SIGHT_RANGE, health[j][None]]
        if with_shield:
            parts.append(shield[j][None])
        parts.append(bits[j])
        return jnp.concatenate(parts) * visible

    def agent(i: jax.Array) -> jax.Array:
        enemies = jax.vmap(lambda k: unit_block(i, n_allies + k, attack_AE[i, k].astype(jnp.float32),
                                                facts.shield_enemy))(jnp.arange(n_units - n_allies))
        parts = [moves_AM[i].astype(jnp.float32), enemies.reshape(-1)]
        if n_allies > 1:
            allies = jax.vmap(lambda j: unit_block(i, j, jnp.float32(1.0), facts.shield_ally))(others[i])
            parts.append(allies.reshape(-1))
        own = [health[i][None]] + ([shield[i][None]] if facts.shield_ally else []) + [bits[i]]
        return jnp.concatenate(parts + own) * alive[i]

    return jax.vmap(agent)(jnp.arange(n_allies))


def state(s: Any, facts: UnitFacts, n_allies: int, map_size: jax.Array, last_actions_AU: jax.Array) -> jax.Array:
    """SMAC's global state [S] with ``state_last_action``:

        per ally [health, cooldown loops / max loops, (x - cx) / W, (y - cy) / H, (shield), type bits] |
        per enemy [health, (x - cx) / W, (y - cy) / H, (shield), type bits] | last actions one-hot [A * U]

    the map's centre (cx, cy) and size (W, H) are SMAX's, and nothing is clipped (a unit at the map's edge gives
    -0.5 or a little beyond, as in SMAC); a dead unit's block is zeros. The cooldown is SMAC's rule: StarCraft II's
    weapon cooldown in game loops (SMAX's seconds x 22.4, from 0) over SMAC's per-type maximum
    (``facts.max_cooldown_loops``: marine 15, stalker 35, zealot 22), unclipped.
    """
    pos, alive = s.unit_positions, s.unit_alive
    health, shield = split_health(s, facts)
    bits = type_bits(s, facts, n_allies)
    rel = (pos - map_size / 2) / map_size
    loops = jnp.maximum(s.unit_weapon_cooldowns, 0.0) * SC2_LOOPS_PER_SECOND
    cooldown = loops / jnp.asarray(facts.max_cooldown_loops)[s.unit_types]
    ally = [health[:n_allies, None], cooldown[:n_allies, None], rel[:n_allies]]
    ally += [shield[:n_allies, None]] if facts.shield_ally else []
    enemy = [health[n_allies:, None], rel[n_allies:]]
    enemy += [shield[n_allies:, None]] if facts.shield_enemy else []
    ally_AF = jnp.concatenate([*ally, bits[:n_allies]], axis=-1) * alive[:n_allies, None]
    enemy_EF = jnp.concatenate([*enemy, bits[n_allies:]], axis=-1) * alive[n_allies:, None]
    return jnp.concatenate([ally_AF.reshape(-1), enemy_EF.reshape(-1), last_actions_AU.reshape(-1)])


def reward(env: Any, before: Any, after: Any) -> jax.Array:
    """SMAC's dense team reward for one step (reward_only_positive, reward_scale):

        (|health and shields removed from live enemies + 10 per enemy killed| + 200 at a win) x 20 / max_reward,
        max_reward = 10 n_enemies + 200 + the enemies' full health and shields (SMAX's health).
    """
    n_allies = env.num_allies
    was_alive = before.unit_alive[n_allies:]
    damage = jnp.sum((before.unit_health[n_allies:] - after.unit_health[n_allies:]) * was_alive)
    killed = jnp.sum(was_alive & ~after.unit_alive[n_allies:])
    allies_dead = ~jnp.any(after.unit_alive[:n_allies])
    enemies_dead = ~jnp.any(after.unit_alive[n_allies:])
    won = (enemies_dead & ~allies_dead).astype(jnp.float32)
    max_reward = DEATH_VALUE * env.num_enemies + WIN_VALUE + jnp.sum(env.unit_type_health[before.unit_types[n_allies:]])
    return ((jnp.abs(damage + DEATH_VALUE * killed) + WIN_VALUE * won) * SCALE_RATE / max_reward).astype(jnp.float32)


def walk_at_targets(env: Any, s: Any, move_A2: jax.Array, attack_A: jax.Array) -> jax.Array:
    """The allies' movement vectors [A, 2] under StarCraft II's attack order: an agent attacking a live enemy outside
    its own range walks straight at it, at full speed but no further than ``ATTACK_STOP_INSIDE`` inside its range
    in this step (SMAX takes the movement vector itself, so the walk is not limited to its four directions)."""
    n_allies = env.num_allies
    pos, types = s.unit_positions, s.unit_types[:n_allies]
    attacking = attack_A >= SMAX_N_MOVEMENT
    target = jnp.clip(n_allies + attack_A - SMAX_N_MOVEMENT, n_allies, pos.shape[0] - 1)
    delta = pos[target] - pos[:n_allies]
    dist = jnp.linalg.norm(delta, axis=-1)
    own_range = env.unit_type_attack_ranges[types]
    full_step = env.unit_type_velocities[types] * env.time_per_step * env.world_steps_per_env_step
    walk = attacking & (dist >= own_range) & s.unit_alive[target] & s.unit_alive[:n_allies]
    speed = jnp.clip((dist - own_range + ATTACK_STOP_INSIDE) / full_step, 0.0, 1.0)
    heading = delta / jnp.maximum(dist, 1e-6)[:, None]
    return jnp.where(walk[:, None], heading * speed[:, None], move_A2)


def step_with_attack_order(env: Any, key: jax.Array, state: Any, smax_actions_A: jax.Array) -> tuple[Any, Any]:
    """JaxMARL's ``HeuristicEnemySMAX.step_env`` with the allies' attacks as StarCraft II's attack order
    (``walk_at_targets``): the same key splits, the enemy's heuristic actions, then SMAX's world steps.
    Returns (next state, SMAX's rewards per agent)."""
    smax = env._env
    key, action_key = jax.random.split(key)
    enemy_obs = smax.get_obs_unit_list(state.state)
    enemy_obs = jnp.stack([enemy_obs[agent] for agent in env.enemy_agents])
    enemy_actions, policy_state = env.get_enemy_actions(action_key, state.enemy_policy_state, enemy_obs)
    enemy_actions = jnp.stack([enemy_actions[agent] for agent in env.enemy_agents])
    enemy_move, enemy_attack = smax._decode_discrete_actions(enemy_actions)
    ally_move, ally_attack = smax._decode_discrete_actions(smax_actions_A)
    ally_move = walk_at_targets(smax, state.state, ally_move, ally_attack)
    actions = (jnp.concatenate([ally_move, enemy_move]), jnp.concatenate([ally_attack, enemy_attack]))
    _, next_inner, rewards, _, _ = smax.step_env_no_decode(key, state.state, actions)
    return state.replace(state=next_inner, enemy_policy_state=policy_state), rewards
