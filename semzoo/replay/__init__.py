"""Episode replay buffer H."""
