"""Run configuration: frozen, keyword-only dataclasses whose fields are the CLI flags.

Defaults are the PyMARL / paper values (paper appendix, tables "hyper-parameters in SEM"); the
default run is the README's main job (SEM-QMIX on SMAX 3m for 20k env steps). Each field's
attribute docstring is its ``semzoo train --help`` text, and every numeric field carries the
``Range`` it must lie in, checked (finite, in range, the right type) when a config is built.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from semzoo import settings as _settings
from semzoo.episodic.settings import MEMORY_SETTINGS
from semzoo.mixers.settings import MIXER_SETTINGS
from semzoo.plugins import check_free, load_plugins

# the settings helpers, also importable from here (``X as X``: re-exported)
from semzoo.settings import AT_LEAST_ONE as AT_LEAST_ONE
from semzoo.settings import CLI as CLI
from semzoo.settings import FLAG as FLAG
from semzoo.settings import NON_NEGATIVE as NON_NEGATIVE
from semzoo.settings import POSITIVE as POSITIVE
from semzoo.settings import PROBABILITY as PROBABILITY
from semzoo.settings import RANGE as RANGE
from semzoo.settings import ConfigField as ConfigField
from semzoo.settings import Range as Range
from semzoo.settings import check_fields as check_fields
from semzoo.settings import field_docs as field_docs
from semzoo.settings import ranged as ranged

DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
"""Device names a config accepts; whether the machine has that device is checked when a run starts."""


MAX_MEMORY_CAPACITY = 10**12
"""The most entries a memory's table may have: a SEM table of 1e12 entries takes about 29 TB, beyond any machine, so a
larger ``--memory-capacity`` is a typo; the bound also keeps the table's size quick to compute."""
MEMORY_CAPACITY = Range(low=1, high=MAX_MEMORY_CAPACITY, note="a SEM table of 1e12 entries takes about 29 TB")




@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Recurrent agent network shared by all agents."""

    hidden_dim: int = ranged(64, AT_LEAST_ONE)
    """GRU hidden size (PyMARL rnn_hidden_dim)."""
    obs_agent_id: bool = True
    """Append a one-hot agent id to each observation."""
    obs_last_action: bool = True
    """Append the agent's previous action (one-hot) to each observation."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Episodic memory (paper section 5 and appendix table of SEM hyper-parameters).

    Whether memory is used, and which kind, comes from the algorithm id (sem-qmix, saem-vdn ...).
    """

    lam: float = ranged(0.1, PROBABILITY, "lambda of eq. 6; the paper uses 0.1")
    """lambda in (1 - lambda)(Q_tot - y)^2 + lambda (Q_tot - E)^2."""
    proj_dim: int = ranged(4, AT_LEAST_ONE)
    """D, the size of a state's key: SEM's random projection phi(s) = V s, EMC's z = M s, EMU's learned embedding."""
    capacity: int = ranged(1_000_000, MEMORY_CAPACITY, **{FLAG: "memory-capacity"})  # --capacity alone is ambiguous
    """|Q^S|, the number of memory entries; beyond it SEM/SAEM evict the least frequently accessed entry, EMC/EMU the
    least recently used."""
    pending_size: int = ranged(5000, AT_LEAST_ONE)
    """|M|, env steps gathered before the table is updated with their per-key maximum returns."""
    miss_rule: Literal["target", "zero"] = "target"
    """On a table miss: 'target' uses max_u Q_tot(tau', u; theta^-) so E = y (the paper); 'zero' drops the memory term (EMC)."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class LearnerConfig:
    """The TD loss and its optimiser (PyMARL q_learner defaults)."""

    gamma: float = ranged(0.99, PROBABILITY, "a discount")
    """Discount factor."""
    lr: float = ranged(5e-4, POSITIVE)
    """RMSprop learning rate."""
    rms_alpha: float = ranged(0.99, Range(low=0, high=1, high_open=True), "at 1 the squared-gradient average never moves")
    """RMSprop smoothing constant of the squared-gradient average."""
    rms_eps: float = ranged(1e-5, POSITIVE, "it keeps RMSprop's division away from zero")
    """RMSprop epsilon added to the denominator."""
    grad_clip: float = ranged(10.0, POSITIVE)
    """Clip of the global gradient norm."""
    batch_size: int = ranged(32, AT_LEAST_ONE)
    """Episodes per update."""
    buffer_size: int = ranged(5000, AT_LEAST_ONE)
    """Replay capacity in episodes."""
    target_update_episodes: int = ranged(200, AT_LEAST_ONE)
    """Hard target-network update period, in collected episodes."""
    double_q: bool = True
    """Pick the target's argmax with the online network (double Q-learning)."""
    td_lambda: float = ranged(0.0, PROBABILITY, "0 is the one-step target of the paper and PyMARL; PyMARL2 uses 0.6 "
                              "for QMIX on SMAC")
    """lambda of TD(lambda) targets y_t = r_t + gamma (1 - term_t) [(1 - lambda) V(t+1) + lambda y_{t+1}] (PyMARL2's
    build_td_lambda_targets); 0: the one-step target y_t = r_t + gamma (1 - term_t) V(t+1)."""
    updates_per_episode: float = ranged(1.0, POSITIVE)
    """Gradient updates per collected episode (Algorithm 1: one; QPLEX and EMC on SMAC: two, their num_circle)."""
    learn_start_episodes: int | None = ranged(None, AT_LEAST_ONE)
    """Episodes in the replay buffer before the first update (PyMARL's burn_in_period); unset: batch_size."""
    timeout_as_terminal: bool = True
    """Store a time-limit truncation as a termination (no bootstrap there), as SMAC reports it by default
    (continuing_episode False) and PyMARL's episode runner stores it; off: bootstrap at a time limit."""
    target_count: Literal["pymarl", "collected"] = "pymarl"
    """How the target period and its sync are counted: 'pymarl' syncs inside an update, once the newest episode's
    0-based index is target_update_episodes past the last sync (PyMARL's q_learner.train(episode_num)); 'collected'
    syncs after an iteration whose collected episodes reach the period past the last sync, updates or not."""
    replay_dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    """Storage type of observations and states in the replay buffer. float32 is exact; float16/bfloat16 halve the
    buffer but round what the learner sees (lossy, so off by default: a run then differs from float32's)."""
    replay_device: Literal["host", "run"] = "host"
    """Where the replay buffer lives: 'host' memory, or the run's device ('run': on a GPU an update's batch is
    gathered there instead of copied from the host; counted against the GPU's memory). The same run either way."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.batch_size > self.buffer_size:
            raise ValueError(
                f"batch_size={self.batch_size} is larger than buffer_size={self.buffer_size}: "
                "lower --batch-size or raise --buffer-size"
            )
        if self.learn_start_episodes is not None and self.learn_start_episodes > self.buffer_size:
            raise ValueError(f"learn_start_episodes={self.learn_start_episodes} is larger than buffer_size="
                             f"{self.buffer_size}: the run would never learn; lower it or raise --buffer-size")


@dataclass(frozen=True, kw_only=True)
class ExplorationConfig:
    """Linear epsilon schedule over env steps."""

    epsilon_start: float = ranged(1.0, PROBABILITY, "a probability")
    """Epsilon of epsilon-greedy exploration at the first env step."""
    epsilon_finish: float = ranged(0.05, PROBABILITY, "a probability")
    """Epsilon once the schedule has run out."""
    epsilon_anneal_steps: int = ranged(50_000, NON_NEGATIVE, "0 starts at epsilon_finish")
    """Env steps over which epsilon falls linearly from epsilon_start to epsilon_finish."""

    def __post_init__(self) -> None:
        check_fields(self)

    def epsilon(self, env_steps: int) -> float:
        """Epsilon after ``env_steps`` environment steps."""
        if self.epsilon_anneal_steps == 0:
            return self.epsilon_finish
        frac = min(1.0, env_steps / self.epsilon_anneal_steps)
        return self.epsilon_start + frac * (self.epsilon_finish - self.epsilon_start)


SMAX_FAMILY = "smax"
"""The env family of JaxMARL's SMAX (``smax:<map>``), whose runs name the rules they train on (``profile``)."""


TeamReward = Literal["mean", "sum"]
TEAM_REWARD_OF_FAMILY: dict[str, TeamReward] = {"lbf": "sum"}
"""Env family -> the team reward ``team_reward='env'`` resolves to there; 'mean' for a family not named."""
DEFAULT_TEAM_REWARD: TeamReward = "mean"


def family_team_reward(env: str) -> TeamReward:
    """The team reward ('mean' or 'sum') of the env id's family, which ``team_reward='env'`` resolves to."""
    return TEAM_REWARD_OF_FAMILY.get(env.partition(":")[0], DEFAULT_TEAM_REWARD)


def is_smax(env: str) -> bool:
    """Whether the env id names a SMAX map (``smax:2s3z``): the part before the first ':' is ``SMAX_FAMILY``."""
    return env.partition(":")[0] == SMAX_FAMILY


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything a run needs, as asked for. ``semzoo.resolution.resolve`` applies its runtime and preset (the rules
    read the algorithm table, above this module); config.json stores the resolved config."""

    env: str = "smax:3m"
    """Environment id: matrix:<game>, smax:<map>, smac:<map>, lbf:<task> or pz:<module>:<factory>."""
    env_args: dict[str, Any] = field(default_factory=dict, metadata={FLAG: "env-arg"})
    """Keyword arguments for the environment factory. On ``smax:<map>`` a run without ``profile`` trains with
    ``profile=smac`` where StarCraft II SMAC has the map (``profile=smax``: SMAX's own rules)."""
    algo: str = "sem-qmix"
    """Algorithm id: <mixer> or <memory>-<mixer> with memory sem, saem, emc, emu, lagma or mc (the own-return ablation),
    mixers vdn, qmix, qplex, cw-qmix, ow-qmix (`semzoo algos` lists them)."""
    steps: int = ranged(20_000, NON_NEGATIVE)
    """Environment steps to train for."""
    seed: int = ranged(0, Range(low=0, high=2**32 - 1), "a 32-bit seed")
    """Seed of networks, exploration, replay sampling, envs and the random projection."""
    out: str = "runs"
    """Parent folder of the run directory."""
    run_name: str | None = None
    """Run directory name under `out`; default <env>_<algo>_seed<seed>, the env arguments given (key=value) before
    _seed."""
    device: str = "auto"
    """'auto' (a GPU when one is present), 'cpu', 'cuda', 'cuda:N' or 'mps'."""
    threads: int = ranged(1, NON_NEGATIVE, "0 keeps torch's default")
    """torch CPU threads for this process; 0 keeps torch's default (one per core). One suits semzoo's small networks,
    and leaves the other cores to other runs (docs/performance.md)."""
    sequential: bool = True
    """Collect, then learn, one after the other (PyMARL's loop); off, the next episodes are collected in an actor
    process while the learner updates, with policy parameters one batch's updates behind."""
    group_collect: bool = True
    """A group of seeds (`--seeds`) collects its runs' episodes in lockstep, one agent forward per step for all its
    runs (their parameters stacked); off, each run collects on its own, one after another. The same episodes either
    way, up to the float rounding of the stacked forward."""
    compile_update: bool = False
    """On a CUDA device, compile the update's loss (torch.compile, CUDA graphs), batches padded to a few lengths so
    that episode lengths do not force recompiles; elsewhere the plain update runs. Off by default: the plain update
    is the reference path, the same on every device."""
    n_envs: int = ranged(1, AT_LEAST_ONE)
    """Environments stepped in parallel; episodes are collected n_envs at a time, epsilon set once per batch (1:
    PyMARL's episode runner, batch_size_run 1)."""
    episode_limit: int | None = ranged(None, AT_LEAST_ONE)
    """Maximum steps per episode; default: the environment's own limit (its ``episode_limit``, ``max_cycles`` or
    ``max_steps`` attribute, else 200, which the run's first lines then say)."""
    team_reward: Literal["env", "mean", "sum"] = "env"
    """How the agents' rewards make the team reward of a step: 'mean' or 'sum' over the agents present; 'env', the env
    family's own ('sum' on lbf:, as EPyMARL sums LBF's rewards; 'mean' elsewhere). config.json stores the one used."""
    test_interval: int = ranged(10_000, AT_LEAST_ONE)
    """Env steps between greedy evaluations."""
    test_episodes: int = ranged(32, AT_LEAST_ONE)
    """Greedy episodes per evaluation."""
    log_interval: int = ranged(2_000, AT_LEAST_ONE)
    """Env steps between training-metric rows."""
    save_interval: int = ranged(50_000, NON_NEGATIVE, "0 disables periodic checkpoints")
    """Env steps between checkpoints (0 disables periodic checkpoints; the last one is always written)."""
    keep_checkpoints: int = ranged(2, NON_NEGATIVE, "0 removes them when the run finishes")
    """Checkpoints kept in checkpoints/, newest first. 0 keeps one while the run trains and removes it when the run
    finishes (best.ckpt, metrics.csv and final.json stay; the run can then not be extended): for large studies,
    where each checkpoint holds the replay buffer (docs/memory-plan.md gives its size). May change when a run is
    resumed."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent network."""
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    """The episodic memory's shared settings (every <memory>- algorithm; lambda and the table's pending set: SEM, SAEM)."""
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    """The loss and its optimiser."""
    exploration: ExplorationConfig = field(default_factory=ExplorationConfig)
    """The epsilon schedule."""
    runtime: Literal["pymarl", "semzoo-0.2"] = "pymarl"
    """How episodes are collected and counted: 'pymarl', the paper's (PyMARL's episode runner: one episode at a time,
    collect then learn, time limits terminal, PyMARL's target count); 'semzoo-0.2', the overlapped runtime (8 envs
    at a time, collection overlapping learning, bootstrapping at time limits, the target period counted in collected
    episodes). It fills the fields it names that are left at their defaults (`semzoo algos` lists them); a field
    given on the command line keeps its value."""
    preset: Literal["none", "authors-smac", "authors-sparse", "epymarl-lbf"] = "none"
    """'authors-smac': the algorithm's SMAC setup as its authors ran it; 'authors-sparse': its sparse-reward SMAC
    setup (LAGMA's, with `--env-arg reward=deaths` or `reward=sparse`); 'epymarl-lbf': EPyMARL's QMIX or VDN setup
    for Level-Based Foraging (docs/lbf.md). `semzoo algos` lists what each sets per
    algorithm and map; it fills the fields it names that are left at their defaults, a field given on the command line
    keeps its value."""
    pinned: tuple[str, ...] = field(default=(), metadata={CLI: False})
    """Config keys given explicitly (``learner.lr``, ``n_envs``): the runtime and the preset leave them as given,
    even at their default. The command line fills it with the flags typed; from Python, name them here."""
    components: dict[str, Any] = field(default_factory=dict, metadata={CLI: False, _settings.HOLDER: True})
    """The own settings of the registered components the algorithm uses (a memory or mixer registered with a
    ``settings`` dataclass: QMIX's ``qmix``, QPLEX's ``qplex``, WQMIX's ``wqmix``; EMC's ``emc`` and ``curiosity``,
    EMU's ``emu`` and ``curiosity``, LAGMA's ``lagma``; a plugin's), section name -> settings, filled with their
    defaults; config.json stores each as a section of its own (``"lagma": {"lagma_n_codes": 64, ...}``), ``--set
    lagma.lagma_n_codes=256`` sets one, and so does its flag (``--lagma-n-codes``) for a built-in component's."""

    def __post_init__(self) -> None:
        if isinstance(self.pinned, list):  # from JSON
            object.__setattr__(self, "pinned", tuple(self.pinned))
        check_fields(self)
        object.__setattr__(self, "components", used_components(self.algo, self.components))
        unknown = [key for key in self.pinned if key not in _config_keys()]
        if unknown:
            raise ValueError(f"pinned names {unknown}, which are not config keys: expected keys such as 'n_envs' or "
                             "'learner.lr' (`semzoo sweep --set` names them the same way)")
        if not DEVICE_PATTERN.fullmatch(self.device):
            raise ValueError(f"device={self.device!r}: expected 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'; "
                             "'auto' picks a GPU when one is present")

    def settings(self, section: str) -> Any:
        """A section's settings by name: a built-in one (``settings('learner')`` is ``self.learner``) or the own
        settings of a registered component the algorithm uses (``settings('best')``, a plugin memory's)."""
        if section in self.components:
            return self.components[section]
        if section in SECTIONS:
            return getattr(self, section)
        owner = _COMPONENTS.get(section)
        used = f"; algo={self.algo!r} does not use {owner.kind} {section!r}" if owner is not None else ""
        raise KeyError(f"no config section {section!r}{used}: expected one of "
                       f"{', '.join([*SECTIONS, *self.components])}")

    def with_settings(self, section: str, **changes: Any) -> TrainConfig:
        """This config with fields of one component's settings changed: ``config.with_settings('lagma',
        lagma_latent_dim=8)``."""
        settings = dataclasses.replace(self.settings(section), **changes)
        if section in SECTIONS:
            return dataclasses.replace(self, **{section: settings})
        return dataclasses.replace(self, components={**self.components, section: settings})

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data, config.json's shape: each component's settings a section of its own."""
        data = dataclasses.asdict(self)
        data.update(data.pop("components"))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of to_dict; unknown keys are an error so a stale config is noticed.

        A section no built-in field holds is a registered component's settings; the plugins are loaded first, so
        a run of a plugin memory reads back where the plugin is installed or named in ``SEMZOO_PLUGINS``.
        """
        data = _from_mixer_section(data)
        sections = config_sections(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown - _COMPONENTS.keys():
            load_plugins()  # a plugin's section: its module registers it
        components = {**data.get("components", {}), **{k: data[k] for k in unknown & _COMPONENTS.keys()}}
        unknown -= _COMPONENTS.keys()
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}: expected a subset of {sorted(known)}, or the "
                             "section of a registered component (a plugin's: import it with --plugin MODULE)")
        kwargs = {k: (sections[k](**v) if k in sections else v) for k, v in data.items() if k in known}
        return cls(**{**kwargs, "components": components})


OLD_MIXER_KEYS: dict[str, tuple[str, ...]] = {
    "embed_dim": ("qmix.embed_dim", "qplex.qplex_embed_dim"),
    "hypernet_dim": ("qmix.hypernet_dim", "qplex.qplex_hypernet_dim"),
    **{name: (f"qplex.{name}",) for name in ("qplex_heads", "qplex_attend_dim", "qplex_transformation",
                                               "qplex_lambda_layers", "qatten_heads", "qatten_reg")},
    "central_embed_dim": ("wqmix.central_embed_dim",), "wqmix_alpha": ("wqmix.wqmix_alpha",),
}
"""A field of the one-section layout of the mixers' sizes (``mixer``) that a kept run's config.json may hold -> the
keys of the mixers' own settings that hold it (QMIX's and QPLEX's embedding sizes were one field there)."""


def _from_mixer_section(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with a stored ``mixer`` section moved to the sections of the mixers that read it, for the mixers the
    run's algorithm trains with (the others never read their fields); its ``pinned`` keys follow."""
    if "mixer" not in data:
        return data
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items() if k != "mixer"}
    algo = str(out.get("algo", TrainConfig.algo))
    used = {name for name, c in _COMPONENTS.items() if c.kind == "mixer" and c.used_by(algo)}

    def moved(field_name: str) -> list[str]:
        if field_name not in OLD_MIXER_KEYS:
            raise ValueError(f"unknown config key 'mixer.{field_name}': expected one of the one-section layout's "
                             f"{sorted(OLD_MIXER_KEYS)}")
        return [key for key in OLD_MIXER_KEYS[field_name] if key.partition(".")[0] in used]

    for field_name, value in data["mixer"].items():
        for key in moved(field_name):
            section, _, name = key.partition(".")
            out.setdefault(section, {}).setdefault(name, value)
    if "pinned" in out:
        out["pinned"] = [new for key in out["pinned"]
                         for new in (moved(key.partition(".")[2]) if key.startswith("mixer.") else [key])]
    return out


def _config_keys() -> frozenset[str]:
    """Every key a config has or may have: the built-in fields', and the registered components' (``best.bonus``)."""
    return _builtin_keys() | component_keys()


@functools.cache
def _builtin_keys() -> frozenset[str]:
    return frozenset(f.key for f in config_fields(TrainConfig))


def config_sections(cls: type = TrainConfig) -> dict[str, type]:
    """The nested sections of a config class, name -> dataclass: ``{'agent': AgentConfig, ...}``."""
    return _settings.config_sections(cls)


def config_fields(cls: type = TrainConfig) -> list[ConfigField]:
    """Every leaf of the config tree (``TrainConfig``'s by default): the top-level fields, then each section's."""
    return _settings.config_fields(cls)


SECTIONS = config_sections(TrainConfig)
"""The nested sections of ``TrainConfig``, name -> dataclass; from_dict, ``sweep --set`` and the CLI read it."""


# --- Components' own settings: a memory or mixer registered with a settings dataclass ---


@dataclass(frozen=True)
class Component:
    """A registered memory or mixer that has settings of its own: ``settings`` is a frozen dataclass, every field
    with a default (``ranged`` fields are range-checked as the built-in ones), its section named ``name``."""

    kind: Literal["memory", "mixer"]
    name: str
    settings: type
    users: tuple[str, ...] = ()
    """The memories or mixers that train with these settings; () for the component ``name`` alone."""

    def used_by(self, algo: str) -> bool:
        """Whether the algorithm id ``algo`` trains with this component (ids are ``<base>`` or ``<memory>-<base>``,
        a memory's name has no '-', and a registered mixer is a base of its own name)."""
        users = self.users or (self.name,)
        if self.kind == "memory":
            return "-" in algo and algo.partition("-")[0] in users
        return any(algo == user or algo.endswith(f"-{user}") for user in users)


_COMPONENTS: dict[str, Component] = {}


def register_settings(kind: Literal["memory", "mixer"], name: str, settings: type, *, users: tuple[str, ...] = (),
                      replace: bool = False) -> None:
    """Give the component ``kind`` ``name`` the settings dataclass ``settings``: its section ``name`` of every config
    whose algorithm uses it (``config.settings(name)``), its keys ``<name>.<field>`` for ``--set`` and sweeps.
    ``users``: the memories (or mixers) that train with the section, when they are others than ``name`` alone
    (the curiosity's: EMC and EMU).

    ``semzoo.register_memory(name, settings=...)`` and ``semzoo.register_mixer(name, settings=...)`` call it.
    The registries' one rule holds: the same class again is a no-op, another one a ValueError unless ``replace``.
    """
    if not (isinstance(settings, type) and dataclasses.is_dataclass(settings)
            and settings.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{kind} {name!r}: settings={settings!r}, expected a frozen dataclass "
                        "(@dataclass(frozen=True, kw_only=True)) whose fields have defaults")
    missing = [f.name for f in dataclasses.fields(settings)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise TypeError(f"{kind} {name!r}: settings field(s) {missing} have no default; give each one (a run that "
                        "does not set it trains with it)")
    taken = {f.name for f in dataclasses.fields(TrainConfig)}
    if name in taken or not name.isidentifier():
        raise ValueError(f"{kind} {name!r}: its settings section would be named {name!r}, "
                         + ("which is a field of TrainConfig" if name in taken else "which is not an identifier")
                         + "; register it under another name")
    component = Component(kind, name, settings, users if users != (name,) else ())
    check_free("settings section", name, component, _COMPONENTS, replace=replace)
    _COMPONENTS[name] = component


for _name, (_settings_class, _users) in MEMORY_SETTINGS.items():
    register_settings("memory", _name, _settings_class, users=_users)
for _name, (_settings_class, _users) in MIXER_SETTINGS.items():
    register_settings("mixer", _name, _settings_class, users=_users)
BUILTIN_COMPONENTS = frozenset(MEMORY_SETTINGS) | frozenset(MIXER_SETTINGS)
"""The sections of the built-in memories' and mixers' own settings (``curiosity``, ``emc``, ``emu``, ``lagma``;
``qmix``, ``qplex``, ``wqmix``): known from the start, and each field a flag of `train` (a plugin's settings take
``--set``)."""


def registered_components() -> dict[str, Component]:
    """Section name -> the component whose settings it holds, in registration order."""
    return dict(_COMPONENTS)


def component_fields(algo: str | None = None) -> list[ConfigField]:
    """The leaves of the components' settings (``best.bonus``), of those ``algo`` uses when it is given."""
    out = []
    for name, component in _COMPONENTS.items():
        if algo is None or component.used_by(algo):
            out += [dataclasses.replace(f, key=f"{name}.{f.name}", section=name)
                    for f in _settings.config_fields(component.settings)]
    return out


def used_components(algo: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of the components ``algo`` uses, from ``given`` (section -> settings or a dict of them) and the
    defaults; a section given for a component the algorithm does not use is an error unless it holds the defaults."""
    out = {}
    for name, value in given.items():
        component = _COMPONENTS.get(name)
        if component is None:
            raise ValueError(f"components names {name!r}, which no registered memory or mixer declares settings for: "
                             f"expected one of {sorted(_COMPONENTS)} (a plugin's: import it with --plugin MODULE)")
        settings = _settings_of(component, value)
        if component.used_by(algo):
            out[name] = settings
        elif settings != component.settings():
            raise ValueError(f"{name}.* set for algo={algo!r}, which does not train with {component.kind} {name!r}: "
                             f"drop the {name} settings, or train an algorithm that uses it")
    for name, component in _COMPONENTS.items():
        if component.used_by(algo) and name not in out:
            out[name] = component.settings()
    for settings in out.values():
        check_fields(settings)
    return out


def builtin_fields() -> list[ConfigField]:
    """The leaves of the config tree and of the built-in memories' own settings (``emc.emc_loss_weight``): every
    setting `train` has a flag for."""
    return [*config_fields(), *(f for f in component_fields() if f.section in BUILTIN_COMPONENTS)]


def component_keys() -> frozenset[str]:
    """The keys of every registered component's settings (``best.bonus``)."""
    return frozenset(f.key for f in component_fields())


def _settings_of(component: Component, value: Any) -> Any:
    if isinstance(value, component.settings):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{component.name}={value!r}: expected the settings of {component.kind} {component.name!r} "
                        f"({component.settings.__name__}) or a dict of them")
    names = [f.name for f in dataclasses.fields(component.settings)]
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ValueError(f"{component.name}.{unknown[0]}: not a setting of {component.kind} {component.name!r}; "
                         f"expected one of {', '.join(f'{component.name}.{n}' for n in names)}")
    return component.settings(**value)


def apply_overrides(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``{'learner.batch_size': 8, 'test_interval': 500}`` applied to a ``TrainConfig.to_dict()``-shaped dict.

    Keys are ``<field>`` or ``<section>.<field>``: those of ``config_fields`` and of the registered components'
    settings (``component_fields``); ValueError naming a key that is neither.
    """
    keys = _config_keys()
    out = {k: (dict(v) if isinstance(v, dict) and (k in SECTIONS or k in _COMPONENTS) else v) for k, v in base.items()}
    for key, value in overrides.items():
        if key not in keys:
            sections = [*SECTIONS, *_COMPONENTS]
            raise ValueError(f"config key {key!r}: expected <field> such as test_interval or <section>.<field> "
                             f"such as learner.batch_size, sections {', '.join(sections)} "
                             "(`semzoo train --help` lists the fields)")
        section, _, name = key.rpartition(".")
        if section:
            out.setdefault(section, {})[name] = value
        else:
            out[key] = value
    return out
