"""A valid value other than the default for every config field, to prove each one can be set."""

from __future__ import annotations

from typing import Any

from semzoo.config import ConfigField

SPECIAL = {"env": "matrix:penalty", "env_args": {"k": -10}, "algo": "qmix", "out": "elsewhere", "run_name": "named",
           "device": "cpu", "episode_limit": 7, "team_reward": "sum", "memory.miss_rule": "zero",
           "learner.replay_dtype": "float16", "learner.replay_device": "run", "curiosity.curiosity_floor": 0.0001,
           "emu.emu_desirable_return": 8.0, "preset": "authors-smac", "qplex.qplex_transformation": "qatten",
           "qplex.qplex_lambda_layers": 1, "learner.learn_start_episodes": 100,
           "learner.td_lambda": 0.6, "runtime": "semzoo-0.2", "learner.target_count": "collected",
           "pinned": ("n_envs",)}
"""Fields whose other value cannot be derived from the default's type."""


def non_default_value(f: ConfigField) -> Any:
    if f.key in SPECIAL:
        return SPECIAL[f.key]
    if f.type is bool:
        return not f.default
    if f.type is int:
        return f.default + 1
    if f.type is float:
        return f.default / 2  # every float range here is an interval from 0 that holds its default
    raise AssertionError(f"no non-default value for {f.key}: add one to SPECIAL in {__file__}")
