"""semzoo: state-based episodic memory for cooperative multi-agent RL.

The public interface: configs, training, evaluation, and the registries that extend semzoo.

Each name is imported on first use (PEP 562), so ``import semzoo`` and the analysis of finished runs
(``semzoo.analysis``) load no torch; ``from semzoo import train`` imports the training stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from semzoo.version import __version__

_HOMES = {
    "Policy": "semzoo.agents.policy", "load_policy": "semzoo.agents.policy",
    "Algorithm": "semzoo.algos", "algorithm_ids": "semzoo.algos", "register_algorithm": "semzoo.algos",
    "AgentConfig": "semzoo.config", "ExplorationConfig": "semzoo.config", "LearnerConfig": "semzoo.config",
    "CuriositySettings": "semzoo.episodic.settings", "EMCSettings": "semzoo.episodic.settings",
    "EMUSettings": "semzoo.episodic.settings", "LAGMASettings": "semzoo.episodic.settings",
    "MemoryConfig": "semzoo.config", "TrainConfig": "semzoo.config",
    "QMIXSettings": "semzoo.mixers.settings", "QPLEXSettings": "semzoo.mixers.settings",
    "WQMIXSettings": "semzoo.mixers.settings",
    "make_env": "semzoo.envs.registry", "register_env": "semzoo.envs.registry",
    "Memory": "semzoo.episodic.memory", "MemorySetup": "semzoo.episodic.setup", "memory_names": "semzoo.episodic.memory",
    "register_memory": "semzoo.episodic.memory",
    "Mixer": "semzoo.mixers.base", "register_mixer": "semzoo.mixers.registry",
    "ResolvedRun": "semzoo.resolution", "resolve": "semzoo.resolution",
    "absolute_metric": "semzoo.run.evaluation", "evaluate_run": "semzoo.run.evaluation",
    "resume_seeds": "semzoo.run.multi", "train_seeds": "semzoo.run.multi",
    "Trainer": "semzoo.run.trainer", "resume": "semzoo.run.trainer", "train": "semzoo.run.trainer",
}
"""Public name -> the module that defines it."""

if TYPE_CHECKING:
    from semzoo.agents.policy import Policy, load_policy
    from semzoo.algos import Algorithm, algorithm_ids, register_algorithm
    from semzoo.config import (
        AgentConfig,
        ExplorationConfig,
        LearnerConfig,
        MemoryConfig,
        TrainConfig,
    )
    from semzoo.envs.registry import make_env, register_env
    from semzoo.episodic.memory import Memory, memory_names, register_memory
    from semzoo.episodic.settings import CuriositySettings, EMCSettings, EMUSettings, LAGMASettings
    from semzoo.episodic.setup import MemorySetup
    from semzoo.mixers.base import Mixer
    from semzoo.mixers.registry import register_mixer
    from semzoo.mixers.settings import QMIXSettings, QPLEXSettings, WQMIXSettings
    from semzoo.resolution import ResolvedRun, resolve
    from semzoo.run.evaluation import absolute_metric, evaluate_run
    from semzoo.run.multi import resume_seeds, train_seeds
    from semzoo.run.trainer import Trainer, resume, train


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'semzoo' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "AgentConfig", "Algorithm", "CuriositySettings", "EMCSettings", "EMUSettings", "ExplorationConfig",
    "LAGMASettings", "LearnerConfig", "Memory", "MemoryConfig", "MemorySetup", "Mixer", "Policy", "QMIXSettings", "QPLEXSettings",
    "ResolvedRun", "TrainConfig", "Trainer", "WQMIXSettings", "__version__", "absolute_metric", "algorithm_ids",
    "evaluate_run", "load_policy", "make_env", "memory_names", "register_algorithm", "register_env",
    "register_memory", "register_mixer", "resolve", "resume", "resume_seeds", "train", "train_seeds",
]
