"""Errors of the user's environment that the CLI turns into one line and exit status 1."""

from __future__ import annotations


class MissingDependency(ImportError):
    """An optional part is not installed or does not import: an extra (``semzoo[smax]``, ``[ray]``, ``[plot]``,
    ``[report]``), StarCraft II and oxwhirl SMAC, or a plugin module. The message says how to install it."""
