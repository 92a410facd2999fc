"""Level-Based Foraging (lbforaging 2.0, extra ``semzoo[lbf]``) as a PettingZoo ParallelEnv: env ids ``lbf:<task>``.

The choices are those of EPyMARL's gymma wrapper (uoe-agents/epymarl ``src/envs/gymma.py``), which the benchmark of
Papoudakis et al. (2021) ran:

- the state is the agents' observations concatenated (``get_state``), each agent's observation as LBF gives it;
- every action is available to every agent (``get_avail_agent_actions``: LBF itself turns an invalid move into
  no-op);
- the team reward is the SUM of the agents' rewards (``reward_scalarisation: "sum"``, EPyMARL's default): a run on
  ``lbf:`` takes ``team_reward`` sum from the env's ``team_reward`` attribute (all the food of an episode pays 1.0);
- the episode limit is the task's ``max_episode_steps`` (50 for every registered task, EPyMARL's
  ``env_args.time_limit=50``), published as ``episode_limit``.

LBF reports one ``done`` for both ends of an episode; here it is split as gymnasium splits it: *terminated* when the
last food is loaded, *truncated* at the step limit with food left.

``state="scaled"`` divides each state entry by the larger magnitude of its bound in LBF's observation space (grid
coordinates -1..size-1 and levels 0..max become about [-0.15, 1]); ``obs="scaled"`` does the same to the agents'
observations. LBF's raw state (EPyMARL's, the default) feeds QMIX's hypernetworks grid coordinates up to 7 on 8x8,
which drives its Q_tot far out of the return range (docs/lbf.md).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

from semzoo.errors import MissingDependency

_IMPORT_ERROR: ImportError | None = None
try:
    import lbforaging  # noqa: F401  (registers the Foraging-* ids with gymnasium)
except ImportError as err:  # optional extra semzoo[lbf]
    _IMPORT_ERROR = err

INSTALL_HINT = "pip install 'semzoo[lbf]' (installs lbforaging)"
TASK_PREFIX = "Foraging"
EXAMPLE_TASK = "Foraging-8x8-2p-2f-coop-v3"
PAPER_TASKS = ("Foraging-8x8-2p-2f-coop-v3", "Foraging-2s-8x8-2p-2f-coop-v3", "Foraging-10x10-3p-3f-v3",
               "Foraging-2s-10x10-3p-3f-v3", "Foraging-15x15-3p-5f-v3", "Foraging-15x15-4p-3f-v3",
               "Foraging-15x15-4p-5f-v3")
"""The LBF tasks of EPyMARL's benchmark (its README's list, lbforaging 2.0 ids)."""
TEAM_REWARD: Literal["mean", "sum"] = "sum"
"""How the agents' rewards make the team reward on LBF: EPyMARL's ``reward_scalarisation`` default."""
SCALINGS = ("raw", "scaled")
N_ACTIONS = 6
"""LBF's actions: none, north, south, west, east, load."""


def _require_lbforaging() -> None:
    if _IMPORT_ERROR is not None:
        raise MissingDependency(f"lbf: ids need lbforaging, which failed to import ({_IMPORT_ERROR}); fix: "
                                f"{INSTALL_HINT}")


@functools.cache
def available_tasks() -> tuple[str, ...]:
    """The Foraging task ids lbforaging registers with gymnasium (grid observations excluded), sorted."""
    _require_lbforaging()
    return tuple(sorted(name for name in gymnasium.registry
                        if name.startswith(TASK_PREFIX + "-") and not name.startswith(TASK_PREFIX + "-grid")))


def check_task(task: str) -> None:
    """ValueError (one line) for a task lbforaging does not register, naming the closest ids."""
    _require_lbforaging()
    if task in available_tasks():
        return
    close = difflib.get_close_matches(task, available_tasks(), n=3, cutoff=0.6)
    near = f"; closest: {', '.join(close)}" if close else ""
    raise ValueError(f"lbf:{task}: lbforaging has no task {task!r}: expected Foraging[-2s]-<size>x<size>-<n>p-<m>f"
                     f"[-coop]-v3, e.g. lbf:{EXAMPLE_TASK}{near}")


def _check_scaling(name: str, value: Any) -> None:
    if value not in SCALINGS:
        raise ValueError(f"lbf: {name}={value!r}: expected one of {', '.join(SCALINGS)} ('raw' is LBF's and "
                         f"EPyMARL's, 'scaled' divides each entry by its space's largest bound)")


class LBFParallelEnv(ParallelEnv):
    """One lbforaging task as a ParallelEnv with ``state()``; agents ``agent_0`` .. ``agent_{n-1}``.

    Shapes: each observation [O] (3 per food, then 3 per agent: row, column, level), state [n * O], 6 actions.
    """

    metadata = {"render_modes": [], "name": "lbf", "is_parallelizable": True}
    team_reward: Literal["mean", "sum"] = TEAM_REWARD
    """The team reward semzoo's adapter forms from the agents' rewards on this env (read by ``semzoo.wrappers.ctde``)."""

    def __init__(self, task: str, *, state: Literal["raw", "scaled"] = "raw",
                 obs: Literal["raw", "scaled"] = "raw") -> None:
        check_task(task)
        _check_scaling("state", state)
        _check_scaling("obs", obs)
        self.task = task
        self.state_scaling = state
        self.obs_scaling = obs
        inner: Any = gymnasium.make(task).unwrapped  # LBF's ForagingEnv, without gymnasium's checking wrappers
        self._env = inner
        self.possible_agents = [f"agent_{i}" for i in range(self._env.n_agents)]
        self.agents: list[str] = []
        self.episode_limit = int(self._env._max_episode_steps)
        """The task's own step limit (50 on every registered task): the episode is truncated there."""
        own: spaces.Box = self._env.observation_space[0]
        low, high = own.low.astype(np.float32), own.high.astype(np.float32)
        # Each entry over the larger magnitude of its bounds, so 0 stays 0 and LBF's -1 ("not there") stays negative.
        self._scale = np.maximum(np.abs(low), np.abs(high)).clip(min=1.0).astype(np.float32)
        obs_low, obs_high = (low / self._scale, high / self._scale) if obs == "scaled" else (low, high)
        self._obs_space = spaces.Box(obs_low, obs_high, dtype=np.float32)
        n = len(self.possible_agents)
        state_low, state_high = (low / self._scale, high / self._scale) if state == "scaled" else (low, high)
        self.state_space = spaces.Box(np.tile(state_low, n), np.tile(state_high, n), dtype=np.float32)
        self._action_space: spaces.Discrete = spaces.Discrete(N_ACTIONS)
        self._raw: tuple[np.ndarray, ...] | None = None

    def observation_space(self, agent: str) -> spaces.Box:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    def _observations(self) -> dict[str, np.ndarray]:
        assert self._raw is not None, "observations before reset()"
        scale = self._scale if self.obs_scaling == "scaled" else None
        return {agent: (raw / scale if scale is not None else raw).astype(np.float32)
                for agent, raw in zip(self.possible_agents, self._raw)}

    def state(self) -> np.ndarray:
        """The agents' observations concatenated, as EPyMARL's ``get_state``: [n * O]."""
        if self._raw is None:
            raise RuntimeError("state() before reset(): reset the env first")
        parts = [raw / self._scale if self.state_scaling == "scaled" else raw for raw in self._raw]
        return np.concatenate(parts).astype(np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None):
        # lbforaging's spawn treats the last episode's player positions as taken while it places each player, so
        # its reset(seed) would depend on the episode before; clear them so a seed alone fixes the start
        for player in self._env.players:
            player.position = None
        raw, _ = self._env.reset(seed=seed, options=options)
        self._raw = tuple(np.asarray(o, np.float32) for o in raw)
        self.agents = list(self.possible_agents)
        return self._observations(), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]):
        joint = [int(actions.get(agent, 0)) for agent in self.possible_agents]
        raw, rewards, done, _, _ = self._env.step(joint)
        self._raw = tuple(np.asarray(o, np.float32) for o in raw)
        food_gone = bool(self._env.field.sum() == 0)
        ended = bool(done)
        observations = self._observations()
        reward = {agent: float(r) for agent, r in zip(self.possible_agents, rewards)}
        terminations = {agent: ended and food_gone for agent in self.possible_agents}
        truncations = {agent: ended and not food_gone for agent in self.possible_agents}
        infos: dict[str, dict] = {agent: {} for agent in self.possible_agents}
        if ended:
            self.agents = []
        return observations, reward, terminations, truncations, infos

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._env.close()


def parallel_env(task: str, *, state: Literal["raw", "scaled"] = "raw",
                 obs: Literal["raw", "scaled"] = "raw") -> LBFParallelEnv:
    """The LBF task ``task`` (e.g. ``Foraging-8x8-2p-2f-coop-v3``); ``state``/``obs``: 'raw' (EPyMARL's) or 'scaled'
    (each entry over its space's largest bound)."""
    return LBFParallelEnv(task, state=state, obs=obs)


__all__ = ["INSTALL_HINT", "PAPER_TASKS", "TEAM_REWARD", "LBFParallelEnv", "available_tasks", "check_task",
           "parallel_env"]
