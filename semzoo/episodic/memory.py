"""Episodic memories as registered objects: the contract every memory answers, and the registry of them.

A memory is a class registered under a name with ``@semzoo.register_memory("name")``; the name is the
prefix of the algorithm ids ``name-<base>`` (``sem-qmix``, ``saem-vdn``; semzoo.algos). The trainer,
the multi-seed group and the learner call the hooks below and never branch on a memory's name, so a new
memory is one file (a plugin module, or ``episodic/<name>.py`` plus its name and module in ``_BUILTIN``).

The hooks, in the order a run calls them (shapes: B episodes, T steps, D state-key words). The class methods receive
a ``MemorySetup`` (semzoo.episodic.setup): the env's sizes, the shared ``memory`` section, the memory's own settings
sections and the run facts it reads, never the whole TrainConfig.

    from_config(setup)                                       build for a run (semzoo.algos.build)
    fit_env(setup) -> (setup, note)                          its defaults that the env's sizes rule out, fitted
                                                             (LAGMA's latent size), with the line that says so
    check_env(setup)                                         refuse settings the env's sizes rule out
                                                             (MemoryDoesNotFitEnv), before a run is built
    planned_nbytes(setup), planned_state_key_words(setup)    its bytes and key-cache width before a run is built
                                                             (the memory plan, `semzoo memory-cost`)
    state_key_words, slot_state_keys(batch) -> [B,T+1,D]     the keys of stored steps, computed once when an
                                                             episode is stored; the replay buffer keeps them
                                                             beside the state (EpisodeBatch.state_keys)
    on_wins(won_B)                                           which of the episodes about to be stored were won
    on_store(batch, slot_state_keys)                         an iteration's episodes were stored
    lookup_batch(clean, state_keys_BSD) -> lookup            phase 1 of an update: numpy allowed, no gradient
                                                             through the learner's networks (a memory's own
                                                             networks may take their own optimiser step here,
                                                             under torch.enable_grad); returns a dataclass whose
                                                             fields are all tensors
    intrinsic_reward(lookup, clean, next_value) -> [B,T]     phase 2: added to the TD target y (curiosity, EMU's
                                           | None            incentive); next_value is V(t+1) of the target nets
    reward_parts(lookup, clean, next_value) -> {name: [B,T]} phase 2: the intrinsic reward's pieces, logged apart
    combine_target(lookup, clean, y, next_value, ...)        phase 2: the memory's target E and the steps it
                                 -> EpisodicTarget | None    applies to, blended by lambda (eq. 6)
    memory_losses(lookup, values) -> {name: scalar}          phase 2: added to the loss, logged as loss_<name>
    on_update()                                              after each gradient update
    on_target_sync()                                         after each target-network sync
    env_step_interval, on_env_steps(env_steps)               each time the run passes a multiple of the interval
    state_dict(), load_state_dict(state), nbytes, metrics()  checkpoints (exact resume) and the logged figures; a
                                                             table's metrics include memory_merge_rate and
                                                             memory_cross_hit_rate (semzoo.episodic.hash_table.TableUsage)

Phase 2 hooks use tensor ops only, with no Python branch on a tensor's value, and read nothing of the
memory but its fixed settings: the multi-seed update (semzoo.learners.stacked) runs them once for all runs
under ``torch.func.vmap``, through the first run's memory object, with each run's own lookup. Whatever a run
owns that they need travels in the lookup.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from semzoo.episodic.setup import MemorySetup
from semzoo.plugins import check_free, load_plugins

if TYPE_CHECKING:
    import numpy as np
    import torch

    from semzoo.config import TrainConfig
    from semzoo.episodic.target import EpisodicTarget
    from semzoo.types import CleanBatch, EpisodeBatch, OnlineValues

NO_MEMORY = "none"
"""The memory of a plain id (``qmix``): a name no memory can take."""
_BUILTIN = {"sem": "semzoo.episodic.sem", "saem": "semzoo.episodic.sem", "emc": "semzoo.episodic.emc",
            "emu": "semzoo.episodic.emu", "lagma": "semzoo.episodic.lagma", "mc": "semzoo.episodic.own_return"}
"""The built-in memories by name (SEM, SAEM, EMC, EMU, LAGMA and the own-return ablation mc), and the module whose
import registers each (its ``@register_memory``)."""
BUILTIN_DESCRIPTIONS = {
    "sem": "state-based memory Q^S(phi(s)), E = r + gamma Q^S(s') (Ma & Li 2021, eq. 6-7)",
    "saem": "state-and-action memory Q^SA(phi(s), u), E = Q^SA(s, u) (Ma & Li 2021, eq. 4)",
    "emc": "nearest key z = M s, H = best return, + w (r + gamma H(s') - Q_tot)^2 on hits, curiosity (Zheng et al. 2021)",
    "emu": "EMU: learned state embedding, desirability and episodic incentive, plus curiosity (Na et al. 2024)",
    "lagma": "LAGMA: VQ-VAE codes of states, goal-reaching code sequences and their incentive (Na and Moon 2024)",
    "mc": "own-return ablation of SEM: E = r + gamma R_{t+1} of the same episode, no table (eq. 6)",
}
"""Each built-in memory's line in `semzoo algos` (its class's ``description``), known without importing it."""


REQUIRED_HOOKS = ("from_config", "lookup_batch", "state_dict", "load_state_dict", "nbytes")
"""What every memory implements (``Memory``'s abstract methods)."""
OPTIONAL_HOOKS = {
    "env sizes (LAGMA's latent size at most the state size)": ("fit_env", "check_env"),
    "the memory plan and `semzoo memory-cost`": ("planned_nbytes", "planned_state_key_words"),
    "keys cached in the replay buffer (SEM, SAEM, EMC)": ("state_key_words", "slot_state_keys"),
    "writing stored episodes (every table)": ("on_store",),
    "win-triggered writes (EMU's desirability)": ("on_wins",),
    "schedules in env steps or updates (EMC's and EMU's curiosity decay, EMU's embedder)": (
        "on_env_steps", "on_update", "on_target_sync"),
    "the target E of eq. (6) (SEM, SAEM, mc)": ("combine_target",),
    "rewards added to y (curiosity; EMU's and LAGMA's incentives)": ("intrinsic_reward", "reward_parts"),
    "losses of its own (EMC's episodic loss)": ("memory_losses",),
    "logged diagnostics": ("metrics",),
}
"""The hooks with a default that does nothing, by what uses them (and which built-in memories override them), in the
order a run first calls each group (the module docstring gives the call order hook by hook)."""


class MemoryDoesNotFitEnv(ValueError):
    """A memory setting that the env's sizes rule out (LAGMA's latent size above the state size): a usage error."""


class Memory(ABC):
    """An episodic memory of a run: what the trainer and the learner call (the hooks of the module docstring).

    The contract is ``REQUIRED_HOOKS``: build it, answer a sampled batch, save and restore it, say its bytes. Every
    other hook has a default that does nothing; ``OPTIONAL_HOOKS`` groups them by what uses them.
    """

    name: ClassVar[str] = ""
    """The registered name, set by ``register_memory``: the prefix of the algorithm ids."""
    description: ClassVar[str] = ""
    """One line for ``semzoo algos``."""
    size_setting: ClassVar[tuple[str, str]] = ("memory.capacity", "--memory-capacity")
    """The config key and `train` flag its bytes grow with: the memory plan names them when the memory is too big."""
    env_step_interval: int = 0
    """``on_env_steps`` runs each time the run's env steps pass a multiple of this; 0: never."""
    adds_reward: ClassVar[bool] = False
    adds_target: ClassVar[bool] = False
    adds_loss: ClassVar[bool] = False
    """What the memory adds to the loss of eq. (6): whether its class overrides ``intrinsic_reward``,
    ``combine_target`` and ``memory_losses`` (set for each subclass as it is defined); the learner calls only those."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.adds_reward = cls.intrinsic_reward is not Memory.intrinsic_reward
        cls.adds_target = cls.combine_target is not Memory.combine_target
        cls.adds_loss = cls.memory_losses is not Memory.memory_losses

    # ----- building --------------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def from_config(cls, setup: MemorySetup) -> Memory:
        """The memory of a run: its settings ``setup.memory`` and ``setup.settings(<its section>)``, the env's sizes
        ``setup.state_dim``, ``n_agents``, ``n_actions`` and ``obs_dim`` (one agent's observation size, for a memory
        that trains networks on the agents' inputs: curiosity), gamma and the seed of the run."""

    @classmethod
    def check_env(cls, setup: MemorySetup) -> None:
        """Raise ``MemoryDoesNotFitEnv`` (one line: the value, the range the env allows, the fix) for a setting of
        ``setup`` that the env's sizes rule out; ``from_config`` and the memory plan call it. Nothing by default."""
        return None

    @classmethod
    def fit_env(cls, setup: MemorySetup) -> tuple[MemorySetup, str | None]:
        """``setup`` with the defaults of its own settings that the env's sizes rule out replaced by the nearest value
        it allows (``setup.with_settings``), and the one line that says so (None: nothing changed). A value the user
        gave (``setup.given``) is kept, for ``check_env`` to refuse. Runs call it before ``check_env``; the config a
        run stores is the fitted one. Nothing by default."""
        return setup, None

    # ----- the plan: bytes before anything is allocated (semzoo.run.memory_plan, `semzoo memory-cost`) --------
    @classmethod
    def planned_nbytes(cls, setup: MemorySetup) -> int:
        """Bytes a run's memory holds at its largest (full capacity, its networks and optimisers); 0: not known."""
        return 0

    @classmethod
    def planned_state_key_words(cls, setup: MemorySetup) -> int:
        """The ``state_key_words`` a run's memory will have, so the replay buffer's key cache enters the plan."""
        return 0

    # ----- the keys of stored steps ----------------------------------------------------------------------
    @property
    def state_key_words(self) -> int:
        """D, 32-bit words of the key cached for each stored state (``slot_state_keys``); 0: none cached."""
        return 0

    def slot_state_keys(self, batch: EpisodeBatch) -> np.ndarray | None:
        """uint32 [B,T+1,D] keys of every real slot of ``batch`` (zero elsewhere), or None when D is 0."""
        return None

    # ----- the schedule ----------------------------------------------------------------------------------
    def on_wins(self, won_B: np.ndarray | None) -> None:
        """Which episodes of the batch stored next were won (bool [B]), None where the env reports no wins.

        Called right before ``on_store`` of that batch (EMU: a won episode is desirable).
        """
        return None  # nothing by default

    def on_store(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None) -> None:
        """``batch`` (collected episodes, [B,T] steps) was stored; ``slot_state_keys`` is its ``slot_state_keys``."""
        return None  # nothing by default

    def on_update(self) -> None:
        """A gradient update was taken."""
        return None  # nothing by default

    def on_target_sync(self) -> None:
        """The target networks were synced with the online ones."""
        return None  # nothing by default

    def on_env_steps(self, env_steps: int) -> None:
        """The run passed a multiple of ``env_step_interval`` env steps (it stands at ``env_steps``)."""
        return None  # nothing by default

    # ----- the update: phase 1 (numpy allowed, no gradient) ----------------------------------------------
    @abstractmethod
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> Any:
        """What the memory answers for a sampled batch: a dataclass whose fields are all tensors.

        ``state_keys_BSD`` is the batch's ``EpisodeBatch.state_keys`` (int32 [B,T+1,D]) when the buffer keeps them.
        """

    # ----- the update: phase 2 (tensor ops only, runs under vmap) ----------------------------------------
    def intrinsic_reward(self, lookup: Any, clean: CleanBatch, next_value_BT: torch.Tensor) -> torch.Tensor | None:
        """A reward [B,T] added to the TD target y (curiosity, EMU's incentive), or None.

        ``next_value_BT`` is the learner's V(t+1) = Q_tot(tau_{t+1}, argmax_u Q, s_{t+1}; theta^-), without gradient.
        """
        return None

    def reward_parts(self, lookup: Any, clean: CleanBatch, next_value_BT: torch.Tensor) -> dict[str, torch.Tensor]:
        """The pieces of ``intrinsic_reward`` [B,T] by name, each logged as ``reward_<name>`` (its mean over real
        steps): EMU's curiosity and incentive apart, so a study sees which acts. Diagnostics only; none by default."""
        return {}

    def combine_target(self, lookup: Any, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor, *,
                       gamma: float, miss_rule: str) -> EpisodicTarget | None:
        """The target E of eq. (6) and the steps it applies to, or None: no E term (the loss is the TD loss)."""
        return None

    def memory_losses(self, lookup: Any, values: OnlineValues) -> dict[str, torch.Tensor]:
        """Scalar losses added to the learner's loss (with gradient through ``values``), by name."""
        return {}

    # ----- state -----------------------------------------------------------------------------------------
    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly (numpy arrays, tensors, plain values)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from ``state_dict()``; scalars may come back as 0-d arrays."""

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes the memory holds."""

    def metrics(self) -> dict[str, float]:
        """Figures logged with each metric row."""
        return {"memory_bytes": float(self.nbytes)}


M = TypeVar("M", bound=type[Memory])
_REGISTRY: dict[str, type[Memory]] = {}


def register_memory(name: str, *, settings: type | None = None, replace: bool = False) -> Callable[[M], M]:
    """Class decorator: register a ``Memory`` subclass as ``name``, so the ids ``name-<base>`` train with it.

    ``settings``: a frozen dataclass of the memory's own settings (fields with defaults, ``semzoo.config.ranged``
    for a range): every config of a ``name-<base>`` id then holds them as its section ``name``, which
    ``from_config`` reads as ``config.settings(name)``, ``--set name.<field>=VALUE`` sets and config.json stores.

    Registering the same class again is a no-op; another class under a taken name is a ValueError unless
    ``replace=True``.
    """
    if not isinstance(name, str) or not name or "-" in name or name == NO_MEMORY or not name.isprintable():
        raise ValueError(f"memory name {name!r}: expected a non-empty name without '-' other than {NO_MEMORY!r} "
                         "(it is the prefix of ids such as sem-qmix)")

    def decorate(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, Memory)):
            raise TypeError(f"register_memory({name!r}) decorates a subclass of semzoo.episodic.memory.Memory, "
                            f"got {cls!r}")
        check_free("memory", name, cls, _REGISTRY, replace=replace)  # the registries' one rule
        if settings is not None:
            from semzoo.config import register_settings

            register_settings("memory", name, settings, replace=replace)
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def _import_builtin() -> None:
    for module in dict.fromkeys(_BUILTIN.values()):
        importlib.import_module(module)  # runs its @register_memory decorators


def is_builtin_memory(name: str) -> bool:
    """Whether ``name`` is one of semzoo's own memories (not a plugin's or a user's)."""
    return name in _BUILTIN


def memory_names() -> list[str]:
    """The registered memories, built-in ones first, then in registration order; imports no memory module."""
    load_plugins()
    return [*_BUILTIN, *(name for name in _REGISTRY if name not in _BUILTIN)]


def memory_description(name: str) -> str:
    """The memory's line in `semzoo algos`: a built-in one's without importing it, else its class's ``description``
    (or the first line of its docstring)."""
    if name in BUILTIN_DESCRIPTIONS:
        return BUILTIN_DESCRIPTIONS[name]
    cls = memory_class(name)
    return cls.description or (cls.__doc__ or "").strip().partition("\n")[0]


def memory_of(algo_id: str) -> str:
    """The memory an algorithm id names by its prefix (``sem-qmix`` -> ``sem``), ``NO_MEMORY`` for a plain id.

    Imports no memory module (the built-in names are known, plugins are loaded), so the analysis of finished
    runs reads it without torch. For an id the algorithm table accepts it is ``parse_algorithm(id).memory``.
    """
    load_plugins()
    prefix, sep, _ = algo_id.partition("-")
    return prefix if sep and (prefix in _BUILTIN or prefix in _REGISTRY) else NO_MEMORY


def memory_class(name: str) -> type[Memory]:
    """The class registered as ``name``; ValueError naming the registered ones otherwise."""
    _import_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown memory {name!r}: expected one of {', '.join(_REGISTRY)} "
                         "(register your own with semzoo.register_memory)")
    return _REGISTRY[name]


def make_memory(name: str, config: TrainConfig, *, state_dim: int, n_agents: int, n_actions: int,
                obs_dim: int) -> Memory:
    """The memory ``name`` of a run of ``config`` on an env of these sizes, built from its part of the run only
    (``MemorySetup.of``)."""
    return memory_class(name).from_config(MemorySetup.of(config, state_dim=state_dim, n_agents=n_agents,
                                                         n_actions=n_actions, obs_dim=obs_dim))


def episodic_target(memory: Memory, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor, *,
                    gamma: float, miss_rule: str) -> EpisodicTarget | None:
    """E for every step of ``clean``: the memory's ``lookup_batch`` (states projected here) then ``combine_target``."""
    import torch

    from semzoo.episodic.target import check_miss_rule

    check_miss_rule(miss_rule)
    with torch.no_grad():
        return memory.combine_target(memory.lookup_batch(clean, None), clean, y_BT, next_value_BT, gamma=gamma,
                                     miss_rule=miss_rule)


__all__ = ["NO_MEMORY", "OPTIONAL_HOOKS", "REQUIRED_HOOKS", "Memory", "MemoryDoesNotFitEnv", "MemorySetup",
           "episodic_target", "make_memory", "memory_class", "memory_description", "memory_names", "memory_of", "register_memory"]
