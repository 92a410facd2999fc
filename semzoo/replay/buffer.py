"""Episode replay buffer H: the steps that were played, in one flat store, sampled as padded episodes.

Layout. Each field is one tensor over *slots* (a slot is one time step of one episode): ``obs``
[slots, A, O], ``state`` [slots, S], ``avail`` [slots, A, U], ``actions`` [slots, A], ``reward`` [slots],
``terminated`` [slots] and, in a run with episodic memory, ``state_keys`` [slots, D]. An episode of
``length`` L holds L + 1 consecutive slots (its steps and the observation after the last one; the step
fields leave that last slot unused). ``offset`` and ``length`` [capacity] say where the episode of each
ring position lies. Slot 0 is never written: it stays zero, and sampling points every padding position at
it, so a padded batch [B, max_t + 1, ...] comes out of one gather per field, with zeros on every padding step.

Ring. Episodes are placed one after another, oldest first, and never wrap inside themselves: an episode
that does not fit before the end goes to slot 1, behind the oldest live episode (a "bip buffer"). The
ring position of an episode (``insert_pos``) counts episodes, not slots (position i holds the i-th episode
stored, modulo ``capacity``), so eviction is oldest episode first at ``capacity`` episodes and ``sample`` draws
ring positions uniformly from the run's generator, whatever the episodes' lengths.

Growth. The store starts small and grows by half (compacting the live episodes oldest first) when an episode
finds no room, up to ``worst_case_slots``: ``(capacity + 1) x (max_t + 1) + 1`` slots, where every
placement finds room without growing (one episode's length of slack at the end and behind the oldest).
So memory follows what was played, not the episode limit (docs/studies/benchmarks.md has the figures). A growth
copies one field at a time: for a moment the store holds the new size plus the old copy of one field
(``growth_transient_bytes`` bounds it; the memory plan counts it).

Storage types. Actions are kept in the smallest integer type that holds ``n_actions``, masks and flags as
bool, state keys as int32: lossless. ``store_dtype`` (float32 by default) may keep observations and states
as float16 or bfloat16, which is lossy; a sample always hands out float32 and int64, the types the learner reads.

Device. The store lives on ``device``: the host, or the run's GPU (``learner.replay_device`` 'run'), where a
collected batch arrives in one copy and a sample is gathered in place, so an update's batch never crosses from
the host; the ring's index (``offset``, ``length``) stays on the host.

Checkpoints (``state_dict``) hold the real slots packed one episode after another, oldest ring position
first (``layout`` PACKED), as CPU tensors whatever the device; ``load_state_dict`` puts them on the buffer's
device, and also reads a checkpoint without that layout, whose fields are padded to [capacity, max_t + 1, ...],
keeping its real slots.
"""

from __future__ import annotations

from typing import Any

import torch

from semzoo.types import EpisodeBatch, packed_copy

SLOT_FIELDS = frozenset({"obs", "state", "avail", "state_keys"})
"""Fields with T + 1 slots per episode (slot ``length`` is the observation after the last step); the others have T."""
PACKED_FIELDS = ("obs", "state", "avail", "actions", "reward", "terminated")
"""The fields a checkpoint stores, packed (``filled`` and ``length`` describe them, the state keys are rebuilt)."""
PACKED = "packed"
ZERO_SLOT = 0
"""The slot every padding position of a sample reads: never written, so always zero."""
FIRST_SLOT = ZERO_SLOT + 1
GROWTH = 1.5
"""Factor by which the store grows when an episode finds no room (amortised O(1) copies per stored slot)."""
STORE_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
"""Storage types for observations and states (``learner.replay_dtype``); float32 is lossless."""


def _real(length: torch.Tensor, steps: int, *, slots: bool) -> torch.Tensor:
    """[B, steps] bool: the real slots (t <= length) or the real steps (t < length) of episodes of ``length`` [B]."""
    t = torch.arange(steps, device=length.device)[None, :]
    return t <= length[:, None] if slots else t < length[:, None]


def action_dtype(n_actions: int) -> torch.dtype:
    """The smallest integer type holding action ids 0..n_actions-1."""
    for dtype in (torch.uint8, torch.int16, torch.int32):
        if n_actions - 1 <= torch.iinfo(dtype).max:
            return dtype
    return torch.int64


def slot_bytes(*, n_agents: int, obs_dim: int, state_dim: int, n_actions: int, state_key_words: int = 0,
               store_dtype: str = "float32") -> dict[str, int]:
    """Bytes one slot takes in each field of the store (``obs``, ``state``, ``avail``, ...)."""
    float_size = torch.empty((), dtype=STORE_DTYPES[store_dtype]).element_size()
    sizes = {"obs": n_agents * obs_dim * float_size, "state": state_dim * float_size, "avail": n_agents * n_actions,
             "actions": n_agents * torch.empty((), dtype=action_dtype(n_actions)).element_size(), "reward": 4,
             "terminated": 1}
    if state_key_words:
        sizes["state_keys"] = 4 * state_key_words
    return sizes


def worst_case_slots(capacity: int, max_t: int) -> int:
    """Slots the store can grow to: every episode at the limit, plus one episode of slack and the zero slot."""
    return (capacity + 1) * (max_t + 1) + FIRST_SLOT


def grown_slots(current: int, needed: int, worst: int) -> int:
    """The size after a growth of a store of ``current`` slots that needs ``needed`` (capped at ``worst``)."""
    return min(worst, max(int(GROWTH * (current - FIRST_SLOT)), needed) + FIRST_SLOT)


class EpisodeReplayBuffer:
    """Holds up to ``capacity`` episodes of at most ``max_t`` steps, storing only their real steps.

    ``nbytes`` is what the store holds now, ``worst_case_nbytes`` what it can grow to. Oldest episodes
    are evicted first.
    """

    def __init__(
        self, *, capacity: int, max_t: int, n_agents: int, obs_dim: int, state_dim: int, n_actions: int,
        device: torch.device | str = "cpu", state_key_words: int = 0, store_dtype: str = "float32",
    ) -> None:
        """``state_key_words`` > 0 (D, a run with episodic memory) keeps each slot's ``state_keys`` too."""
        if capacity <= 0 or max_t <= 0:
            raise ValueError(f"capacity={capacity}, max_t={max_t}: expected positive sizes")
        if store_dtype not in STORE_DTYPES:
            raise ValueError(f"store_dtype={store_dtype!r}: expected one of {', '.join(STORE_DTYPES)}")
        self.capacity, self.max_t = capacity, max_t
        self.n_agents, self.obs_dim, self.state_dim, self.n_actions = n_agents, obs_dim, state_dim, n_actions
        self.state_key_words, self.store_dtype = state_key_words, store_dtype
        self.device = torch.device(device)
        float_dtype = STORE_DTYPES[store_dtype]
        # Per field: the shape of one slot and the storage type.
        self._layout: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
            "obs": ((n_agents, obs_dim), float_dtype), "state": ((state_dim,), float_dtype),
            "avail": ((n_agents, n_actions), torch.bool), "actions": ((n_agents,), action_dtype(n_actions)),
            "reward": ((), torch.float32), "terminated": ((), torch.bool),
        }
        if state_key_words:
            self._layout["state_keys"] = ((state_key_words,), torch.int32)
        self.worst_slots = worst_case_slots(capacity, max_t)
        self.offset = torch.zeros(capacity, dtype=torch.int64)
        self.length = torch.zeros(capacity, dtype=torch.int64)
        self.insert_pos = 0
        self.size = 0
        self._clear(self._initial_slots())

    def _initial_slots(self) -> int:
        return min(self.worst_slots, FIRST_SLOT + 2 * (self.max_t + 1))

    def _clear(self, n_slots: int) -> None:
        """An empty store of ``n_slots`` slots (only the zero slot is zeroed: the rest is written before it is read)."""
        self.store = {name: torch.empty((n_slots, *shape), dtype=dtype, device=self.device)
                      for name, (shape, dtype) in self._layout.items()}
        for value in self.store.values():
            value[ZERO_SLOT] = 0
        self.head = FIRST_SLOT  # the next free slot
        self.wrapped = False  # whether the newest episodes lie below the oldest (placed from slot 1 again)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    @property
    def n_slots(self) -> int:
        return int(self.store["reward"].shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes the store and its index hold now."""
        return sum(v.nbytes for v in self.store.values()) + self.offset.nbytes + self.length.nbytes

    @property
    def worst_case_nbytes(self) -> int:
        """Bytes the store can grow to (every episode at the limit), not counting a growth's transient copy."""
        per_slot = sum(v[0].nbytes for v in self.store.values())
        return self.worst_slots * per_slot + self.offset.nbytes + self.length.nbytes

    # ----- ring bookkeeping -------------------------------------------------------------------------------------

    def _oldest(self) -> int:
        """Ring position of the oldest stored episode."""
        return self.insert_pos if self.size == self.capacity else (self.insert_pos - self.size) % self.capacity

    def _tail(self) -> int:
        """First slot of the oldest stored episode (the end of the free room of a wrapped ring)."""
        return int(self.offset[self._oldest()])

    def _evict_oldest(self) -> None:
        self.size -= 1
        if self.size == 0:
            self.head, self.wrapped = FIRST_SLOT, False
        elif self.wrapped and self._tail() < int(self.offset[(self._oldest() - 1) % self.capacity]):
            self.wrapped = False  # the episodes above the wrap are all gone

    def _place(self, n: int) -> int:
        """First slot of room for ``n`` consecutive slots (growing the store when there is none)."""
        if self.size == 0:
            self.head, self.wrapped = FIRST_SLOT, False
        if not self.wrapped:
            if self.head + n <= self.n_slots:
                return self.head
            if self.size and FIRST_SLOT + n <= self._tail():
                self.wrapped = True
                return FIRST_SLOT
        elif self.head + n <= self._tail():
            return self.head
        self._grow(n)
        return self.head

    def _live_order(self) -> torch.Tensor:
        """Ring positions of the stored episodes, oldest first."""
        return (self._oldest() + torch.arange(self.size)) % self.capacity

    def _live_slots(self, order: torch.Tensor) -> torch.Tensor:
        """The slots of the episodes at ring positions ``order``, one episode after another."""
        starts, counts = self.offset[order], self.length[order] + 1
        first = torch.cumsum(counts, 0) - counts
        return torch.repeat_interleave(starts - first, counts) + torch.arange(int(counts.sum()))

    def _grow(self, n: int) -> None:
        """Copy the live episodes, oldest first, into a larger store with room for ``n`` more slots."""
        order = self._live_order()
        slots = self._live_slots(order).to(self.device)
        used = int(slots.numel())
        size = grown_slots(self.n_slots, used + n, self.worst_slots)
        assert size >= FIRST_SLOT + used + n, "the worst case always has room"
        for name, old in list(self.store.items()):  # one field at a time: the transient is one field's old copy
            new = torch.empty((size, *old.shape[1:]), dtype=old.dtype, device=self.device)
            new[ZERO_SLOT] = 0
            new[FIRST_SLOT: FIRST_SLOT + used] = old[slots]
            self.store[name] = new
            del old
        counts = self.length[order] + 1
        self.offset[order] = FIRST_SLOT + torch.cumsum(counts, 0) - counts
        self.head, self.wrapped = FIRST_SLOT + used, False

    # ----- insert and sample ------------------------------------------------------------------------------------

    def insert(self, batch: EpisodeBatch) -> None:
        """Copy the real slots of ``batch`` (B episodes, time axis <= max_t) in, evicting the oldest episodes.

        A buffer that keeps state keys needs ``batch.state_keys``; one that does not ignores them.
        """
        t = batch.max_t
        if t > self.max_t:
            raise ValueError(f"episodes of {t} steps do not fit a buffer of max_t={self.max_t}")
        if "state_keys" in self.store and batch.state_keys is None:
            raise ValueError("this buffer keeps state keys: set batch.state_keys = memory.slot_state_keys(batch) "
                             "(as an int32 tensor) before inserting")
        lengths = [int(x) for x in batch.length]
        fields = {name: getattr(batch, name) for name in self.store}
        if self.device.type == "cuda" and all(value.device.type == "cpu" for value in fields.values()):
            fields = packed_copy(fields, self.device)  # the batch crosses to the GPU once, not once per episode and field
        for i, length in enumerate(lengths):
            pos = self.insert_pos
            if self.size == self.capacity:
                self._evict_oldest()
            start = self._place(length + 1)
            self.offset[pos], self.length[pos] = start, length
            self.head = start + length + 1
            self.insert_pos = (pos + 1) % self.capacity
            self.size += 1
            for name, dst in self.store.items():
                src = fields[name][i]
                steps = length + 1 if name in SLOT_FIELDS else length
                dst[start: start + steps] = src[:steps].to(self.device, dst.dtype)

    def can_sample(self, batch_size: int) -> bool:
        return self.size >= batch_size

    def _gather(self, idx: torch.Tensor, t: int | None = None) -> EpisodeBatch:
        """The episodes at ring positions ``idx`` as a padded batch of ``t`` steps (the longest of them by default).

        On a device other than the CPU only the episodes' starts and lengths (2 x B integers) cross, in one copy:
        the slot indices, the gather and the batch are computed where the store is.
        """
        length, start = self.length[idx], self.offset[idx]
        if t is None:
            t = int(length.max())
        if self.device.type != "cpu":
            start, length = torch.stack([start, length]).to(self.device)
        filled = _real(length, t, slots=False)  # [B, t]
        first = start[:, None] + torch.arange(t + 1, device=self.device)[None, :]  # [B, t+1]
        slot = torch.where(_real(length, t + 1, slots=True), first, ZERO_SLOT)
        step = torch.where(filled, first[:, :t], ZERO_SLOT)
        out = {name: value[slot if name in SLOT_FIELDS else step] for name, value in self.store.items()}
        return EpisodeBatch(
            obs=out["obs"].float(), state=out["state"].float(), avail=out["avail"], actions=out["actions"].long(),
            reward=out["reward"], terminated=out["terminated"], filled=filled, length=length,
            state_keys=out.get("state_keys"),
        )

    def sample(self, batch_size: int, generator: torch.Generator) -> EpisodeBatch:
        """``batch_size`` distinct episodes drawn uniformly, cut to the longest sampled episode, padded with zeros."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes from a buffer holding {self.size}")
        idx = torch.randperm(self.size, generator=generator)[:batch_size]
        return self._gather(idx)

    def stored(self, first: int = 0, last: int | None = None) -> EpisodeBatch:
        """The stored episodes at ring positions ``first``..``last`` - 1 (default: all) padded to ``max_t``, a copy:
        [n, max_t + 1, ...]."""
        last = self.size if last is None else min(last, self.size)
        return self._gather(torch.arange(first, last), self.max_t)

    @property
    def data(self) -> EpisodeBatch:
        """``stored()``: the ``size`` stored episodes, padded to [size, max_t + 1, ...] in ring order (a copy)."""
        return self.stored()

    # ----- checkpoints ------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The stored episodes' real slots, packed (CPU tensors): ``length`` [size], then per field the real
        slots of ring position 0, 1, ... (``obs`` [sum(length + 1), A, O], ``actions`` [sum(length), A], ...),
        in fixed types (float32 observations and states, int64 actions), so a checkpoint reads the same whatever
        the store's types.

        ``filled`` is not stored (it is ``t < length``), nor the state keys (a function of the states,
        rebuilt with ``set_state_keys``).
        """
        order = torch.arange(self.size)
        length = self.length[: self.size].clone()
        state: dict[str, Any] = {"insert_pos": self.insert_pos, "size": self.size, "layout": PACKED, "length": length}
        slots = self._live_slots(order)
        # The step fields: every slot of an episode but its last.
        last = torch.cumsum(length + 1, 0) - 1
        keep = torch.ones(slots.numel(), dtype=torch.bool)
        keep[last] = False
        steps = slots[keep]
        for name in PACKED_FIELDS:
            value = self.store[name][(slots if name in SLOT_FIELDS else steps).to(self.device)].cpu()
            state[name] = value.float() if name in ("obs", "state") else value.long() if name == "actions" else value
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``state_dict``; a state without the PACKED layout holds padded fields [capacity, max_t + 1, ...],
        of which the first ``size`` episodes' real slots are kept. A buffer that keeps state keys then needs
        ``set_state_keys``."""
        size = int(state["size"])
        if state.get("layout") == PACKED:
            length = state["length"].to(torch.int64)
            fields = {name: state[name] for name in PACKED_FIELDS}
        else:  # padded tensors [capacity, max_t + 1, ...]: keep the real slots
            length = state["length"][:size].to(torch.int64)
            fields = {}
            for name in PACKED_FIELDS:
                value = state[name][:size]
                fields[name] = value[_real(length, value.shape[1], slots=name in SLOT_FIELDS)]
        self.insert_pos = int(state["insert_pos"])
        counts = length + 1
        used = int(counts.sum())
        self._clear(max(self._initial_slots(), FIRST_SLOT + used))  # compacted: the next insert grows it
        self.offset.zero_()
        self.length.zero_()
        self.length[:size] = length
        self.size = size
        order = self._live_order()  # oldest first from slot 1: the ring is not wrapped
        self.offset[order] = FIRST_SLOT + torch.cumsum(counts[order], 0) - counts[order]
        self.head = FIRST_SLOT + used
        slots = self._live_slots(torch.arange(size))  # the packed fields are by ring position
        last = torch.cumsum(counts, 0) - 1
        keep = torch.ones(used, dtype=torch.bool)
        keep[last] = False
        for name in PACKED_FIELDS:
            dst = self.store[name]
            where = (slots if name in SLOT_FIELDS else slots[keep]).to(self.device)
            dst[where] = fields[name].to(self.device, dst.dtype)

    def set_state_keys(self, state_keys: torch.Tensor) -> None:
        """The state keys of the stored episodes [size, T+1, D] (after ``load_state_dict``); padding is ignored."""
        assert "state_keys" in self.store, "this buffer keeps no state keys"
        order = torch.arange(self.size)
        slots = self._live_slots(order).to(self.device)
        real = _real(self.length[: self.size], state_keys.shape[1], slots=True)
        self.store["state_keys"][slots] = state_keys[real.to(state_keys.device)].to(self.device, torch.int32)


def packed_nbytes(*, n_agents: int, obs_dim: int, state_dim: int, n_actions: int, slots: int, episodes: int) -> int:
    """Bytes of ``state_dict``'s packed copy of ``episodes`` stored episodes holding ``slots`` real slots (their steps
    plus one each): float32 observations and states and bool masks per slot, int64 actions, float32 reward and bool
    terminated per step, an int64 length per episode (``state_dict``'s fixed types, whatever the store's)."""
    per_slot = 4 * (n_agents * obs_dim + state_dim) + n_agents * n_actions
    per_step = 8 * n_agents + 4 + 1
    return slots * per_slot + (slots - episodes) * per_step + 8 * episodes


def growth_transient_bytes(field_bytes: dict[str, int], old_slots: int) -> int:
    """Most bytes a growth from ``old_slots`` holds beyond the new store: the old copy of its largest field."""
    return max(field_bytes.values()) * old_slots
