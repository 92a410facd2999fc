"""SEM and SAEM, the episodic memories of Ma & Li (2021): exact tables of the highest return, keyed on phi(s) = V s.

Paper: "State-based Episodic Memory for Multi-Agent Reinforcement Learning" (Ma & Li, 2021), sections 4-5 and
Algorithm 1. Everything SEM does is in this file, in the order a run meets it:

    phi(s) = V s                    ``EpisodicMemory.project`` (V [D, F] ~ N(0, 1) from the run seed; bit-exact)
    (phi(s_t), R_t) -> M            ``EpisodicMemory.update_from`` (the pending set M, every real step stored)
    M -> Q^S, per-key max (eq. 5)   ``EpisodicMemory.flush`` once M holds |M| env steps (the table:
                                    semzoo.episodic.hash_table, open addressing with LFU eviction)
    lookup                          ``EpisodicMemory.lookup_batch``: one batched probe of phi(s_{t+1})
    E (eq. 7) and the miss rule     ``next_state_target``: E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1})), y_t on a miss

``SEMTable`` is registered as "sem". ``SAEMTable`` ("saem") is the variant with the joint action in the key
(phi(s), u) and E_t = Q^SA(phi(s_t), u_t) (eq. 4). Both answer the ``Memory`` hooks of semzoo.episodic.memory.
Layout, determinism and eviction rules: docs/memory.md; their bytes: semzoo.episodic.plans and cost.

Shapes: B = episodes, T = episode limit, F = state size, D = projection size, A = agents, K = number of keys,
W = 32-bit words per key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from semzoo.episodic.hash_table import MAX_CAPACITY, LFUKeyTable, TableUsage
from semzoo.episodic.memory import BUILTIN_DESCRIPTIONS, Memory, memory_class, register_memory
from semzoo.episodic.plans import (
    ACTION_ID_LIMIT,
    TABLE_LAYOUTS,
    lfu_table_bytes,
    saem_key_words,
    sem_key_words,
    table_memory_bytes,
)
from semzoo.episodic.returns import discounted_returns, to_numpy
from semzoo.episodic.target import EpisodicTarget, TableLookup
from semzoo.types import EpisodeBatch

if TYPE_CHECKING:
    from semzoo.episodic.setup import MemorySetup
    from semzoo.types import CleanBatch

def project_fixed_order(projection_DF: np.ndarray, states_KF: np.ndarray) -> np.ndarray:
    """V s for states [K, F] (float32 values): float64 [D, K], bit-identical whatever batch, layout or device.

    Every product V[d, f] s[f] is formed in float64 and accumulated in the fixed order f = 0..F-1 with
    elementwise numpy ops (no BLAS: its summation order depends on shapes). SEM's phi(s) and EMC's z = M s.
    """
    states_FK = np.ascontiguousarray(states_KF.astype(np.float32).T, dtype=np.float64)
    acc_DK = np.zeros((projection_DF.shape[0], states_FK.shape[1]))
    term_DK = np.empty_like(acc_DK)
    for f in range(states_FK.shape[0]):  # a loop over state features, not keys
        np.multiply(projection_DF[:, f, None], states_FK[f], out=term_DK)
        acc_DK += term_DK
    return acc_DK


def next_state_target(lookup: TableLookup, clean: CleanBatch, next_value_BT: torch.Tensor, gamma: float,
                      miss_rule: str) -> EpisodicTarget:
    """SEM's E (eq. 7) with the paper's miss rule, from the table's answers for s_{t+1} (tensor ops only):

        E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1}))   where the table holds s_{t+1}
        E_t = r_t + gamma (1 - term_t) V(t+1) = y_t         on a miss: V(t+1) = max_u Q_tot(tau_{t+1}, u; theta^-)

    A real end needs no table (E = r), so it counts as answered. The memory term applies at every real step
    (miss rule "target", the paper) or at the answered ones ("zero", EMC). Shared by SEM's table and the
    own-return ablation ``mc`` (semzoo.episodic.own_return), which must agree.
    """
    with torch.no_grad():
        e_BT = clean.bootstrapped(torch.where(lookup.hit_BT, lookup.values_BT, next_value_BT), gamma)
    real_BT = clean.mask.bool()
    answered_BT = real_BT & (lookup.hit_BT | (clean.terminated > 0))
    applies_BT = real_BT if miss_rule == "target" else answered_BT
    return EpisodicTarget(e_BT=e_BT, applies_BT=applies_BT.float(), answered_BT=answered_BT.float(),
                          hit_rate=lookup.hit_rate)


class EpisodicMemory(Memory, ABC):
    """Episodic memory table of highest discounted returns, keyed exactly on projected states.

    Keys are uint32 words [..., W]: the float32 bits of phi(s) = V s
    (V [D, F] ~ N(0, 1) from `seed`), then, for SAEM, the joint action.
    Pairs (key, R_t) wait in a pending set M and enter the table, per-key
    max, once M holds `pending_size` env steps (paper eq. 5, Algorithm 1).

    The ``Memory`` hooks (semzoo.episodic.memory): the state keys phi(s) are cached per stored slot
    (``state_key_words`` = D); ``on_store`` feeds M; ``lookup_batch`` probes the table (SEM at phi(s_{t+1}), SAEM
    at (phi(s_t), u_t)); ``combine_target`` forms E (SEM's eq. 7 here, ``next_state_target``; SAEM's eq. 4 in
    ``SAEMTable``). A subclass gives the key layout (``key_words``, ``keys_from_state_keys``,
    ``joint_action_in_key``) and the cost model.
    """

    joint_action_in_key: ClassVar[bool] = False
    """SAEM's keys hold the joint action after phi(s); SEM's are phi(s) alone."""

    @property
    def kind(self) -> str:
        """The registered name ("sem", "saem"), saved in state_dict and checked on load."""
        return self.name

    def __init__(
        self,
        *,
        state_dim: int,
        n_agents: int,
        proj_dim: int = 4,
        capacity: int = 1_000_000,
        pending_size: int = 5000,
        gamma: float = 0.99,
        seed: int = 0,
    ) -> None:
        for name, value in (
            ("state_dim", state_dim),
            ("n_agents", n_agents),
            ("proj_dim", proj_dim),
            ("capacity", capacity),
            ("pending_size", pending_size),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive int")
        if capacity > MAX_CAPACITY:
            raise ValueError(
                f"capacity={capacity} exceeds the supported maximum {MAX_CAPACITY}; use a smaller table"
            )
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r} must lie in [0, 1]")
        self.state_dim = int(state_dim)
        self.n_agents = int(n_agents)
        self.proj_dim = int(proj_dim)
        self.pending_size = int(pending_size)
        self.gamma = float(gamma)
        self.seed = int(seed)
        self.projection_DF = np.random.default_rng(self.seed).standard_normal((self.proj_dim, self.state_dim))
        self._table = LFUKeyTable(int(capacity), self.key_words)
        self._pending_keys: list[np.ndarray] = []
        self._pending_returns: list[np.ndarray] = []
        self._pending_steps = 0
        self.usage = TableUsage()

    @classmethod
    def from_config(cls, setup: MemorySetup) -> EpisodicMemory:
        """The table of a run: D, capacity and |M| from ``setup.memory``, gamma and the seed of V from the run."""
        m = setup.memory
        return cls(state_dim=setup.state_dim, n_agents=setup.n_agents, proj_dim=m.proj_dim, capacity=m.capacity,
                   pending_size=m.pending_size, gamma=setup.gamma, seed=setup.seed)

    # ------------------------------------------------------------ cost model (semzoo.episodic.cost)
    @classmethod
    @abstractmethod
    def key_words_for(cls, proj_dim: int, n_agents: int) -> int:
        """W, 32-bit words per key of a table with projection size D and n agents."""

    @classmethod
    @abstractmethod
    def paper_n_tables(cls, n_agents: int, n_actions: int) -> int:
        """Tables the paper's layout needs (paper sec. 6): a Python int, exact for any size."""

    @classmethod
    def planned_nbytes(cls, setup: MemorySetup) -> int:
        """The table at its capacity and the projection V (``semzoo.episodic.plans.table_memory_bytes``)."""
        return table_memory_bytes(cls.key_words_for, setup)

    @classmethod
    def table_bytes(cls, n_agents: int, n_actions: int, *, capacity: int | float, proj_dim: int) -> int:
        """Bytes the table of ``capacity`` entries allocates (``nbytes`` of a memory built with these sizes).

        ValueError for a size that is not positive or more actions than a SAEM key holds.
        """
        return lfu_table_bytes(cls.key_words_for, n_agents, n_actions, capacity=capacity, proj_dim=proj_dim)

    @classmethod
    def planned_state_key_words(cls, setup: MemorySetup) -> int:
        return setup.memory.proj_dim  # state_key_words: the float32 bits of phi(s)

    # ------------------------------------------------------------ Memory hooks
    @property
    def state_key_words(self) -> int:
        return self.proj_dim

    def on_store(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None) -> None:
        """R_t of each real step into the pending set M; Q^S is written once M holds |M| steps."""
        self.update_from(batch, slot_state_keys)

    @torch.no_grad()
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> TableLookup:
        """Phase 1: one batched probe of the table for the steps of ``clean`` that read it.

        SEM reads Q^S(phi(s_{t+1})) at the real steps that did not end their episode; SAEM reads Q^SA(phi(s_t), u_t)
        at every real step. A read counts as an access for LFU eviction, so reading padding or the slot after a real
        end would keep junk entries alive. ``state_keys_BSD`` is the batch's ``EpisodeBatch.state_keys`` ([B,T+1,D]
        int32, the bits of phi(s) of every real slot, projected when the episode was stored); without it the states
        are projected here.
        """
        query_BT = clean.mask.cpu().numpy() > 0
        if not self.joint_action_in_key:
            query_BT &= clean.terminated.cpu().numpy() == 0
        episode_K, step_K = np.nonzero(query_BT)  # row-major order, as a boolean mask gathers
        slot_K = step_K if self.joint_action_in_key else step_K + 1  # SEM's key is the next state's
        if state_keys_BSD is None:
            keys_KW = self.state_keys(clean.state.cpu().numpy()[episode_K, slot_K])
        else:
            keys_KW = state_keys_BSD.cpu().numpy()[episode_K, slot_K].view(np.uint32)
        if self.joint_action_in_key:
            keys_KW = self.keys_from_state_keys(keys_KW, clean.actions.cpu().numpy()[episode_K, step_K])
        values_K, hits_K, merged_K = self._table.lookup_merged(keys_KW)
        self.usage.looked_up(hits_K, merged_K)
        values_BT = np.zeros(query_BT.shape, np.float32)
        values_BT[query_BT] = values_K
        hit_BT = np.zeros(query_BT.shape, bool)
        hit_BT[query_BT] = hits_K
        like = clean.reward
        return TableLookup(values_BT=torch.from_numpy(values_BT).to(device=like.device, dtype=like.dtype),
                           hit_BT=torch.from_numpy(hit_BT).to(like.device),
                           hit_rate=torch.tensor(float(np.mean(hits_K)) if len(hits_K) else 0.0, dtype=torch.float64))

    def combine_target(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       *, gamma: float, miss_rule: str) -> EpisodicTarget:
        """Phase 2: SEM's E (eq. 7, ``next_state_target``), a constant target like y (tensor ops only).

        ``y_BT`` and ``next_value_BT`` ([B,T]) are the learner's TD target and bootstrap value V(t+1),
        with y_t = r_t + gamma (1 - term_t) V(t+1).
        """
        return next_state_target(lookup, clean, next_value_BT, gamma, miss_rule)

    def metrics(self) -> dict[str, float]:
        return {"memory_entries": float(self.n_entries), "memory_bytes": float(self.nbytes),
                "memory_pending_steps": float(self.pending_steps), **self.usage.metrics()}

    # ------------------------------------------------------------ keys
    @property
    @abstractmethod
    def key_words(self) -> int:
        """32-bit words per key (W)."""

    def keys(self, states: Any, actions: Any = None) -> np.ndarray:
        """Exact table keys: states [..., F] (actions [..., A]) -> uint32 [..., W]."""
        return self.keys_from_state_keys(self.state_keys(states), actions)

    @abstractmethod
    def keys_from_state_keys(self, state_keys: np.ndarray, actions: Any = None) -> np.ndarray:
        """Table keys from the states' keys ``state_keys(states)`` [..., D] (and actions [..., A]): uint32 [..., W]."""

    def state_keys(self, states: Any) -> np.ndarray:
        """The state's part of a key, the float32 bits of phi(s): states [..., F] -> uint32 [..., D]."""
        return self.project(states).view(np.uint32)

    def slot_state_keys(self, batch: EpisodeBatch) -> np.ndarray:
        """``state_keys`` of every real slot of a batch (t <= length: its steps and the state after the last).

        state [B, T+1, F] -> uint32 [B, T+1, D], zero on the other slots. Projected once when a batch is
        stored (semzoo.run.trainer), so that an update's lookup only probes the table (docs/memory.md).
        """
        state = to_numpy(batch.state)
        length = to_numpy(batch.length)
        if state.ndim != 3 or state.shape[0] != length.shape[0]:
            raise ValueError(f"batch.state has shape {tuple(state.shape)}, expected [B, T+1, F] with B = "
                             f"{length.shape[0]} from batch.length")
        real_BS = np.arange(state.shape[1])[None, :] <= length[:, None]
        keys_BSD = np.zeros((*state.shape[:2], self.proj_dim), np.uint32)
        keys_BSD[real_BS] = self.state_keys(state[real_BS])
        return keys_BSD

    def project(self, states: Any) -> np.ndarray:
        """Random projection phi(s) = V s: states [..., F] -> float32 [..., D].

        Bit-identical for a state whatever batch, layout or device it comes in:
        the state is rounded to float32, then every product V[d, f] s[f] is
        formed in float64 and accumulated in the fixed order f = 0..F-1 with
        elementwise numpy ops (no BLAS: its summation order depends on shapes),
        and the sum is rounded to float32.
        """
        states_np = to_numpy(states)
        if states_np.ndim < 1 or states_np.shape[-1] != self.state_dim:
            raise ValueError(
                f"states have shape {tuple(states_np.shape)} but this memory expects [..., {self.state_dim}] "
                f"(state_dim={self.state_dim}); pass EpisodeBatch.state or build the memory with the env's state size"
            )
        lead = states_np.shape[:-1]
        acc_DK = project_fixed_order(self.projection_DF, states_np.reshape(-1, self.state_dim))
        return acc_DK.T.astype(np.float32).reshape(*lead, self.proj_dim)

    def _check_keys(self, keys: Any) -> np.ndarray:
        keys_np = to_numpy(keys)
        if keys_np.dtype != np.uint32:
            raise TypeError(f"keys have dtype {keys_np.dtype}, expected uint32; build them with memory.keys(...)")
        if keys_np.ndim < 1 or keys_np.shape[-1] != self.key_words:
            raise ValueError(
                f"keys have shape {tuple(keys_np.shape)}, expected [..., {self.key_words}]; "
                "build them with memory.keys(...) of this memory"
            )
        return keys_np

    # ------------------------------------------------------------ table ops
    def add(self, keys: Any, returns: Any) -> None:
        """Write returns [...] for keys [..., W] into the table, per-key max (eq. 5)."""
        keys_np = self._check_keys(keys)
        returns_np = to_numpy(returns).astype(np.float32)
        if returns_np.shape != keys_np.shape[:-1]:
            raise ValueError(
                f"returns have shape {tuple(returns_np.shape)}, expected {tuple(keys_np.shape[:-1])} "
                "(one return per key)"
            )
        if not np.isfinite(returns_np).all():
            raise ValueError("returns contain NaN or inf; mask padding steps before adding")
        flat_KW = keys_np.reshape(-1, self.key_words)
        self.usage.wrote(flat_KW.shape[0], self._table.upsert_max(flat_KW, returns_np.reshape(-1)))

    def lookup(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """Stored returns for keys [..., W]: (values float32 [...], hit bool [...]).

        A miss gives MISS_VALUE; each hit counts as an access for eviction.
        """
        values, hit, _ = self.lookup_merged(keys)
        return values, hit

    def lookup_merged(self, keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``lookup`` and whether each hit entry holds more than one visit (bool [...], false on a miss)."""
        keys_np = self._check_keys(keys)
        values_K, hit_K, merged_K = self._table.lookup_merged(keys_np.reshape(-1, self.key_words))
        lead = keys_np.shape[:-1]
        return values_K.reshape(lead), hit_K.reshape(lead), merged_K.reshape(lead)

    def query(self, states: Any, actions: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """lookup(keys(states, actions)): (values float32 [...], hit bool [...])."""
        return self.lookup(self.keys(states, actions))

    # ------------------------------------------------------------ pending set M
    def update_from(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None = None) -> None:
        """Add (key of step t, R_t) for every real step of the batch to M; flush when full.

        state [B, T+1, F], actions [B, T, A], reward [B, T], filled [B, T]. The
        slot after the last step and padding are never written. ``slot_state_keys``
        is the batch's ``slot_state_keys(batch)`` when the caller has it already.
        """
        state = to_numpy(batch.state)
        filled = to_numpy(batch.filled).astype(bool)
        n_steps = filled.shape[1]
        if state.ndim != 3 or state.shape[:2] != (filled.shape[0], n_steps + 1):
            raise ValueError(
                f"batch.state has shape {tuple(state.shape)}, expected [B, T+1, F] = "
                f"[{filled.shape[0]}, {n_steps + 1}, {self.state_dim}] from filled {tuple(filled.shape)}"
            )
        returns_BT = discounted_returns(batch.reward, filled, self.gamma)
        actions = to_numpy(batch.actions)
        if slot_state_keys is None:
            step_keys = self.state_keys(state[:, :n_steps][filled])
        else:
            step_keys = np.asarray(slot_state_keys)[:, :n_steps][filled]
        keys_KW = self.keys_from_state_keys(step_keys, actions[filled] if self.joint_action_in_key else None)
        self._pending_keys.append(keys_KW)
        self._pending_returns.append(returns_BT[filled])
        self._pending_steps += int(filled.sum())
        if self._pending_steps >= self.pending_size:
            self.flush()

    def flush(self) -> None:
        """Write the pending set M into the table (per-key max) and empty it."""
        if self._pending_keys:
            keys_KW = np.concatenate(self._pending_keys)
            self.usage.wrote(keys_KW.shape[0], self._table.upsert_max(keys_KW, np.concatenate(self._pending_returns)))
        self._pending_keys, self._pending_returns, self._pending_steps = [], [], 0

    # ------------------------------------------------------------ properties
    @property
    def n_entries(self) -> int:
        return self._table.n_entries

    @property
    def capacity(self) -> int:
        return self._table.capacity

    @property
    def nbytes(self) -> int:
        """Bytes allocated for the table (keys, values, counters, index)."""
        return self._table.nbytes

    @property
    def pending_steps(self) -> int:
        return self._pending_steps

    # ------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "state_dim": self.state_dim,
            "n_agents": self.n_agents,
            "proj_dim": self.proj_dim,
            "capacity": self.capacity,
            "pending_size": self.pending_size,
            "gamma": self.gamma,
            "seed": self.seed,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: config, V, table, counters, pending set (numpy / python)."""
        pending_keys = (
            np.concatenate(self._pending_keys) if self._pending_keys else np.zeros((0, self.key_words), np.uint32)
        )
        pending_returns = (
            np.concatenate(self._pending_returns) if self._pending_returns else np.zeros(0, np.float32)
        )
        table = self._table
        return {
            **self._config(),
            "projection": self.projection_DF.copy(),
            "table_keys": table.key_NWL.copy(),
            "table_values": table.value_NL.copy(),
            "table_meta": table.meta_NL.copy(),
            "table_overflow": table.overflow_N.copy(),
            **self.usage.state_dict(),
            "n_entries": table.n_entries,
            "tick": table.tick,
            "pending_keys": pending_keys,
            "pending_returns": pending_returns,
            "pending_steps": self._pending_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from state_dict(); scalars may come back as 0-d arrays (np.savez)."""
        for name, expected in self._config().items():
            given = state[name]
            given = str(given) if isinstance(expected, str) else type(expected)(np.asarray(given).item())
            if given != expected:
                raise ValueError(
                    f"state_dict has {name}={given!r} but this memory has {name}={expected!r}; "
                    "build the memory with the same arguments before loading"
                )
        table = self._table
        arrays: dict[str, np.ndarray] = {
            "projection": self.projection_DF,
            "table_keys": table.key_NWL,
            "table_values": table.value_NL,
            "table_meta": table.meta_NL,
            "table_overflow": table.overflow_N,
        }
        for name, current in arrays.items():
            given = np.asarray(state[name])
            if given.shape != current.shape or given.dtype != current.dtype:
                raise ValueError(
                    f"state_dict[{name!r}] has {given.dtype} {given.shape}, expected {current.dtype} {current.shape}"
                )
            current[...] = given
        self.usage = TableUsage.from_state(state)
        table.n_entries = int(np.asarray(state["n_entries"]).item())
        table.tick = int(np.asarray(state["tick"]).item())
        pending_keys = np.asarray(state["pending_keys"], dtype=np.uint32).reshape(-1, self.key_words)
        pending_returns = np.asarray(state["pending_returns"], dtype=np.float32).reshape(-1)
        self._pending_keys = [pending_keys] if pending_keys.size else []
        self._pending_returns = [pending_returns] if pending_returns.size else []
        self._pending_steps = int(np.asarray(state["pending_steps"]).item())


@register_memory("sem")
class SEMTable(EpisodicMemory):
    """State-based episodic memory Q^S: phi(s) -> highest discounted return from s (paper sec. 5).

    E_t = r_t + gamma (1 - term_t) Q^S(phi(s_{t+1})) (eq. 7); on a miss Q^S(s_{t+1}) is replaced by the
    learner's bootstrap value V(t+1), so E_t = y_t.
    """

    description = BUILTIN_DESCRIPTIONS["sem"]

    @property
    def key_words(self) -> int:
        return sem_key_words(self.proj_dim)

    @classmethod
    def key_words_for(cls, proj_dim: int, n_agents: int) -> int:
        return TABLE_LAYOUTS["sem"].key_words(proj_dim, n_agents)

    @classmethod
    def paper_n_tables(cls, n_agents: int, n_actions: int) -> int:
        return TABLE_LAYOUTS["sem"].paper_n_tables(n_agents, n_actions)  # one table

    def keys_from_state_keys(self, state_keys: np.ndarray, actions: Any = None) -> np.ndarray:
        """The key is the state's key, the float32 bits of phi(s): uint32 [..., D]."""
        if actions is not None:
            raise ValueError("SEM keys use the state only; call keys(states) with actions=None (SAEM takes actions)")
        return state_keys


@register_memory("saem")
class SAEMTable(EpisodicMemory):
    """State-and-action episodic memory Q^SA: (phi(s), u) -> highest return (paper sec. 4).

    One shared table of fixed capacity instead of the paper's |U|^n tables;
    the joint action is part of the key, 16 bits per agent. E_t = Q^SA(phi(s_t), u_t) (eq. 4), y_t on a miss.
    """

    description = BUILTIN_DESCRIPTIONS["saem"]
    joint_action_in_key = True

    @property
    def key_words(self) -> int:
        return saem_key_words(self.proj_dim, self.n_agents)

    @classmethod
    def key_words_for(cls, proj_dim: int, n_agents: int) -> int:
        return TABLE_LAYOUTS["saem"].key_words(proj_dim, n_agents)

    @classmethod
    def paper_n_tables(cls, n_agents: int, n_actions: int) -> int:
        return TABLE_LAYOUTS["saem"].paper_n_tables(n_agents, n_actions)  # one table per joint action

    def combine_target(self, lookup: TableLookup, clean: CleanBatch, y_BT: torch.Tensor, next_value_BT: torch.Tensor,
                       *, gamma: float, miss_rule: str) -> EpisodicTarget:
        """Phase 2: SAEM's E (eq. 4): E_t = Q^SA(phi(s_t), u_t) where the table holds the pair, y_t on a miss."""
        with torch.no_grad():
            e_BT = torch.where(lookup.hit_BT, lookup.values_BT, y_BT)
        real_BT = clean.mask.bool()
        answered_BT = real_BT & lookup.hit_BT
        applies_BT = real_BT if miss_rule == "target" else answered_BT
        return EpisodicTarget(e_BT=e_BT, applies_BT=applies_BT.float(), answered_BT=answered_BT.float(),
                              hit_rate=lookup.hit_rate)

    def _joint_actions(self, actions: Any, of: tuple[int, ...], what: str) -> np.ndarray:
        """``actions`` as numpy, checked to be [..., n_agents] for the states (or state keys) of shape ``of``."""
        if actions is None:
            raise ValueError("SAEM keys need the joint action: call keys(states, actions) with actions [..., n_agents]")
        actions_np = to_numpy(actions)
        expected = (*of[:-1], self.n_agents)
        if tuple(actions_np.shape) != expected:
            raise ValueError(
                f"actions have shape {tuple(actions_np.shape)}, expected {expected} "
                f"for {what} {tuple(of)} and n_agents={self.n_agents}"
            )
        return actions_np

    def keys(self, states: Any, actions: Any = None) -> np.ndarray:
        """states [..., F], actions [..., A] int -> uint32 [..., D + ceil(A / 2)]."""
        states_np = to_numpy(states)
        self._joint_actions(actions, states_np.shape, "states")  # before projecting: the error names the states
        return self.keys_from_state_keys(self.state_keys(states_np), actions)

    def keys_from_state_keys(self, state_keys: np.ndarray, actions: Any = None) -> np.ndarray:
        """phi(s)'s bits [..., D] then the action ids [..., A], 16 bits each: uint32 [..., D + ceil(A / 2)]."""
        actions_np = self._joint_actions(actions, state_keys.shape, "state keys")
        if not np.issubdtype(actions_np.dtype, np.integer):
            raise TypeError(f"actions have dtype {actions_np.dtype}, expected integer action ids")
        if actions_np.size and (actions_np.min() < 0 or actions_np.max() >= ACTION_ID_LIMIT):
            raise ValueError(
                f"action ids span [{actions_np.min()}, {actions_np.max()}], expected ids in [0, {ACTION_ID_LIMIT})"
            )
        ids = actions_np.astype(np.uint16).reshape(-1, self.n_agents)
        if self.n_agents % 2:
            ids = np.concatenate([ids, np.zeros((ids.shape[0], 1), np.uint16)], axis=1)
        n_action_words = self.key_words - self.proj_dim
        action_words = np.ascontiguousarray(ids).view(np.uint32).reshape(*state_keys.shape[:-1], n_action_words)
        return np.concatenate([state_keys, action_words], axis=-1)


def make_episodic_memory(kind: str, **kwargs: Any) -> EpisodicMemory:
    """Build the registered table memory ``kind`` ("sem", "saem", ...) with EpisodicMemory's keyword arguments."""
    cls = memory_class(kind)
    if not issubclass(cls, EpisodicMemory):
        raise ValueError(f"memory {kind!r} is not a table keyed on phi(s) (an EpisodicMemory): build it with "
                         "semzoo.episodic.memory.make_memory(name, config, ...)")
    return cls(**kwargs)
