"""Shared data contracts: what a vectorized CTDE env returns, what an episode batch holds, and what the loss
and the episodic memories read of a sampled batch (CleanBatch, OnlineValues).

The ground floor: this module imports nothing of semzoo, so the agents, the learners and the memories can
all read these types without importing one another.

Shapes use N = parallel envs, B = episodes, T = episode limit, A = agents,
O = observation size, S = state size, U = actions per agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # torch is imported where a tensor is made: `semzoo envs` and the env wrappers read these types without it
    import torch

NO_ACTION = -1
"""Last-action id before the first step (encoded as an all-zero one-hot)."""


@dataclass
class CTDEArrays:
    """One time step of N environments, fixed shapes whatever agents are alive.

    obs:   float32 [N, A, O]  zero for a dead (padded) agent
    state: float32 [N, S]
    avail: bool    [N, A, U]  a dead agent has only the no-op action available
    alive: bool    [N, A]
    """

    obs: np.ndarray
    state: np.ndarray
    avail: np.ndarray
    alive: np.ndarray


@dataclass(frozen=True)
class StateLayout:
    """Where the per-unit features sit in the global state: ``n_units`` blocks of ``unit_dim`` from ``offset``.

    state[offset + i * unit_dim : offset + (i + 1) * unit_dim] are unit i's features, units 0..n_units-1 being the
    agents in their order (SMAC and SMAX put the allies' blocks first). An env declares it as a ``state_layout``
    attribute (of its ParallelEnv or its VecCTDEEnv); mixers that attend over units (QPLEX's Qatten transformation)
    read it, and refuse an env that declares none.
    """

    n_units: int
    unit_dim: int
    offset: int = 0

    def __post_init__(self) -> None:
        if self.n_units < 1 or self.unit_dim < 1 or self.offset < 0:
            raise ValueError(f"{self}: expected n_units >= 1, unit_dim >= 1 and offset >= 0")

    @property
    def end(self) -> int:
        """One past the last state feature the units' blocks use."""
        return self.offset + self.n_units * self.unit_dim


PACK_ALIGN = 8
"""Bytes every field of a packed copy starts at a multiple of: the widest element (int64), so each views back."""


def packed_copy(tensors: dict[str, torch.Tensor], device: torch.device | str) -> dict[str, torch.Tensor]:
    """``tensors`` (on the host) on ``device`` through one copy: their bytes packed into one buffer, copied, viewed back.

    The buffer is pinned for a GPU, so the copy runs asynchronously; the values, dtypes and shapes are those
    of ``tensors`` bit for bit.
    """
    import torch

    device = torch.device(device)
    offsets, total = {}, 0
    for name, value in tensors.items():
        offsets[name] = total
        total += -(-value.numel() * value.element_size() // PACK_ALIGN) * PACK_ALIGN
    host = torch.empty(total, dtype=torch.uint8, pin_memory=device.type == "cuda")
    for name, value in tensors.items():
        nbytes = value.numel() * value.element_size()
        host[offsets[name]: offsets[name] + nbytes] = value.contiguous().view(-1).view(torch.uint8)
    moved = host.to(device, non_blocking=True)
    return {name: moved[offsets[name]: offsets[name] + value.numel() * value.element_size()]
            .view(value.dtype).view(value.shape) for name, value in tensors.items()}


def on_device(value: torch.Tensor, device: torch.device) -> bool:
    """Whether ``value`` lies on ``device`` (a device without an index, such as ``cuda``, matches any of its kind)."""
    return value.device.type == device.type and (device.index is None or value.device.index == device.index)


VecStep = tuple[CTDEArrays, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]
"""What a vec env's ``step`` returns: (arrays, reward [N], terminated [N], truncated [N], info)."""


@runtime_checkable
class VecCTDEEnv(Protocol):
    """N environments stepped in lockstep, exposing fixed-shape arrays.

    ``step`` returns ``(arrays, reward [N] float32, terminated [N] bool,
    truncated [N] bool, info)`` where ``info`` maps names (``battle_won`` ...)
    to arrays of shape [N]. Once env i has returned ``terminated or truncated``
    its later outputs are ignored until the next ``reset``: stepping it again
    must not raise and must return finite arrays (repeating the final ones is
    fine). ``reset(seed)`` resets all N envs; env i is seeded with ``seed + i``.
    An env may also declare ``state_layout: StateLayout | None`` (optional: read with getattr).
    """

    n_envs: int
    n_agents: int
    obs_dim: int
    state_dim: int
    n_actions: int
    episode_limit: int
    agent_names: list[str]

    def reset(self, seed: int | None = None) -> CTDEArrays: ...

    def step(self, actions: np.ndarray) -> VecStep: ...

    def close(self) -> None: ...


@dataclass
class EpisodeBatch:
    """B padded episodes as tensors. Slot t < length holds a real step.

    obs:        float32 [B, T+1, A, O]  slot ``length`` holds the observation after the last step
    state:      float32 [B, T+1, S]     likewise
    avail:      bool    [B, T+1, A, U]
    actions:    int64   [B, T, A]
    reward:     float32 [B, T]
    terminated: bool    [B, T]   true only at a real end (win, loss, game over), never at a time limit
    filled:     bool    [B, T]   true for real steps, false for padding
    length:     int64   [B]      number of real steps
    state_keys: int32   [B, T+1, D] or None: the episodic memory's key of every real slot's state (the
                float32 bits of phi(s) = V s), set by the replay buffer of a run with episodic memory so
                that an update's table lookup needs no projection; zero past slot ``length``
    Padding values are unspecified (zero, NaN, anything): consumers mask them.
    """

    obs: torch.Tensor
    state: torch.Tensor
    avail: torch.Tensor
    actions: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    filled: torch.Tensor
    length: torch.Tensor
    state_keys: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        return int(self.reward.shape[0])

    @property
    def max_t(self) -> int:
        return int(self.reward.shape[1])

    def tensors(self) -> dict[str, torch.Tensor]:
        """The fields that hold a tensor, by name (``state_keys`` only when set)."""
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}

    def to(self, device: torch.device | str) -> EpisodeBatch:
        return EpisodeBatch(**{name: value.to(device) for name, value in self.tensors().items()})

    def for_update(self, device: torch.device | str) -> EpisodeBatch:
        """This batch as a gradient update on ``device`` reads it: the same batch where it already is.

        From the host to a GPU its fields travel in one copy (``packed_copy``: one transfer instead of
        one per field), and ``state_keys`` stay on the host, where the memory's table reads them. A batch
        gathered on ``device`` (a replay buffer there) is returned as it is: no copy, its state keys included.
        """
        import torch

        device = torch.device(device)
        tensors = self.tensors()
        if all(on_device(value, device) for value in tensors.values()):
            return self
        if device.type != "cuda" or any(value.device.type != "cpu" for value in tensors.values()):
            return self.to(device)
        keys = tensors.pop("state_keys", None)
        return EpisodeBatch(**packed_copy(tensors, device), state_keys=keys)

    def index(self, idx: torch.Tensor | slice) -> EpisodeBatch:
        return EpisodeBatch(**{name: value[idx] for name, value in self.tensors().items()})


@dataclass
class CleanBatch:
    """An EpisodeBatch with padding replaced by zeros, plus the masks derived from it.

    Padding can hold anything (NaN, 1e9); every tensor here is finite and identical
    whatever the padding held, so losses and gradients do not depend on it.
    """

    obs: torch.Tensor  # [B,T+1,A,O]
    state: torch.Tensor  # [B,T+1,S]
    avail: torch.Tensor  # [B,T+1,A,U] bool, all false on padding
    actions: torch.Tensor  # [B,T,A]
    last_actions: torch.Tensor  # [B,T+1,A], NO_ACTION at t=0
    reward: torch.Tensor  # [B,T]
    terminated: torch.Tensor  # [B,T] float
    mask: torch.Tensor  # [B,T] float, 1 on real steps

    @classmethod
    def from_batch(cls, batch: EpisodeBatch) -> CleanBatch:
        import torch

        t = batch.reward.shape[1]
        device = batch.reward.device
        slot_valid = torch.arange(t + 1, device=device)[None, :] <= batch.length[:, None]  # [B,T+1]
        filled = batch.filled
        actions = torch.where(filled[..., None], batch.actions, 0)
        last_actions = torch.cat([torch.full_like(actions[:, :1], NO_ACTION), actions], dim=1)
        real = torch.get_default_dtype()  # float32; float64 where the golden runs ask for it (tests/golden_runs.py)
        return cls(
            obs=torch.where(slot_valid[..., None, None], batch.obs, 0.0).to(real),
            state=torch.where(slot_valid[..., None], batch.state, 0.0).to(real),
            avail=batch.avail & slot_valid[..., None, None],
            actions=actions,
            last_actions=last_actions,
            reward=torch.where(filled, batch.reward, 0.0).to(real),
            terminated=(batch.terminated & filled).to(real),
            mask=filled.to(real),
        )

    def bootstrapped(self, value_BT: torch.Tensor, gamma: float) -> torch.Tensor:
        """One-step target r_t + gamma (1 - term_t) V_{t+1} of every step: [B,T] (paper eq. 2 and 7).

        A time limit is not a termination, so a truncated step bootstraps like any other.
        """
        return self.reward + gamma * (1.0 - self.terminated) * value_BT

    def lambda_returns(self, value_BT: torch.Tensor, gamma: float, td_lambda: float,
                       reward_BT: torch.Tensor | None = None) -> torch.Tensor:
        """TD(lambda) targets of every step: [B,T], computed backwards (PyMARL2's ``build_td_lambda_targets``).

            G_t = r_t + gamma (1 - term_t) [(1 - lambda) V_{t+1} + lambda G_{t+1}]

        ``value_BT[:, t]`` is V_{t+1}, the bootstrap value of the state after step t. After the last real step
        of an episode that did not terminate (a time limit) G_{t+1} is replaced by V_{t+1}, so that step's target
        is the one-step target; after a real end nothing is bootstrapped. ``reward_BT`` (default: ``reward``)
        lets a caller add an intrinsic reward. Padding steps hold values that no real step reads. At lambda 0
        this is ``bootstrapped`` up to rounding. Tensor ops only, so it runs under ``torch.func.vmap``.
        """
        import torch

        reward = self.reward if reward_BT is None else reward_BT
        n_steps = reward.shape[1]
        returns: list[torch.Tensor] = []
        for t in range(n_steps - 1, -1, -1):
            if t + 1 < n_steps:  # G_{t+1} where step t+1 is real, V_{t+1} after an episode's last step
                g_next = torch.where(self.mask[:, t + 1] > 0, returns[-1], value_BT[:, t])
            else:
                g_next = value_BT[:, t]
            blended = (1.0 - td_lambda) * value_BT[:, t] + td_lambda * g_next
            returns.append(reward[:, t] + gamma * (1.0 - self.terminated[:, t]) * blended)
        return torch.stack(returns[::-1], dim=1)


@dataclass(frozen=True)
class OnlineValues:
    """One batch through the online networks: what the loss and its hooks (the learner's, the memory's) read."""

    clean: CleanBatch
    q_BTAU: torch.Tensor
    """Q_a(tau, u) of every slot and action, [B,T+1,A,U], with gradient."""
    q_tot_BT: torch.Tensor
    """Q_tot(tau_t, u_t, s_t) of the taken joint actions, [B,T], with gradient."""
    logged: dict[str, torch.Tensor] = field(default_factory=dict, kw_only=True)
    """Further values [B,T] without gradient, each logged after ``q_tot`` as its mean over real steps (WQMIX's q_star)."""
