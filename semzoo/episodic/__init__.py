"""Episodic memory: SEM and SAEM tables, the episodic target E with the steps it applies to, and the storage cost."""
