"""Episodic memory: the Memory contract and registry (memory.py), SEM and SAEM (sem.py) over an LFU hash table
(hash_table.py), EMC, EMU, LAGMA and the own-return ablation (emc.py, emu.py, lagma.py, own_return.py), the
nearest-key index of EMC and EMU (nearest.py, tolerance.py, eviction.py), what their E targets share (target.py),
the storage cost (cost.py) and the built-in memories' own settings (settings.py, torch-free)."""
