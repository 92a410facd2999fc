"""Episodic memory: SEM and SAEM tables, and their storage cost."""
