"""JaxMARL SMAX (heuristic enemy) exposed through SMAC's environment interface, single and vectorized.

``SMAXEnv`` behaves like SMAC's ``StarCraft2Env`` (``reset``, ``step(actions) ->
(reward, terminated, info)``, ``get_obs``, ``get_state``, ``get_avail_actions``,
``get_env_info`` ...) so ``semzoo.wrappers.smac.SMACParallelEnv`` serves it and
StarCraft II alike. ``SMAXVecEnv`` steps N copies in one jitted, vmapped call and
returns the fixed-shape arrays of ``semzoo.types.VecCTDEEnv``.

Actions use SMAC's layout, remapped onto SMAX's:

    SMAC  0 no-op (dead only)  1 stop  2 north  3 south  4 east  5 west  6+k attack enemy k
    SMAX  4 stop               4 stop  0        2        1       3       5+k

so a dead agent has exactly ``[1, 0, 0, ...]`` available, as in SMAC.
Observations are SMAX's unit-list observations (clipped to [-1, 1]); the
state is SMAX's world state with positions scaled by the map size and weapon
cooldowns scaled by the unit's cooldown, so every entry lies in [0, 1].
The reward is SMAX's ally reward (enemy health fraction removed per step plus
a win bonus of 1), or one of the sparser rewards of ``REWARDS`` (``reward=``).
Wins and losses terminate; SMAX's time limit truncates.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from semzoo.envs import smac_rules
from semzoo.envs.maps import UnknownMapError
from semzoo.envs.smac_rules import Options
from semzoo.errors import MissingDependency
from semzoo.types import CTDEArrays, StateLayout, VecStep
from semzoo.wrappers.smac import SMACParallelEnv, agent_names_for, check_obs_format, check_unavailable_action


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
ATTACK_MODES = ("closest", "random")
"""How JaxMARL's heuristic enemy picks its target."""
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
RUN_OWNED_ARGS = {"seed": ("seeds its envs from the run's seed", "--seed"),
                  "episode_limit": ("passes its own episode limit to the envs", "--episode-limit")}
"""Arguments of ``parallel_env`` that a run sets from its config: (what the run does, the flag to use instead)."""


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
            max_cooldown = env.unit_type_weapon_cooldowns[s.unit_types]
            global_state = smac_jax.state(s, facts, n_allies, map_size, max_cooldown, carry[2])
        else:
            global_state = world_state(s)
        return obs_AO, global_state, avail_AU, alive_A

    def strong(carry: Any) -> Any:
        """Drop weak types so the carry from reset and from step hit the same compiled step."""
        return jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), carry)

    fixed_start_key = jax.random.PRNGKey(FIXED_START_SEED)

    def reset(key: jax.Array) -> Any:
        key, reset_key = jax.random.split(key)
        # SMAX's reset draws only the start positions at random (uniform noise of +-2 around each team's spawn
        # point); with fixed starts it draws them from one fixed key, and the episode's own key stream (weapon
        # cooldowns, the enemy's choices) goes on as before
        _, state = env.reset(fixed_start_key if fixed_starts else reset_key)
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
        state_bounds=(-1.0, 1.0) if smac_state else (STATE_LOW, STATE_HIGH),
        reset=jax.jit(reset_and_observe),
        step=jax.jit(step_and_observe),
        vreset=jax.jit(jax.vmap(reset_and_observe)),
        vstep=jax.jit(vstep),
        kstep=jax.jit(kstep),  # compiles once per K
        kreset=jax.jit(kreset),  # the same
        key_struct=jax.eval_shape(lambda: jax.random.PRNGKey(0)),
    )


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


def check_run_env_args(env_args: dict[str, Any]) -> None:
    """ValueError for an env arg of ``smax:<map>`` that a run sets from its own config (seed, episode_limit).

    ``parallel_env`` takes them (a single env has no run around it), ``SMAXVecEnv`` gets them from
    the run: so a run refuses them up front, naming the flag that sets them.
    """
    for key, (what, flag) in RUN_OWNED_ARGS.items():
        if key in env_args:
            raise ValueError(f"--env-arg {key}={env_args[key]}: a SMAX run {what}; drop this --env-arg and use "
                             f"{flag} {env_args[key]}")


def _check_options(enemy_shoots: Any, attack_mode: Any) -> None:
    if not isinstance(enemy_shoots, bool):
        raise TypeError(f"enemy_shoots={enemy_shoots!r}: expected true or false; pass enemy_shoots=false to make "
                         "the enemy passive")
    if attack_mode not in ATTACK_MODES:
        raise ValueError(f"attack_mode={attack_mode!r}: expected one of {', '.join(ATTACK_MODES)}")


def _core(map_name: str, episode_limit: int | None, enemy_shoots: bool, attack_mode: str,
          options: Options) -> _Core:
    """The cached compiled core for this configuration (jit caches live on it, so compile once per key)."""
    _check_options(enemy_shoots, attack_mode)
    _require_jaxmarl()
    if map_name not in MAP_NAME_TO_SCENARIO:
        raise UnknownMapError(
            f"SMAX has no map {map_name!r}; available: {', '.join(available_maps())} "
            f"(for other SMAC maps use StarCraft II: env id 'smac:{map_name}')"
        )
    if options.needs_smac_map():
        smac_rules.smac_map_for(map_name)
    limit = smac_rules.episode_limit(map_name, options.time_limit) if episode_limit is None else episode_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"episode_limit must be a positive int, got {episode_limit!r}")
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


class SMAXEnv:
    """One SMAX battle against JaxMARL's heuristic enemy, with SMAC's ``StarCraft2Env`` interface.

    Shapes: obs [A, O], state [S], avail [A, U] with U = 6 + n_enemies (SMAC's action layout).
    """

    def __init__(
        self,
        map_name: str,
        *,
        seed: int = 0,
        episode_limit: int | None = None,
        enemy_shoots: bool = True,
        attack_mode: str = "closest",
        fixed_starts: bool | None = None,
        reward: str | None = None,
        profile: str | None = None,
        time_limit: str | None = None,
        step_time: str | None = None,
        attack: str | None = None,
        walls: str | None = None,
        obs: str | None = None,
        state: str | None = None,
    ) -> None:
        """``profile`` and the SMAC options (``fixed_starts`` to ``state``): ``semzoo.envs.smac_rules``."""
        self.map_name = map_name
        options = resolve_options(profile, reward=reward, time_limit=time_limit, step_time=step_time, attack=attack,
                                  walls=walls, obs=obs, state=state, fixed_starts=fixed_starts)
        self._options: dict[str, Any] = {"episode_limit": episode_limit, "enemy_shoots": enemy_shoots,
                                         "attack_mode": attack_mode, "options": options}
        self.options = options
        """The resolved SMAC options (``semzoo.envs.smac_rules.Options``)."""
        """What ``_core`` is built from besides the map: a copy or an unpickled env rebuilds it from them."""
        self._core = _core(map_name, **self._options)
        self.n_agents = self._core.n_agents
        self.n_enemies = self._core.n_enemies
        self.n_actions = self._core.n_actions
        self.episode_limit = self._core.episode_limit
        self.state_layout = self._core.state_layout
        self.state_bounds = self._core.state_bounds
        self._key = jax.random.PRNGKey(seed)
        self._carry: Any = None
        self._arrays: CTDEArrays | None = None
        self._done = True
        self.battles_won = 0
        self.battles_game = 0
        self.timeouts = 0

    # --- copy and pickle ------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Everything but the compiled core (JaxMARL's env holds local functions, and deep-copying it recurses
        in its ``__getattr__``), with the battle's JAX arrays as host arrays: ``copy.deepcopy`` and ``pickle``
        (SuperSuit's ``concat_vec_envs_v1`` clones an env with cloudpickle) carry the battle, its key stream and
        its counters."""
        state = {name: value for name, value in self.__dict__.items() if name != "_core"}
        state["_key"], state["_carry"] = jax.device_get((self._key, self._carry))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild the core from the map and options (cached: compiled once per process), the battle from its
        host arrays; the copy then plays on exactly as the original would."""
        self.__dict__.update(state)
        self._core = _core(self.map_name, **self._options)
        self._key = jnp.asarray(state["_key"])
        self._carry = None if state["_carry"] is None else jax.tree.map(jnp.asarray, state["_carry"])

    # --- SMAC interface -------------------------------------------------------------------------
    def seed(self, seed: int) -> None:
        """Seed the next ``reset`` (SMAC's env takes its seed at construction; this one can be reseeded)."""
        self._key = jax.random.PRNGKey(seed)
        self._carry = None  # the next reset starts from this key, not from the last episode's stream

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        """Start a battle; returns (obs list, state) like SMAC."""
        if self._carry is not None:
            self._key = self._carry[1]  # continue the key stream of the last episode
        self._carry, observation = self._core.reset(self._key)
        self._set_arrays(observation)
        self._done = False
        return self.get_obs(), self.get_state()

    def step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        """Apply one SMAC-layout action per agent; returns (reward, terminated, info) like SMAC.

        ``terminated`` is true at a win, a loss and the time limit; ``info["episode_limit"]``
        tells the time limit apart (like SMAC with ``continuing_episode=True``).
        """
        if self._done:
            raise RuntimeError("SMAXEnv.step called on a finished episode; call reset() first")
        actions_A = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions_A.shape != (self.n_agents,):
            raise ValueError(f"expected {self.n_agents} actions, got shape {np.shape(actions)}")
        assert self._arrays is not None
        legal = (actions_A >= 0) & (actions_A < self.n_actions)
        legal[legal] = self._arrays.avail[legal.nonzero()[0], actions_A[legal]]
        if not legal.all():
            agent = int(np.flatnonzero(~legal)[0])
            raise ValueError(
                f"agent {agent} cannot take action {int(actions_A[agent])}; "
                f"available: {np.flatnonzero(self._arrays.avail[agent]).tolist()}"
            )
        self._carry, observation, flags = self._core.step(self._carry, jnp.asarray(actions_A, dtype=jnp.int32))
        observation, flags = jax.device_get((observation, flags))
        reward, terminated, truncated, won, dead_allies, dead_enemies = flags
        self._set_arrays(observation)
        info: dict[str, Any] = {
            "battle_won": bool(won),
            "dead_allies": int(dead_allies),
            "dead_enemies": int(dead_enemies),
        }
        done = bool(terminated) or bool(truncated)
        if bool(truncated):
            info["episode_limit"] = True
            self.timeouts += 1
        if done:
            self._done = True
            self.battles_game += 1
            self.battles_won += int(won)
        return float(reward), done, info

    def _set_arrays(self, observation: Any) -> None:
        self._arrays = _writable_arrays(observation)

    def _arrays_or_raise(self) -> CTDEArrays:
        if self._arrays is None:
            raise RuntimeError("SMAXEnv has no observation yet; call reset() first")
        return self._arrays

    def get_obs(self) -> np.ndarray:
        """All agents' observations [A, O] (SMAC returns a list of [O] arrays; this indexes the same)."""
        return self._arrays_or_raise().obs

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return self._arrays_or_raise().obs[agent_id]

    def get_obs_size(self) -> int:
        return self._core.obs_dim

    def get_state(self) -> np.ndarray:
        return self._arrays_or_raise().state

    def get_state_size(self) -> int:
        return self._core.state_dim

    def get_avail_actions(self) -> np.ndarray:
        """Available actions [A, U] as 0/1 ints (SMAC returns nested lists; this indexes the same)."""
        return self._arrays_or_raise().avail.astype(np.int64)

    def get_avail_agent_actions(self, agent_id: int) -> list[int]:
        return self._arrays_or_raise().avail[agent_id].astype(np.int64).tolist()

    def get_total_actions(self) -> int:
        return self.n_actions

    def get_env_info(self) -> dict[str, Any]:
        return {
            "n_agents": self.n_agents,
            "n_actions": self.n_actions,
            "obs_shape": self._core.obs_dim,
            "state_shape": self._core.state_dim,
            "episode_limit": self.episode_limit,
        }

    def get_stats(self) -> dict[str, float]:
        return {
            "battles_won": self.battles_won,
            "battles_game": self.battles_game,
            "win_rate": self.battles_won / max(self.battles_game, 1),
            "timeouts": self.timeouts,
        }

    def get_unit_type_names(self) -> list[str] | None:
        """Unit type of each agent (e.g. ``["stalker", "stalker", "zealot", ...]``); None for random types."""
        return None if self._core.unit_types is None else list(self._core.unit_types)

    def close(self) -> None:
        self._carry = None
        self._arrays = None
        self._done = True


class SMAXVecEnv:
    """N SMAX battles stepped in one jitted, vmapped call; implements ``semzoo.types.VecCTDEEnv``.

    Shapes: obs [N, A, O], state [N, S], avail [N, A, U], alive [N, A]; reward/terminated/truncated [N].
    Env i seeded with ``seed + i`` follows the same trajectory as ``SMAXEnv`` seeded with ``seed + i``.
    A finished env is frozen (repeats its final arrays, reward 0, flags false) until the next ``reset``.
    """

    def __init__(
        self,
        map_name: str,
        n_envs: int,
        *,
        episode_limit: int | None = None,
        enemy_shoots: bool = True,
        attack_mode: str = "closest",
        obs_format: str = "dict",
        fixed_starts: bool | None = None,
        unavailable_action: str = "error",
        reward: str | None = None,
        profile: str | None = None,
        time_limit: str | None = None,
        step_time: str | None = None,
        attack: str | None = None,
        walls: str | None = None,
        obs: str | None = None,
        state: str | None = None,
    ) -> None:
        """``obs_format`` is checked and otherwise unused: arrays have no per-agent format, and a run passes
        its ``smax:<map>`` env args (which may choose the format of ``parallel_env``) here.
        ``unavailable_action``: ``"error"`` or ``"stop"``, as ``parallel_env``'s (``UNAVAILABLE_ACTIONS``).
        ``profile`` and the SMAC options (``fixed_starts`` to ``state``): ``semzoo.envs.smac_rules``."""
        check_obs_format(obs_format)
        check_unavailable_action(unavailable_action)
        if not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be a positive int, got {n_envs!r}")
        self.map_name = map_name
        options = resolve_options(profile, reward=reward, time_limit=time_limit, step_time=step_time, attack=attack,
                                  walls=walls, obs=obs, state=state, fixed_starts=fixed_starts)
        self._core = _core(map_name, episode_limit, enemy_shoots, attack_mode, options)
        self.options = options
        """The resolved SMAC options (``semzoo.envs.smac_rules.Options``)."""
        self.n_envs = n_envs
        self.n_agents = self._core.n_agents
        self.obs_dim = self._core.obs_dim
        self.state_dim = self._core.state_dim
        self.n_actions = self._core.n_actions
        self.episode_limit = self._core.episode_limit
        self.agent_names = agent_names_for(self._core.unit_types, self.n_agents)
        self.state_layout = self._core.state_layout
        self.state_bounds = self._core.state_bounds
        self.unavailable_action = unavailable_action
        self._carry: Any = None
        self._frozen_N = np.ones(n_envs, dtype=bool)
        self._arrays: CTDEArrays | None = None
        self._handed: tuple[_JaxInputs, int | None] | None = None
        """The agents' inputs of the last reset or step as JAX arrays, and this env's row of a grouped call's K."""
        self.hand_over_inputs = True
        """Whether ``agent_inputs`` hands JAX's buffers to torch; False: it gives None, and a runner converts
        ``arrays.obs`` and ``arrays.avail`` (the path through the host, which gives the same values)."""

    def reset(self, seed: int | None = None) -> CTDEArrays:
        """Reset all N envs; env i is seeded with ``seed + i`` (without a seed, each continues its key stream)."""
        seeds_N = self._start_seeds(seed)
        keys = self._carry[1] if seeds_N is None else jax.vmap(jax.random.PRNGKey)(seeds_N)
        self._carry, observation = self._core.vreset(keys)
        self._frozen_N = np.zeros(self.n_envs, dtype=bool)
        self._handed = (_JaxInputs(observation), None)
        self._arrays = self._to_arrays(observation)
        return self._arrays

    def _start_seeds(self, seed: int | None) -> np.ndarray | None:
        """The seeds of the N envs' keys at ``reset(seed)``: ``seed + i`` (``0 + i`` at the first reset) as JAX's
        default int (int32 wraps as ``jnp.arange`` does); None where each env continues its key stream."""
        if seed is None and self._carry is not None:
            return None
        base = 0 if seed is None else seed
        return np.arange(base, base + self.n_envs).astype(jax.dtypes.canonicalize_dtype(np.int64))

    def agent_inputs(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The agents' inputs of the last reset or step, obs [N, A, O] float32 and avail [N, A, U] bool, as torch
        tensors on ``device`` that share JAX's buffers (DLPack: no copy through the host).

        None where JAX holds its arrays on another device than ``device`` (or ``hand_over_inputs`` is off): the
        runner converts ``arrays.obs`` and ``arrays.avail`` then. The tensors are JAX's own buffers: read them,
        never write into them (nothing stops a write, and it would change JAX's array).
        """
        if not self.hand_over_inputs or self._handed is None:
            return None
        inputs, k = self._handed
        tensors = inputs.on(torch.device(device))
        if tensors is None:
            return None
        obs, avail = tensors
        return (obs, avail) if k is None else (obs[k], avail[k])

    def step(self, actions: np.ndarray) -> VecStep:
        """Step all N envs with SMAC-layout actions [N, A]; dead agents' actions are replaced by the no-op."""
        if self._carry is None or self._arrays is None:
            raise RuntimeError("SMAXVecEnv.step called before reset()")
        actions_NA = self._checked_actions(actions)
        # numpy straight into the jitted step and one device_get for everything: each jnp.asarray
        # and device_get is a dispatch of its own, and together they were 15 % of a vec step.
        self._carry, observation, flags = self._core.vstep(
            self._carry, actions_NA.astype(np.int32, copy=False), self._frozen_N
        )
        self._handed = (_JaxInputs(observation), None)
        return self._stepped(*jax.device_get((observation, flags)))

    @staticmethod
    def why_not_together(envs: Sequence[Any]) -> str | None:
        """Why ``envs`` cannot step together (``step_together``), or None: other classes, maps or options, sizes."""
        if not envs:
            return "no envs given"
        first = envs[0]
        if any(type(env) is not SMAXVecEnv for env in envs):
            return "not all envs are SMAXVecEnvs"
        if len({id(env) for env in envs}) < len(envs):
            return "an env is given twice"
        if any(env._core is not first._core for env in envs):
            return "the envs differ in map, episode limit or SMAX options"
        if any(env.n_envs != first.n_envs for env in envs):
            return f"the envs differ in n_envs ({sorted({env.n_envs for env in envs})})"
        return None

    @staticmethod
    def step_together(envs: Sequence[SMAXVecEnv], actions: Sequence[np.ndarray | None]) -> list[VecStep | None]:
        """Step K vec envs of one configuration in one jitted call: ``envs[k].step(actions[k])`` for each k.

        actions[k] is [N, A] (SMAC layout), or None to leave ``envs[k]`` as it is (its result is None). Each
        env ends up as its own ``step`` leaves it and returns what that returns; one dispatch and one
        ``jax.device_get`` for all K x N envs. An env left out still goes through the call, every env frozen
        (a frozen env keeps its carry, PRNG key included), so the compiled step depends on K only, and K envs
        after a call with more envs are padded up to that size (compiled already).
        """
        problem = SMAXVecEnv.why_not_together(envs)
        if problem is None and len(actions) != len(envs):
            problem = f"{len(envs)} envs with {len(actions)} actions: give one [n_envs, n_agents] array (or None) each"
        if problem is None and any(env._carry is None or env._arrays is None for env in envs):
            problem = "some env was not reset; call reset() on each first"
        if problem is not None:
            raise ValueError(f"SMAXVecEnv.step_together: {problem}")
        first = envs[0]
        no_op_NA, all_frozen_N = np.zeros((first.n_envs, first.n_agents), np.int32), np.ones(first.n_envs, dtype=bool)
        actions_K, frozen_K = [], []
        for k, (env, act) in enumerate(zip(envs, actions)):
            if act is None:  # nothing moves: every env frozen
                actions_K.append(no_op_NA)
                frozen_K.append(all_frozen_N)
                continue
            try:
                actions_K.append(env._checked_actions(act).astype(np.int32, copy=False))
            except (ValueError, TypeError) as err:
                raise type(err)(f"envs[{k}]: {err}") from None
            frozen_K.append(env._frozen_N)
        # a group that shrank (runs that finished training) is padded with frozen copies of env 0 up to a K
        # compiled already: no compile of a few seconds per group size; a padded group's results are dropped
        core, k = first._core, len(envs)
        padded_k = _group_size(core, k)
        carries_K = tuple(env._carry for env in envs) + (first._carry,) * (padded_k - k)
        actions_K += [no_op_NA] * (padded_k - k)
        frozen_K += [all_frozen_N] * (padded_k - k)
        carries, observation, flags = core.kstep(carries_K, np.stack(actions_K), np.stack(frozen_K))
        inputs = _JaxInputs(observation)  # [K, N, ...]: env k's inputs are row k
        observation, flags = jax.device_get((observation, flags))
        results: list[VecStep | None] = []
        for k, (env, act) in enumerate(zip(envs, actions)):
            if act is None:
                results.append(None)
                continue
            env._carry, env._handed = carries[k], (inputs, k)
            results.append(env._stepped(tuple(x[k] for x in observation), tuple(x[k] for x in flags)))
        return results

    @staticmethod
    def reset_together(envs: Sequence[SMAXVecEnv], seeds: Sequence[int | None]) -> list[CTDEArrays]:
        """Reset K vec envs of one configuration in one jitted call: ``envs[k].reset(seeds[k])`` for each k.

        Each env ends up as its own ``reset`` leaves it (carry with its key stream, arrays, no env frozen) and
        result k is what that returns; one dispatch and one ``jax.device_get`` for all K x N envs. K envs after a
        grouped call with more envs are padded up to that size (compiled already), as in ``step_together``.
        """
        problem = SMAXVecEnv.why_not_together(envs)
        if problem is None and len(seeds) != len(envs):
            problem = f"{len(envs)} envs with {len(seeds)} seeds: give one seed (or None) each"
        if problem is not None:
            raise ValueError(f"SMAXVecEnv.reset_together: {problem}")
        first = envs[0]
        core, n = first._core, first.n_envs
        no_seeds_N = np.zeros(n, jax.dtypes.canonicalize_dtype(np.int64))
        no_keys_N = np.zeros((n, *core.key_struct.shape), core.key_struct.dtype)
        seeds_K, keys_K, seeded_K = [], [], []
        for env, seed in zip(envs, seeds):
            seeds_N = env._start_seeds(seed)
            seeded_K.append(seeds_N is not None)
            seeds_K.append(no_seeds_N if seeds_N is None else seeds_N)
            keys_K.append(env._carry[1] if seeds_N is None else no_keys_N)
        padded_k = _group_size(core, len(envs))  # padding: copies of env 0's, dropped
        seeds_K += [seeds_K[0]] * (padded_k - len(envs))
        keys_K += [keys_K[0]] * (padded_k - len(envs))
        seeded_K += [seeded_K[0]] * (padded_k - len(envs))
        carries, observation = core.kreset(np.stack(seeds_K), tuple(keys_K), np.asarray(seeded_K))
        inputs = _JaxInputs(observation)  # [K, N, ...]: env k's inputs are row k
        observation = jax.device_get(observation)
        results = []
        for k, env in enumerate(envs):
            env._carry, env._handed = carries[k], (inputs, k)
            env._frozen_N = np.zeros(n, dtype=bool)
            env._arrays = _host_arrays(tuple(x[k] for x in observation))
            results.append(env._arrays)
        return results

    def _checked_actions(self, actions: np.ndarray) -> np.ndarray:
        """``actions`` as a legal integer array [N, A], or the ValueError / TypeError of ``step``."""
        actions_NA = np.asarray(actions)
        if actions_NA.shape != (self.n_envs, self.n_agents):
            raise ValueError(
                f"actions must have shape [n_envs, n_agents] = {(self.n_envs, self.n_agents)}, got {actions_NA.shape}"
            )
        if not np.issubdtype(actions_NA.dtype, np.integer):
            raise TypeError(f"actions must be integers, got dtype {actions_NA.dtype}")
        return self._playable(actions_NA)

    def _stepped(self, observation: Any, flags: Any) -> VecStep:
        """Take in a step's host outputs (the carry is already set): arrays, frozen envs; returns ``step``'s tuple."""
        reward, terminated, truncated, won, _, _ = flags
        self._arrays = _host_arrays(observation)
        self._frozen_N = self._frozen_N | terminated | truncated
        info = {"battle_won": np.asarray(won, dtype=bool)}
        return (
            self._arrays,
            np.asarray(reward, dtype=np.float32),
            np.asarray(terminated, dtype=bool),
            np.asarray(truncated, dtype=bool),
            info,
        )

    def _playable(self, actions_NA: np.ndarray) -> np.ndarray:
        """The actions [N, A] the live agents play: ``actions_NA``, an unavailable one replaced by stop
        (``unavailable_action="stop"``) or refused with a ValueError naming the env and the agent."""
        assert self._arrays is not None
        live_NA = self._arrays.alive & ~self._frozen_N[:, None]
        in_range = (actions_NA >= 0) & (actions_NA < self.n_actions)
        outside = live_NA & ~in_range
        if outside.any():
            env_i, agent = (int(x) for x in np.argwhere(outside)[0])
            raise ValueError(f"env {env_i}: {self.agent_names[agent]}: action {int(actions_NA[env_i, agent])} is "
                             f"outside its action space; expected 0 to {self.n_actions - 1}")
        chosen = np.take_along_axis(self._arrays.avail, np.clip(actions_NA, 0, self.n_actions - 1)[..., None], -1)
        unavailable = live_NA & ~chosen[..., 0]
        if not unavailable.any():
            return actions_NA
        if self.unavailable_action == "stop":
            return np.where(unavailable, SMAC_STOP, actions_NA)
        env_i, agent = (int(x) for x in np.argwhere(unavailable)[0])
        raise ValueError(
            f"env {env_i}: {self.agent_names[agent]} cannot take action {int(actions_NA[env_i, agent])}; available: "
            f"{np.flatnonzero(self._arrays.avail[env_i, agent]).tolist()}; choose from avail, or pass "
            "unavailable_action='stop' to make an unavailable action stop the unit"
        )

    def _to_arrays(self, observation: Any) -> CTDEArrays:
        return _writable_arrays(observation)

    def close(self) -> None:
        self._carry = None
        self._arrays = None
        self._handed = None


def _group_size(core: _Core, k: int) -> int:
    """The K to call kstep or kreset with for k vec envs: the smallest K compiled already that holds them, else k.

    A group that shrank (runs that finished training) is padded up to it: no compile of a few seconds per size.
    """
    padded_k = min((size for size in core.group_sizes if size >= k), default=k)
    core.group_sizes.add(padded_k)
    return padded_k


class _JaxInputs:
    """The agents' inputs of one jitted reset or step as JAX arrays, obs [(K,) N, A, O] and avail [(K,) N, A, U], and
    the torch tensors that share their buffers (DLPack), made once per device for all the call's envs."""

    def __init__(self, observation: Any) -> None:
        obs, _state, avail, _alive = observation
        self.obs, self.avail = obs, avail
        self._tensors: dict[torch.device, tuple[torch.Tensor, torch.Tensor] | None] = {}

    def on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(obs, avail) as torch tensors on ``device`` sharing JAX's buffers; None where JAX holds them elsewhere."""
        if device not in self._tensors:
            self._tensors[device] = _shared_tensors(self.obs, self.avail, device)
        return self._tensors[device]


JAX_PLATFORM_FOR_TORCH = {"cpu": "cpu", "cuda": "gpu"}
"""The JAX platform whose buffers a torch device type can take over through DLPack."""


def _shared_tensors(obs: Any, avail: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """torch tensors on ``device`` that share the buffers of the JAX arrays ``obs`` and ``avail`` (DLPack), or None
    where JAX holds them on another device (another platform, or another GPU than ``device``)."""
    jax_devices = obs.devices()
    if len(jax_devices) != 1 or JAX_PLATFORM_FOR_TORCH.get(device.type) != next(iter(jax_devices)).platform:
        return None
    tensors = torch.from_dlpack(obs), torch.from_dlpack(avail)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    same = all(t.device.type == device.type and (device.type == "cpu" or t.device == device) for t in tensors)
    return tensors if same else None


def _writable_arrays(observation: Any) -> CTDEArrays:
    """Host copies (arrays from jax.device_get are read-only views) of (obs, state, avail, alive)."""
    return _host_arrays(jax.device_get(observation))


def _host_arrays(observation: Any) -> CTDEArrays:
    """Writable copies of (obs, state, avail, alive) already on the host (read-only views)."""
    obs, state, avail, alive = (np.array(x) for x in observation)
    return CTDEArrays(obs=obs, state=state, avail=avail, alive=alive)


def parallel_env(
    map_name: str,
    *,
    seed: int = 0,
    episode_limit: int | None = None,
    enemy_shoots: bool = True,
    attack_mode: str = "closest",
    obs_format: str = "dict",
    fixed_starts: bool | None = None,
    unavailable_action: str = "error",
    reward: str | None = None,
    profile: str | None = None,
    time_limit: str | None = None,
    step_time: str | None = None,
    attack: str | None = None,
    walls: str | None = None,
    obs: str | None = None,
    state: str | None = None,
) -> SMACParallelEnv:
    """A PettingZoo ParallelEnv with ``state()`` over SMAX ``map_name`` (env id ``smax:<map>``).

    ``obs_format="box"``: flat Box observations, each agent's action mask in ``infos[agent]["action_mask"]``
    (for SuperSuit's Box-only wrappers); the default ``"dict"`` puts the mask in the observation.
    ``fixed_starts=True``: every episode starts from the same state (``FIXED_START_SEED``), as StarCraft II
    spawns units at fixed positions; SMAX's default draws each unit's start position at random.
    ``unavailable_action="stop"``: an action the agent's mask rules out stops the unit instead of raising
    (SMAC's behaviour, the default ``"error"``), for pipelines that sample without the mask
    (``semzoo.wrappers.smac.UNAVAILABLE_ACTIONS``).
    ``reward``: "dense" (SMAX's own), "sparse" (SMAC's +1 win / -1 defeat), "deaths" (LAGMA's) or "smac" (SMAC's
    dense reward; ``REWARDS``).
    ``profile="smac"``: SMAC's reward, episode limit, attack range, map edge, observation, state and fixed starts
    (``semzoo.envs.smac_rules``); each of ``time_limit``, ``step_time``, ``attack``, ``walls``, ``obs``, ``state`` (``"smac"``),
    ``reward`` and ``fixed_starts`` also alone, and one given by name keeps its value against the profile.
    """
    check_obs_format(obs_format)
    check_unavailable_action(unavailable_action)
    backend = SMAXEnv(
        map_name, seed=seed, episode_limit=episode_limit, enemy_shoots=enemy_shoots, attack_mode=attack_mode,
        fixed_starts=fixed_starts, reward=reward, profile=profile, time_limit=time_limit, step_time=step_time,
        attack=attack, walls=walls, obs=obs, state=state,
    )
    return SMACParallelEnv(
        backend, obs_bounds=(OBS_LOW, OBS_HIGH), state_bounds=backend.state_bounds, map_name=map_name,
        obs_format=obs_format, unavailable_action=unavailable_action,
    )


__all__ = ["SMAXEnv", "SMAXVecEnv", "agent_names_for", "available_maps", "check_run_env_args", "parallel_env"]
