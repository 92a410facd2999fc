"""semzoo: state-based episodic memory for cooperative multi-agent RL.

The public interface: configs, training, evaluation, and the registries that extend semzoo.
"""

__version__ = "0.2.0"

from semzoo.agents.policy import Policy, load_policy
from semzoo.algos import Algorithm, algorithm_ids, register_algorithm
from semzoo.config import (
                           AgentConfig,
                           CuriosityConfig,
                           EMCConfig,
                           EMUConfig,
                           ExplorationConfig,
                           LearnerConfig,
                           MemoryConfig,
                           MixerConfig,
                           TrainConfig,
)
from semzoo.envs.registry import make_env, register_env
from semzoo.episodic.memory import Memory, memory_names, register_memory
from semzoo.mixers.base import Mixer, register_mixer
from semzoo.run.evaluation import absolute_metric, evaluate_run
from semzoo.run.multi import resume_seeds, train_seeds
from semzoo.run.trainer import Trainer, resume, train

__all__ = [
    "AgentConfig", "Algorithm", "CuriosityConfig", "EMCConfig", "EMUConfig", "ExplorationConfig", "LearnerConfig", "Memory", "MemoryConfig", "Mixer", "MixerConfig",
    "Policy", "TrainConfig", "Trainer", "__version__", "absolute_metric", "algorithm_ids", "evaluate_run", "load_policy", "make_env",
    "memory_names", "register_algorithm", "register_env", "register_memory", "register_mixer", "resume", "resume_seeds",
    "train", "train_seeds",
]
