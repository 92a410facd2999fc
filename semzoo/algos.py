"""The algorithm table: what an algorithm id means, and the one place its parts are built.

An id is ``<base>`` or ``<memory>-<base>``: ``base`` names a row of the table (a mixer and the
learner that trains it), ``memory`` a registered episodic memory (``sem``, ``saem``: paper sections 4-5;
any other registered with ``semzoo.register_memory``, see semzoo.episodic.memory).

    qmix          QMixer         QLearner
    cw-qmix       QMixer         WQMIXLearner(weighting="cw")    + its central Q*
    sem-qplex     QPLEXMixer     QLearner                        + SEM table, E target (eq. 6-7)

Every mixer registered with ``semzoo.register_mixer(name)`` is a row of its own (trained by the
plain ``QLearner``), so ``name`` and ``<memory>-name`` for every memory train without further code.
``register_algorithm`` adds a row with its own learner (a subclass of ``QLearner`` that overrides
its hooks). A run parses its id once (``semzoo.resolution.resolve``; ``TrainConfig`` knows no table) and ``build``
makes its parts from that; ``semzoo algos`` and the matrix-game script list the table; user code reaches it from
the CLI through a plugin module (``semzoo.plugins``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from semzoo.episodic.memory import NO_MEMORY, make_memory, memory_names
from semzoo.mixers.registry import make_mixer, mixer_names
from semzoo.plugins import check_free, load_plugins

if TYPE_CHECKING:
    import torch

    from semzoo.agents.rnn import RNNAgent
    from semzoo.config import TrainConfig
    from semzoo.episodic.memory import Memory
    from semzoo.learners.q_learner import QLearner
    from semzoo.mixers.base import Mixer
    from semzoo.types import VecCTDEEnv


@dataclass(frozen=True)
class Algorithm:
    """A row of the table: ``mixer`` (a registered mixer name) trained by ``learner`` with ``learner_args``.

    ``learner`` is the import path of a ``QLearner`` subclass (``module:Class``), imported when a run
    is built, so listing the table imports no learner.
    """

    name: str
    mixer: str
    learner: str = "semzoo.learners.q_learner:QLearner"
    learner_args: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def learner_class(self) -> type[QLearner]:
        import importlib

        module, _, attr = self.learner.partition(":")
        found: Any = importlib.import_module(module)
        for part in attr.split("."):  # a nested class: module:Outer.Inner
            found = getattr(found, part)
        return found


@dataclass(frozen=True)
class AlgorithmId:
    """A parsed id: the table row and the registered memory's name ('none' without memory)."""

    id: str
    algorithm: Algorithm
    memory: str

    @property
    def mixer(self) -> str:
        return self.algorithm.mixer

    @property
    def has_memory(self) -> bool:
        """True for the <memory>-<base> ids, which train with an episodic memory."""
        return self.memory != NO_MEMORY


_TABLE: dict[str, Algorithm] = {}


def register_algorithm(algorithm: Algorithm, *, replace: bool = False) -> Algorithm:
    """Add a row; its memory variants ``<memory>-<name>`` come with it. Returns the row.

    Checked here, so a plugin's mistake is one line when it is imported, not a traceback when a run is built:
    the name, the mixer (registered), the learner (the ``module:Class`` path of a ``QLearner`` subclass).
    Registering an equal row again is a no-op; another row under a taken name is a ValueError unless
    ``replace=True`` (the registries' one rule, ``semzoo.plugins.check_free``).
    """
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"register_algorithm got {algorithm!r}: expected semzoo.Algorithm(name, mixer, learner=...)")
    _check_row(algorithm)
    check_free("algorithm", algorithm.name, algorithm, _TABLE, replace=replace)
    _TABLE[algorithm.name] = algorithm
    return algorithm


def _check_row(algorithm: Algorithm) -> None:
    """ValueError/TypeError, one line, for a row that could not be built: bad name, unknown mixer, bad learner."""
    name = algorithm.name
    if not isinstance(name, str) or not name or name.partition("-")[0] in memory_names():
        raise ValueError(f"algorithm name {name!r}: expected a name that does not start with "
                         f"{', '.join(k + '-' for k in memory_names())} (those prefixes select episodic memory)")
    if algorithm.mixer not in mixer_names():
        raise ValueError(f"algorithm {name!r}: mixer {algorithm.mixer!r} is not registered: expected one of "
                         f"{', '.join(mixer_names())}; register it first with @semzoo.register_mixer")
    module, _, attr = str(algorithm.learner).partition(":")
    if not module or not attr:
        raise ValueError(f"algorithm {name!r}: learner {algorithm.learner!r}: expected 'module:Class', e.g. "
                         "'semzoo.learners.wqmix:WQMIXLearner'")
    try:
        learner = algorithm.learner_class()
    except ImportError as err:
        raise ValueError(f"algorithm {name!r}: learner module {module!r} cannot be imported ({err}): put it on "
                         "PYTHONPATH or fix the path") from None
    except AttributeError:
        raise ValueError(f"algorithm {name!r}: module {module!r} has no {attr!r} (learner "
                         f"{algorithm.learner!r})") from None
    from semzoo.learners.q_learner import QLearner

    if not (isinstance(learner, type) and issubclass(learner, QLearner)):
        raise TypeError(f"algorithm {name!r}: learner {algorithm.learner!r} is {learner!r}: expected a subclass of "
                        "semzoo.learners.q_learner.QLearner that overrides its hooks")


_BUILTIN = (
    Algorithm("vdn", "vdn", description="VDN: Q_tot = sum of agent utilities (Sunehag et al. 2018)"),
    Algorithm("qmix", "qmix", description="QMIX: monotonic hypernetwork mixer (Rashid et al. 2018)"),
    Algorithm("qplex", "qplex", description="QPLEX: duplex dueling with attention (Wang et al. 2021)"),
    Algorithm("cw-qmix", "qmix", learner="semzoo.learners.wqmix:WQMIXLearner", learner_args={"weighting": "cw"},
              description="CW-QMIX: centrally weighted QMIX with a central Q* (Rashid et al. 2020)"),
    Algorithm("ow-qmix", "qmix", learner="semzoo.learners.wqmix:WQMIXLearner", learner_args={"weighting": "ow"},
              description="OW-QMIX: optimistically weighted QMIX with a central Q* (Rashid et al. 2020)"),
)
# The built-in rows skip register_algorithm's checks: those import every learner, and listing the table
# should import none (tests/test_algos.py builds each built-in row).
_TABLE.update((_algorithm.name, _algorithm) for _algorithm in _BUILTIN)


def _rows() -> dict[str, Algorithm]:
    """The table with every registered mixer that has no row of its own as a plain-QLearner row."""
    load_plugins()
    rows = dict(_TABLE)
    for name in mixer_names():
        rows.setdefault(name, Algorithm(name, name, description=f"mixer {name!r} (registered) with the Q-learner"))
    return rows


def algorithm_ids() -> list[str]:
    """Every trainable id: each row, then its variants with each registered memory."""
    rows = _rows()
    return [f"{prefix}{name}" for prefix in ("", *(k + "-" for k in memory_names())) for name in rows]


def parse_algorithm(algo_id: str) -> AlgorithmId:
    """'sem-qmix' -> AlgorithmId(row qmix, memory 'sem'); ValueError naming the valid ids otherwise."""
    rows = _rows()
    memories = memory_names()
    prefix, _, rest = algo_id.partition("-")
    if prefix in memories and rest in rows:
        return AlgorithmId(algo_id, rows[rest], prefix)
    if algo_id in rows:
        return AlgorithmId(algo_id, rows[algo_id], NO_MEMORY)
    bases, prefixes = ", ".join(rows), ", ".join(memories)
    if rest in rows:
        raise ValueError(f"unknown memory {prefix!r} in algorithm {algo_id!r}: expected one of {prefixes} "
                         "(`semzoo algos` lists them; register your own with semzoo.register_memory)")
    raise ValueError(f"unknown algorithm {algo_id!r}: expected <base> or <memory>-<base> with memory one of "
                     f"{prefixes} and base one of {bases} (`semzoo algos` lists them; register your own with "
                     "semzoo.register_mixer or semzoo.register_memory)")


def make_run_mixer(config: TrainConfig, algo: AlgorithmId, env: Any) -> Mixer:
    """The mixer of a resolved run (``semzoo.resolution``: ``config`` and its parsed id ``algo``) for ``env`` (anything
    with the env's sizes and, if declared, ``state_layout``).

    A mixer that needs the per-unit state layout on an env that declares none is refused with one line naming
    the env (``MissingStateLayout``, a ValueError).
    """
    from semzoo.mixers.qplex import MissingStateLayout

    try:
        return make_mixer(algo.mixer, n_agents=env.n_agents, state_dim=env.state_dim, n_actions=env.n_actions,
                          state_layout=getattr(env, "state_layout", None), settings=config.components.get(algo.mixer))
    except MissingStateLayout as err:
        raise MissingStateLayout(f"env {config.env!r} {err}") from None


@dataclass
class RunParts:
    """The trainable parts of a run, built for one env."""

    algo: AlgorithmId
    agent: RNNAgent
    mixer: Mixer
    memory: Memory | None
    learner: QLearner


def build(config: TrainConfig, algo: AlgorithmId, env: VecCTDEEnv, device: torch.device) -> RunParts:
    """Agent, mixer, episodic memory and learner of a resolved run (``semzoo.resolution``: ``config`` and its parsed id
    ``algo``) for ``env``, in that order (seeded RNG order)."""
    from semzoo.agents.rnn import RNNAgent

    agent = RNNAgent.for_env(env, config.agent).to(device)
    mixer = make_run_mixer(config, algo, env).to(device)
    memory = None
    if algo.has_memory:
        memory = make_memory(algo.memory, config, state_dim=env.state_dim, n_agents=env.n_agents,
                             n_actions=env.n_actions, obs_dim=env.obs_dim)
    learner_class = algo.algorithm.learner_class()
    section = learner_class.settings_section
    learner = learner_class.from_config(config.learner, memory_config=config.memory,
                                        settings=config.components.get(section) if section else None,
                                        agent=agent, mixer=mixer, memory=memory, **algo.algorithm.learner_args)
    return RunParts(algo=algo, agent=agent, mixer=mixer, memory=memory, learner=learner)


__all__ = ["NO_MEMORY", "Algorithm", "AlgorithmId", "RunParts", "algorithm_ids", "build", "make_run_mixer",
           "parse_algorithm", "register_algorithm"]
