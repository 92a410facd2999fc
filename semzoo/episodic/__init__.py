"""Episodic memory: the Memory contract and registry (memory.py), SEM and SAEM tables, what their E targets share, and the storage cost."""
