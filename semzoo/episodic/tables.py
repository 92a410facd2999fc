"""The names of SEM's and SAEM's tables, importable from this module as well as from their homes.

SEM and SAEM live in semzoo.episodic.sem, the LFU hash table in semzoo.episodic.hash_table, the table's counters
in semzoo.episodic.hash_table, the discounted return in semzoo.episodic.returns and the byte counts in
semzoo.episodic.plans and semzoo.episodic.cost. Importing this module registers "sem" and "saem", as importing semzoo.episodic.sem does.
"""

from __future__ import annotations

from semzoo.episodic.cost import (
    DEFAULT_CAPACITY,
    PAPER_PROJ_DIM,
    check_table_sizes,
    semzoo_storage_bytes,
    table_class,
)
from semzoo.episodic.hash_table import (
    AGE_BITS,
    AGE_LIMIT,
    BUCKET_SLOTS,
    COUNT_BITS,
    COUNT_MAX,
    EMPTY_META,
    EVICTION_SAMPLE_MARGIN,
    EVICTION_SAMPLE_STRIDE,
    LOW_BITS,
    MAX_CAPACITY,
    MERGED,
    MISS_VALUE,
    OVERFLOW_MAX,
    SLOTS_PER_ENTRY,
    LFUKeyTable,
    TableUsage,
    n_buckets_for,
    table_nbytes,
)
from semzoo.episodic.plans import (
    ACTION_ID_LIMIT,
    PROJECTION_BYTES_PER_ENTRY,
    projection_bytes,
    saem_key_words,
    sem_key_words,
)
from semzoo.episodic.returns import discounted_returns
from semzoo.episodic.sem import (
    EpisodicMemory,
    SAEMTable,
    SEMTable,
    make_episodic_memory,
    project_fixed_order,
)

__all__ = [
    "ACTION_ID_LIMIT", "AGE_BITS", "AGE_LIMIT", "BUCKET_SLOTS", "COUNT_BITS", "COUNT_MAX", "DEFAULT_CAPACITY",
    "EMPTY_META", "EVICTION_SAMPLE_MARGIN", "EVICTION_SAMPLE_STRIDE", "LOW_BITS", "MAX_CAPACITY", "MERGED",
    "MISS_VALUE", "OVERFLOW_MAX", "PAPER_PROJ_DIM", "PROJECTION_BYTES_PER_ENTRY", "SLOTS_PER_ENTRY",
    "EpisodicMemory", "LFUKeyTable", "SAEMTable", "SEMTable", "TableUsage", "check_table_sizes",
    "discounted_returns", "make_episodic_memory", "n_buckets_for", "project_fixed_order", "projection_bytes",
    "saem_key_words", "sem_key_words", "semzoo_storage_bytes", "table_class", "table_nbytes",
]
