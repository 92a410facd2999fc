"""The compiled SMAX core: JaxMARL's SMAX (heuristic enemy) with SMAC's action layout, jitted once per configuration.

``_core(map, episode_limit, enemy_shoots, attack_mode, options)`` builds (and caches) the reset and step functions
that ``semzoo.envs.smax.SMAXEnv`` and ``semzoo.envs.smax_vec.SMAXVecEnv`` call: one env, N envs (vmapped) and K
groups of N envs. Actions use SMAC's layout, remapped onto SMAX's:

    SMAC  0 no-op (dead only)  1 stop  2 north  3 south  4 east  5 west  6+k attack enemy k
    SMAX  4 stop               4 stop  0        2        1       3       5+k

so a dead agent has exactly ``[1, 0, 0, ...]`` available, as in SMAC. With SMAX's options the observation is its
unit list (clipped to [-1, 1]) and the state its world state scaled into [0, 1]; ``options``
(``semzoo.envs.smac_rules``) switch each to SMAC's rules.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from semzoo.envs import smac_rules
from semzoo.envs.smac_rules import Options
from semzoo.envs.smax_args import (  # noqa: F401 - ATTACK_MODES, RUN_OWNED_ARGS, check_run_env_args: their old home
    ATTACK_MODES,
    RUN_OWNED_ARGS,
    check_episode_limit,
    check_map,
    check_options,
    check_run_env_args,
)
from semzoo.errors import MissingDependency
from semzoo.types import CTDEArrays, StateLayout


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1 for a block: JaxMARL prints "Importing submoduled environments..." on
    import, and ``contextlib.redirect_stdout`` does not catch it (it does not go through sys.stdout)."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


try:  # optional extra: semzoo[smax]
    import jax
    import jax.numpy as jnp

    with _quiet_stdout():
        from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario
        from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

    from semzoo.envs import smac_jax
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    _IMPORT_ERROR: ImportError | None = _err
else:
    _IMPORT_ERROR = None

UNIT_FEATURES = 4
"""Features of a unit's state block before its type one-hot: health, x, y, weapon cooldown (as SMAC's allies)."""
SMAC_NOOP = 0
SMAC_STOP = 1
SMAC_N_NON_ATTACK = 6
SMAX_STOP = 4
SMAX_N_NON_ATTACK = 5
# SMAC non-attack action -> SMAX action (see the module docstring).
SMAC_TO_SMAX_NON_ATTACK = (SMAX_STOP, SMAX_STOP, 0, 2, 1, 3)
# SMAC move slots (north, south, east, west) -> SMAX move indices.
SMAX_MOVE_FOR_SMAC_MOVE = (0, 2, 1, 3)
OBS_LOW, OBS_HIGH = -1.0, 1.0
STATE_LOW, STATE_HIGH = 0.0, 1.0
INSTALL_HINT = "pip install 'semzoo[smax]' (installs jaxmarl and jax)"
FIXED_START_SEED = 0
"""With ``fixed_starts``, every episode starts from the start state that SMAX's reset draws from this key: its
spawn points plus one fixed draw of its start-position noise (units keep SMAX's spread, and stand where
they stood in the last episode, as StarCraft II's SMAC maps spawn them)."""
REWARDS = smac_rules.OPTIONS["reward"]
"""The team reward per step (``reward=``):

    dense   SMAX's own: enemy health removed / n_enemies, +1 at a win (SMAX's won_battle_bonus).
    sparse  SMAC's reward_sparse=True with reward_scale=False (oxwhirl/smac starcraft2.py): 0 on every step,
            +1 at a win, -1 at a defeat, 0 at a draw and at the time limit.
    deaths  LAGMA's "sparse" SMAC (aailabkaist/LAGMA config/envs/sc2_sparse.yaml, reward_only_positive False, with
            its starcraft2_LAGMA.py reward_battle): (10 per enemy killed - 5 per ally killed + 200 at a win)
            x 20 / max_reward, max_reward = 10 n_enemies + 200 + the enemies' full health (SMAC's scale, the
            episode's own units); no damage term, 0 at a defeat and at the time limit.
    smac    SMAC's dense reward (``semzoo.envs.smac_jax.reward``): damage + 10 per kill + 200 at a win, x 20 /
            max_reward.
"""
DEATH_VALUE, WIN_VALUE, NEGATIVE_SCALE, SCALE_RATE = 10.0, 200.0, 0.5, 20.0
"""SMAC's defaults that ``reward="deaths"`` uses: reward_death_value, reward_win, reward_negative_scale and
reward_scale_rate (oxwhirl/smac starcraft2.py)."""


def _require_jaxmarl() -> None:
    if _IMPORT_ERROR is not None:
        raise MissingDependency(f"SMAX needs jaxmarl, which failed to import ({_IMPORT_ERROR}); fix: {INSTALL_HINT}")


def available_maps() -> list[str]:
    """Map names the installed JaxMARL SMAX defines."""
    _require_jaxmarl()
    return sorted(MAP_NAME_TO_SCENARIO)


@dataclass(frozen=True)
class _Core:
    """One compiled SMAX configuration shared by every env instance with the same key.

    observation = (obs_AO, state_S, avail_AU, alive_A);  reset(key) -> (carry, observation);
    step(carry, actions_A) -> (carry, observation, (reward, terminated, truncated, won, dead_allies,
    dead_enemies)). vreset / vstep are the same over N envs (one dispatch per call); kstep is vstep in a
    loop over K groups of N envs: (K carries of N envs, actions_KNA, frozen_KN) -> (K carries, observation and flags
    stacked [K, N, ...]), one dispatch for all K x N envs; kreset is vreset in the same loop: (seeds_KN, K key
    streams [N, 2], seeded_K) -> (K carries, observation stacked [K, N, ...]).
    """

    env: Any
    n_agents: int
    n_enemies: int
    n_actions: int
    obs_dim: int
    state_dim: int
    episode_limit: int
    unit_types: tuple[str, ...] | None
    state_layout: StateLayout
    """The allies' blocks open the state: 4 + n_types features (``world_state``), or SMAC's with ``state="smac"``."""
    state_bounds: tuple[float, float]
    """Every state entry lies in these bounds."""
    reset: Callable[..., Any]
    step: Callable[..., Any]
    vreset: Callable[..., Any]
    vstep: Callable[..., Any]
    kstep: Callable[..., Any]
    kreset: Callable[..., Any]
    key_struct: Any
    """Shape and dtype of one env's PRNG key (kreset's placeholder for the key stream of an env it seeds)."""
    group_sizes: set[int] = field(default_factory=set, compare=False)
    """The K that kstep and kreset were called with (compiled for): a smaller group is padded up to one of them."""


_CORES: dict[tuple[Any, ...], _Core] = {}


def _build_core(map_name: str, episode_limit: int, enemy_shoots: bool, attack_mode: str, options: Options) -> _Core:
    scenario = map_name_to_scenario(map_name)
    env = HeuristicEnemySMAX(
        scenario=scenario, max_steps=episode_limit, enemy_shoots=enemy_shoots, attack_mode=attack_mode,
        **({"walls_cause_death": False} if options.walls == smac_rules.SMAC else {}),
        **({"time_per_step": 1.0 / smac_rules.SC2_LOOPS_PER_SECOND} if options.step_time == smac_rules.SMAC else {}),
    )
    fixed_starts, reward_kind = options.fixed_starts, options.reward
    smac_obs, smac_state = options.obs == smac_rules.SMAC, options.state == smac_rules.SMAC
    smac_attack, smac_walls = options.attack == smac_rules.SMAC, options.walls == smac_rules.SMAC
    facts = (smac_rules.unit_facts(map_name, list(env.unit_type_names), np.asarray(env.unit_type_health))
             if smac_obs or smac_state else None)
    n_allies, n_enemies = env.num_allies, env.num_enemies
    n_actions = SMAC_N_NON_ATTACK + n_enemies
    smac_to_smax = jnp.asarray(
        list(SMAC_TO_SMAX_NON_ATTACK) + [SMAX_N_NON_ATTACK + k for k in range(n_enemies)], dtype=jnp.int32
    )
    n_types = len(env.unit_type_names)
    map_size = jnp.asarray([env.map_width, env.map_height], dtype=jnp.float32)
    unit_types = None
    if not scenario.smacv2_unit_type_generation:
        unit_types = tuple(env.unit_type_names[int(t)] for t in np.asarray(scenario.unit_types)[:n_allies])

    def world_state(s: Any) -> jax.Array:
        """Normalised SMAX world state [(4 + n_types) * n_units + 2 * n_units], every entry in [0, 1]."""
        health = s.unit_health / env.unit_type_health[s.unit_types]
        # Collision pushes can leave a unit just outside the map until the next world step kills it.
        pos = jnp.clip(s.unit_positions / map_size, 0.0, 1.0)
        cooldown = jnp.clip(s.unit_weapon_cooldowns / env.unit_type_weapon_cooldowns[s.unit_types], 0.0, 1.0)
        onehot = jax.nn.one_hot(s.unit_types, n_types)
        per_unit = jnp.concatenate([health[:, None], pos, cooldown[:, None], onehot], axis=-1)  # UNIT_FEATURES + types
        per_unit = per_unit * s.unit_alive[:, None]
        type_code = s.unit_types.astype(jnp.float32) / (n_types - 1)
        return jnp.concatenate([per_unit.reshape(-1), s.unit_teams.astype(jnp.float32), type_code])

    def observe(carry: Any) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        state = carry[0]
        s = state.state
        alive_A = s.unit_alive[:n_allies]
        avail = env.get_avail_actions(state)
        smax_AU = jnp.stack([avail[a] for a in env.agents]).astype(bool)
        moves = smax_AU[:, jnp.asarray(SMAX_MOVE_FOR_SMAC_MOVE)]
        if smac_walls:  # SMAC masks a move into the map's edge
            moves = moves & smac_jax.moves_available(s, n_allies, map_size)
        attacks = smac_jax.attacks_available(s, n_allies) if smac_attack else smax_AU[:, SMAX_N_NON_ATTACK:]
        avail_AU = jnp.concatenate([(~alive_A)[:, None], alive_A[:, None], moves & alive_A[:, None], attacks], axis=-1)
        if smac_obs:
            assert facts is not None
            obs_AO = smac_jax.observation(s, facts, n_allies, avail_AU[:, 2:SMAC_N_NON_ATTACK], attacks)
        else:
            obs = env.get_obs(state)
            obs_AO = jnp.stack([obs[a] for a in env.agents]).astype(jnp.float32)
        obs_AO = jnp.clip(obs_AO, OBS_LOW, OBS_HIGH) * alive_A[:, None]
        if smac_state:
            assert facts is not None
            global_state = smac_jax.state(s, facts, n_allies, map_size, carry[2])
        else:
            global_state = world_state(s)
        return obs_AO, global_state, avail_AU, alive_A

    def strong(carry: Any) -> Any:
        """Drop weak types so the carry from reset and from step hit the same compiled step."""
        return jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), carry)

    fixed_start_key = jax.random.PRNGKey(FIXED_START_SEED)
    spawn = smac_rules.smac_map_for(map_name).spawn if options.spawn == smac_rules.SMAC else None
    team_AE = np.arange(n_allies + n_enemies) >= n_allies  # False: an ally, True: an enemy

    def at_spawn(s: Any) -> Any:
        """SMAX's start positions moved to SMAC's spawn points: each team's units keep their spread from SMAX's draw
        around its own point, their centroid on SMAC's point (``spawn``)."""
        assert spawn is not None
        pos = s.unit_positions
        point = jnp.where(team_AE[:, None], jnp.asarray(spawn[1]), jnp.asarray(spawn[0]))
        centroid = jnp.where(team_AE[:, None], jnp.mean(pos[n_allies:], axis=0), jnp.mean(pos[:n_allies], axis=0))
        return s.replace(unit_positions=(pos - centroid + point).astype(pos.dtype))

    def reset(key: jax.Array) -> Any:
        key, reset_key = jax.random.split(key)
        # SMAX's reset draws only the start positions at random (uniform noise of +-2 around each team's spawn
        # point); with fixed starts it draws them from one fixed key, and the episode's own key stream (weapon
        # cooldowns, the enemy's choices) goes on as before
        _, state = env.reset(fixed_start_key if fixed_starts else reset_key)
        if spawn is not None:
            state = state.replace(state=at_spawn(state.state))
        if smac_state:  # the carry holds the agents' last actions (one-hot [A, U]) for SMAC's state
            return strong((state, key, jnp.zeros((n_allies, n_actions), jnp.float32)))
        return strong((state, key))

    def step(carry: Any, actions_A: jax.Array) -> tuple[Any, ...]:
        state, key = carry[0], carry[1]
        key, step_key = jax.random.split(key)
        alive_A = state.state.unit_alive[:n_allies]
        played_A = jnp.where(alive_A, actions_A, SMAC_NOOP)
        smax_actions = smac_to_smax[played_A]
        if smac_attack:
            next_state, rewards = smac_jax.step_with_attack_order(env, step_key, state, smax_actions)
        else:
            # step_env, not step: step would auto-reset and lose the terminal state.
            _, next_state, rewards, _, _ = env.step_env(
                step_key, state, {a: smax_actions[i] for i, a in enumerate(env.agents)}
            )
        alive = next_state.state.unit_alive
        allies_dead = ~jnp.any(alive[:n_allies])
        enemies_dead = ~jnp.any(alive[n_allies:])
        terminated = allies_dead | enemies_dead
        # SMAX's own done flag comes one step late (it tests the limit before counting the step).
        truncated = (next_state.state.step >= episode_limit) & ~terminated
        won = enemies_dead & ~allies_dead
        reward = _team_reward(reward_kind, env, state.state, next_state.state, rewards[env.agents[0]])
        dead_allies = jnp.sum(~alive[:n_allies])
        dead_enemies = jnp.sum(~alive[n_allies:])
        next_carry = (next_state, key, jax.nn.one_hot(played_A, n_actions)) if smac_state else (next_state, key)
        return strong(next_carry), reward, terminated, truncated, won, dead_allies, dead_enemies

    def reset_and_observe(key: jax.Array) -> tuple[Any, Any]:
        carry = reset(key)
        return carry, observe(carry)

    def step_and_observe(carry: Any, actions_A: jax.Array) -> tuple[Any, Any, Any]:
        carry, *out = step(carry, actions_A)
        return carry, observe(carry), tuple(out)

    def vstep(carry_N: Any, actions_NA: jax.Array, frozen_N: jax.Array) -> tuple[Any, Any, Any]:
        """Step N envs; a frozen (finished) env keeps its carry and reports nothing."""
        new_carry, reward, term, trunc, won, dead_a, dead_e = jax.vmap(step)(carry_N, actions_NA)

        def keep(new: jax.Array, old: jax.Array) -> jax.Array:
            mask = frozen_N.reshape(frozen_N.shape + (1,) * (new.ndim - 1))
            return jnp.where(mask, old, new)

        carry = jax.tree.map(keep, new_carry, carry_N)
        live = ~frozen_N
        flags = (reward * live, term & live, trunc & live, won & live, dead_a, dead_e)
        return carry, jax.vmap(observe)(carry), flags

    def kstep(carries_K: tuple[Any, ...], actions_KNA: jax.Array, frozen_KN: jax.Array) -> tuple[Any, Any, Any]:
        """Step K groups of N envs (K SMAXVecEnvs); the carries go in and come out one per group."""
        carry_KN = jax.tree.map(lambda *leaves: jnp.stack(leaves), *carries_K)
        # a loop over the K groups inside the one call, each the vec env's own step: vmap over K as well
        # changes how XLA vectorises the step, and the state then differs from the vec env's in the last bit
        carry_KN, observation, flags = jax.lax.map(lambda xs: vstep(*xs), (carry_KN, actions_KNA, frozen_KN))
        carries = tuple(jax.tree.map(lambda x, k=k: x[k], carry_KN) for k in range(len(carries_K)))
        return carries, observation, flags

    def kreset(seeds_KN: jax.Array, keys_K: tuple[jax.Array, ...], seeded_K: jax.Array) -> tuple[Any, Any]:
        """Reset K groups of N envs (K SMAXVecEnvs): group k from the keys of seeds_KN[k] where seeded_K[k], else
        from its key stream keys_K[k] [N, 2]; the carries come out one per group."""
        fresh_KN = jax.vmap(jax.vmap(jax.random.PRNGKey))(seeds_KN)
        keys_KN = jnp.where(seeded_K[:, None, None], fresh_KN, jnp.stack(keys_K))
        # a loop over the groups, each the vec env's own reset (as kstep, for the same bits)
        carry_KN, observation = jax.lax.map(jax.vmap(reset_and_observe), keys_KN)
        carries = tuple(jax.tree.map(lambda x, k=k: x[k], carry_KN) for k in range(len(keys_K)))
        return carries, observation

    probe = jax.eval_shape(lambda k: observe(reset(k)), jax.random.PRNGKey(0))
    return _Core(
        env=env,
        n_agents=n_allies,
        n_enemies=n_enemies,
        n_actions=n_actions,
        obs_dim=int(probe[0].shape[-1]),
        state_dim=int(probe[1].shape[-1]),
        episode_limit=episode_limit,
        unit_types=unit_types,
        state_layout=_state_layout(n_allies, n_types, facts if smac_state else None),
        state_bounds=(-1.0, _smac_state_high(env, facts)) if smac_state else (STATE_LOW, STATE_HIGH),
        reset=jax.jit(reset_and_observe),
        step=jax.jit(step_and_observe),
        vreset=jax.jit(jax.vmap(reset_and_observe)),
        vstep=jax.jit(vstep),
        kstep=jax.jit(kstep),  # compiles once per K
        kreset=jax.jit(kreset),  # the same
        key_struct=jax.eval_shape(lambda: jax.random.PRNGKey(0)),
    )


def _smac_state_high(env: Any, facts: smac_rules.UnitFacts | None) -> float:
    """The upper bound of SMAC's state on SMAX: 1, or the largest cooldown SMAC's rule can read if above (a stalker
    that has just fired: (1.87 s + SMAX's deviation of up to 2 world steps) x 22.4 / 35, about 1.25)."""
    assert facts is not None
    longest_s = np.asarray(env.unit_type_weapon_cooldowns) + 2 * float(env.time_per_step)
    ratio = longest_s * smac_rules.SC2_LOOPS_PER_SECOND / facts.max_cooldown_loops
    return float(max(1.0, float(np.max(ratio[facts.ally_type_bit >= 0]))))  # the state holds the allies' only


def _state_layout(n_allies: int, n_types: int, facts: smac_rules.UnitFacts | None) -> StateLayout:
    """The allies' blocks at the state's start: SMAX's 4 + n_types features, or SMAC's (health, cooldown, x, y,
    shield on Protoss maps, type bits) with ``facts``."""
    if facts is None:
        return StateLayout(n_units=n_allies, unit_dim=UNIT_FEATURES + n_types)
    return StateLayout(n_units=n_allies, unit_dim=4 + int(facts.shield_ally) + facts.type_bits)


def _team_reward(kind: str, env: Any, before: Any, after: Any, dense: jax.Array) -> jax.Array:
    """The team's reward for one step from SMAX's states before and after it (``REWARDS``; traced, ``kind`` static)."""
    if kind == smac_rules.SMAC:
        return smac_jax.reward(env, before, after)
    n_allies = env.num_allies
    allies_dead = ~jnp.any(after.unit_alive[:n_allies])
    enemies_dead = ~jnp.any(after.unit_alive[n_allies:])
    won = (enemies_dead & ~allies_dead).astype(jnp.float32)
    if kind == "sparse":
        lost = (allies_dead & ~enemies_dead).astype(jnp.float32)
        return won - lost  # a draw (both teams gone in one step) is neither, as in SMAC
    if kind == "deaths":
        killed = (before.unit_alive & ~after.unit_alive).astype(jnp.float32)
        enemy_health = jnp.sum(env.unit_type_health[before.unit_types[n_allies:]])
        max_reward = DEATH_VALUE * env.num_enemies + WIN_VALUE + enemy_health
        deaths = DEATH_VALUE * jnp.sum(killed[n_allies:]) - DEATH_VALUE * NEGATIVE_SCALE * jnp.sum(killed[:n_allies])
        return (deaths + WIN_VALUE * won) * SCALE_RATE / max_reward
    return dense.astype(jnp.float32)


def _core(map_name: str, episode_limit: int | None, enemy_shoots: bool, attack_mode: str,
          options: Options) -> _Core:
    """The cached compiled core for this configuration (jit caches live on it, so compile once per key)."""
    check_options(enemy_shoots, attack_mode)
    _require_jaxmarl()
    check_map(map_name, MAP_NAME_TO_SCENARIO)
    if options.needs_smac_map():
        smac_rules.smac_map_for(map_name)
    limit = smac_rules.episode_limit(map_name, options.time_limit) if episode_limit is None else episode_limit
    check_episode_limit(limit)
    key = (map_name, limit, bool(enemy_shoots), attack_mode, options)
    if key not in _CORES:
        _CORES[key] = _build_core(map_name, limit, bool(enemy_shoots), attack_mode, options)
    return _CORES[key]


SMAC_OPTION_ARGS = tuple(smac_rules.OPTIONS)
"""The keyword arguments of ``parallel_env``, ``SMAXEnv`` and ``SMAXVecEnv`` that ``profile`` sets (None: the
profile's value)."""


def resolve_options(profile: Any, **given: Any) -> Options:
    """The SMAC options of ``profile`` (``"smax"``, the default, or ``"smac"``) with each one ``given`` (not None) in
    its place (``semzoo.envs.smac_rules``)."""
    return smac_rules.resolve("smax" if profile is None else profile, given)




def _writable_arrays(observation: Any) -> CTDEArrays:
    """Host copies (arrays from jax.device_get are read-only views) of (obs, state, avail, alive)."""
    return _host_arrays(jax.device_get(observation))


def _host_arrays(observation: Any) -> CTDEArrays:
    """Writable copies of (obs, state, avail, alive) already on the host (read-only views)."""
    obs, state, avail, alive = (np.array(x) for x in observation)
    return CTDEArrays(obs=obs, state=state, avail=avail, alive=alive)

