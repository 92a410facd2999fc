"""EMU's episodic memory as the registered memory "emu": a learned state embedding, desirability and the incentive.

Paper: "Efficient Episodic Memory Utilization of Cooperative Multi-Agent Reinforcement Learning" (Na et al.,
ICLR 2024). Settings: its section ``emu`` (``EMUSettings``, episodic/settings.py), ``config.memory.proj_dim`` (D) and ``config.memory.capacity``.

    key        x = f_phi(s, t / limit)                     the encoder of a deterministic embedder (below)
    memory     per entry: raw state s, t, key x, H (highest discounted return from s), visits N, desirable
               visits N_d, desirable flag xi; least recently used entry evicted
    lookup     nearest stored key whose every z-normalised dimension is within delta (ZBox)
    incentive  r^p_t = gamma N_d / (N + 0.001) max(H(s_{t+1}) - V(t+1), 0)   on a hit at s_{t+1}, else 0
    target     y_t = r_t + r^c_t + r^p_t + gamma (1 - term_t) V(t+1)          (r^c: curiosity, semzoo.episodic.curiosity)

The embedder: encoder [s, t/limit] -> h -> h -> D, decoder [x, t/limit] -> h -> h with a head for the state
and one for the return, ReLU between layers; loss (H - H_hat)^2 + w ||s - s_hat||^2 (w = 0.1), Adam, clipped.

Writing (``on_store``, every episode of every collected batch). Each episode is walked from its last step back
to its first, as EMU does, with R_t its discounted return from t. An episode that was won is desirable; a
state is desirable when its episode is, or when a later state of its episode (in time) visited a desirable
entry ("desirability propagates backwards"). Each state joins the nearest entry within the tolerance (a visit:
N += 1, and N_d += 1 when the state is desirable) or becomes a new entry (N = 1, N_d = 0, xi = its flag: EMU's
defaults). An undesirable entry visited by a desirable state moves there (the memory shift: its state, t, key
and H become the visitor's, xi = 1); otherwise H = max(H, R_t). The whole batch is written with array
operations, with the result of writing its states one at a time in that order (``_write``).

Schedule (``on_env_steps``; its own counter of env steps): every ``emu_norm_interval`` env steps the keys'
per-dimension mean and std (the box's z-normalisation) are refreshed from the stored keys; every
``emu_train_interval`` the embedder takes ``samples / batch`` Adam steps on entries sampled with the memory's
own generator, then every stored key is computed again from its raw state and the normalisation refreshed.

Where this differs from EMU's public code (EMU_release_pymarl), on purpose:
- the time input is t / limit at write, lookup and re-embedding alike (EMU writes t / (limit + 1)); ``limit``
  is the run's episode limit, the length T of the collected batches (the runner pads each to it);
- every episode of a batch is written (EMU writes the first episode of its 5,000-episode "additional update");
- the normalisation is refreshed right after a re-embedding (EMU compares with stale normalised keys until
  its next refresh); the nearest key is the nearest in z-normalised space (EMU: in raw space);
- the embedder's loss is a mean over the mini-batch (EMU: a sum, whose gradient the clip at 10 then bounds);
- it trains on the entries it holds when it holds fewer than ``emu_train_samples`` (EMU then skips training);
- the incentive is 0 after a real end (EMU adds it there too, from V of the state after the end);
- where the env reports no wins, ``emu_desirable_return`` (or the best return so far) decides desirability.
Within one batch, keys are matched against the entries as they stood before the batch's memory shifts (a
shifted entry's new key serves from the next batch on); the flags, counts and returns follow the
one-at-a-time order exactly.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from semzoo.episodic.curiosity import Curiosity, default_float_bytes
from semzoo.episodic.hash_table import TableUsage
from semzoo.episodic.memory import BUILTIN_DESCRIPTIONS, Memory, register_memory
from semzoo.episodic.nearest import NearestIndex
from semzoo.episodic.plans import embedder_parameter_count, emu_bytes
from semzoo.episodic.returns import discounted_returns
from semzoo.episodic.settings import EMUSettings
from semzoo.episodic.target import scatter
from semzoo.episodic.tolerance import EMU_DELTA, ZBox

if TYPE_CHECKING:
    from semzoo.episodic.setup import MemorySetup
    from semzoo.types import CleanBatch, EpisodeBatch

VISIT_EPSILON = 1e-3
"""N_d / (N + 0.001): EMU's epsilon in the desirable share of an entry's visits."""
EMBEDDER_SEED_OFFSET = 0xE3B0
"""The embedder's initial weights come from torch seeded with config.seed + this (the run's RNG stream is untouched)."""
SAMPLER_STREAM = 0xE3B1
"""Spawn key, under the run seed, of the numpy generator that samples the embedder's training entries."""
EMBED_CHUNK = 1 << 16
"""States per forward pass when every stored key is computed again."""


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name}={value!r}: expected a positive int; set it in the emu settings or config.memory")
    return int(value)


class Embedder(nn.Module):
    """EMU's deterministic state embedding and its decoder (controllers/vae_embedder.py, encoder_type 1).

    encoder: [s, tau] (S + 1) -> h -> h -> D;  decoder: [x, tau] (D + 1) -> h -> h -> (s_hat [S], H_hat [1]).
    tau = t / limit. ReLU after each hidden layer.
    """

    def __init__(self, state_dim: int, embed_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(state_dim + 1, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, embed_dim))
        self.decoder = nn.Sequential(nn.Linear(embed_dim + 1, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.state_head = nn.Linear(hidden_dim, state_dim)
        self.return_head = nn.Linear(hidden_dim, 1)

    def embed(self, state_KS: torch.Tensor, tau_K: torch.Tensor) -> torch.Tensor:
        """x = f_phi(s, tau): [K, D]."""
        return self.encoder(torch.cat([state_KS, tau_K[:, None]], dim=1))

    def forward(self, state_KS: torch.Tensor, tau_K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(s_hat [K, S], H_hat [K]) through the key."""
        hidden = self.decoder(torch.cat([self.embed(state_KS, tau_K), tau_K[:, None]], dim=1))
        return self.state_head(hidden), self.return_head(hidden)[:, 0]

    def loss(self, state_KS: torch.Tensor, tau_K: torch.Tensor, return_K: torch.Tensor,
             state_weight: float) -> torch.Tensor:
        """mean_k [(H_k - H_hat_k)^2 + w ||s_k - s_hat_k||^2], a scalar."""
        state_hat, return_hat = self(state_KS, tau_K)
        return ((return_K - return_hat) ** 2 + state_weight * ((state_KS - state_hat) ** 2).sum(dim=1)).mean()


@dataclass(frozen=True)
class EMULookup:
    """What the memory answers for a sampled batch: [B,T] tensors, 0 / false where s_{t+1} was not looked up."""

    hit_BT: torch.Tensor
    """s_{t+1} has a stored entry within the box (bool); looked up at real steps without a real end."""
    return_BT: torch.Tensor
    """H(s_{t+1}) of that entry (float, 0 on a miss)."""
    desirability_BT: torch.Tensor
    """N_d / (N + 0.001) of that entry (float, 0 on a miss)."""
    curiosity_BT: torch.Tensor
    """The curiosity reward of the step (float, 0 when curiosity is off)."""


@register_memory("emu", settings=EMUSettings)
class EMUMemory(Memory):
    """EMU's memory: learned keys, desirability, memory shift and the episodic incentive (see the module docstring)."""

    description = BUILTIN_DESCRIPTIONS["emu"]

    def __init__(self, *, state_dim: int, proj_dim: int = 4, capacity: int = 1_000_000, gamma: float = 0.99,
                 seed: int = 0, delta: float = EMU_DELTA, hidden_dim: int = 64, lr: float = 5e-4,
                 grad_clip: float = 10.0, state_loss_weight: float = 0.1, train_interval: int = 10_000,
                 train_samples: int = 102_400, train_batch: int = 1024, norm_interval: int = 200,
                 incentive: bool = True, desirable_return: float | None = None, init_desirability: bool = False,
                 device: torch.device | str = "cpu", curiosity: Curiosity | None = None,
                 curiosity_interval: int = 1) -> None:
        self.state_dim = _positive_int("state_dim", state_dim)
        self.proj_dim = _positive_int("proj_dim", proj_dim)
        self.capacity = _positive_int("capacity", capacity)
        self.hidden_dim = _positive_int("emu_hidden_dim", hidden_dim)
        self.train_interval = _positive_int("emu_train_interval", train_interval)
        self.train_samples = _positive_int("emu_train_samples", train_samples)
        self.train_batch = _positive_int("emu_train_batch", train_batch)
        self.norm_interval = _positive_int("emu_norm_interval", norm_interval)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r}: expected a discount in [0, 1]; set learner.gamma")
        self.gamma, self.seed = float(gamma), int(seed)
        self.lr, self.grad_clip, self.state_loss_weight = float(lr), float(grad_clip), float(state_loss_weight)
        self.incentive = bool(incentive)
        self.desirable_return = None if desirable_return is None else float(desirable_return)
        self.init_desirability = bool(init_desirability)
        self.device = torch.device(device)
        self.curiosity = curiosity
        # on_env_steps runs at every multiple of each schedule's interval (the curiosity's decay included)
        intervals = [self.train_interval, self.norm_interval]
        if curiosity is not None:
            intervals.append(_positive_int("curiosity_decay_steps", curiosity_interval))
        self.env_step_interval = math.gcd(*intervals)

        self.index = NearestIndex(self.proj_dim, self.capacity, ZBox(delta), eviction="lru")
        self.state_NS = np.zeros((self.capacity, self.state_dim), np.float32)
        self.time_N = np.zeros(self.capacity, np.int32)
        self.return_N = np.zeros(self.capacity, np.float32)
        self.visits_N = np.zeros(self.capacity, np.int64)
        self.desirable_visits_N = np.zeros(self.capacity, np.int64)
        self.desirable_N = np.zeros(self.capacity, bool)

        with torch.random.fork_rng(devices=[]):  # the embedder's own seed; the run's torch stream is untouched
            torch.manual_seed(self.seed + EMBEDDER_SEED_OFFSET)
            self.embedder = Embedder(self.state_dim, self.proj_dim, self.hidden_dim)
        self.embedder.to(self.device)
        self.optimizer = torch.optim.Adam(self.embedder.parameters(), lr=self.lr)
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, SAMPLER_STREAM])))

        self.limit = 0
        """The episode limit: t / limit is the embedder's time input (set by the first stored batch)."""
        self.best_return = -math.inf
        """The best episode return seen so far (the desirability rule where the env reports no wins)."""
        self.env_steps = 0
        self.trainings = 0
        self.last_loss: float | None = None
        self.hits = 0
        self.queries = 0
        self.usage = TableUsage()
        self.desirable_hits = 0
        """Lookups since the run started whose entry had N_d > 0 (where the incentive can act)."""
        self._won: np.ndarray | None = None

    @classmethod
    def from_config(cls, setup: MemorySetup) -> EMUMemory:
        """EMU of a run: its settings ``emu``, D and capacity from ``setup.memory``, gamma and seed of the run, its
        device, the curiosity."""
        from semzoo.run.device import resolve_device

        e, m = setup.settings("emu"), setup.memory
        return cls(state_dim=setup.state_dim, proj_dim=m.proj_dim, capacity=m.capacity, gamma=setup.gamma,
                   seed=setup.seed, delta=e.emu_delta, hidden_dim=e.emu_hidden_dim, lr=e.emu_lr,
                   grad_clip=e.emu_grad_clip, state_loss_weight=e.emu_state_loss_weight,
                   train_interval=e.emu_train_interval, train_samples=e.emu_train_samples,
                   train_batch=e.emu_train_batch, norm_interval=e.emu_norm_interval, incentive=e.emu_incentive,
                   desirable_return=e.emu_desirable_return, init_desirability=e.emu_flag_init_desirability,
                   device=resolve_device(setup.device), curiosity=Curiosity.from_config(setup),
                   curiosity_interval=setup.settings("curiosity").curiosity_decay_steps)

    @classmethod
    def planned_nbytes(cls, setup: MemorySetup) -> int:
        """Full capacity (raw state, t, H, N, N_d, flag; the index's key, grid and LRU), the embedder and Adam, curiosity."""
        return emu_bytes(setup, word_bytes=default_float_bytes())

    # ----- embedding ---------------------------------------------------------------------------------------
    def tau(self, time: Any) -> torch.Tensor:
        """The embedder's time input t / limit, float32 on the embedder's device."""
        t = torch.as_tensor(time, device=self.device).to(torch.float32)
        return t / float(max(self.limit, 1))

    @torch.no_grad()
    def embed(self, state_KS: Any, time_K: Any) -> np.ndarray:
        """Keys f_phi(s, t / limit) of states [K, S] at steps [K] with the current embedder: float32 [K, D]."""
        state = torch.as_tensor(state_KS, device=self.device).to(torch.float32)
        time = torch.as_tensor(time_K, device=self.device)
        out = [self.embedder.embed(state[i:i + EMBED_CHUNK], self.tau(time[i:i + EMBED_CHUNK]))
               for i in range(0, state.shape[0], EMBED_CHUNK)]  # chunks of states, not one key at a time
        if not out:
            return np.zeros((0, self.proj_dim), np.float32)
        return torch.cat(out).cpu().numpy().astype(np.float32, copy=False)

    # ----- writing -----------------------------------------------------------------------------------------
    def on_wins(self, won_B: np.ndarray | None) -> None:
        self._won = None if won_B is None else np.asarray(won_B, bool).copy()

    def desirable_episodes(self, return_B: np.ndarray) -> np.ndarray:
        """bool [B]: won (where the env reports wins), else return >= emu_desirable_return, else >= the best so far."""
        won, self._won = self._won, None
        if won is not None:
            if won.shape != return_B.shape:
                raise ValueError(f"on_wins gave {won.shape[0]} episodes, the stored batch has {return_B.shape[0]}; "
                                 "call on_wins with the won flags of the batch passed to on_store")
            return won
        if self.desirable_return is not None:
            return return_B >= self.desirable_return
        if return_B.size:
            self.best_return = max(self.best_return, float(return_B.max()))
        return return_B >= self.best_return

    def on_store(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None) -> None:
        """Write every real step of every episode of ``batch``, each episode from its last step back to its first."""
        state = batch.state.detach().cpu().numpy()
        filled = batch.filled.detach().cpu().numpy().astype(bool)
        reward = batch.reward.detach().cpu().numpy()
        if self.limit == 0:
            self.limit = int(filled.shape[1])
        returns_BT = discounted_returns(reward, filled, self.gamma)
        desirable_B = self.desirable_episodes(np.where(filled, reward, 0.0).sum(axis=1))
        episode_K, step_K = np.nonzero(filled)
        order = np.lexsort((-step_K, episode_K))  # EMU's loop: episode by episode, backwards in time
        episode_K, step_K = episode_K[order], step_K[order]
        if episode_K.size == 0:
            return
        states_KS = state[episode_K, step_K]
        self._write(self.embed(states_KS, step_K), states_KS, step_K, returns_BT[episode_K, step_K],
                    desirable_B[episode_K], episode_K)

    def _write(self, keys_KD: np.ndarray, states_KS: np.ndarray, time_K: np.ndarray, return_K: np.ndarray,
               episode_desirable_K: np.ndarray, episode_K: np.ndarray) -> None:
        """Write K states in this order (an episode's states contiguous, last step first), as one at a time would.

        keys [K, D], raw states [K, S], steps t [K], returns R_t [K], their episode's desirability [K], episode [K].
        """
        n_keys = keys_KD.shape[0]
        slot_K, added_K = self.index.find_or_add(keys_KD)
        self.usage.wrote(n_keys, int((~added_K).sum()))
        position = np.arange(n_keys)
        created = np.zeros(self.capacity, bool)
        created[slot_K[added_K]] = True  # entries this batch created (possibly in an evicted entry's slot)
        node_K = np.unique(slot_K, return_inverse=True)[1]
        was_desirable_K = self.desirable_N[slot_K] & ~created[slot_K]
        # Desirability flag f_k of each visit: the episode's, or an entry desirable when an earlier write of the same
        # episode (a later time step) visited it. An entry is desirable at write k if it was before the batch or
        # an earlier write of any episode visited it with f = 1. Iterate to the fixed point (f only grows).
        episode_start = np.flatnonzero(np.r_[True, episode_K[1:] != episode_K[:-1]])
        episode_of_K = np.cumsum(np.r_[True, episode_K[1:] != episode_K[:-1]]) - 1
        flag_K = episode_desirable_K.copy()
        while True:
            first_flagged = np.full(node_K.max() + 1, n_keys)
            np.minimum.at(first_flagged, node_K[flag_K], position[flag_K])
            desirable_before_K = (was_desirable_K | (first_flagged[node_K] < position)).astype(np.int64)
            before_in_episode = np.cumsum(desirable_before_K) - desirable_before_K  # exclusive, then per episode:
            before_in_episode -= before_in_episode[episode_start][episode_of_K]
            new_flag = episode_desirable_K | (before_in_episode > 0)
            if np.array_equal(new_flag, flag_K):
                break
            flag_K = new_flag

        # Per entry, its visits in write order.
        order = np.lexsort((position, node_K))
        node_sorted = node_K[order]
        start = np.flatnonzero(np.r_[True, node_sorted[1:] != node_sorted[:-1]])
        slot = slot_K[order[start]]
        count = np.diff(np.r_[start, n_keys])
        flag_sorted = flag_K[order]
        is_new = created[slot]
        assert added_K[order[start[is_new]]].all(), "a created entry's first visit is the write that added it"
        initial = np.where(is_new, flag_sorted[start], self.desirable_N[slot])
        any_flag = np.logical_or.reduceat(flag_sorted, start)
        sorted_position = np.arange(n_keys)
        first_flag = np.full(slot.shape[0], n_keys)
        np.minimum.at(first_flag, node_sorted[flag_sorted], sorted_position[flag_sorted])
        # memory shift: an undesirable entry visited by a desirable state takes that state (and its return)
        shift = ~initial & any_flag
        anchor = np.where(shift, first_flag, start)  # the write the entry's content comes from (new or shifted)
        takes_content = shift | is_new
        from_anchor = sorted_position >= anchor[np.repeat(np.arange(slot.shape[0]), count)]
        best = np.maximum.reduceat(np.where(from_anchor, return_K[order], -np.inf), start).astype(np.float32)
        self.return_N[slot] = np.where(takes_content, best, np.maximum(self.return_N[slot], best))
        counted = flag_sorted.copy()
        # a new entry starts at N = 1 and N_d = 0, or N_d = its flag with EMU's flag_init_desirability
        counted[start[is_new]] = self.init_desirability & flag_sorted[start[is_new]]
        self.visits_N[slot] = np.where(is_new, 0, self.visits_N[slot]) + count
        self.desirable_visits_N[slot] = (np.where(is_new, 0, self.desirable_visits_N[slot])
                                         + np.add.reduceat(counted.astype(np.int64), start))
        self.desirable_N[slot] = initial | any_flag
        source = order[anchor[takes_content]]
        self.state_NS[slot[takes_content]] = states_KS[source]
        self.time_N[slot[takes_content]] = time_K[source]
        if shift.any():
            self.index.set_keys(slot[shift], keys_KD[order[anchor[shift]]])

    # ----- the schedule ------------------------------------------------------------------------------------
    def on_env_steps(self, env_steps: int) -> None:
        """Train the embedder and re-embed (every emu_train_interval), refresh the normalisation (emu_norm_interval)."""
        last, self.env_steps = self.env_steps, int(env_steps)
        if self.env_steps // self.train_interval > last // self.train_interval:
            self.train_embedder()
        if self.env_steps // self.norm_interval > last // self.norm_interval:
            self.index.fit_normalisation()
        if self.curiosity is not None:
            self.curiosity.on_env_steps(env_steps)

    def train_embedder(self) -> None:
        """samples / batch Adam steps of the embedder on entries drawn with the memory's generator, then re-embed."""
        slots = self.index.slots()
        if slots.size == 0:
            return
        chosen = slots[self.rng.choice(slots.shape[0], size=min(self.train_samples, slots.shape[0]), replace=False)]
        state = torch.as_tensor(self.state_NS[chosen], device=self.device)
        tau = self.tau(self.time_N[chosen])
        target = torch.as_tensor(self.return_N[chosen], device=self.device)
        losses = []
        with torch.enable_grad():
            for begin in range(0, chosen.shape[0], self.train_batch):  # ~100 mini-batches, not one key at a time
                batch = slice(begin, begin + self.train_batch)
                loss = self.embedder.loss(state[batch], tau[batch], target[batch], self.state_loss_weight)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.embedder.parameters(), self.grad_clip)
                self.optimizer.step()
                losses.append(loss.detach())
        self.last_loss = float(torch.stack(losses).mean())
        self.trainings += 1
        self.reembed()

    def reembed(self) -> None:
        """Every stored key computed again from its raw state and t with the current embedder; normalisation refreshed."""
        slots = self.index.slots()
        if slots.size == 0:
            return
        self.index.rebuild(self.embed(self.state_NS[slots], self.time_N[slots]), slots)
        self.index.fit_normalisation()

    # ----- the update --------------------------------------------------------------------------------------
    @torch.no_grad()
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> EMULookup:
        """Phase 1: s_{t+1} of every real step without a real end, embedded and looked up in one batched query."""
        like = clean.reward
        query_BT = ((clean.mask > 0) & (clean.terminated == 0)).cpu().numpy()
        flat_K = np.flatnonzero(query_BT)
        episode_K, step_K = np.divmod(flat_K, query_BT.shape[1])
        next_state = clean.state[torch.as_tensor(episode_K, device=clean.state.device),
                                 torch.as_tensor(step_K + 1, device=clean.state.device)]
        found = self.index.query(self.embed(next_state, step_K + 1))
        hit_K = found.hit
        slot_K = found.slot[hit_K]
        self.index.touch(slot_K)  # a read counts for LRU eviction, as EMU's peek
        values_K = np.zeros(flat_K.shape[0], np.float32)
        share_K = np.zeros(flat_K.shape[0], np.float32)
        values_K[hit_K] = self.return_N[slot_K]
        share_K[hit_K] = self.desirable_visits_N[slot_K] / (self.visits_N[slot_K] + VISIT_EPSILON)
        several_K = np.zeros(flat_K.shape[0], bool)
        several_K[hit_K] = self.visits_N[slot_K] > 1
        self.usage.looked_up(hit_K, several_K)
        self.desirable_hits += int((self.desirable_visits_N[slot_K] > 0).sum())
        self.hits += int(hit_K.sum())
        self.queries += int(flat_K.shape[0])
        curiosity = self.curiosity.reward(clean).to(like) if self.curiosity is not None else torch.zeros_like(like)
        return EMULookup(hit_BT=scatter(hit_K.astype(np.float32), flat_K, like).bool(),
                         return_BT=scatter(values_K, flat_K, like), desirability_BT=scatter(share_K, flat_K, like),
                         curiosity_BT=curiosity)

    def intrinsic_reward(self, lookup: EMULookup, clean: CleanBatch, next_value_BT: torch.Tensor) -> torch.Tensor | None:
        """Phase 2: curiosity + gamma N_d / (N + 0.001) max(H(s_{t+1}) - V(t+1), 0) on hits (tensor ops only)."""
        if not self.incentive:
            return lookup.curiosity_BT if self.curiosity is not None else None
        return lookup.curiosity_BT + self.incentive_reward(lookup, next_value_BT)

    def incentive_reward(self, lookup: EMULookup, next_value_BT: torch.Tensor) -> torch.Tensor:
        """r^p = gamma N_d / (N + 0.001) max(H(s_{t+1}) - V(t+1), 0) on hits, 0 elsewhere: [B,T] (tensor ops only)."""
        gap = torch.clamp(lookup.return_BT - next_value_BT, min=0.0)
        return torch.where(lookup.hit_BT, self.gamma * lookup.desirability_BT * gap, 0.0)

    def reward_parts(self, lookup: EMULookup, clean: CleanBatch, next_value_BT: torch.Tensor) -> dict[str, torch.Tensor]:
        """Curiosity and incentive apart (``reward_curiosity``, ``reward_incentive``): which of the two acts."""
        parts = {"curiosity": lookup.curiosity_BT} if self.curiosity is not None else {}
        if self.incentive:
            parts["incentive"] = self.incentive_reward(lookup, next_value_BT)
        return parts

    # ----- state -------------------------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        return {"state_dim": self.state_dim, "proj_dim": self.proj_dim, "capacity": self.capacity,
                "hidden_dim": self.hidden_dim, "seed": self.seed}

    def state_dict(self) -> dict[str, Any]:
        slots = self.index.slots()
        return {
            **self._settings(),
            "index": self.index.state_dict(),
            "slots": slots, "state": self.state_NS[slots], "time": self.time_N[slots],
            "return": self.return_N[slots], "visits": self.visits_N[slots],
            "desirable_visits": self.desirable_visits_N[slots], "desirable": self.desirable_N[slots],
            "embedder": {name: value.detach().cpu().clone() for name, value in self.embedder.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),  # its tensors would change with the next step
            "rng": _generator_state(self.rng),
            "limit": self.limit, "best_return": self.best_return, "env_steps": self.env_steps,
            "trainings": self.trainings, "last_loss": self.last_loss, "hits": self.hits, "queries": self.queries,
            **self.usage.state_dict(), "desirable_hits": self.desirable_hits,
            "curiosity": self.curiosity.state_dict() if self.curiosity is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, mine in self._settings().items():
            given = int(np.asarray(state[name]).item())
            if given != mine:
                raise ValueError(f"checkpoint has EMU {name}={given}, this memory {mine}; resume with the run's config")
        self.index.load_state_dict(state["index"])
        slots = np.asarray(state["slots"], np.int64)
        for array, name in ((self.state_NS, "state"), (self.time_N, "time"), (self.return_N, "return"),
                            (self.visits_N, "visits"), (self.desirable_visits_N, "desirable_visits"),
                            (self.desirable_N, "desirable")):
            array[...] = 0
            array[slots] = np.asarray(state[name], array.dtype)
        self.embedder.load_state_dict(state["embedder"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = _generator_state_from(state["rng"])
        self.limit = int(np.asarray(state["limit"]).item())
        self.best_return = float(np.asarray(state["best_return"]).item())
        self.env_steps = int(np.asarray(state["env_steps"]).item())
        self.trainings = int(np.asarray(state["trainings"]).item())
        self.last_loss = None if state["last_loss"] is None else float(np.asarray(state["last_loss"]).item())
        self.hits = int(np.asarray(state["hits"]).item())
        self.queries = int(np.asarray(state["queries"]).item())
        self.usage = TableUsage.from_state(state)
        self.desirable_hits = int(np.asarray(state.get("desirable_hits", 0)).item())
        if self.curiosity is not None:
            self.curiosity.load_state_dict(state["curiosity"])
        self._won = None

    @property
    def nbytes(self) -> int:
        arrays = (self.state_NS, self.time_N, self.return_N, self.visits_N, self.desirable_visits_N, self.desirable_N)
        networks = sum(p.numel() * p.element_size() for p in self.embedder.parameters())
        adam = sum(t.numel() * t.element_size() for s in self.optimizer.state.values() for t in s.values()
                   if isinstance(t, torch.Tensor))
        curiosity = int(self.curiosity.nbytes) if self.curiosity is not None else 0
        return self.index.settled_nbytes + sum(a.nbytes for a in arrays) + networks + adam + curiosity

    def metrics(self) -> dict[str, float]:
        """Entries, bytes, desirable share, trainings, the last training's loss, and the hit rate since the last row."""
        slots = self.index.slots()
        out = {"memory_entries": float(slots.shape[0]), "memory_bytes": float(self.nbytes),
               "memory_desirable": float(self.desirable_N[slots].mean()) if slots.size else 0.0,
               "emu_trainings": float(self.trainings)}
        if self.queries:
            out["memory_hit_rate"] = self.hits / self.queries
        out.update(self.usage.metrics())
        if self.usage.hits:  # since the run started, like the two rates above: where the incentive can act
            out["memory_desirable_hit_share"] = self.desirable_hits / self.usage.hits
        self.hits = self.queries = 0  # the hit rate of each row is that of the updates since the previous row
        if self.last_loss is not None:
            out["emu_embedder_loss"] = self.last_loss
        if self.curiosity is not None:
            out.update(self.curiosity.metrics())
        return out


def _generator_state(rng: np.random.Generator) -> dict[str, Any]:
    """The PCG64 state with its 128-bit integers as decimal strings (a checkpoint holds plain values)."""
    state = rng.bit_generator.state
    return {"bit_generator": state["bit_generator"], "state": str(state["state"]["state"]),
            "inc": str(state["state"]["inc"]), "has_uint32": int(state["has_uint32"]),
            "uinteger": int(state["uinteger"])}


def _generator_state_from(saved: dict[str, Any]) -> dict[str, Any]:
    return {"bit_generator": str(saved["bit_generator"]),
            "state": {"state": int(str(saved["state"])), "inc": int(str(saved["inc"]))},
            "has_uint32": int(np.asarray(saved["has_uint32"]).item()),
            "uinteger": int(np.asarray(saved["uinteger"]).item())}


__all__ = ["EMULookup", "EMUMemory", "Embedder", "embedder_parameter_count"]
