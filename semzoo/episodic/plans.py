"""What each built-in memory holds at its largest, in bytes, from the env's sizes and the run's settings.

The memory plan of `semzoo train` (``Memory.planned_nbytes``) and `semzoo memory-cost` read these formulas; each
memory class's ``planned_nbytes`` returns its formula's figure, so there is one of each. The module loads no
torch: `semzoo memory-cost` prints them without the training stack. A network's bytes are its parameter count
(written out here for each architecture; tests/test_memory_plans.py checks each against the network built)
times the words its copies and its optimiser's state keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from semzoo.episodic.hash_table import table_nbytes

if TYPE_CHECKING:
    from semzoo.config import AgentConfig
    from semzoo.episodic.setup import MemorySetup

# ----- SEM and SAEM: one LFU table of phi(s) keys, and the projection V

ACTION_ID_LIMIT = 1 << 16
"""SAEM stores each agent's action id in 16 bits (two agents per key word)."""
PROJECTION_BYTES_PER_ENTRY = 8
"""semzoo draws V as float64 (numpy's standard_normal) and projects in float64."""


def projection_bytes(proj_dim: int, state_dim: int) -> int:
    """Bytes of the random projection V (D x F float64), shared by SEM and SAEM."""
    return proj_dim * state_dim * PROJECTION_BYTES_PER_ENTRY


def check_sizes(n_agents: int, n_actions: int, capacity: int | float, proj_dim: int) -> int:
    """The capacity as an int, after a ValueError for a size that is not positive."""
    for name, value in (("n_agents", n_agents), ("n_actions", n_actions), ("proj_dim", proj_dim)):
        if int(value) != value or value <= 0:
            raise ValueError(f"{name}={value!r} must be a positive int")
    if int(capacity) != capacity or capacity <= 0:
        raise ValueError(f"capacity={capacity!r} must be a positive whole number of entries")
    return int(capacity)


def sem_key_words(proj_dim: int) -> int:
    """32-bit words in a SEM key: the float32 bits of phi(s)."""
    return proj_dim


def saem_key_words(proj_dim: int, n_agents: int) -> int:
    """32-bit words in a SAEM key: phi(s) then the action ids, 16 bits each."""
    return proj_dim + (n_agents + 1) // 2


KeyWords = Callable[[int, int], int]
"""W, the 32-bit words per key of a table, from (D, n agents)."""


class TableLayout(NamedTuple):
    """What a table keyed on phi(s) looks like: its key's width and the tables the paper's layout needs."""

    key_words: KeyWords
    paper_n_tables: Callable[[int, int], int]
    """Tables the paper's layout needs (paper sec. 6) from (n agents, |U|): a Python int, exact for any size."""


TABLE_LAYOUTS = {
    "sem": TableLayout(key_words=lambda proj_dim, n_agents: sem_key_words(proj_dim),
                       paper_n_tables=lambda n_agents, n_actions: 1),
    "saem": TableLayout(key_words=saem_key_words,  # one table per joint action in the paper
                        paper_n_tables=lambda n_agents, n_actions: int(n_actions) ** int(n_agents)),
}
"""SEM's and SAEM's layouts; their classes (``semzoo.episodic.sem``) answer with these."""


def lfu_table_bytes(key_words: KeyWords, n_agents: int, n_actions: int, *, capacity: int | float,
                    proj_dim: int) -> int:
    """Bytes a table of ``capacity`` entries with keys of ``key_words(D, n)`` words allocates; ValueError for a size
    that is not positive or more actions than a SAEM key holds."""
    n_entries = check_sizes(n_agents, n_actions, capacity, proj_dim)
    if n_actions > ACTION_ID_LIMIT:
        raise ValueError(f"n_actions={n_actions} exceeds the {ACTION_ID_LIMIT} action ids a SAEM key can hold")
    return table_nbytes(n_entries, key_words(proj_dim, int(n_agents)))


# ----- the nearest-key index of EMC and EMU

RECENT_MAX = 16384
"""Writes go to a small sorted run of recent entries; past 16384 of them (or removals) the main table is rebuilt."""
BUCKETS_PER_ENTRY = 2
"""The main table has a power of two >= 2 n buckets: half are empty, most others hold one key."""
MIN_BUCKETS_LOG2 = 10
"""The main table has at least 2^10 buckets."""
SLOT_BYTES = 1 + 8 + 4 + 4
"""Bytes per slot besides its key: occupancy, cell hash, free stack, the main table's listing."""
LRU_SLOT_BYTES = 8
"""The least-recently-used eviction's tick per slot."""
RECENT_ENTRY_BYTES = 8 + 4
"""A write in the recent run: its cell hash and its slot."""


def n_buckets(n_entries: int) -> int:
    """Buckets of the main table listing ``n_entries`` keys: a power of two >= 2 n, at least 2^10."""
    return 1 << max(MIN_BUCKETS_LOG2, int(np.ceil(np.log2(max(1, BUCKETS_PER_ENTRY * n_entries)))))


def nearest_index_bytes(capacity: int, dim: int, *, lru: bool = True) -> int:
    """The most an index of ``capacity`` keys of ``dim`` floats holds (full, its recent run at its largest)."""
    per_slot = 4 * dim + SLOT_BYTES + (LRU_SLOT_BYTES if lru else 0)
    return capacity * per_slot + 4 * (n_buckets(capacity) + 1) + RECENT_MAX * RECENT_ENTRY_BYTES


# ----- EMC's and EMU's curiosity: a VDN net on the agent architecture, its two copies and a predictor

CURIOSITY_OPTIMISER_WORDS = 3
"""Words of optimiser state per network parameter: RMSprop's square average (VDN net), Adam's two moments (predictor)."""
CURIOSITY_OPTIMISED_NETWORKS = 2
"""Networks with an optimiser: the VDN net and the predictor."""
CURIOSITY_NETWORK_COPIES = 4
"""Parameter sets held: the VDN net, its hard target, its soft copy and the predictor."""
AGENT_PARAMETER_TENSORS = 8
"""Parameter tensors of the agent network: fc1's weight and bias, the GRU's two weights and two biases, fc2's two."""


def agent_parameter_count(agent: AgentConfig, *, obs_dim: int, n_agents: int, n_actions: int) -> int:
    """Parameters of the agent network (``semzoo.agents.rnn.RNNAgent``: fc1, a one-layer GRU, fc2) of ``agent``'s
    sizes and inputs on an env of these sizes."""
    h = agent.hidden_dim
    inputs = obs_dim + (n_actions if agent.obs_last_action else 0) + (n_agents if agent.obs_agent_id else 0)
    return inputs * h + h + 6 * h * h + 6 * h + h * n_actions + n_actions


def curiosity_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """Bytes the curiosity of a memory of ``setup`` holds once trained (its ``nbytes`` after the first update); 0 when
    off.

    ``word_bytes``: the size of torch's default float (4; 8 where a run sets float64).
    """
    if not setup.settings("curiosity").curiosity:
        return 0
    n_params = agent_parameter_count(setup.agent, obs_dim=setup.obs_dim, n_agents=setup.n_agents,
                                     n_actions=setup.n_actions)
    # plus the step count both optimisers keep per parameter tensor (a 0-d tensor of the default dtype)
    return ((CURIOSITY_NETWORK_COPIES + CURIOSITY_OPTIMISER_WORDS) * n_params
            + CURIOSITY_OPTIMISED_NETWORKS * AGENT_PARAMETER_TENSORS) * word_bytes


# ----- each memory

EMC_VALUE_BYTES = 4
"""The return H kept per slot beside the index (float32)."""
EMC_MERGED_BYTES = 1
"""The flag kept per slot beside the index: a second write met the entry (bool)."""


def embedder_parameter_count(state_dim: int, embed_dim: int, hidden_dim: int) -> int:
    """Parameters of EMU's ``Embedder`` of these sizes (weights and biases)."""
    h = hidden_dim
    encoder = (state_dim + 1) * h + h + h * h + h + h * embed_dim + embed_dim
    decoder = (embed_dim + 1) * h + h + h * h + h
    return encoder + decoder + h * state_dim + state_dim + h + 1


LAGMA_OPTIMISER_WORDS = 3
"""The VQ-VAE's parameters and Adam's two moments, float32 words each."""


def vqvae_parameter_count(state_dim: int, latent_dim: int, hidden_dim: int, n_codes: int) -> int:
    """Parameters of LAGMA's ``VQVAE`` of these sizes (weights, biases and the codebook)."""
    h = hidden_dim
    encoder = state_dim * h + h + h * h + h + h * latent_dim + latent_dim
    decoder = latent_dim * h + h + h * h + h + h * state_dim + state_dim
    return encoder + latent_dim * n_codes + decoder


def table_memory_bytes(key_words: KeyWords, setup: MemorySetup) -> int:
    """A table keyed on phi(s) (SEM, SAEM, a plugin's ``EpisodicMemory``): the table at its capacity and V."""
    m = setup.memory
    return (lfu_table_bytes(key_words, setup.n_agents, setup.n_actions, capacity=m.capacity, proj_dim=m.proj_dim)
            + projection_bytes(m.proj_dim, setup.state_dim))


def sem_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """SEM: the table of phi(s) keys at its capacity and the projection V."""
    return table_memory_bytes(TABLE_LAYOUTS["sem"].key_words, setup)


def saem_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """SAEM: the table of (phi(s), u) keys at its capacity and the projection V."""
    return table_memory_bytes(TABLE_LAYOUTS["saem"].key_words, setup)


def emc_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """EMC: the index and the returns at full capacity, M (float64) and the curiosity's networks and optimisers."""
    d, capacity = setup.memory.proj_dim, setup.memory.capacity
    return (nearest_index_bytes(capacity, d) + (EMC_VALUE_BYTES + EMC_MERGED_BYTES) * capacity
            + 8 * d * setup.state_dim + curiosity_bytes(setup, word_bytes=word_bytes))


def emu_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """EMU: full capacity (raw state, t, H, N, N_d, flag; the index's key, grid and LRU), the embedder and Adam,
    the curiosity."""
    capacity, dim, state_dim = setup.memory.capacity, setup.memory.proj_dim, setup.state_dim
    entry = 4 * state_dim + 4 + 4 + 8 + 8 + 1
    networks = 3 * 4 * embedder_parameter_count(state_dim, dim, setup.settings("emu").emu_hidden_dim)  # weights, Adam m, v
    return capacity * entry + nearest_index_bytes(capacity, dim) + networks + curiosity_bytes(setup, word_bytes=word_bytes)


def lagma_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """LAGMA: the codes' windows, values and counts, the top-k sequences of every code, the VQ-VAE with Adam's
    moments."""
    c = setup.settings("lagma")
    k = c.lagma_n_codes
    per_code = 4 * c.lagma_value_window + 8 + 4 + 8 + 8  # window, writes, value, visits, the row window's count
    sequences = k * c.lagma_top_k * (8 + (k + 7) // 8)  # a return and a set of codes (one bit per code) each
    networks = LAGMA_OPTIMISER_WORDS * 4 * vqvae_parameter_count(setup.state_dim, c.lagma_latent_dim,
                                                                  c.lagma_hidden_dim, k)
    return k * per_code + sequences + networks


def own_return_bytes(setup: MemorySetup, *, word_bytes: int = 4) -> int:
    """The own-return ablation holds nothing of its own (the episode's return comes with the batch)."""
    return 0


Plan = Callable[..., int]
BUILTIN_PLANS: dict[str, Plan] = {"sem": sem_bytes, "saem": saem_bytes, "emc": emc_bytes, "emu": emu_bytes,
                                  "lagma": lagma_bytes, "mc": own_return_bytes}
"""Each built-in memory's formula, by its registered name (``semzoo.episodic.memory``)."""
