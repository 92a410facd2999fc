"""Run configuration: frozen, keyword-only dataclasses whose fields are the CLI flags.

Defaults are the PyMARL / paper values (paper appendix, tables "hyper-parameters in SEM").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Recurrent agent network shared by all agents."""

    hidden_dim: int = 64
    """GRU hidden size (PyMARL rnn_hidden_dim)."""
    obs_agent_id: bool = True
    """Append a one-hot agent id to each observation."""
    obs_last_action: bool = True
    """Append the agent's previous action (one-hot) to each observation."""

    def __post_init__(self) -> None:
        _positive(hidden_dim=self.hidden_dim)


@dataclass(frozen=True, kw_only=True)
class MixerConfig:
    """Mixing-network sizes; each mixer reads the fields it needs."""

    embed_dim: int = 32
    """QMIX mixing embedding size."""
    hypernet_dim: int = 64
    """Hidden size of QMIX's 2-layer hypernetworks."""
    qplex_heads: int = 4
    """Attention heads of QPLEX's advantage weights (4 for SMAC, 10 for matrix games in the original settings)."""
    qplex_attend_dim: int = 32
    """Per-head key/query size of QPLEX's attention."""
    central_embed_dim: int = 256
    """Hidden size of WQMIX's unrestricted central mixer Q*."""
    wqmix_alpha: float = 0.75
    """Weight given by WQMIX to joint actions that are not (believed) optimal; paper: 0.75."""

    def __post_init__(self) -> None:
        _positive(embed_dim=self.embed_dim, hypernet_dim=self.hypernet_dim, qplex_heads=self.qplex_heads,
                  qplex_attend_dim=self.qplex_attend_dim, central_embed_dim=self.central_embed_dim)
        if not 0.0 < self.wqmix_alpha <= 1.0:
            raise ValueError(f"wqmix_alpha={self.wqmix_alpha}: expected a weight in (0, 1]; the paper uses 0.75")


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Episodic memory (paper section 5 and appendix table of SEM hyper-parameters).

    Whether memory is used, and which kind, comes from the algorithm id (sem-qmix, saem-vdn ...).
    """

    lam: float = 0.1
    """lambda in (1 - lambda)(Q_tot - y)^2 + lambda (Q_tot - E)^2."""
    proj_dim: int = 4
    """D, the size of the random projection phi(s) = V s."""
    capacity: int = 1_000_000
    """|Q^S|, the number of table entries; least frequently accessed entries are evicted beyond it."""
    pending_size: int = 5000
    """|M|, env steps gathered before the table is updated with their per-key maximum returns."""
    miss_rule: Literal["target", "zero"] = "target"
    """On a table miss: 'target' uses max_u Q_tot(tau', u; theta^-) so E = y (the paper); 'zero' drops the memory term (EMC)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam={self.lam}: expected lambda in [0, 1]; the paper uses 0.1")
        if self.miss_rule not in ("target", "zero"):
            raise ValueError(f"miss_rule={self.miss_rule!r}: expected 'target' (paper) or 'zero' (EMC)")
        _positive(proj_dim=self.proj_dim, capacity=self.capacity, pending_size=self.pending_size)


@dataclass(frozen=True, kw_only=True)
class LearnerConfig:
    """The TD loss and its optimiser (PyMARL q_learner defaults)."""

    gamma: float = 0.99
    lr: float = 5e-4
    rms_alpha: float = 0.99
    rms_eps: float = 1e-5
    grad_clip: float = 10.0
    """Clip of the global gradient norm."""
    batch_size: int = 32
    """Episodes per update."""
    buffer_size: int = 5000
    """Replay capacity in episodes."""
    target_update_episodes: int = 200
    """Hard target-network update period, in collected episodes."""
    double_q: bool = True
    """Pick the target's argmax with the online network (double Q-learning)."""
    updates_per_episode: float = 1.0
    """Gradient updates per collected episode (Algorithm 1: one)."""
    timeout_as_terminal: bool = False
    """Treat a time-limit truncation as a termination (no bootstrap), as PyMARL does; off by default."""

    def __post_init__(self) -> None:
        _positive(lr=self.lr, batch_size=self.batch_size, buffer_size=self.buffer_size,
                  target_update_episodes=self.target_update_episodes, grad_clip=self.grad_clip,
                  updates_per_episode=self.updates_per_episode)
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma={self.gamma}: expected a discount in [0, 1]")
        if self.batch_size > self.buffer_size:
            raise ValueError(
                f"batch_size={self.batch_size} is larger than buffer_size={self.buffer_size}: "
                "lower --batch-size or raise --buffer-size"
            )


@dataclass(frozen=True, kw_only=True)
class ExplorationConfig:
    """Linear epsilon schedule over env steps."""

    epsilon_start: float = 1.0
    epsilon_finish: float = 0.05
    epsilon_anneal_steps: int = 50_000

    def __post_init__(self) -> None:
        for name in ("epsilon_start", "epsilon_finish"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value}: expected a probability in [0, 1]")
        if self.epsilon_anneal_steps < 0:
            raise ValueError(f"epsilon_anneal_steps={self.epsilon_anneal_steps}: expected >= 0")

    def epsilon(self, env_steps: int) -> float:
        """Epsilon after ``env_steps`` environment steps."""
        if self.epsilon_anneal_steps == 0:
            return self.epsilon_finish
        frac = min(1.0, env_steps / self.epsilon_anneal_steps)
        return self.epsilon_start + frac * (self.epsilon_finish - self.epsilon_start)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything a run needs; stored resolved as config.json in the run directory."""

    env: str = "matrix:climbing"
    """Environment id: matrix:<game>, smax:<map>, smac:<map> or pz:<module>:<factory>."""
    env_args: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    algo: str = "qmix"
    """Algorithm id: <mixer> or sem-<mixer> / saem-<mixer>, mixers vdn, qmix, qplex, cw-qmix, ow-qmix."""
    steps: int = 50_000
    """Environment steps to train for."""
    seed: int = 0
    out: str = "runs"
    """Parent folder of the run directory."""
    run_name: str | None = None
    """Run directory name under `out`; default <env>_<algo>_seed<seed>."""
    device: str = "auto"
    """'auto' (a GPU when one is present), 'cpu', 'cuda', 'cuda:1' ..."""
    threads: int = 1
    """torch CPU threads for this process (0 keeps torch's default). One is fastest for semzoo's small
    networks on a shared machine: with two threads on a loaded 2-core box an update ran 10x slower."""
    n_envs: int = 8
    """Environments stepped in parallel; episodes are collected n_envs at a time."""
    episode_limit: int | None = None
    """Maximum steps per episode; default: the environment's own limit."""
    test_interval: int = 10_000
    """Env steps between greedy evaluations."""
    test_episodes: int = 32
    """Greedy episodes per evaluation."""
    log_interval: int = 2_000
    """Env steps between training-metric rows."""
    save_interval: int = 50_000
    """Env steps between checkpoints (0 disables periodic checkpoints)."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    mixer: MixerConfig = field(default_factory=MixerConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    exploration: ExplorationConfig = field(default_factory=ExplorationConfig)

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"steps={self.steps}: expected a non-negative number of env steps")
        _positive(n_envs=self.n_envs, test_episodes=self.test_episodes, log_interval=self.log_interval,
                  test_interval=self.test_interval)
        if self.threads < 0:
            raise ValueError(f"threads={self.threads}: expected >= 0 (0 keeps torch's default)")
        if self.save_interval < 0:
            raise ValueError(f"save_interval={self.save_interval}: expected >= 0 (0 disables periodic saves)")
        if self.episode_limit is not None:
            _positive(episode_limit=self.episode_limit)
        from semzoo.algos import parse_algorithm  # the algorithm table is the one judge of an id

        parse_algorithm(self.algo)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """Inverse of to_dict; unknown keys are an error so a stale config is noticed."""
        nested = {"agent": AgentConfig, "mixer": MixerConfig, "memory": MemoryConfig,
                  "learner": LearnerConfig, "exploration": ExplorationConfig}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}: expected a subset of {sorted(known)}")
        kwargs = {k: (nested[k](**v) if k in nested else v) for k, v in data.items()}
        return cls(**kwargs)


def _positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name}={value}: expected a positive value")
