"""TableUsage: the counters that show a memory's table acting (merges, cross-episode hits), shared by every memory."""

from __future__ import annotations

from typing import Any

import numpy as np


class TableUsage:
    """How a memory's table is used, counted since the run started: the diagnostics of a memory acting.

    ``memory_merge_rate``: the share of writes that met an existing entry (an equal key for SEM and SAEM, a key
    within the tolerance for EMC and EMU, or an earlier write of the same batch); ``memory_cross_hit_rate``: the
    share of lookups answered by an entry that holds more than one visit, so that a return of another visit
    could reach the target. A lookup answered by the entry its own step wrote, the only kind where states never
    repeat, is a self-hit: it counts in ``memory_hit_rate`` but not here. Both rates count a state that recurs
    within its own episode (a state the episode returns to) like one another episode reached; only the
    second brings another episode's return (``scripts/state_repeats.py`` tells the two apart in a run's buffer).
    """

    COUNTERS = ("writes", "merges", "lookups", "hits", "cross_hits")

    def __init__(self) -> None:
        self.writes = 0
        self.merges = 0
        self.lookups = 0
        self.hits = 0
        self.cross_hits = 0

    def wrote(self, writes: int, merges: int) -> None:
        """``writes`` writes, of which ``merges`` met an existing entry."""
        self.writes += int(writes)
        self.merges += int(merges)

    def looked_up(self, hit_K: np.ndarray, several_visits_K: np.ndarray) -> None:
        """K lookups: which hit, and which hit an entry of more than one visit (bool [K] each)."""
        self.lookups += int(hit_K.shape[0])
        self.hits += int(hit_K.sum())
        self.cross_hits += int((hit_K & several_visits_K).sum())

    def metrics(self) -> dict[str, float]:
        """The two rates, each once its denominator is positive."""
        out = {}
        if self.writes:
            out["memory_merge_rate"] = self.merges / self.writes
        if self.lookups:
            out["memory_cross_hit_rate"] = self.cross_hits / self.lookups
        return out

    def state_dict(self, prefix: str = "usage_") -> dict[str, int]:
        """The counters as flat entries ``<prefix><name>`` (a memory's state_dict holds them beside its arrays)."""
        return {prefix + name: getattr(self, name) for name in self.COUNTERS}

    @classmethod
    def from_state(cls, state: dict[str, Any], prefix: str = "usage_") -> TableUsage:
        """The counters saved by ``state_dict()`` in ``state``; zero where absent (a checkpoint that holds none)."""
        usage = cls()
        for name in cls.COUNTERS:
            if prefix + name in state:
                setattr(usage, name, int(np.asarray(state[prefix + name]).item()))
        return usage

