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
from typing import Any

import numpy as np

with contextlib.suppress(ImportError):  # optional extra semzoo[smax]; without it ``_core`` names the extra
    import jax
    import jax.numpy as jnp

from semzoo.envs.smax_core import (
    DEATH_VALUE,
    FIXED_START_SEED,
    NEGATIVE_SCALE,
    OBS_HIGH,
    OBS_LOW,
    REWARDS,
    SCALE_RATE,
    SMAC_OPTION_ARGS,
    WIN_VALUE,
    _core,
    _writable_arrays,
    available_maps,
    check_run_env_args,
    resolve_options,
)
from semzoo.envs.smax_vec import SMAXVecEnv
from semzoo.types import CTDEArrays
from semzoo.wrappers.smac import SMACParallelEnv, agent_names_for, check_obs_format, check_unavailable_action


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
        spawn: str | None = None,
    ) -> None:
        """``profile`` and the SMAC options (``fixed_starts`` to ``state``): ``semzoo.envs.smac_rules``."""
        self.map_name = map_name
        options = resolve_options(profile, reward=reward, time_limit=time_limit, step_time=step_time, attack=attack,
                                  walls=walls, obs=obs, state=state, spawn=spawn, fixed_starts=fixed_starts)
        self.options = options
        """The resolved SMAC options (``semzoo.envs.smac_rules.Options``)."""
        self._options: dict[str, Any] = {"episode_limit": episode_limit, "enemy_shoots": enemy_shoots,
                                         "attack_mode": attack_mode, "options": options}
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
    spawn: str | None = None,
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
    ``profile="smac"``: SMAC's reward, episode limit, attack range, map edge, observation, state, spawn points and fixed starts
    (``semzoo.envs.smac_rules``); each of ``time_limit``, ``step_time``, ``attack``, ``walls``, ``obs``, ``state`` (``"smac"``),
    ``reward`` and ``fixed_starts`` also alone, and one given by name keeps its value against the profile.
    """
    check_obs_format(obs_format)
    check_unavailable_action(unavailable_action)
    backend = SMAXEnv(
        map_name, seed=seed, episode_limit=episode_limit, enemy_shoots=enemy_shoots, attack_mode=attack_mode,
        fixed_starts=fixed_starts, reward=reward, profile=profile, time_limit=time_limit, step_time=step_time,
        attack=attack, walls=walls, obs=obs, state=state, spawn=spawn,
    )
    return SMACParallelEnv(
        backend, obs_bounds=(OBS_LOW, OBS_HIGH), state_bounds=backend.state_bounds, map_name=map_name,
        obs_format=obs_format, unavailable_action=unavailable_action,
    )


__all__ = ["DEATH_VALUE", "FIXED_START_SEED", "NEGATIVE_SCALE", "REWARDS", "SCALE_RATE", "SMAC_OPTION_ARGS", "WIN_VALUE",
           "SMAXEnv", "SMAXVecEnv", "agent_names_for", "available_maps", "check_run_env_args", "parallel_env",
           "resolve_options"]

