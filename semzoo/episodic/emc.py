"""EMC's episodic memory, registered as "emc": the highest return seen from the nearest stored state key.

Paper: Zheng et al., "Episodic Multi-agent Reinforcement Learning with Curiosity-driven Exploration",
NeurIPS 2021, sec. 4.2 (and sec. 4.1 for the curiosity, semzoo.episodic.curiosity). Shapes: B episodes,
T steps (T+1 slots), F state size, D key size (--proj-dim), K keys, N capacity.

    z(s)      = M s, M [D, F] ~ N(0, 1/D) fixed (from the run seed)
    H(z)      = max of the discounted returns R_t = sum_{i>=t} gamma^(i-t) r_i written at keys within the
                tolerance of z (numpy's allclose: |z - z'| <= atol + rtol |z| per dimension)
    E_t       = r_t + gamma (1 - term_t) H(z(s_{t+1}))               on a hit; E_t = r_t at a real end
    L_emc     = w sum_t hit_t (E_t - Q_tot(tau_t, u_t))^2 / sum_t m_t   (w = emc_loss_weight, m_t real steps)
    L         = L_td + L_emc, with the curiosity's r^i added to the TD target y when it is on

The hooks (semzoo.episodic.memory): ``slot_state_keys`` caches z of every real slot in the replay buffer
(D float32 words, their bits); ``on_store`` writes R_t of every real step of every episode (each episode
walked backwards, as EMC does); ``lookup_batch`` queries z(s_{t+1}) of every real non-terminal step in one
batched call of the nearest-key index (semzoo.episodic.nearest) and takes the curiosity's update;
``memory_losses`` gives L_emc (logged as ``loss_emc``) and ``combine_target`` nothing (no blend by lambda).

Checked against EMC's public code (kikojay/EMC: components/episodic_memory_buffer.py, modules/agents/
LRN_KNN.py, learners/qplex_curiosity_vdn_learner.py); what differs, and why:

- EMC writes only the first episode of each stored batch; here every episode.
- EMC writes every slot of the padded episode, padding and the state after the last step included (with
  return 0); here the real steps only. Its lookups of the state after a real end then hit that 0, so its
  target there is r_t: here a real end gets E_t = r_t without a lookup (and a time-limit end, a miss in
  general, no memory loss rather than a target built on the padding's 0).
- EMC answers lookups from a kd-tree rebuilt only at target-network updates, so entries written since are
  invisible; here every written entry answers at once.
- EMC looks keys up one at a time (nearest stored key, then the allclose test); here the nearest key
  among those within the tolerance, for a whole batch at once: the same answer unless two stored keys
  lie within the tolerance of a query, where EMC may miss.
- EMC's projection comes from a fixed numpy seed (123456); here from the run seed, so seeds differ.
- EMC stores returns in float64; here float32, like SEM's table.
- EMC on SMAC (config/algs/EMC_sc2.yaml) takes two gradient updates per collected episode (num_circle: 2;
  its target period of 200 then counts updates, so 100 episodes) on a QPLEX-Qatten base; semzoo's default is
  one update per episode on any base. ``--preset authors-smac`` gives an emc- algorithm the two updates and the
  target every 100 episodes, and emc-qplex the Qatten base too (semzoo.presets; docs/baselines.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from semzoo.episodic.curiosity import Curiosity, default_float_bytes
from semzoo.episodic.hash_table import TableUsage
from semzoo.episodic.memory import BUILTIN_DESCRIPTIONS, Memory, register_memory
from semzoo.episodic.nearest import NearestIndex
from semzoo.episodic.plans import emc_bytes
from semzoo.episodic.returns import discounted_returns
from semzoo.episodic.sem import project_fixed_order
from semzoo.episodic.settings import EMCSettings
from semzoo.episodic.target import scatter
from semzoo.episodic.tolerance import AllClose

if TYPE_CHECKING:
    from semzoo.episodic.setup import MemorySetup
    from semzoo.types import CleanBatch, EpisodeBatch, OnlineValues

PROJECTION_STREAM = 0xE3C
"""Spawn key of the projection M under the run seed."""
MAX_CAPACITY = (1 << 31) - 1
"""The nearest-key index numbers its slots with 32-bit ints."""
NO_HIT_RATE = float("nan")
"""The hit rate before the first lookup (not logged)."""
EMPTY_VALUE = -np.inf
"""A freshly added entry's value before the max with its returns."""


@dataclass(frozen=True)
class EMCLookup:
    """What the memory answers for a sampled batch: [B,T] tensors (0 / false where it was not asked) and the rate."""

    values_BT: torch.Tensor
    """H(z(s_{t+1})) where the index answered, 0 elsewhere (float)."""
    hit_BT: torch.Tensor
    """The episodic loss applies (bool): the index answered a real non-terminal step, or a real end (E = r)."""
    intrinsic_BT: torch.Tensor
    """The curiosity's reward r^i (0 on padding; all 0 when the curiosity is off)."""
    hit_rate: torch.Tensor
    """Hits / lookups of this batch (real non-terminal steps), 0-d float64; 0 if none."""


@register_memory("emc", settings=EMCSettings)
class EMCMemory(Memory):
    """EMC's memory of one run (module docstring): a nearest-key index of z = M s, the returns H, the curiosity."""

    description = BUILTIN_DESCRIPTIONS["emc"]

    def __init__(self, *, state_dim: int, proj_dim: int = 4, capacity: int = 1_000_000, gamma: float = 0.99,
                 seed: int = 0, loss_weight: float = 0.1, atol: float = 1e-8, rtol: float = 1e-5,
                 curiosity: Curiosity | None = None) -> None:
        for name, value in (("state_dim", state_dim), ("proj_dim", proj_dim), ("capacity", capacity)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"{name}={value!r}: expected a positive int")
        if capacity > MAX_CAPACITY:
            raise ValueError(f"capacity={capacity}: expected at most {MAX_CAPACITY} entries; lower --memory-capacity")
        self.state_dim, self.proj_dim, self.capacity = int(state_dim), int(proj_dim), int(capacity)
        self.gamma, self.seed, self.loss_weight = float(gamma), int(seed), float(loss_weight)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, PROJECTION_STREAM]))
        self.projection_DF = rng.normal(0.0, 1.0 / np.sqrt(self.proj_dim), (self.proj_dim, self.state_dim))
        self.index = NearestIndex(self.proj_dim, self.capacity, AllClose(atol=atol, rtol=rtol), eviction="lru")
        self.values_N = np.zeros(self.capacity, np.float32)
        self.merged_N = np.zeros(self.capacity, bool)
        self.usage = TableUsage()
        self.curiosity = curiosity
        self.uses_curiosity = curiosity is not None
        self.env_step_interval = curiosity.config.curiosity_decay_steps if curiosity is not None else 0
        self.last_hit_rate = NO_HIT_RATE

    @classmethod
    def from_config(cls, setup: MemorySetup) -> EMCMemory:
        """D and capacity from ``setup.memory``, the tolerance and loss weight from its settings ``emc``, the curiosity."""
        e = setup.settings("emc")
        return cls(state_dim=setup.state_dim, proj_dim=setup.memory.proj_dim, capacity=setup.memory.capacity,
                   gamma=setup.gamma, seed=setup.seed, loss_weight=e.emc_loss_weight, atol=e.emc_atol,
                   rtol=e.emc_rtol, curiosity=Curiosity.from_config(setup))

    @classmethod
    def planned_nbytes(cls, setup: MemorySetup) -> int:
        """The index and the returns at full capacity, M (float64) and the curiosity's networks and optimisers."""
        return emc_bytes(setup, word_bytes=default_float_bytes())

    @classmethod
    def planned_state_key_words(cls, setup: MemorySetup) -> int:
        return setup.memory.proj_dim  # the float32 bits of z = M s

    # ----- keys ----------------------------------------------------------------------------------------------

    def keys(self, states: Any) -> np.ndarray:
        """z = M s: states [..., F] -> float32 [..., D].

        The same bits for a state whatever batch it comes in: products formed in float64 and summed in the
        fixed order f = 0..F-1 (a BLAS product's order depends on the shapes), then rounded to float32.
        """
        states_np = states.detach().cpu().numpy() if isinstance(states, torch.Tensor) else np.asarray(states)
        if states_np.ndim < 1 or states_np.shape[-1] != self.state_dim:
            raise ValueError(f"states have shape {tuple(states_np.shape)}, expected [..., {self.state_dim}] "
                             f"(state_dim={self.state_dim}); pass EpisodeBatch.state of the env this memory was built for")
        lead = states_np.shape[:-1]
        z_DK = project_fixed_order(self.projection_DF, states_np.reshape(-1, self.state_dim))  # SEM's projection
        return z_DK.T.astype(np.float32).reshape(*lead, self.proj_dim)

    @property
    def state_key_words(self) -> int:
        return self.proj_dim

    def slot_state_keys(self, batch: EpisodeBatch) -> np.ndarray:
        """The bits of z of every real slot (t <= length), uint32 [B,T+1,D]; zero on the other slots."""
        state = batch.state.detach().cpu().numpy()
        real_BS = np.arange(state.shape[1])[None, :] <= batch.length.cpu().numpy()[:, None]
        keys_BSD = np.zeros((*state.shape[:2], self.proj_dim), np.float32)
        keys_BSD[real_BS] = self.keys(state[real_BS])
        return keys_BSD.view(np.uint32)

    # ----- writes --------------------------------------------------------------------------------------------

    def on_store(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None) -> None:
        """R_t of every real step of every episode, at z(s_t): each episode from its last step back, in batch order."""
        filled = batch.filled.cpu().numpy().astype(bool)
        n_steps = filled.shape[1]
        returns_BT = discounted_returns(batch.reward, filled, self.gamma)
        if slot_state_keys is None:
            keys_BTD = self.keys(batch.state[:, :n_steps])
        else:
            keys_BTD = np.asarray(slot_state_keys)[:, :n_steps].view(np.float32)
        episode_K, step_K = np.nonzero(filled)
        order = np.lexsort((-step_K, episode_K))  # EMC's write order: backwards through each episode
        episode_K, step_K = episode_K[order], step_K[order]
        self.write(keys_BTD[episode_K, step_K], returns_BT[episode_K, step_K])

    def write(self, keys_KD: np.ndarray, returns_K: np.ndarray) -> None:
        """Write returns [K] at keys [K, D], in order: a key within the tolerance of a stored one (or of an earlier
        key of this call) keeps the max of the returns; any other key is a new entry, the least recently used
        entry evicted when the index is full."""
        returns_K = np.asarray(returns_K, np.float32)
        for start in range(0, returns_K.shape[0], self.capacity):  # one call per capacity's worth of keys
            chunk = slice(start, start + self.capacity)
            slots, added = self.index.find_or_add(keys_KD[chunk])
            self.values_N[slots[added]] = EMPTY_VALUE  # a reused slot forgets its evicted entry's return
            np.maximum.at(self.values_N, slots, returns_K[chunk])
            # every write that did not create its entry met one: the entry now holds more than one visit
            self.merged_N[slots[added]] = False
            self.merged_N[slots[~added]] = True
            self.usage.wrote(slots.shape[0], int((~added).sum()))

    def value_of(self, keys_KD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(H float32 [K], hit bool [K]) of keys [K, D], without counting a use (0 on a miss)."""
        found = self.index.query(keys_KD)
        return np.where(found.hit, self.values_N[found.slot.clip(min=0)], 0.0).astype(np.float32), found.hit

    # ----- the update ----------------------------------------------------------------------------------------

    @torch.no_grad()
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> EMCLookup:
        """Phase 1: H(z(s_{t+1})) of every real non-terminal step in one query (a hit counts as a use for LRU),
        and the curiosity's reward (its networks take their update's steps)."""
        real_BT = clean.mask.cpu().numpy() > 0
        end_BT = real_BT & (clean.terminated.cpu().numpy() > 0)
        flat_K = np.flatnonzero(real_BT & ~end_BT)  # row-major: the order EMC reads them in
        episode_K, step_K = np.divmod(flat_K, real_BT.shape[1])
        if state_keys_BSD is None:
            keys_KD = self.keys(clean.state.cpu().numpy()[episode_K, step_K + 1])
        else:
            keys_KD = state_keys_BSD.cpu().numpy()[episode_K, step_K + 1].view(np.float32)
        found = self.index.query(keys_KD)
        self.index.touch(found.slot[found.hit])
        self.usage.looked_up(found.hit, self.merged_N[found.slot.clip(min=0)])
        values_K = np.where(found.hit, self.values_N[found.slot.clip(min=0)], 0.0)
        like = clean.reward
        hit_BT = scatter(found.hit, flat_K, like).bool() | torch.from_numpy(end_BT).to(like.device)
        self.last_hit_rate = float(found.hit.mean()) if flat_K.size else 0.0
        intrinsic_BT = self.curiosity.reward(clean) if self.curiosity is not None else torch.zeros_like(like)
        return EMCLookup(values_BT=scatter(values_K, flat_K, like), hit_BT=hit_BT, intrinsic_BT=intrinsic_BT,
                         hit_rate=torch.tensor(self.last_hit_rate, dtype=torch.float64))

    def intrinsic_reward(self, lookup: EMCLookup, clean: CleanBatch, next_value_BT: torch.Tensor) -> torch.Tensor | None:
        """The curiosity's r^i (phase 2), None when it is off."""
        return lookup.intrinsic_BT if self.uses_curiosity else None

    def reward_parts(self, lookup: EMCLookup, clean: CleanBatch, next_value_BT: torch.Tensor) -> dict[str, torch.Tensor]:
        """The curiosity, logged as ``reward_curiosity`` (the whole of EMC's intrinsic reward)."""
        return {"curiosity": lookup.intrinsic_BT} if self.uses_curiosity else {}

    def memory_losses(self, lookup: EMCLookup, values: OnlineValues) -> dict[str, torch.Tensor]:
        """L_emc = w sum_t hit_t (r_t + gamma (1 - term_t) H(s_{t+1}) - Q_tot)^2 / sum_t m_t (phase 2, tensor ops)."""
        clean = values.clean
        with torch.no_grad():
            e_BT = clean.bootstrapped(lookup.values_BT.to(clean.reward.dtype), self.gamma)  # a real end: E = r
            applies_BT = lookup.hit_BT.to(clean.mask.dtype) * clean.mask
        n_real = clean.mask.sum().clamp(min=1.0)
        return {"emc": self.loss_weight * (applies_BT * (e_BT - values.q_tot_BT) ** 2).sum() / n_real}

    # ----- the schedule ------------------------------------------------------------------------------------

    def on_env_steps(self, env_steps: int) -> None:
        """The curiosity's scale decays."""
        if self.curiosity is not None:
            self.curiosity.on_env_steps(env_steps)

    # ----- state -------------------------------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        return {"state_dim": self.state_dim, "proj_dim": self.proj_dim, "capacity": self.capacity,
                "uses_curiosity": self.uses_curiosity}

    def state_dict(self) -> dict[str, Any]:
        """M, the index (keys, LRU ticks), the returns, the last hit rate and the curiosity."""
        return {**self._settings(), "projection": self.projection_DF.copy(), "index": self.index.state_dict(),
                "values": self.values_N.copy(), "merged": self.merged_N.copy(), **self.usage.state_dict(),
                "last_hit_rate": None if np.isnan(self.last_hit_rate) else self.last_hit_rate,
                "curiosity": self.curiosity.state_dict() if self.curiosity is not None else {}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, mine in self._settings().items():
            given = type(mine)(np.asarray(state[name]).item())
            if given != mine:
                raise ValueError(f"checkpoint has {name}={given}, this memory {name}={mine}; "
                                 "build the memory with the run's config before loading")
        self.projection_DF = np.asarray(state["projection"], np.float64).copy()
        self.index.load_state_dict(state["index"])
        self.values_N = np.asarray(state["values"], np.float32).copy()
        # a checkpoint without merged flags: every entry counts as one visit
        self.merged_N = np.asarray(state.get("merged", np.zeros(self.capacity, bool)), bool).copy()
        self.usage = TableUsage.from_state(state)
        last = state["last_hit_rate"]
        self.last_hit_rate = NO_HIT_RATE if last is None else float(np.asarray(last).item())
        if self.curiosity is not None:
            self.curiosity.load_state_dict(state["curiosity"])

    @property
    def n_entries(self) -> int:
        return self.index.n_entries

    @property
    def nbytes(self) -> int:
        """The index, the returns, M and the curiosity.

        The index's grid listing is counted as it is right after a rebuild (a 4-byte slot per entry, the bucket
        table for them), not its run of recent writes: that depends on when the grid was last rebuilt, and a
        resumed run rebuilds it, so the logged bytes would differ from a run never stopped.
        """
        return (self.index.settled_nbytes + self.values_N.nbytes + self.merged_N.nbytes + self.projection_DF.nbytes
                + (self.curiosity.nbytes if self.curiosity is not None else 0))

    def metrics(self) -> dict[str, float]:
        """Entries, bytes, the hit rate of the last update's lookups and the curiosity's figures."""
        hit_rate = {} if np.isnan(self.last_hit_rate) else {"memory_hit_rate": self.last_hit_rate}
        curiosity = self.curiosity.metrics() if self.curiosity is not None else {}
        return {"memory_entries": float(self.n_entries), "memory_bytes": float(self.nbytes), **hit_rate,
                **self.usage.metrics(), **curiosity}


__all__ = ["EMCLookup", "EMCMemory"]
