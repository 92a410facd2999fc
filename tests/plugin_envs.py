"""A plugin module for the CLI tests: importing it registers the env ``plugin_coin_game`` (SEMZOO_PLUGINS=plugin_envs)."""

from __future__ import annotations

import semzoo
from semzoo.envs import matrix_game_v0


def coin_game(k: float = -10.0):
    """Two agents, one step: the penalty game under another name, built by a plain factory."""
    return matrix_game_v0.parallel_env("penalty", k=k)


semzoo.register_env("plugin_coin_game", coin_game)
