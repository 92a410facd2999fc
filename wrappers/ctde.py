"""PettingZoo ParallelEnv with ``state()``  ->  fixed-shape arrays for centralised training.

``CTDEEnv`` turns one ParallelEnv into a gymnasium ``Env`` whose observation is a dict
of fixed-shape arrays (obs [A,O], state [S], avail [A,U], alive [A]); ``CTDEVecEnv`` runs
N of them through gymnasium's vector machinery (in-process or one process per env)
and implements the ``VecCTDEEnv`` protocol of ``semzoo.types``.

Decisions (see docs/design.md):
- Agents are ``possible_agents`` in order. An agent that leaves ``agents`` (dead) is
  padded: zero observation, only ``noop_action`` available, ``alive`` false.
- Observations of different sizes are zero-padded to the largest; action spaces of
  different sizes are padded with unavailable actions.
- Team reward: the mean (default) or sum of the agents' rewards at that step.
- The episode limit: the one given, else the env's ``episode_limit``, ``max_cycles`` or ``max_steps`` attribute
  (on the env, then its ``unwrapped`` env), else 200 with a warning (``fallback_note``).
- The episode ends when no agent is left or ``episode_limit`` steps were taken. It is
  *terminated* when an agent reported termination and none truncation; otherwise
  (time limit, the adapter's own limit) it is *truncated* and the learner bootstraps.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from pettingzoo.utils.env import ParallelEnv

from semzoo.types import CTDEArrays, StateLayout

STATE_DTYPE_KINDS = "fiub"
"""numpy dtype kinds a state() may have (float, int, unsigned, bool): cast to float32 without surprise."""

ACTION_MASK_KEY = "action_mask"
OBSERVATION_KEY = "observation"
DEFAULT_EPISODE_LIMIT = 200
"""The step limit of an env that publishes none (``EPISODE_LIMIT_ATTRIBUTES``) when the run gives none either."""
EPISODE_LIMIT_ATTRIBUTES = ("episode_limit", "max_cycles", "max_steps")
"""The attributes read, in this order, on the env and then its ``unwrapped`` env, for its step limit (a positive int):
SMAC's and semzoo's ``episode_limit``, MPE's ``max_cycles``, ``max_steps``."""
INFO_KEYS = ("battle_won",)
"""Per-episode facts copied from the agents' infos into the team info."""
TERMINATED_KEY = "ctde_terminated"
TRUNCATED_KEY = "ctde_truncated"
"""Info keys that carry a ``CTDEEnv``'s terminated/truncated past gymnasium's vector env (``_EndsInInfo``)."""


def _episode_limit_of(env: ParallelEnv) -> int | None:
    """The env's own step limit where it publishes one (SMAC, semzoo matrix games, MPE's max_cycles)."""
    for holder in (env, getattr(env, "unwrapped", env)):
        for name in EPISODE_LIMIT_ATTRIBUTES:
            value = getattr(holder, name, None)
            if isinstance(value, (int, np.integer)) and value > 0:
                return int(value)
    return None


def fallback_note(env_name: str) -> str:
    """The line that says a run cuts the episodes of ``env_name`` at ``DEFAULT_EPISODE_LIMIT`` steps for want of a limit."""
    return (f"env {env_name!r} publishes no episode limit (an int attribute {', '.join(EPISODE_LIMIT_ATTRIBUTES)} on "
            f"the env or its unwrapped env): its episodes are cut at {DEFAULT_EPISODE_LIMIT} steps, as truncations; give "
            "the env one of those attributes, or --episode-limit")


def _obs_size(space: spaces.Space) -> int:
    if isinstance(space, spaces.Dict):
        if OBSERVATION_KEY not in space.spaces:
            raise TypeError(f"dict observation space {space} has no {OBSERVATION_KEY!r} entry")
        space = space[OBSERVATION_KEY]
    if space.shape is None:
        raise TypeError(f"observation space {space} has no fixed shape")
    return int(np.prod(space.shape))


@dataclass(frozen=True)
class AgentLayout:
    """How the agents of a ParallelEnv map onto a fixed agent axis: order, padded sizes and the no-op.

    The one place that turns a PettingZoo observation dict into the padded arrays the agent
    network sees, shared by training (``CTDEEnv``) and acting (``semzoo.Policy``).
    """

    agent_names: tuple[str, ...]
    """``possible_agents`` in order: agent i is row i of every array."""
    obs_sizes: tuple[int, ...]
    act_sizes: tuple[int, ...]
    noop_action: int = 0
    """The one action available to an agent that left (dead)."""

    def __post_init__(self) -> None:
        if not 0 <= self.noop_action < self.n_actions:
            raise ValueError(f"noop_action={self.noop_action}: expected an action id in [0, {self.n_actions})")

    @classmethod
    def of_env(cls, env: ParallelEnv, *, noop_action: int = 0) -> AgentLayout:
        """The layout of ``env``'s ``possible_agents``; TypeError for non-Discrete actions or shapeless observations."""
        names = tuple(env.possible_agents)
        obs_sizes = tuple(_obs_size(env.observation_space(a)) for a in names)
        act_sizes = []
        for agent in names:
            space = env.action_space(agent)
            if not isinstance(space, spaces.Discrete):
                raise TypeError(f"agent {agent!r} has action space {space}: semzoo's agents need Discrete actions")
            act_sizes.append(int(space.n))
        return cls(agent_names=names, obs_sizes=obs_sizes, act_sizes=tuple(act_sizes), noop_action=noop_action)

    @property
    def n_agents(self) -> int:
        return len(self.agent_names)

    @property
    def obs_dim(self) -> int:
        return max(self.obs_sizes)

    @property
    def n_actions(self) -> int:
        return max(self.act_sizes)

    def pad(self, observations: dict[str, Any],
            action_masks: dict[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Observation dict of the agents present -> (obs float32 [A,O], avail bool [A,U], alive bool [A]).

        An agent's observation is an array or a dict with ``observation`` and ``action_mask``;
        ``action_masks`` gives masks for agents whose observation carries none (else all its
        actions are available). Absent agents are padded: zero observation, only the no-op available.
        """
        n, u = self.n_agents, self.n_actions
        obs_AO = np.zeros((n, self.obs_dim), np.float32)
        avail_AU = np.zeros((n, u), bool)
        alive_A = np.zeros(n, bool)
        for i, agent in enumerate(self.agent_names):
            if agent not in observations:
                avail_AU[i, self.noop_action] = True
                continue
            alive_A[i] = True
            agent_obs = observations[agent]
            mask = action_masks.get(agent) if action_masks else None
            if isinstance(agent_obs, dict):
                mask = agent_obs[ACTION_MASK_KEY]
                agent_obs = agent_obs[OBSERVATION_KEY]
            if mask is not None:
                mask = np.asarray(mask).reshape(-1).astype(bool)
                avail_AU[i, : mask.size] = mask
            else:
                avail_AU[i, : self.act_sizes[i]] = True
            flat = np.asarray(agent_obs, np.float32).reshape(-1)
            if flat.size != self.obs_sizes[i]:
                raise ValueError(f"the observation of {agent!r} has {flat.size} values: expected {self.obs_sizes[i]}, "
                                 "its observation space's size in the env the agents were built for")
            obs_AO[i, : flat.size] = flat
        return obs_AO, avail_AU, alive_A


class CTDEEnv(gymnasium.Env):
    """One ParallelEnv with ``state()`` as a gymnasium env of fixed-shape arrays.

    Observation: dict ``obs`` float32 [A,O], ``state`` float32 [S], ``avail`` int8 [A,U],
    ``alive`` int8 [A]. Action: MultiDiscrete [A] (actions of dead agents are ignored).
    After the episode ends, further ``step`` calls are no-ops that repeat the final
    observation with zero reward, so N envs can be stepped in lockstep.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        env: ParallelEnv,
        *,
        episode_limit: int | None = None,
        noop_action: int = 0,
        reward_reduction: Literal["mean", "sum"] = "mean",
        name: str | None = None,
    ) -> None:
        if not callable(getattr(env, "state", None)):
            raise TypeError(
                f"{type(env).__name__} has no state(): semzoo needs a ParallelEnv that exposes the global state"
            )
        if reward_reduction not in ("mean", "sum"):
            raise ValueError(f"reward_reduction={reward_reduction!r}: expected 'mean' or 'sum'")
        self.env = env
        self.layout = AgentLayout.of_env(env, noop_action=noop_action)
        self.agent_names: list[str] = list(self.layout.agent_names)
        self.n_agents = self.layout.n_agents
        self.obs_dim = self.layout.obs_dim
        self.n_actions = self.layout.n_actions
        self.noop_action = noop_action
        self.name = name
        state_space = getattr(env, "state_space", None)
        # The declared state shape: the state_space's, else the shape of the first state() (read once here).
        declared = tuple(state_space.shape) if state_space is not None else np.shape(env.state())
        self.state_dim = int(np.prod(declared))
        self.state_layout: StateLayout | None = getattr(env, "state_layout", None)  # per-unit features, if declared
        self._state_declared = f"shape {declared}" + (" (its state_space)" if state_space is not None else
                                                      " (its first state(), as it has no state_space)")
        self._state_shapes = {declared, (self.state_dim,)}
        self.reward_reduction = reward_reduction
        own_limit = _episode_limit_of(env)
        self.episode_limit = int(episode_limit or own_limit or DEFAULT_EPISODE_LIMIT)
        self.episode_limit_fallback = not episode_limit and not own_limit
        """True when neither the caller nor the env gave a limit, so the episode is cut at ``DEFAULT_EPISODE_LIMIT``."""

        n, o, u, s = self.n_agents, self.obs_dim, self.n_actions, self.state_dim
        self.observation_space = spaces.Dict(
            {
                "obs": spaces.Box(-np.inf, np.inf, (n, o), np.float32),
                "state": spaces.Box(-np.inf, np.inf, (s,), np.float32),
                "avail": spaces.Box(0, 1, (n, u), np.int8),
                "alive": spaces.Box(0, 1, (n,), np.int8),
            }
        )
        self.action_space = spaces.MultiDiscrete([u] * n)
        self._t = 0
        self._done = True
        self._terminated = False
        self._truncated = False
        self._last: dict[str, np.ndarray] | None = None

    def _arrays(self, obs: dict[str, Any], infos: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        # Envs with flat observations may carry each agent's mask in its info (semzoo's obs_format="box").
        masks = {a: info[ACTION_MASK_KEY] for a, info in (infos or {}).items() if ACTION_MASK_KEY in (info or {})}
        obs_AO, avail_AU, alive_A = self.layout.pad(obs, masks)
        raw = np.asarray(self.env.state())
        # A shape and dtype compare per step: a state of another size would be cut or padded nowhere, but
        # reach the mixers and the SEM projection as a different vector from the one the run was sized for.
        if raw.shape not in self._state_shapes or raw.dtype.kind not in STATE_DTYPE_KINDS:
            raise ValueError(self._bad_state(raw))
        state = raw.astype(np.float32, copy=False).reshape(-1)
        return {"obs": obs_AO, "state": state, "avail": avail_AU.astype(np.int8), "alive": alive_A.astype(np.int8)}

    def _bad_state(self, raw: np.ndarray) -> str:
        """The one line for a state() that is not the declared flat array of numbers."""
        who = f"env {self.name!r} ({type(self.env).__name__})" if self.name else f"env {type(self.env).__name__}"
        when = "reset()" if self._t == 0 else f"step {self._t}"
        return (f"{who}: state() returned an array of shape {raw.shape} and dtype {raw.dtype} after {when}; "
                f"expected {self.state_dim} numbers (float, int or bool), {self._state_declared}: make state() "
                "return the same flat array at every step and declare its shape in state_space (a gymnasium Box)")

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        obs, infos = self.env.reset(seed=seed, options=options)
        self._t = 0
        self._done = False
        self._last = self._arrays(obs, infos)
        return self._last, {}

    def step(self, action):
        if self._done:
            assert self._last is not None, "step() before reset()"
            return self._last, 0.0, self._terminated, self._truncated, {}
        actions = np.asarray(action).reshape(-1)
        live = list(self.env.agents)
        joint = {a: int(actions[self.agent_names.index(a)]) for a in live}
        obs, rewards, terms, truncs, infos = self.env.step(joint)
        self._t += 1
        values = [float(rewards.get(a, 0.0)) for a in live]
        reward = float(np.sum(values)) if self.reward_reduction == "sum" else float(np.mean(values)) if values else 0.0
        any_trunc = any(bool(truncs.get(a, False)) for a in live)
        any_term = any(bool(terms.get(a, False)) for a in live)
        ended = not self.env.agents
        at_limit = self._t >= self.episode_limit
        self._terminated = bool(ended and any_term and not any_trunc)
        self._truncated = bool((ended or at_limit) and not self._terminated)
        self._done = self._terminated or self._truncated
        self._last = self._arrays(obs, infos)
        info = {}
        for key in INFO_KEYS:
            for a in live:
                if key in infos.get(a, {}):
                    info[key] = bool(infos[a][key])
                    break
        return self._last, reward, self._terminated, self._truncated, info

    def close(self) -> None:
        self.env.close()


class _EndsInInfo(gymnasium.Wrapper):
    """A ``CTDEEnv`` whose terminated/truncated travel in its info, while gymnasium sees episodes that never end.

    With autoreset disabled, gymnasium's vector envs refuse to step an env that has reported the end of its
    episode, but the runner steps all N envs until the longest episode ends: an env whose episode is over then
    steps as a no-op (``CTDEEnv.step``). Episodes of different lengths (MAVEN's m-step game, SMAC) need that.
    """

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, False, False, {**info, TERMINATED_KEY: terminated, TRUNCATED_KEY: truncated}


class CTDEVecEnv:
    """N ``CTDEEnv`` in lockstep through gymnasium's vector envs; implements ``VecCTDEEnv``.

    ``async_=True`` steps each env in its own process (worth it for slow simulators);
    the default steps them in-process, cheapest for fast envs such as MPE and matrix games.
    """

    def __init__(self, env_fns: list[Callable[[], ParallelEnv]], *, async_: bool = False, **ctde_kwargs: Any) -> None:
        if not env_fns:
            raise ValueError("env_fns is empty: expected at least one environment factory")
        wrapped = [lambda fn=fn: _EndsInInfo(CTDEEnv(fn(), **ctde_kwargs)) for fn in env_fns]
        self._vec: AsyncVectorEnv | SyncVectorEnv
        if async_:
            # Build one env here first: a bad id or argument then fails in this process, not in a worker.
            probe = CTDEEnv(env_fns[0](), **ctde_kwargs)
            self._vec = AsyncVectorEnv(wrapped, autoreset_mode=AutoresetMode.DISABLED)
        else:
            sync = SyncVectorEnv(wrapped, autoreset_mode=AutoresetMode.DISABLED)
            self._vec = sync
            probe = sync.envs[0].unwrapped  # type: ignore[assignment]  # the CTDEEnv inside `wrapped`
        self.n_envs = len(env_fns)
        self.n_agents = probe.n_agents
        self.obs_dim = probe.obs_dim
        self.state_dim = probe.state_dim
        self.n_actions = probe.n_actions
        self.episode_limit = probe.episode_limit
        if probe.episode_limit_fallback:
            warnings.warn(fallback_note(probe.name or type(probe.env).__name__), stacklevel=2)
        self.agent_names = list(probe.agent_names)
        self.state_layout = probe.state_layout
        if async_:
            probe.close()

    @staticmethod
    def _to_arrays(obs: dict[str, np.ndarray]) -> CTDEArrays:
        return CTDEArrays(
            obs=obs["obs"].astype(np.float32, copy=False),
            state=obs["state"].astype(np.float32, copy=False),
            avail=obs["avail"].astype(bool),
            alive=obs["alive"].astype(bool),
        )

    def reset(self, seed: int | None = None) -> CTDEArrays:
        seeds: list[int | None] | None = None if seed is None else [seed + i for i in range(self.n_envs)]
        obs: dict[str, np.ndarray]
        obs, _ = self._vec.reset(seed=seeds)
        return self._to_arrays(obs)

    def step(self, actions: np.ndarray):
        obs: dict[str, np.ndarray]
        reward: np.ndarray
        terminated: np.ndarray
        truncated: np.ndarray
        obs, reward, _, _, infos = self._vec.step(np.asarray(actions, np.int64))
        terminated, truncated = infos[TERMINATED_KEY], infos[TRUNCATED_KEY]
        info = {}
        for key in INFO_KEYS:
            if key in infos:
                present = infos.get(f"_{key}", np.ones(self.n_envs, bool))
                info[key] = np.where(present, infos[key], False).astype(bool)
        return (
            self._to_arrays(obs),
            np.asarray(reward, np.float32),
            np.asarray(terminated, bool),
            np.asarray(truncated, bool),
            info,
        )

    def close(self) -> None:
        self._vec.close()
