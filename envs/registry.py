"""Environment ids -> PettingZoo ParallelEnvs.

Ids: ``matrix:<game>``, ``smax:<map>`` (JaxMARL SMAX, extra ``semzoo[smax]``),
``smac:<map>`` (StarCraft II SMAC), ``lbf:<task>`` (Level-Based Foraging, extra ``semzoo[lbf]``),
``pz:<module>:<factory>`` for any importable
ParallelEnv factory whose env has ``state()``, e.g. ``pz:mpe2.simple_spread_v3:parallel_env``,
and any name given to ``register_env`` (from Python, or from a plugin module for the CLI).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pettingzoo.utils.env import AECEnv, ParallelEnv

from semzoo.errors import MissingDependency
from semzoo.plugins import check_free, load_plugins
from semzoo.types import VecCTDEEnv

if TYPE_CHECKING:
    from semzoo.config import TrainConfig

ENV_KINDS = ("matrix", "smax", "smac", "lbf", "pz")
ENV_ID_HELP = ("matrix:<game>, smax:<map>, smac:<map>, lbf:<task>, pz:<module>:<factory> or a name given to "
               "semzoo.register_env")
STATE_HOWTO = ("give the env a state() method that returns the global state as a flat array, and a state_space "
               "(gymnasium Box) of that shape; semzoo's mixers and episodic memory read it")

_registered: dict[str, Callable[..., ParallelEnv]] = {}


def register_env(name: str, factory: Callable[..., ParallelEnv], *, replace: bool = False,
                 overwrite: bool = False) -> Callable[..., ParallelEnv]:
    """Make ``name`` an env id: ``TrainConfig(env=name)``, ``--env name`` (from a plugin module), ``make_env(name)``.

    ``factory(**env_args)`` returns a PettingZoo ParallelEnv with ``state()``; it gets the same checks as
    ``pz:`` ids. The run directory stores ``name``, so evaluating or resuming the run needs it registered
    again (for the CLI: register it in a module named by ``--plugin`` / ``SEMZOO_PLUGINS``). Returns ``factory``.
    Registering the same factory again is a no-op; another factory under a taken name is a ValueError unless
    ``replace=True`` (``overwrite=True``, its older name, does the same).
    """
    if not isinstance(name, str) or not name or name.strip() != name:
        raise ValueError(f"env name {name!r}: expected a non-empty string without surrounding spaces")
    if name.partition(":")[0] in ENV_KINDS:
        raise ValueError(f"env name {name!r}: names starting with {', '.join(k + ':' for k in ENV_KINDS)} are "
                         "semzoo's own ids; pick another name")
    if not callable(factory):
        raise TypeError(f"env {name!r}: factory {factory!r} is not callable; expected a function or class that "
                        "returns a PettingZoo ParallelEnv")
    check_free("env", name, factory, _registered, replace=replace or overwrite)
    _registered[name] = factory
    return factory


def registered_envs() -> list[str]:
    """The names given to ``register_env`` (plugins included), sorted."""
    load_plugins()
    return sorted(_registered)


def registered_factory(name: str) -> Callable[..., ParallelEnv] | None:
    """The factory given to ``register_env`` under ``name`` (None for semzoo's own ids and unknown names)."""
    return _registered.get(name)


def make_env(env_id: str, **kwargs: Any) -> ParallelEnv:
    """Build the PettingZoo ParallelEnv named by ``env_id``; ``kwargs`` go to its factory."""
    kind, _, rest = env_id.partition(":")
    if kind == "matrix" and rest:
        from semzoo.envs import matrix_game_v0

        return _call(matrix_game_v0.parallel_env, env_id, kwargs, rest)
    if kind == "smax" and rest:
        from semzoo.envs import smax

        return _call(smax.parallel_env, env_id, kwargs, rest)
    if kind == "smac" and rest:
        from semzoo.wrappers import smac

        return _call(smac.parallel_env, env_id, kwargs, rest)
    if kind == "lbf" and rest:
        from semzoo.envs import lbf

        return check_env(_call(lbf.parallel_env, env_id, kwargs, rest), env_id)
    if kind == "pz" and rest:
        factory, module = _pz_factory(env_id, rest)
        # PettingZoo's env modules build every env from raw_env(**kwargs): its signature names the valid arguments.
        return check_env(_call(factory, env_id, kwargs, signature_of=getattr(module, "raw_env", None)), env_id)
    if env_id not in _registered:
        load_plugins()  # a plugin module may register it
    if env_id not in _registered:
        names = f"; registered: {', '.join(sorted(_registered))}" if _registered else ""
        raise ValueError(f"unknown env id {env_id!r}: expected {ENV_ID_HELP} (run `semzoo envs` for the list){names}")
    return check_env(_call(_registered[env_id], env_id, kwargs), env_id)


def _pz_factory(env_id: str, rest: str) -> tuple[Callable[..., Any], Any]:
    module_name, _, factory_name = rest.rpartition(":")
    if not module_name or not factory_name:
        raise ValueError(f"env id {env_id!r}: expected pz:<module>:<factory>, e.g. pz:mpe2.simple_spread_v3:parallel_env")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        missing = err.name if isinstance(err, ModuleNotFoundError) else None
        if missing and missing != module_name.partition(".")[0] and \
                (module_name == missing or module_name.startswith(missing + ".")):
            # The package is there but not this module of it: a misspelt id, not a missing install.
            raise ValueError(f"env id {env_id!r}: cannot import module {module_name!r} ({err}): its package is "
                             "installed, so check the module's spelling") from None
        raise MissingDependency(f"env id {env_id!r}: cannot import module {module_name!r} ({err}); install it "
                                "first (MPE: pip install 'semzoo[mpe]')") from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ValueError(f"env id {env_id!r}: module {module_name!r} has no factory {factory_name!r}")
    return factory, module


def _call(factory: Callable[..., Any], env_id: str, kwargs: dict[str, Any], *positional: Any,
          signature_of: Callable[..., Any] | None = None) -> Any:
    """``factory(*positional, **kwargs)``, refusing keyword arguments the factory does not take by name.

    A factory that passes ``**kwargs`` on is judged by ``signature_of`` where given, else by the call.
    """
    params = _keyword_params(factory)
    if params is not None and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params) and signature_of is not None:
        params = _keyword_params(signature_of)
    else:
        params = None if params is None else params[len(positional):]
    if params is not None and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        valid = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
        unknown = [key for key in kwargs if key not in valid]
        if unknown:
            raise ValueError(f"env id {env_id!r}: unknown env argument{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; its factory takes {', '.join(valid) or 'none'}")
    return factory(*positional, **kwargs)


def _keyword_params(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read (some builtins): let the call decide
        return None


def check_env(env: Any, env_id: str) -> ParallelEnv:
    """Refuse, in one line, an env that is not a ParallelEnv with a readable global state; returns ``env``.

    ``state()`` is read once: an env that can only give it after ``reset()`` is returned reset.
    """
    if isinstance(env, AECEnv) or (not isinstance(env, ParallelEnv) and hasattr(env, "agent_iter")):
        raise ValueError(f"env id {env_id!r} builds an AEC env ({type(env).__name__}): semzoo needs a ParallelEnv; use "
                         "the module's parallel_env() or pettingzoo.utils.conversions.aec_to_parallel")
    if not hasattr(env, "possible_agents") or not callable(getattr(env, "step", None)):
        raise ValueError(f"env id {env_id!r} builds a {type(env).__name__}, not a PettingZoo ParallelEnv")
    if not callable(getattr(env, "state", None)):
        raise ValueError(f"env id {env_id!r}: the env has no state(); {STATE_HOWTO}")
    try:
        env.state()
    except Exception:
        try:
            env.reset()
            env.state()
        except Exception as err:
            reason = (str(err).splitlines() or [""])[0]
            raise ValueError(f"env id {env_id!r}: state() fails even after reset() ({type(err).__name__}: "
                             f"{reason}); {STATE_HOWTO}") from None
    return env


def make_vec_env(config: TrainConfig) -> VecCTDEEnv:
    """The ``config.n_envs`` environments of a run, as a ``VecCTDEEnv`` (SMAX: one jitted, vmapped batch)."""
    kind, _, name = config.env.partition(":")
    if kind == "smax":
        from semzoo.envs.smax import SMAXVecEnv, check_run_env_args

        check_run_env_args(config.env_args)  # seed and episode_limit come from the run's own config
        if config.team_reward == "sum":
            raise ValueError(f"team_reward='sum' on {config.env}: SMAX pays one team reward, not one per agent; use "
                             "team_reward 'mean' (or 'env') there")
        return SMAXVecEnv(name, n_envs=config.n_envs, episode_limit=config.episode_limit, **config.env_args)
    from semzoo.wrappers.ctde import CTDEVecEnv

    # CTDEVecEnv builds its first env in this process (sync and async), so a bad id or argument fails here.
    fns = [lambda: make_env(config.env, **config.env_args) for _ in range(config.n_envs)]
    from semzoo.config import family_team_reward

    reduction = family_team_reward(config.env) if config.team_reward == "env" else config.team_reward
    return CTDEVecEnv(fns, episode_limit=config.episode_limit, name=config.env, reward_reduction=reduction)
