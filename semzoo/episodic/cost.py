"""Analytic storage cost of episodic memory: the paper's layout and semzoo's.

Paper sec. 6 ("Comparison between SEM and SAEM"), |Q| = 1e6 entries, D = 4:
SEM needs 0.029 GB (one table); SAEM needs |U|^n tables, 142 GB on
2c_vs_64zg (n = 2, |U| = 70) and 3e40 GB on 27m_vs_30m (n = 27, |U| = 36).
All arithmetic uses Python ints, so |U|^n never overflows.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from semzoo.episodic.memory import memory_class, memory_names
from semzoo.episodic.plans import BUILTIN_PLANS, TABLE_LAYOUTS, check_sizes, lfu_table_bytes

if TYPE_CHECKING:
    from semzoo.episodic.sem import EpisodicMemory

DEFAULT_CAPACITY = 1_000_000
"""|Q^S| of the paper's storage figures (sec. 6)."""
PAPER_PROJ_DIM = 4
"""D of the paper's storage figures (sec. 6)."""

GB = 10**9
"""The paper's GB: 0.029 GB / 1e6 entries = 29 bytes per entry."""
PAPER_BYTES_PER_ENTRY = 29
"""0.029 GB for 1e6 entries at D = 4 (paper sec. 6)."""
KEY_BYTES_PER_DIM = 4
"""A float32 per projected dimension; the paper reports D = 4 only, so the
rest of its 29 bytes (value and bookkeeping) is taken as fixed per entry."""
PAPER_FIXED_BYTES = PAPER_BYTES_PER_ENTRY - KEY_BYTES_PER_DIM * PAPER_PROJ_DIM
PAPER_KINDS = ("sem", "saem")
"""The two memories the paper compares in sec. 6 (``storage_comparison``)."""


def table_class(kind: str) -> type[EpisodicMemory]:
    """The registered memory ``kind`` if it is a table keyed on phi(s) (it has a cost model); ValueError otherwise."""
    from semzoo.episodic.sem import EpisodicMemory

    cls = memory_class(kind)
    if not issubclass(cls, EpisodicMemory):
        raise ValueError(f"memory {kind!r} is not a table keyed on phi(s) (an EpisodicMemory): it has no table cost model")
    return cls


def check_table_sizes(kind: str, n_agents: int, n_actions: int, capacity: int | float, proj_dim: int) -> int:
    """The capacity as an int, after a ValueError for a ``kind`` that is no table or a size that is not positive."""
    if kind not in TABLE_LAYOUTS:  # SEM and SAEM are tables: their layouts are known without importing them
        table_class(kind)
    return check_sizes(n_agents, n_actions, capacity, proj_dim)


def semzoo_storage_bytes(
    kind: str,
    n_agents: int,
    n_actions: int,
    capacity: int | float = DEFAULT_CAPACITY,
    proj_dim: int = PAPER_PROJ_DIM,
) -> int:
    """Bytes semzoo's table allocates: one table of `capacity` entries for SEM and for SAEM.

    Equals `make_episodic_memory(kind, ...).nbytes`; SAEM keys add 2 bytes per agent.
    """
    if kind in TABLE_LAYOUTS:
        return lfu_table_bytes(TABLE_LAYOUTS[kind].key_words, n_agents, n_actions, capacity=capacity,
                               proj_dim=proj_dim)
    return table_class(kind).table_bytes(n_agents, n_actions, capacity=capacity, proj_dim=proj_dim)


def paper_bytes_per_entry(proj_dim: int = PAPER_PROJ_DIM) -> int:
    """Bytes per table entry in the paper's layout: 29 at D = 4."""
    return KEY_BYTES_PER_DIM * proj_dim + PAPER_FIXED_BYTES


def paper_n_tables(kind: str, n_agents: int, n_actions: int) -> int:
    """Lookup tables in the paper's layout: 1 for SEM, |U|^n for SAEM (one per joint action)."""
    check_table_sizes(kind, n_agents, n_actions, 1, PAPER_PROJ_DIM)
    if kind in TABLE_LAYOUTS:
        return TABLE_LAYOUTS[kind].paper_n_tables(int(n_agents), int(n_actions))
    return table_class(kind).paper_n_tables(int(n_agents), int(n_actions))


def paper_storage_bytes(
    kind: str,
    n_agents: int,
    n_actions: int,
    capacity: int | float = DEFAULT_CAPACITY,
    proj_dim: int = PAPER_PROJ_DIM,
) -> int:
    """Bytes the paper's layout needs: n_tables * |Q| * bytes per entry (a Python int).

    SEM: 1 * 1e6 * 29 = 0.029 GB; SAEM on 2c_vs_64zg: 70^2 * 1e6 * 29 = 142 GB.
    """
    n_entries = check_table_sizes(kind, n_agents, n_actions, capacity, proj_dim)
    return paper_n_tables(kind, n_agents, n_actions) * n_entries * paper_bytes_per_entry(proj_dim)


def storage_comparison(
    n_agents: int,
    n_actions: int,
    capacity: int | float = DEFAULT_CAPACITY,
    proj_dim: int = PAPER_PROJ_DIM,
) -> dict[str, int]:
    """Bytes of SEM and SAEM in the paper's layout and in semzoo's, keyed `paper_sem` ... `semzoo_saem`."""
    return {
        f"{layout}_{kind}": fn(kind, n_agents, n_actions, capacity, proj_dim)
        for layout, fn in (("paper", paper_storage_bytes), ("semzoo", semzoo_storage_bytes))
        for kind in PAPER_KINDS
    }


STATE_KEY_BYTES_PER_DIM = 4
"""The replay buffer keeps phi(s)'s float32 bits of every slot (an int32 per dimension) beside the state."""


def state_keys_bytes(n_slots: int, proj_dim: int) -> int:
    """Bytes of the state keys a replay buffer of ``n_slots`` slots keeps (an episode of L steps stores L + 1)."""
    return n_slots * proj_dim * STATE_KEY_BYTES_PER_DIM


def format_gb(n_bytes: int) -> str:
    """Bytes as the paper's GB (1e9), exact for any Python int (36^27 tables do not fit a float's range)."""
    value = Decimal(n_bytes) / Decimal(GB)
    return f"{value:.3g} GB" if value < Decimal(10) ** 6 else f"{value:.2e} GB"


class EnvSizes(NamedTuple):
    """The sizes a memory's cost depends on, and where they came from."""

    n_agents: int
    n_actions: int
    state_dim: int
    obs_dim: int
    """One agent's observation size (the networks of EMC's and EMU's curiosity read it)."""
    description: str


RAW_STATE_BYTES_PER_DIM = 4
"""EMU keeps each entry's raw state (float32) to re-embed its key whenever its embedder retrains."""


def memory_costs(sizes: EnvSizes, *, capacity: int | float = DEFAULT_CAPACITY,
                 proj_dim: int = PAPER_PROJ_DIM) -> dict[str, int]:
    """Bytes each registered memory holds at its largest on an env of ``sizes`` (``Memory.planned_nbytes``), by name.

    The figure the memory plan of ``semzoo train`` counts for it, with the other settings at their defaults.
    """
    from semzoo.config import MemoryConfig, TrainConfig
    from semzoo.episodic.setup import MemorySetup

    memory = MemoryConfig(capacity=int(capacity), proj_dim=proj_dim)
    out = {}
    for name in memory_names():
        config = TrainConfig(algo=f"{name}-qmix", memory=memory)  # the memory's own settings at their defaults
        setup = MemorySetup.of(config, state_dim=sizes.state_dim, n_agents=sizes.n_agents, n_actions=sizes.n_actions,
                               obs_dim=sizes.obs_dim)
        # a built-in memory's formula without importing it (torch's default float, 4 bytes); a plugin's from its class
        out[name] = BUILTIN_PLANS[name](setup) if name in BUILTIN_PLANS else memory_class(name).planned_nbytes(setup)
    return out


def sizes_of(target: str, env_args: dict[str, Any] | None = None) -> EnvSizes:
    """(n_agents, n_actions, state_dim, obs_dim, description) of a SMAC map name or an env id.

    A SMAC map (``2c_vs_64zg``, or ``smac:<map>`` without env args) comes from ``semzoo.envs.maps``:
    no StarCraft II needed. Any other env id, a name given to ``register_env`` included, is built and
    read through its CTDE adapter. ValueError for a bare name that is neither a map nor registered.
    """
    from semzoo.envs import maps
    from semzoo.envs.registry import make_env, registered_envs
    from semzoo.wrappers.ctde import CTDEEnv

    env_args = env_args or {}
    kind, sep, name = target.partition(":")
    map_name = target if not sep else name if kind == "smac" and not env_args else None
    if map_name is not None and map_name in maps.SMAC_MAPS:
        m = maps.smac_map(map_name)
        return EnvSizes(m.n_agents, m.n_actions, m.state_dim, m.obs_dim,
                        f"SMAC map {map_name}" if not sep else f"env {target}")
    if not sep and target not in registered_envs():
        raise ValueError(f"unknown map {target!r}: expected a SMAC map (the paper's: {', '.join(maps.PAPER_MAPS)}; "
                         "`semzoo envs` lists all), an env id such as matrix:climbing, or a registered env name")
    ctde = CTDEEnv(make_env(target, **env_args))
    try:
        return EnvSizes(ctde.n_agents, ctde.n_actions, ctde.state_dim, ctde.obs_dim, f"env {target}")
    finally:
        ctde.close()
