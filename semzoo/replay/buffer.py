"""Episode replay buffer H: preallocated padded tensors, circular, uniform sampling.

The buffer keeps padding at zero: slots past an episode's observation after its last step (slot
``length``) and steps past its last step. (A collected batch pads with whatever its envs held after they
finished; ``CleanBatch`` zeroes padding before any loss, so learning never saw it.) Its checkpoint form
(``state_dict``) therefore holds only the real slots, packed one episode after another, and rebuilds the
padded tensors exactly: a checkpoint of SMAX 2s3z, whose episodes fill about 57 of their 100 steps, is
that much smaller. ``load_state_dict`` also reads the padded form of checkpoints written before 0.3.
"""

from __future__ import annotations

from typing import Any

import torch

from semzoo.types import EpisodeBatch

SLOT_FIELDS = frozenset({"obs", "state", "avail", "state_keys"})
"""Fields with T + 1 slots per episode (slot ``length`` is the observation after the last step); the others have T."""
PACKED_FIELDS = ("obs", "state", "avail", "actions", "reward", "terminated")
"""The fields a checkpoint stores, packed (``filled`` and ``length`` describe them, the state keys are rebuilt)."""
PACKED = "packed"


def _real(length: torch.Tensor, steps: int, *, slots: bool) -> torch.Tensor:
    """[B, steps] bool: the real slots (t <= length) or the real steps (t < length) of episodes of ``length`` [B]."""
    t = torch.arange(steps, device=length.device)[None, :]
    return t <= length[:, None] if slots else t < length[:, None]


class EpisodeReplayBuffer:
    """Holds up to ``capacity`` episodes of at most ``max_t`` steps as preallocated tensors.

    Memory is fixed at construction: see ``nbytes``. Oldest episodes are overwritten first.
    """

    def __init__(
        self, *, capacity: int, max_t: int, n_agents: int, obs_dim: int, state_dim: int, n_actions: int,
        device: torch.device | str = "cpu", state_key_words: int = 0,
    ) -> None:
        """``state_key_words`` > 0 (D, a run with episodic memory) keeps each slot's ``state_keys`` too."""
        if capacity <= 0 or max_t <= 0:
            raise ValueError(f"capacity={capacity}, max_t={max_t}: expected positive sizes")
        self.capacity, self.max_t = capacity, max_t
        c, t, a = capacity, max_t, n_agents
        kw: dict[str, Any] = {"device": device}
        self.data = EpisodeBatch(
            obs=torch.zeros(c, t + 1, a, obs_dim, dtype=torch.float32, **kw),
            state=torch.zeros(c, t + 1, state_dim, dtype=torch.float32, **kw),
            avail=torch.zeros(c, t + 1, a, n_actions, dtype=torch.bool, **kw),
            actions=torch.zeros(c, t, a, dtype=torch.int64, **kw),
            reward=torch.zeros(c, t, dtype=torch.float32, **kw),
            terminated=torch.zeros(c, t, dtype=torch.bool, **kw),
            filled=torch.zeros(c, t, dtype=torch.bool, **kw),
            length=torch.zeros(c, dtype=torch.int64, **kw),
            state_keys=torch.zeros(c, t + 1, state_key_words, dtype=torch.int32, **kw) if state_key_words else None,
        )
        self.insert_pos = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return sum(value.nbytes for value in self.data.tensors().values())

    def insert(self, batch: EpisodeBatch) -> None:
        """Copy ``batch`` (B episodes, time axis <= max_t) in, overwriting the oldest episodes.

        A buffer that keeps state keys needs ``batch.state_keys``; one that does not ignores them.
        """
        n, t = batch.batch_size, batch.max_t
        if t > self.max_t:
            raise ValueError(f"episodes of {t} steps do not fit a buffer of max_t={self.max_t}")
        if self.data.state_keys is not None and batch.state_keys is None:
            raise ValueError("this buffer keeps state keys: set batch.state_keys = memory.slot_state_keys(batch) "
                             "(as an int32 tensor) before inserting")
        device = self.data.length.device
        idx = (self.insert_pos + torch.arange(n)) % self.capacity
        idx = idx.to(device)
        length = batch.length.to(device)
        for name, dst in self.data.tensors().items():
            src = getattr(batch, name)
            assert src is not None
            src = src.to(device)
            if name == "length":
                dst[idx] = src
                continue
            steps = t + 1 if name in SLOT_FIELDS else t
            real = _real(length, steps, slots=name in SLOT_FIELDS)  # [n, steps]
            dst[idx] = 0  # stale tail of an overwritten longer episode
            zero = torch.zeros((), dtype=src.dtype, device=device)
            dst[idx, :steps] = torch.where(real.view(*real.shape, *[1] * (src.dim() - 2)), src[:, :steps], zero)
        self.insert_pos = (self.insert_pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def can_sample(self, batch_size: int) -> bool:
        return self.size >= batch_size

    def sample(self, batch_size: int, generator: torch.Generator) -> EpisodeBatch:
        """``batch_size`` distinct episodes drawn uniformly, cut to the longest sampled episode."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes from a buffer holding {self.size}")
        idx = torch.randperm(self.size, generator=generator)[:batch_size].to(self.data.length.device)
        batch = self.data.index(idx)
        t = int(batch.length.max())
        return EpisodeBatch(
            obs=batch.obs[:, : t + 1], state=batch.state[:, : t + 1], avail=batch.avail[:, : t + 1],
            actions=batch.actions[:, :t], reward=batch.reward[:, :t], terminated=batch.terminated[:, :t],
            filled=batch.filled[:, :t], length=batch.length,
            state_keys=None if batch.state_keys is None else batch.state_keys[:, : t + 1],
        )

    def state_dict(self) -> dict[str, Any]:
        """The stored episodes' real slots, packed (CPU tensors): ``length`` [size], then per field the real
        slots of episode 0, episode 1, ... (``obs`` [sum(length + 1), A, O], ``actions`` [sum(length), A], ...).

        ``filled`` is not stored (it is ``t < length``), nor the state keys (a function of the states,
        rebuilt with ``set_state_keys``).
        """
        length = self.data.length[: self.size].cpu()
        state: dict[str, Any] = {"insert_pos": self.insert_pos, "size": self.size, "layout": PACKED, "length": length}
        for name in PACKED_FIELDS:
            value = getattr(self.data, name)[: self.size].cpu()
            state[name] = value[_real(length, value.shape[1], slots=name in SLOT_FIELDS)]  # boolean index: a copy
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``state_dict`` (and reads the padded form of older checkpoints, the first ``size`` slots or
        all of them); a buffer that keeps state keys then needs ``set_state_keys``."""
        size = int(state["size"])
        for value in self.data.tensors().values():
            value.zero_()
        if state.get("layout") == PACKED:
            length = state["length"].to(self.data.length.device)
            self.data.length[:size] = length
            self.data.filled[:size] = _real(length, self.max_t, slots=False)
            for name in PACKED_FIELDS:
                stored = getattr(self.data, name)[:size]  # a view: the assignment below fills the buffer
                stored[_real(length, stored.shape[1], slots=name in SLOT_FIELDS)] = state[name].to(stored.device)
        else:
            for name, value in self.data.tensors().items():
                if name != "state_keys":
                    value[: state[name].shape[0]] = state[name]
        self.insert_pos, self.size = int(state["insert_pos"]), size

    def stored(self) -> EpisodeBatch:
        """The stored episodes, slot i of the buffer first (views, not copies)."""
        return self.data.index(slice(0, self.size))

    def set_state_keys(self, state_keys: torch.Tensor) -> None:
        """The state keys of the stored episodes [size, T+1, D] (after ``load_state_dict``)."""
        assert self.data.state_keys is not None, "this buffer keeps no state keys"
        self.data.state_keys.zero_()
        self.data.state_keys[: self.size] = state_keys.to(self.data.state_keys.device)
