"""Episode replay buffer and episodic-memory tables."""
