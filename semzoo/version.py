"""semzoo's version, in a module that imports nothing, so that any layer may read it (pyproject.toml holds the same)."""

__version__ = "0.3.0"
