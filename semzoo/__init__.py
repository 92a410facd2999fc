"""semzoo: state-based episodic memory for cooperative multi-agent RL."""

__version__ = "0.1.0"
