"""semzoo: state-based episodic memory for cooperative multi-agent RL.

The public interface: configs, training, evaluation, and the registries that extend semzoo.
"""

__version__ = "0.1.0"

from semzoo.algos import Algorithm, algorithm_ids, register_algorithm
from semzoo.config import (AgentConfig, ExplorationConfig, LearnerConfig, MemoryConfig, MixerConfig,
                           TrainConfig)
from semzoo.agents.policy import Policy, load_policy
from semzoo.envs.registry import make_env, register_env
from semzoo.mixers.base import Mixer, register_mixer
from semzoo.run.evaluation import evaluate_run
from semzoo.run.trainer import Trainer, resume, train

__all__ = ["__version__", "TrainConfig", "AgentConfig", "MixerConfig", "MemoryConfig", "LearnerConfig",
           "ExplorationConfig", "train", "resume", "evaluate_run", "Trainer", "make_env", "register_env", "load_policy",
           "Policy", "Mixer", "register_mixer",
           "Algorithm", "register_algorithm", "algorithm_ids"]
