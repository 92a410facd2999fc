"""SMAC map facts: team sizes, action/observation/state sizes and which backends provide each map.

Sizes follow SMAC's formulas with its default options (``obs_all_health=True``,
``obs_last_action=False``, no pathing/terrain observations, ``state_last_action=True``):

    n_actions = 6 + n_enemies                     (no-op, stop, 4 moves, one attack/heal per target)
    obs_dim   = 4                                 (move feasibility)
              + n_enemies   * (4 + 1 + shield_e + type_bits)
              + (n_agents-1) * (4 + 1 + shield_a + type_bits)
              + (1 + shield_a + type_bits)        (own health, shield, type)
    state_dim = n_agents  * (4 + shield_a + type_bits)
              + n_enemies * (3 + shield_e + type_bits)
              + n_agents * n_actions              (last actions)

``shield_x`` is 1 for a Protoss team. Medivacs target allies with their
"attack" slots (heal), so medivac maps keep ``6 + n_enemies`` actions.

The SMAX columns are the sizes semzoo's SMAX backend (``semzoo.envs.smax``)
reports: JaxMARL's unit-list observation (13 features per other unit with its 6
unit types, 10 own features), a world state of 12 features per unit (both
teams), and SMAC's action layout remapped onto SMAX (so ``6 + n_enemies``).
SMAX's time limit is its own ``max_steps`` (100 by default), not SMAC's.
"""

from __future__ import annotations

from dataclasses import dataclass

SC2_BACKEND = "sc2"
SMAX_BACKEND = "smax"

SMAC_N_NON_ATTACK_ACTIONS = 6
SMAC_N_MOVE_FEATURES = 4
SMAC_ALLY_FEATURES = 4  # visible, distance, relative x, relative y
SMAC_ALLY_STATE_FEATURES = 4  # health, weapon cooldown, relative x, relative y
SMAC_ENEMY_STATE_FEATURES = 3  # health, relative x, relative y
PROTOSS = "P"

SMAX_N_UNIT_TYPES = 6  # marine, marauder, stalker, zealot, zergling, hydralisk
SMAX_OTHER_UNIT_FEATURES = 7 + SMAX_N_UNIT_TYPES
SMAX_OWN_FEATURES = 4 + SMAX_N_UNIT_TYPES
SMAX_STATE_FEATURES_PER_UNIT = 4 + SMAX_N_UNIT_TYPES + 2  # own features, team, unit type
SMAX_DEFAULT_EPISODE_LIMIT = 100

# The eight maps of the SEM paper (Ma & Li, 2021), in the paper's order.
PAPER_MAPS = (
    "2s3z",
    "3s5z",
    "1c3s5z",
    "2s_vs_1sc",
    "2c_vs_64zg",
    "MMM2",
    "bane_vs_bane",
    "27m_vs_30m",
)


class UnknownMapError(ValueError):
    """A map name that the chosen backend does not provide."""


@dataclass(frozen=True)
class SMACMap:
    """One SMAC scenario as SMAC (StarCraft II) defines it, plus its SMAX-side sizes.

    ``allies`` / ``enemies`` list ``(unit_type, count)`` in SMAC's agent order
    (agents are sorted by SMAC's unit-type id). ``smax_*`` are None where SMAX
    lacks the map.
    """

    name: str
    allies: tuple[tuple[str, int], ...]
    enemies: tuple[tuple[str, int], ...]
    ally_race: str
    enemy_race: str
    unit_type_bits: int
    episode_limit: int
    backends: tuple[str, ...]
    spawn: tuple[tuple[float, float], tuple[float, float]] | None = None
    """The points (x, y) where the map's script creates the allies' and the enemies' units, where semzoo knows them
    (SMAX's ``spawn=smac`` places the teams around them); None elsewhere."""

    @property
    def n_agents(self) -> int:
        return sum(count for _, count in self.allies)

    @property
    def n_enemies(self) -> int:
        return sum(count for _, count in self.enemies)

    @property
    def n_actions(self) -> int:
        return SMAC_N_NON_ATTACK_ACTIONS + self.n_enemies

    @property
    def obs_dim(self) -> int:
        shield_a = int(self.ally_race == PROTOSS)
        shield_e = int(self.enemy_race == PROTOSS)
        enemy = SMAC_ALLY_FEATURES + 1 + shield_e + self.unit_type_bits
        ally = SMAC_ALLY_FEATURES + 1 + shield_a + self.unit_type_bits
        own = 1 + shield_a + self.unit_type_bits
        return SMAC_N_MOVE_FEATURES + self.n_enemies * enemy + (self.n_agents - 1) * ally + own

    @property
    def state_dim(self) -> int:
        shield_a = int(self.ally_race == PROTOSS)
        shield_e = int(self.enemy_race == PROTOSS)
        ally = SMAC_ALLY_STATE_FEATURES + shield_a + self.unit_type_bits
        enemy = SMAC_ENEMY_STATE_FEATURES + shield_e + self.unit_type_bits
        return self.n_agents * ally + self.n_enemies * enemy + self.n_agents * self.n_actions

    def agent_unit_types(self) -> list[str]:
        """Unit type of each SMAC agent, in agent order."""
        return [unit for unit, count in self.allies for _ in range(count)]

    @property
    def in_paper(self) -> bool:
        return self.name in PAPER_MAPS

    @property
    def smax_obs_dim(self) -> int | None:
        if SMAX_BACKEND not in self.backends:
            return None
        n_others = self.n_agents - 1 + self.n_enemies
        return n_others * SMAX_OTHER_UNIT_FEATURES + SMAX_OWN_FEATURES

    @property
    def smax_state_dim(self) -> int | None:
        if SMAX_BACKEND not in self.backends:
            return None
        return (self.n_agents + self.n_enemies) * SMAX_STATE_FEATURES_PER_UNIT


def _m(
    name: str,
    allies: tuple[tuple[str, int], ...],
    enemies: tuple[tuple[str, int], ...],
    races: str,
    unit_type_bits: int,
    limit: int,
    smax: bool = False,
    spawn: tuple[tuple[float, float], tuple[float, float]] | None = None,
) -> SMACMap:
    backends = (SC2_BACKEND, SMAX_BACKEND) if smax else (SC2_BACKEND,)
    return SMACMap(name, allies, enemies, races[0], races[1], unit_type_bits, limit, backends, spawn)


SMAC_SPAWN_32 = ((9.0, 16.0), (23.0, 16.0))
"""Where the 32 x 32 maps 3m, 2s3z and 3s5z of SMAC create the allies and the enemies (SMAX's own points are a
quarter and three quarters of the width, (8, 16) and (24, 16))."""


_MARINES = "marine"
# Facts from SMAC's map registry (oxwhirl/smac smac_maps.py) and the SMAC paper's scenario table.
SMAC_MAPS: dict[str, SMACMap] = {
    m.name: m
    for m in (
        _m("3m", ((_MARINES, 3),), ((_MARINES, 3),), "TT", 0, 60, smax=True, spawn=SMAC_SPAWN_32),
        _m("8m", ((_MARINES, 8),), ((_MARINES, 8),), "TT", 0, 120, smax=True),
        _m("25m", ((_MARINES, 25),), ((_MARINES, 25),), "TT", 0, 150, smax=True),
        _m("5m_vs_6m", ((_MARINES, 5),), ((_MARINES, 6),), "TT", 0, 70, smax=True),
        _m("8m_vs_9m", ((_MARINES, 8),), ((_MARINES, 9),), "TT", 0, 120),
        _m("10m_vs_11m", ((_MARINES, 10),), ((_MARINES, 11),), "TT", 0, 150, smax=True),
        _m("27m_vs_30m", ((_MARINES, 27),), ((_MARINES, 30),), "TT", 0, 180, smax=True),
        _m(
            "MMM",
            (("marauder", 2), (_MARINES, 7), ("medivac", 1)),
            (("marauder", 2), (_MARINES, 7), ("medivac", 1)),
            "TT",
            3,
            150,
        ),
        _m(
            "MMM2",
            (("marauder", 2), (_MARINES, 7), ("medivac", 1)),
            (("marauder", 3), (_MARINES, 8), ("medivac", 1)),
            "TT",
            3,
            180,
        ),
        _m("2s3z", (("stalker", 2), ("zealot", 3)), (("stalker", 2), ("zealot", 3)), "PP", 2, 120, smax=True,
           spawn=SMAC_SPAWN_32),
        _m("3s5z", (("stalker", 3), ("zealot", 5)), (("stalker", 3), ("zealot", 5)), "PP", 2, 150, smax=True,
           spawn=SMAC_SPAWN_32),
        _m(
            "3s5z_vs_3s6z",
            (("stalker", 3), ("zealot", 5)),
            (("stalker", 3), ("zealot", 6)),
            "PP",
            2,
            170,
            smax=True,
        ),
        _m(
            "1c3s5z",
            (("colossus", 1), ("stalker", 3), ("zealot", 5)),
            (("colossus", 1), ("stalker", 3), ("zealot", 5)),
            "PP",
            3,
            180,
        ),
        _m("3s_vs_3z", (("stalker", 3),), (("zealot", 3),), "PP", 0, 150),
        _m("3s_vs_4z", (("stalker", 3),), (("zealot", 4),), "PP", 0, 200),
        _m("3s_vs_5z", (("stalker", 3),), (("zealot", 5),), "PP", 0, 250, smax=True),
        _m("2m_vs_1z", ((_MARINES, 2),), (("zealot", 1),), "TP", 0, 150),
        _m("corridor", (("zealot", 6),), (("zergling", 24),), "PZ", 0, 400),
        _m("6h_vs_8z", (("hydralisk", 6),), (("zealot", 8),), "ZP", 0, 150, smax=True),
        _m("2s_vs_1sc", (("stalker", 2),), (("spine_crawler", 1),), "PZ", 0, 300),
        _m("so_many_baneling", (("zealot", 7),), (("baneling", 32),), "PZ", 0, 100),
        _m(
            "bane_vs_bane",
            (("baneling", 4), ("zergling", 20)),
            (("baneling", 4), ("zergling", 20)),
            "ZZ",
            2,
            200,
        ),
        _m("2c_vs_64zg", (("colossus", 2),), (("zergling", 64),), "PZ", 0, 400),
    )
}

# SMAX-only scenarios (SMACv2-style random unit types and positions); no SC2 map of that name.
SMAX_ONLY_MAPS: dict[str, tuple[int, int]] = {
    "smacv2_5_units": (5, 5),
    "smacv2_10_units": (10, 10),
    "smacv2_20_units": (20, 20),
}


def smac_map(name: str, backend: str | None = None) -> SMACMap:
    """The SMAC map called ``name``; with ``backend``, also check that this backend provides it."""
    info = SMAC_MAPS.get(name)
    if info is None or (backend is not None and backend not in info.backends):
        available = sorted(m.name for m in SMAC_MAPS.values() if backend is None or backend in m.backends)
        where = f" for backend {backend!r}" if backend else ""
        raise UnknownMapError(f"unknown SMAC map {name!r}{where}; available: {', '.join(available)}")
    return info


def map_table() -> list[dict[str, object]]:
    """One row per known map for a CLI listing (``semzoo envs``): SMAC sizes, SMAX sizes, backends."""
    rows: list[dict[str, object]] = []
    for m in SMAC_MAPS.values():
        rows.append(
            {
                "map": m.name,
                "agents": m.n_agents,
                "enemies": m.n_enemies,
                "actions": m.n_actions,
                "obs_dim": m.obs_dim,
                "state_dim": m.state_dim,
                "episode_limit": m.episode_limit,
                "units": " ".join(f"{count}x{unit}" for unit, count in m.allies),
                "enemy_units": " ".join(f"{count}x{unit}" for unit, count in m.enemies),
                "backends": ",".join(m.backends),
                "paper": m.in_paper,
                "smax_obs_dim": m.smax_obs_dim,
                "smax_state_dim": m.smax_state_dim,
                "smax_episode_limit": SMAX_DEFAULT_EPISODE_LIMIT if SMAX_BACKEND in m.backends else None,
            }
        )
    for name, (n_agents, n_enemies) in SMAX_ONLY_MAPS.items():
        n_units = n_agents + n_enemies
        rows.append(
            {
                "map": name,
                "agents": n_agents,
                "enemies": n_enemies,
                "actions": SMAC_N_NON_ATTACK_ACTIONS + n_enemies,
                "obs_dim": None,
                "state_dim": None,
                "episode_limit": None,
                "units": f"{n_agents}x random",
                "enemy_units": f"{n_enemies}x random",
                "backends": SMAX_BACKEND,
                "paper": False,
                "smax_obs_dim": (n_units - 1) * SMAX_OTHER_UNIT_FEATURES + SMAX_OWN_FEATURES,
                "smax_state_dim": n_units * SMAX_STATE_FEATURES_PER_UNIT,
                "smax_episode_limit": SMAX_DEFAULT_EPISODE_LIMIT,
            }
        )
    return rows
