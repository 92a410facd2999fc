"""semzoo: state-based episodic memory for cooperative multi-agent RL."""

__version__ = "0.1.0"

from semzoo.registry import make_env

__all__ = ["make_env", "__version__"]
