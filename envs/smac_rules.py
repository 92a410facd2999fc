"""SMAC's rules computed on SMAX's state: the options of ``smax:<map>`` that bring SMAX to StarCraft II SMAC.

Each option closes one departure of JaxMARL's SMAX from SMAC (oxwhirl/smac ``starcraft2.py``, its defaults), and
each defaults to SMAX's own behaviour in the env factory. ``profile="smac"`` sets them all; an option given by name
keeps its value. A training run on a map that SMAC has gets ``profile="smac"`` unless its env arguments name a
profile (``default_profile``, applied by ``semzoo.resolution.resolve``); ``profile="smax"`` is SMAX's own rules.

    option       SMAX's (default)                            "smac"
    reward       dense: enemy health fraction removed /      damage to the enemy's health and shields + 10 per enemy
                 n_enemies, +1 at a win                      killed + 200 at a win, x 20 / max_reward (SMAC's dense)
    time_limit   100 steps on every map                      the map's SMAC episode limit (2s3z 120, 3s5z 150, 3m 60)
    step_time    8 world steps of 1/16 s: 0.5 s a step       8 world steps of 1/22.4 s: SMAC's step_mul of 8 game
                                                             loops at the "faster" speed (22.4 loops a second) that
                                                             SMAX's unit speeds and cooldowns are quoted at
    attack       available inside the unit's own range       available within 6 (SMAC's shoot range) for every unit;
                 (zealot 2, marine 5, stalker 6)             a unit outside its own range walks at the target, as
                                                             StarCraft II's attack order does
    walls        a unit touching the map edge dies           moves into the edge are masked and the edge kills nobody
    obs          JaxMARL's unit list                         SMAC's features (move flags; per enemy and ally: attack
                                                             or visible flag, distance, dx, dy / 9, health, shield,
                                                             type bits; own health, shield, type bits)
    state        SMAX's units (health, x, y, cooldown, type) SMAC's state: allies' health, cooldown (game loops over
                 without last actions                        SMAC's per-type maximum, unclipped), x, y, shield,
                                                             type; enemies' health, x, y, shield, type; every agent's
                                                             last action
    spawn        SMAX's points: (W/4, H/2) and (3W/4, H/2)   SMAC's points where semzoo knows them (3m, 2s3z, 3s5z:
                 ((8, 16) and (24, 16) on 32 x 32)           (9, 16) and (23, 16)), each team's units spread
                                                             around its point with their centroid on it
    fixed_starts false: +-2 noise around each spawn point    true: one start state, as SMAC's maps spawn units

What stays SMAX's: the unit stats (health = StarCraft II's hit points plus shields, no armour, no shield
regeneration, no bonus damage) and JaxMARL's heuristic enemy.
SMAX's health is split into SC2's hit points and shields by unit type (``SC2_SHIELDS``): shields take damage first,
so shield = max(health - hit points max, 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from semzoo.envs.maps import SMAC_MAPS, SMAX_BACKEND, SMAX_DEFAULT_EPISODE_LIMIT

SMAC = "smac"
SMAX = "smax"
"""The profile of SMAX's own rules, JaxMARL's SMAX as semzoo always ran it (``PROFILES``)."""
OPTIONS: dict[str, tuple[Any, ...]] = {
    "reward": ("dense", "sparse", "deaths", SMAC),
    "time_limit": ("smax", SMAC),
    "step_time": ("smax", SMAC),
    "attack": ("unit_range", SMAC),
    "walls": ("death", SMAC),
    "obs": ("smax", SMAC),
    "state": ("smax", SMAC),
    "spawn": ("smax", SMAC),
    "fixed_starts": (False, True),
}
"""The allowed values of each option, SMAX's own first (the default)."""
PROFILES: dict[str, dict[str, Any]] = {
    SMAX: {name: values[0] for name, values in OPTIONS.items()},
    SMAC: {name: (True if name == "fixed_starts" else SMAC) for name in OPTIONS},
}
"""``profile=``: the value of every option. ``smax`` is JaxMARL's SMAX as semzoo always ran it."""
OPTION_HELP = {
    "reward": "SMAC's dense reward: damage + 10 per kill + 200 at a win, scaled to a max return of 20",
    "time_limit": "the map's SMAC episode limit (2s3z 120, 3s5z 150, 3m 60) instead of SMAX's 100",
    "step_time": "a step spans SMAC's 8 game loops at 22.4 a second (0.357 s) instead of SMAX's 0.5 s",
    "attack": "attack available within 6 for every unit, a unit out of its own range walking at the target",
    "walls": "moves into the map edge masked, no death at the edge",
    "obs": "SMAC's observation features",
    "state": "SMAC's state, with every agent's last action",
    "spawn": "the teams start around SMAC's spawn points (3m, 2s3z, 3s5z: x 9 and 23, not SMAX's 8 and 24)",
    "fixed_starts": "one start state for every episode",
}
"""What each option of the SMAC profile sets (``semzoo envs`` lists them)."""

SHOOT_RANGE = 6.0
"""SMAC's ``unit_shoot_range``: an enemy within it (<=) can be attacked, for every unit type."""
SIGHT_RANGE = 9.0
"""SMAC's ``unit_sight_range``: units within it (<) are observed; distances and offsets are divided by it."""
MOVE_PROBE = 1.0
"""SMAC's ``can_move`` looks ``move_amount / 2`` (2 / 2) ahead for a pathable cell."""
ATTACK_STOP_INSIDE = 0.25
"""How far inside its own range a unit walking at its target stops (SMAX attacks at distance < range)."""
DEATH_VALUE, WIN_VALUE, SCALE_RATE = 10.0, 200.0, 20.0
"""SMAC's reward_death_value, reward_win and reward_scale_rate."""
SC2_SHIELDS = {"stalker": 80.0, "zealot": 50.0}
"""StarCraft II's shields of the Protoss types SMAX has; SMAX's health is hit points plus these."""
SC2_LOOPS_PER_SECOND = 22.4
"""StarCraft II's game loops per second at the "faster" game speed; SMAC's step is 8 of them (its maps' step_mul)."""
SMAC_MAX_COOLDOWN = {"marine": 15.0, "marauder": 25.0, "stalker": 35.0, "zealot": 22.0, "hydralisk": 10.0,
                     "zergling": 11.0}
"""SMAC's ``unit_max_cooldown`` in game loops per unit type (15 for a type it does not list): the state divides a
unit's weapon cooldown in game loops by it and does not clip. On SMAX, whose cooldowns are seconds at the "faster"
speed, the loops are ``max(cooldown, 0) x SC2_LOOPS_PER_SECOND`` (SMAX's cooldown runs below 0 while a unit waits;
StarCraft II's stops at 0), so a marine that has just fired reads (0.61 s + SMAX's deviation) x 22.4 / 15, about 0.9-1.0.
"""
SMAC_DEFAULT_MAX_COOLDOWN = 15.0
SMAC_ENEMY_TYPE_ORDER = ("zealot", "stalker")
"""SMAC's type bits of enemies on its stalker-and-zealot maps: SC2's own unit ids (zealot 73, stalker 74) minus 73,
while the allies' follow the map's order (stalker 0, zealot 1). Both as SMAC's ``get_unit_type_id`` computes them."""


@dataclass(frozen=True)
class Options:
    """One resolved set of ``OPTIONS`` (hashable: it keys the compiled SMAX core)."""

    reward: str = "dense"
    time_limit: str = "smax"
    step_time: str = "smax"
    attack: str = "unit_range"
    walls: str = "death"
    obs: str = "smax"
    state: str = "smax"
    spawn: str = "smax"
    fixed_starts: bool = False

    def needs_smac_map(self) -> bool:
        """Whether these options read SMAC's facts of the map (its limit, type bits, races, spawn points)."""
        return SMAC in (self.time_limit, self.obs, self.state, self.spawn)


def resolve(profile: Any = "smax", given: Mapping[str, Any] | None = None) -> Options:
    """The options of ``profile`` with those ``given`` by name (not None) in their place; a bad value is a one-line
    ValueError naming the argument, the allowed values and the default."""
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r}: expected one of {', '.join(PROFILES)} (default smax; a training run's "
                         "smac on a map StarCraft II SMAC has); pass profile=smac for SMAC's reward, limits, attacks, "
                         "walls, features and fixed starts, profile=smax for SMAX's own")
    values = dict(PROFILES[profile])
    for name, value in (given or {}).items():
        if value is None:
            continue
        allowed = OPTIONS[name]
        if name == "fixed_starts":
            if not isinstance(value, bool):
                raise TypeError(f"fixed_starts={value!r}: expected true or false; pass fixed_starts=true to start "
                                "every episode from the same state")
        elif value not in allowed:
            raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(str, allowed))} (default "
                             f"{allowed[0]}); {name}=smac is SMAC's")
        values[name] = value
    return Options(**values)


def default_profile(map_name: str) -> str:
    """The profile a training run on ``smax:<map>`` gets when its env arguments name none: ``smac`` where the map has
    a StarCraft II SMAC map on SMAX (its limit, type bits and races), SMAX's own (``smax``) otherwise."""
    info = SMAC_MAPS.get(map_name)
    return SMAC if info is not None and SMAX_BACKEND in info.backends else SMAX


def smac_map_for(map_name: str) -> Any:
    """The SMAC map that SMAC's rules on SMAX need (type bits, races, episode limit); ValueError for a SMAX-only map."""
    info = SMAC_MAPS.get(map_name)
    if info is None or SMAX_BACKEND not in info.backends:
        raise ValueError(f"smax:{map_name} has no StarCraft II SMAC map, so SMAC's rules (profile=smac, time_limit, "
                         "obs, state) cannot apply; use a map of `semzoo envs` with both backends, e.g. smax:2s3z")
    return info


def episode_limit(map_name: str, time_limit: str) -> int:
    """The episode limit an env of ``map_name`` gets when the run sets none."""
    return smac_map_for(map_name).episode_limit if time_limit == SMAC else SMAX_DEFAULT_EPISODE_LIMIT


@dataclass(frozen=True)
class UnitFacts:
    """Per SMAX unit type (6 entries): SC2's hit points and shields, and SMAC's type bit for allies and enemies.

    ``ally_type_bit[t]`` / ``enemy_type_bit[t]`` are -1 for a type the map's team does not have; ``type_bits`` is the
    map's ``unit_type_bits`` (0: no type one-hot); ``shield_ally`` / ``shield_enemy``: the team is Protoss.
    """

    hp_max: np.ndarray
    shield_max: np.ndarray
    ally_type_bit: np.ndarray
    enemy_type_bit: np.ndarray
    type_bits: int
    shield_ally: bool
    shield_enemy: bool
    max_cooldown_loops: np.ndarray
    """[6] SMAC's ``unit_max_cooldown`` of each SMAX type, in game loops (``SMAC_MAX_COOLDOWN``)."""


def unit_facts(map_name: str, unit_type_names: list[str], smax_health: np.ndarray) -> UnitFacts:
    """SMAC's per-type facts for ``map_name`` over SMAX's unit types (``unit_type_names``, ``smax_health`` [6])."""
    info = smac_map_for(map_name)
    shield = np.asarray([SC2_SHIELDS.get(name, 0.0) for name in unit_type_names], np.float32)
    hp_max = np.asarray(smax_health, np.float32) - shield
    ally_order = [unit for unit, _ in info.allies]
    enemy_units = {unit for unit, _ in info.enemies}
    enemy_order = ([u for u in SMAC_ENEMY_TYPE_ORDER if u in enemy_units]
                   if enemy_units <= set(SMAC_ENEMY_TYPE_ORDER) else [unit for unit, _ in info.enemies])
    ally_bit = np.asarray([ally_order.index(n) if n in ally_order else -1 for n in unit_type_names], np.int32)
    enemy_bit = np.asarray([enemy_order.index(n) if n in enemy_order else -1 for n in unit_type_names], np.int32)
    max_cooldown = np.asarray([SMAC_MAX_COOLDOWN.get(name, SMAC_DEFAULT_MAX_COOLDOWN) for name in unit_type_names],
                              np.float32)
    return UnitFacts(hp_max=hp_max, shield_max=shield, ally_type_bit=ally_bit, enemy_type_bit=enemy_bit,
                     type_bits=info.unit_type_bits, shield_ally=info.ally_race == "P",
                     shield_enemy=info.enemy_race == "P", max_cooldown_loops=max_cooldown)



def profile_lines() -> list[str]:
    """``semzoo envs``'s lines on the SMAC profile: the argument, then each option it sets."""
    lines = ["SMAC on SMAX: --env-arg profile=smac sets every option below to SMAC's (each also alone, e.g. "
             "--env-arg reward=smac; an option given by name keeps its value). `semzoo train` on a map that "
             "StarCraft II SMAC has uses it unless told otherwise; --env-arg profile=smax trains on SMAX's own rules, "
             "the value after each option below:"]
    for name in OPTIONS:
        value = "true" if name == "fixed_starts" else SMAC
        setting = f"{name}={value}"
        lines.append(f"  {setting:<18} {OPTION_HELP[name]} (default {str(OPTIONS[name][0]).lower()})")
    return lines
