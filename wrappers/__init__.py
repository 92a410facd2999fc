"""Environment wrappers: SMAC-API -> PettingZoo, PettingZoo -> fixed-shape CTDE arrays."""
