"""N SMAX battles stepped in one jitted, vmapped call (``SMAXVecEnv``, a ``semzoo.types.VecCTDEEnv``), and K such
vector envs stepped together in one call."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

with contextlib.suppress(ImportError):  # optional extra semzoo[smax]; without it ``_core`` names the extra
    import jax

from semzoo.envs.smax_core import (
    SMAC_STOP,
    _Core,
    _core,
    _host_arrays,
    _writable_arrays,
    resolve_options,
)
from semzoo.types import CTDEArrays, VecStep
from semzoo.wrappers.smac import agent_names_for, check_obs_format, check_unavailable_action


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
        spawn: str | None = None,
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
                                  walls=walls, obs=obs, state=state, spawn=spawn, fixed_starts=fixed_starts)
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

