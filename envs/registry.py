"""Environment ids -> PettingZoo ParallelEnvs.

Ids: ``matrix:<game>``, ``smax:<map>`` (JaxMARL SMAX, extra ``semzoo[smax]``),
``smac:<map>`` (StarCraft II SMAC) and ``pz:<module>:<factory>`` for any importable
ParallelEnv factory whose env has ``state()``, e.g. ``pz:mpe2.simple_spread_v3:parallel_env``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pettingzoo.utils.env import ParallelEnv

from semzoo.types import VecCTDEEnv

if TYPE_CHECKING:
    from semzoo.config import TrainConfig

ENV_KINDS = ("matrix", "smax", "smac", "pz")
ENV_ID_HELP = "matrix:<game>, smax:<map>, smac:<map> or pz:<module>:<factory>"


def make_env(env_id: str, **kwargs: Any) -> ParallelEnv:
    """Build the PettingZoo ParallelEnv named by ``env_id``; ``kwargs`` go to its factory."""
    kind, _, rest = env_id.partition(":")
    if kind not in ENV_KINDS or not rest:
        raise ValueError(f"unknown env id {env_id!r}: expected {ENV_ID_HELP} (run `semzoo envs` for the list)")
    if kind == "matrix":
        from semzoo.envs import matrix_game_v0

        return matrix_game_v0.parallel_env(rest, **kwargs)
    if kind == "smax":
        from semzoo.envs import smax

        return smax.parallel_env(rest, **kwargs)
    if kind == "smac":
        from semzoo.wrappers import smac

        return smac.parallel_env(rest, **kwargs)
    module_name, _, factory_name = rest.rpartition(":")
    if not module_name or not factory_name:
        raise ValueError(f"env id {env_id!r}: expected pz:<module>:<factory>, e.g. pz:mpe2.simple_spread_v3:parallel_env")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"env id {env_id!r}: cannot import module {module_name!r} ({err}); install it first") from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ValueError(f"env id {env_id!r}: module {module_name!r} has no factory {factory_name!r}")
    env = factory(**kwargs)
    if not callable(getattr(env, "state", None)):
        raise ValueError(f"env id {env_id!r}: the env has no state(); semzoo needs the global state for its mixers")
    return env


def make_vec_env(config: TrainConfig) -> VecCTDEEnv:
    """The ``config.n_envs`` environments of a run, as a ``VecCTDEEnv`` (SMAX: one jitted, vmapped batch)."""
    kind, _, name = config.env.partition(":")
    if kind == "smax":
        from semzoo.envs.smax import SMAXVecEnv

        return SMAXVecEnv(name, n_envs=config.n_envs, episode_limit=config.episode_limit, **config.env_args)
    from semzoo.wrappers.ctde import CTDEVecEnv

    # CTDEVecEnv builds its first env in this process (sync and async), so a bad id or argument fails here.
    fns = [lambda: make_env(config.env, **config.env_args) for _ in range(config.n_envs)]
    return CTDEVecEnv(fns, episode_limit=config.episode_limit)
