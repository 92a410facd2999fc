"""The env arguments of ``smax:<map>`` checked without JAX: a bad map or argument is refused before JaxMARL imports.

``semzoo train`` calls ``check_env_args`` first, so ``--env smax:3mm`` or ``--env-arg reward=sprase`` is one line
within a second, not after the 20-30 s JAX and JaxMARL take to import on a busy machine. The env factories
(``semzoo.envs.smax.parallel_env``, ``SMAXEnv``, ``SMAXVecEnv``) make the same checks with the same messages: each
check lives here once. Imports numpy, pettingzoo and gymnasium (through ``semzoo.wrappers.smac``), never JAX.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semzoo.envs import smac_rules
from semzoo.envs.maps import SMAC_MAPS, SMAX_BACKEND, SMAX_ONLY_MAPS, UnknownMapError

SMAX_MAPS = tuple(sorted([name for name, info in SMAC_MAPS.items() if SMAX_BACKEND in info.backends]
                         + list(SMAX_ONLY_MAPS)))
"""The maps of JaxMARL's SMAX (its ``MAP_NAME_TO_SCENARIO``), known without importing it; a test holds the two equal."""
ATTACK_MODES = ("closest", "random")
"""How JaxMARL's heuristic enemy picks its target."""
RUN_OWNED_ARGS = {"seed": ("seeds its envs from the run's seed", "--seed"),
                  "episode_limit": ("passes its own episode limit to the envs", "--episode-limit")}
"""Arguments of ``parallel_env`` that a run sets from its config: (what the run does, the flag to use instead)."""
FACTORY_ARGS = ("seed", "episode_limit", "enemy_shoots", "attack_mode", "obs_format", "fixed_starts",
                "unavailable_action", "reward", "profile", "time_limit", "step_time", "attack", "walls", "obs", "state",
                "spawn")
"""The keyword arguments of ``semzoo.envs.smax.parallel_env`` in its order (a test holds them to its signature)."""
WORD_ARGS = frozenset({"attack_mode", "obs_format", "unavailable_action", "profile",
                       *(name for name, values in smac_rules.OPTIONS.items() if isinstance(values[0], str))})
"""The arguments whose values are words (``profile=smac``): a word there is never a number or list misread as one."""


def check_map(map_name: str, available: Any = SMAX_MAPS) -> None:
    """UnknownMapError (a ValueError) for a map SMAX does not have, naming the ones it has and StarCraft II's id."""
    if map_name not in available:
        raise UnknownMapError(f"SMAX has no map {map_name!r}; available: {', '.join(sorted(available))} "
                              f"(for other SMAC maps use StarCraft II: env id 'smac:{map_name}')")


def check_options(enemy_shoots: Any, attack_mode: Any) -> None:
    """TypeError or ValueError for a bad ``enemy_shoots`` (a boolean) or ``attack_mode`` (``ATTACK_MODES``)."""
    if not isinstance(enemy_shoots, bool):
        raise TypeError(f"enemy_shoots={enemy_shoots!r}: expected true or false; pass enemy_shoots=false to make "
                        "the enemy passive")
    if attack_mode not in ATTACK_MODES:
        raise ValueError(f"attack_mode={attack_mode!r}: expected one of {', '.join(ATTACK_MODES)}")


def check_episode_limit(limit: Any) -> None:
    """ValueError unless ``limit`` is a positive int."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"episode_limit must be a positive int, got {limit!r}")


def check_run_env_args(env_args: Mapping[str, Any]) -> None:
    """ValueError for an env arg of ``smax:<map>`` that a run sets from its own config (seed, episode_limit).

    ``parallel_env`` takes them (a single env has no run around it), ``SMAXVecEnv`` gets them from
    the run: so a run refuses them up front, naming the flag that sets them.
    """
    for key, (what, flag) in RUN_OWNED_ARGS.items():
        if key in env_args:
            raise ValueError(f"--env-arg {key}={env_args[key]}: a SMAX run {what}; drop this --env-arg and use "
                             f"{flag} {env_args[key]}")


def check_env_args(env_id: str, env_args: Mapping[str, Any]) -> None:
    """ValueError or TypeError, with the env factory's own message, for ``smax:<map>`` env arguments the env would
    refuse: an unknown map or argument, a value out of its set, SMAC's rules on a map StarCraft II SMAC lacks.

    The checks of ``parallel_env(map, **env_args)`` in its order, without building the env (no JAX).
    """
    from semzoo.wrappers.smac import check_obs_format, check_unavailable_action

    map_name = env_id.partition(":")[2]
    unknown = [key for key in env_args if key not in FACTORY_ARGS]
    if unknown:
        raise ValueError(f"env id {env_id!r}: unknown env argument{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; its factory takes {', '.join(FACTORY_ARGS)}")
    check_obs_format(env_args.get("obs_format", "dict"))
    check_unavailable_action(env_args.get("unavailable_action", "error"))
    profile = env_args.get("profile")
    options = smac_rules.resolve("smax" if profile is None else profile,
                                 {name: env_args.get(name) for name in smac_rules.OPTIONS})
    check_options(env_args.get("enemy_shoots", True), env_args.get("attack_mode", "closest"))
    check_map(map_name)
    if options.needs_smac_map():
        smac_rules.smac_map_for(map_name)
    if env_args.get("episode_limit") is not None:
        check_episode_limit(env_args["episode_limit"])


__all__ = ["ATTACK_MODES", "FACTORY_ARGS", "RUN_OWNED_ARGS", "SMAX_MAPS", "WORD_ARGS", "check_env_args", "check_episode_limit",
           "check_map", "check_options", "check_run_env_args"]
