"""Any env with SMAC's interface (StarCraft II or SMAX) as a PettingZoo ParallelEnv with a global state.

SMAC's interface (``smac.env.StarCraft2Env``): ``reset()``, ``step(actions) ->
(reward, terminated, info)``, ``get_obs()``, ``get_obs_agent(i)``, ``get_state()``,
``get_avail_actions()``, ``get_avail_agent_actions(i)``, ``get_env_info()`` (dict with
n_agents, n_actions, obs_shape, state_shape, episode_limit), ``get_stats()``,
``close()``, optionally ``seed(seed)`` and ``get_unit_type_names()``.

Per agent the observation is ``{"observation": float32 [O], "action_mask": int8 [U]}``, or with
``obs_format="box"`` the flat float32 [O] alone with the mask in ``infos[agent]["action_mask"]``
(SuperSuit's Box-only wrappers take that); ``state()`` is float32 [S]. ``reset()`` returns the
same info keys as ``step()`` (``battle_won``, ``dead_allies``, ``dead_enemies``, ``episode_limit``,
``sc2_crashed``), so clients that build their info spec from ``reset()`` (TorchRL) see them all. The team reward is given to every agent. A win or a
loss sets ``terminations``; the episode limit (or a StarCraft II crash, flagged
``infos[agent]["sc2_crashed"]``) sets ``truncations``. An agent is dead when only
the no-op (action 0) is available, as in SMAC; it then leaves ``agents``. An action the agent's mask rules
out is refused, as SMAC refuses it, unless ``unavailable_action="stop"`` (see ``UNAVAILABLE_ACTIONS``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from semzoo.envs.maps import SC2_BACKEND, SMAC_MAPS, SMAC_N_NON_ATTACK_ACTIONS, UnknownMapError
from semzoo.errors import MissingDependency
from semzoo.types import StateLayout

NOOP_ACTION = 0
STOP_ACTION = 1
"""SMAC's stop: what a living unit does when it does nothing (the no-op, action 0, is for dead units only)."""
SMAC_GIT_URL = "git+https://github.com/oxwhirl/smac.git"
SMAC_INSTALL = f"pip install {SMAC_GIT_URL}"
PAPER_SC2_VERSION = "4.6.2.69232"
DEFAULT_SC2PATH = "~/StarCraftII"  # pysc2's default on Linux when SC2PATH is unset
SMAC_MAPS_DIR = ("Maps", "SMAC_Maps")
SC2_MAP_SUFFIX = ".SC2Map"
UNBOUNDED = (-np.inf, np.inf)
OBS_FORMATS = ("dict", "box")
"""``dict``: observation {"observation", "action_mask"}; ``box``: the flat observation, the mask in the infos."""
ENV_INFO_KEYS = ("n_agents", "n_actions", "obs_shape", "state_shape", "episode_limit")
UNAVAILABLE_ACTIONS = ("error", "stop")
"""What ``step`` does with an action a living agent's mask rules out. ``error`` (the default): a ValueError naming
the agent, as SMAC's ``StarCraft2Env`` asserts that every action is available. ``stop``: the unit plays its no-op,
SMAC's stop (action 1), instead; for pipelines that sample actions without the mask (PettingZoo's
``parallel_seed_test``, its ``parallel_api_test`` on box observations, SuperSuit's ``sticky_actions_v0``). An
action outside the action space is refused either way."""


class SMACUnavailableError(MissingDependency, RuntimeError):
    """StarCraft II or oxwhirl SMAC is missing or misconfigured; the message says how to fix it.

    A ``MissingDependency`` (the CLI prints its one line and exits 1); still a RuntimeError for older callers.
    """


def agent_names_for(unit_types: Sequence[str] | None, n_agents: int) -> list[str]:
    """PettingZoo agent names: ``<unit type>_<k>`` numbered within each type, or ``agent_<i>`` without types."""
    if unit_types is None:
        return [f"agent_{i}" for i in range(n_agents)]
    if len(unit_types) != n_agents:
        raise ValueError(f"unit_types has {len(unit_types)} entries but the env has {n_agents} agents")
    counts: dict[str, int] = {}
    names = []
    for unit in unit_types:
        names.append(f"{unit}_{counts.get(unit, 0)}")
        counts[unit] = counts.get(unit, 0) + 1
    return names


def check_obs_format(obs_format: Any) -> None:
    """ValueError unless ``obs_format`` is one of ``OBS_FORMATS``."""
    if obs_format not in OBS_FORMATS:
        raise ValueError(f"obs_format={obs_format!r}: expected 'dict' (observation and action_mask) or 'box' "
                         "(flat observation, mask in infos[agent]['action_mask'])")


def check_unavailable_action(unavailable_action: Any) -> None:
    """ValueError unless ``unavailable_action`` is one of ``UNAVAILABLE_ACTIONS``."""
    if unavailable_action not in UNAVAILABLE_ACTIONS:
        raise ValueError(f"unavailable_action={unavailable_action!r}: expected 'error' (refuse an action the mask rules "
                         "out, as SMAC does) or 'stop' (the unit stops instead)")


def _is_dead(avail_U: np.ndarray) -> bool:
    """SMAC's convention: a dead agent can take the no-op and nothing else."""
    return bool(avail_U[NOOP_ACTION]) and not avail_U[NOOP_ACTION + 1 :].any()


def _state_layout(env: Any, n_agents: int) -> StateLayout | None:
    """The allies' blocks at the start of the state: the backend's own ``state_layout`` (SMAX), else SMAC's
    (StarCraft2Env: health, weapon cooldown, relative x and y, shield bits, unit type bits); None if unknown."""
    declared = getattr(env, "state_layout", None)
    if isinstance(declared, StateLayout):
        return declared
    shield, types = getattr(env, "shield_bits_ally", None), getattr(env, "unit_type_bits", None)
    if isinstance(shield, int) and isinstance(types, int):
        return StateLayout(n_units=n_agents, unit_dim=4 + shield + types)
    return None


class SMACParallelEnv(ParallelEnv):
    """PettingZoo ParallelEnv (with ``state()``) around an object with SMAC's environment interface.

    Shapes: observation [O] float32, action_mask [U] int8, state [S] float32.
    """

    metadata = {"name": "smac_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(
        self,
        env: Any,
        *,
        unit_types: Sequence[str] | None = None,
        obs_bounds: tuple[float, float] = UNBOUNDED,
        state_bounds: tuple[float, float] = UNBOUNDED,
        map_name: str | None = None,
        obs_format: str = "dict",
        unavailable_action: str = "error",
    ) -> None:
        """``env``: the SMAC-API object, or a zero-argument factory returning one.

        ``unit_types``: each agent's unit type (names become ``stalker_0`` ...); default: the backend's
        ``get_unit_type_names()`` if it has one, else ``agent_<i>``. ``*_bounds``: Box limits.
        ``obs_format``: ``"dict"`` or ``"box"`` (see ``OBS_FORMATS``). ``unavailable_action``: ``"error"`` or
        ``"stop"`` (see ``UNAVAILABLE_ACTIONS``).
        """
        check_obs_format(obs_format)
        check_unavailable_action(unavailable_action)
        if not hasattr(env, "step") and callable(env):
            env = env()
        missing = [m for m in ("reset", "step", "get_obs", "get_state", "get_avail_actions", "get_env_info")
                   if not callable(getattr(env, m, None))]
        if missing:
            raise TypeError(f"env {type(env).__name__} lacks SMAC's methods {missing}; pass a SMAC-API object")
        self.smac_env = env
        info = env.get_env_info()
        absent = [k for k in ENV_INFO_KEYS if k not in info]
        if absent:
            raise ValueError(f"get_env_info() lacks keys {absent}; SMAC's env info has {list(ENV_INFO_KEYS)}")
        self.n_agents = int(info["n_agents"])
        self.n_actions = int(info["n_actions"])
        self.obs_dim = int(info["obs_shape"])
        self.state_dim = int(info["state_shape"])
        self.episode_limit = int(info["episode_limit"])
        self.map_name = map_name
        self.state_layout = _state_layout(env, self.n_agents)
        self.obs_format = obs_format
        self.unavailable_action = unavailable_action
        self.render_mode = None
        if unit_types is None and callable(getattr(env, "get_unit_type_names", None)):
            unit_types = env.get_unit_type_names()
        self.possible_agents = agent_names_for(unit_types, self.n_agents)
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self.agents: list[str] = []

        obs_box = spaces.Box(obs_bounds[0], obs_bounds[1], (self.obs_dim,), np.float32)
        mask_box = spaces.Box(0, 1, (self.n_actions,), np.int8)
        # Cached once so that every call returns the same space object (PettingZoo API requirement).
        self.observation_spaces: dict[str, spaces.Space] = {
            a: obs_box if obs_format == "box" else spaces.Dict({"observation": obs_box, "action_mask": mask_box})
            for a in self.possible_agents
        }
        self.action_spaces: dict[str, spaces.Space] = {a: spaces.Discrete(self.n_actions) for a in self.possible_agents}
        self.state_space = spaces.Box(state_bounds[0], state_bounds[1], (self.state_dim,), np.float32)

        self._steps = 0
        self._obs: dict[str, Any] = {}
        self._masks: dict[str, np.ndarray] = {}
        self._dead_enemies = 0
        self._state = np.zeros(self.state_dim, dtype=np.float32)
        self._warned_seed = False

    # --- PettingZoo API ----------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def state(self) -> np.ndarray:
        """Global state [S] float32 after the last reset/step."""
        return self._state

    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, Any], dict[str, dict]]:
        if seed is not None:
            self._seed_backend(seed)
            for i, agent in enumerate(self.possible_agents):
                self.action_spaces[agent].seed(seed + i)
        self.smac_env.reset()
        self._steps = 0
        self._dead_enemies = 0
        _obs_AO, avail_AU = self._read_backend()
        self.agents = [a for a in self.possible_agents if not _is_dead(avail_AU[self.agent_index[a]])]
        # The keys step() returns, with their values before the first step: clients such as TorchRL's
        # PettingZooWrapper build their info spec from reset() and drop keys it lacks.
        start = {"battle_won": False, "dead_allies": self.n_agents - len(self.agents), "dead_enemies": 0}
        infos = {a: self._agent_info(a, start, crashed=False, truncated=False) for a in self.agents}
        return {a: self._obs[a] for a in self.agents}, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            if not actions:  # no agent, no action: a no-op, as in PettingZoo's MPE (SuperSuit's black_death_v3 needs it)
                return {}, {}, {}, {}, {}
            raise RuntimeError("step called with no live agents; the episode is over, call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for live agents {missing}; every agent in env.agents needs an action")
        # Dead agents (not in self.agents) get the no-op, as SMAC requires.
        action_list = [self._playable(a, actions[a]) if a in self.agents else NOOP_ACTION for a in self.possible_agents]
        reward, terminated, info = self.smac_env.step(action_list)
        self._steps += 1
        live_before = self.agents

        crashed = bool(terminated) and not info  # SMAC returns (0, True, {}) after restarting a crashed SC2
        if crashed:
            # The backend has restarted the game: keep the last observations and state, end by truncation.
            alive_after = {a: True for a in live_before}
            ep_terminated, ep_truncated, reward = False, True, 0.0
        else:
            _, avail_AU = self._read_backend()
            alive_after = {a: not _is_dead(avail_AU[self.agent_index[a]]) for a in live_before}
            ep_terminated, ep_truncated = self._classify_end(bool(terminated), info, avail_AU)
            self._dead_enemies = int(info.get("dead_enemies", self._dead_enemies))
            # A backend without the counts (a user's SMAC-API object): dead allies follow from the masks.
            info = {"dead_allies": self.n_agents - sum(alive_after.values()), **info}

        infos = {a: self._agent_info(a, info, crashed, ep_truncated) for a in live_before}
        terminations = {}
        truncations = {}
        for a in live_before:
            died = not alive_after[a]
            terminations[a] = died or ep_terminated
            truncations[a] = ep_truncated and not died
        rewards = {a: float(reward) for a in live_before}
        obs = {a: self._obs[a] for a in live_before}
        ended = ep_terminated or ep_truncated
        self.agents = [] if ended else [a for a in live_before if alive_after[a]]
        return obs, rewards, terminations, truncations, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        close = getattr(self.smac_env, "close", None)
        if callable(close):
            close()

    def get_stats(self) -> dict[str, Any]:
        """The backend's ``get_stats()`` (win rate, timeouts ...)."""
        return dict(self.smac_env.get_stats())

    # --- helpers -----------------------------------------------------------------------------------
    def _playable(self, agent: str, action: Any) -> int:
        """The SMAC action ``agent`` plays for ``action``: itself when its mask allows it, else stop
        (``unavailable_action="stop"``) or a ValueError naming the agent."""
        u = int(action)
        if not 0 <= u < self.n_actions:
            raise ValueError(f"{agent}: action {u} is outside its action space Discrete({self.n_actions}); expected "
                             f"0 to {self.n_actions - 1}")
        if self._masks[agent][u]:
            return u
        if self.unavailable_action == "stop":
            return STOP_ACTION
        raise ValueError(f"{agent} cannot take action {u}; available: {np.flatnonzero(self._masks[agent]).tolist()}; "
                         "choose from its action_mask, or pass unavailable_action='stop' to make an unavailable "
                         "action stop the unit")

    def _read_backend(self) -> tuple[np.ndarray, np.ndarray]:
        """Cache every agent's observation (in ``obs_format``), mask and the state; return obs [A, O], avail [A, U]."""
        obs_AO = np.asarray(self.smac_env.get_obs(), dtype=np.float32).reshape(self.n_agents, self.obs_dim)
        avail_AU = np.asarray(self.smac_env.get_avail_actions(), dtype=np.int8).reshape(
            self.n_agents, self.n_actions
        )
        self._masks = {a: avail_AU[i] for i, a in enumerate(self.possible_agents)}
        if self.obs_format == "box":
            self._obs = {a: obs_AO[i] for i, a in enumerate(self.possible_agents)}
        else:
            self._obs = {
                a: {"observation": obs_AO[i], "action_mask": avail_AU[i]} for i, a in enumerate(self.possible_agents)
            }
        self._state = np.asarray(self.smac_env.get_state(), dtype=np.float32).reshape(self.state_dim)
        return obs_AO, avail_AU

    def _classify_end(self, terminated: bool, info: dict, avail_AU: np.ndarray) -> tuple[bool, bool]:
        """(terminated, truncated) of the episode: a real end (win, loss, draw) or the time limit."""
        at_limit = self._steps >= self.episode_limit
        if not terminated:
            return False, at_limit  # a backend that does not stop at its limit is cut here
        if info.get("episode_limit", False):
            return False, True  # SMAC with continuing_episode=True says so explicitly
        won = bool(info.get("battle_won", False))
        allies_dead = all(_is_dead(avail_AU[i]) for i in range(self.n_agents))
        n_enemies = self.n_actions - SMAC_N_NON_ATTACK_ACTIONS
        enemies_dead = info.get("dead_enemies", -1) == n_enemies
        real_end = won or allies_dead or enemies_dead
        # Without continuing_episode SMAC only says terminated; at the limit with both teams alive it is a timeout.
        return (not at_limit or real_end), (at_limit and not real_end)

    def _agent_info(self, agent: str, info: dict, crashed: bool, truncated: bool) -> dict[str, Any]:
        """The backend's step info plus the keys every step and reset carry (and the mask for ``box``)."""
        out = dict(info)
        out.setdefault("battle_won", False)
        # SMAC's info has no counts after a crash (it is empty): keep the last ones so the keys never change.
        out.setdefault("dead_allies", self.n_agents - len(self.agents))
        out.setdefault("dead_enemies", self._dead_enemies)
        out["episode_limit"] = truncated and not crashed
        out["sc2_crashed"] = crashed
        if self.obs_format == "box":
            out["action_mask"] = self._masks[agent]
        return out

    def _seed_backend(self, seed: int) -> None:
        seed_fn = getattr(self.smac_env, "seed", None)
        if callable(seed_fn) and _takes_one_argument(seed_fn):
            seed_fn(seed)
            return
        if not self._warned_seed:
            warnings.warn(
                f"{type(self.smac_env).__name__} cannot be reseeded after construction; reset(seed={seed}) "
                "only seeds the action spaces. Pass seed= when building the env "
                "(StarCraft2Env(seed=...) / semzoo.wrappers.smac.parallel_env(map, seed=...))",
                stacklevel=3,
            )
            self._warned_seed = True


def _takes_one_argument(fn: Callable[..., Any]) -> bool:
    try:
        inspect.signature(fn).bind(0)
    except (TypeError, ValueError):
        return False
    return True


# --- StarCraft II backend ----------------------------------------------------------------------------
def _import_starcraft2env() -> type:
    """``smac.env.StarCraft2Env`` from oxwhirl SMAC, or a one-line error saying how to install it."""
    hint = f"install it with `{SMAC_INSTALL}` and StarCraft II {PAPER_SC2_VERSION} (the paper's version)"
    try:
        importlib.import_module("smac")
    except ImportError:
        raise SMACUnavailableError(f"oxwhirl SMAC is not installed; {hint}") from None
    try:
        smac_env = importlib.import_module("smac.env")
    except ModuleNotFoundError as err:
        if err.name is not None and not err.name.startswith("smac"):
            raise SMACUnavailableError(
                f"oxwhirl SMAC is installed but its dependency {err.name!r} is missing; reinstall with `{SMAC_INSTALL}`"
            ) from None
        smac_env = None
    if smac_env is None or not hasattr(smac_env, "StarCraft2Env"):
        raise SMACUnavailableError(
            "the installed `smac` package is SMAC3 (hyper-parameter optimisation), not oxwhirl SMAC; "
            f"fix: `pip uninstall smac && {SMAC_INSTALL}`"
        )
    return smac_env.StarCraft2Env


def _check_known_map(map_name: str) -> None:
    try:
        maps = importlib.import_module("smac.env.starcraft2.maps")
        registry = maps.get_smac_map_registry() if hasattr(maps, "get_smac_map_registry") else None
    except ImportError:
        registry = None
    known = set(registry) if registry else {m.name for m in SMAC_MAPS.values() if SC2_BACKEND in m.backends}
    if map_name not in known:
        raise UnknownMapError(f"unknown SMAC map {map_name!r}; available: {', '.join(sorted(known))}")


def _check_sc2path(map_name: str) -> Path:
    raw = os.environ.get("SC2PATH")
    if raw is None:
        default = Path(DEFAULT_SC2PATH).expanduser()
        if not default.is_dir():
            raise SMACUnavailableError(
                f"SC2PATH is not set and {default} does not exist; install StarCraft II {PAPER_SC2_VERSION} "
                "and `export SC2PATH=/path/to/StarCraftII` (see docs/starcraft.md)"
            )
        root = default
    else:
        root = Path(raw).expanduser()
        if not root.is_dir():
            raise SMACUnavailableError(
                f"SC2PATH={raw!r} is not a directory; point it at your StarCraft II install "
                f"(version {PAPER_SC2_VERSION} in the paper)"
            )
    map_file = root.joinpath(*SMAC_MAPS_DIR, map_name + SC2_MAP_SUFFIX)
    if not map_file.is_file():
        raise SMACUnavailableError(
            f"SMAC map file {map_file} is missing; download the SMAC maps into {root.joinpath(*SMAC_MAPS_DIR)}"
        )
    return root


def make_sc2_env(map_name: str, **kwargs: Any) -> Any:
    """Build oxwhirl SMAC's ``StarCraft2Env(map_name=map_name, **kwargs)`` after checking the install.

    Raises SMACUnavailableError (SMAC missing, SMAC3 installed instead, bad SC2PATH, map file
    missing) or UnknownMapError, each with a one-line fix.
    """
    starcraft2env = _import_starcraft2env()
    _check_known_map(map_name)
    _check_sc2path(map_name)
    return starcraft2env(map_name=map_name, **kwargs)


def parallel_env(map_name: str, *, obs_format: str = "dict", unavailable_action: str = "error",
                 **kwargs: Any) -> SMACParallelEnv:
    """A PettingZoo ParallelEnv with ``state()`` over StarCraft II SMAC ``map_name`` (env id ``smac:<map>``).

    ``obs_format``: ``"dict"`` or ``"box"`` (see ``OBS_FORMATS``); ``unavailable_action``: ``"error"`` or ``"stop"``
    (see ``UNAVAILABLE_ACTIONS``); ``kwargs`` go to ``StarCraft2Env`` (e.g. ``seed``, ``continuing_episode``,
    ``difficulty``).
    """
    check_obs_format(obs_format)
    check_unavailable_action(unavailable_action)
    backend = make_sc2_env(map_name, **kwargs)
    known = SMAC_MAPS.get(map_name)
    unit_types = known.agent_unit_types() if known is not None else None
    return SMACParallelEnv(backend, unit_types=unit_types, map_name=map_name, obs_format=obs_format,
                           unavailable_action=unavailable_action)


__all__ = [
    "SMACParallelEnv",
    "SMACUnavailableError",
    "agent_names_for",
    "check_obs_format",
    "check_unavailable_action",
    "make_sc2_env",
    "parallel_env",
]
