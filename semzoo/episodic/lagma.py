"""LAGMA's latent goal-guided memory as the registered memory "lagma": a VQ-VAE codebook over states, the codes'
values and goal-reaching code sequences, and the incentive they pay.

Paper: "LAGMA: LAtent Goal-guided Multi-Agent Reinforcement Learning" (Na and Moon, ICML 2024); code
aailabkaist/LAGMA, LAGMA_v0_release/src (learners/lagma_learner.py, modules/vae/vqvae.py, nearest_embed.py).
Settings: its section ``lagma`` (``LAGMASettings``, episodic/settings.py), defaults from its config/algs/lagma_sc2.yaml. Shapes: B episodes, T steps
(T+1 slots), S state size, D latent size, K codes, N states.

    code       k(s) = argmin_j ||z(s) - e_j||_2,  z = f(s) the encoder (S -> h -> h -> D), e_j a column of the codebook [D, K]
    VQ-VAE     L = mean over the real slots of the batch of
                     ||s - g(e_k(s))||^2 / S                                   (reconstruction; straight through k)
                   + vq_coef ||e_k(s) - sg(z)||^2 + commit_coef ||sg(e_k(s)) - z||^2
                   + coverage_coef mean_{j in J(t)} ||sg(z) - e_j||^2           (J(t): the codes of the slot's time step)
    value      C(k) = mean of the latest ``value_window`` returns-to-go R_t written at code k (LAGMA's moving average
               Cqt; its window starts holding one 0)
    sequences  each code keeps the ``top_k`` code sequences k(s_t), k(s_{t+1}), ..., k(s_L) of highest R_t that start there
    incentive  r^i_t = gamma max(C(k(s_{t+1})) - V(t+1), 0)  when k(s_{t+1}) lies on the step's reference sequence and
               differs from k(s_t); else 0
    target     y_t = r_t + r^i_t + gamma (1 - term_t) V(t+1)         (LAGMA: gamma eta + r + gamma (1 - term) Q_target)

The time step's codes J(t) spread the codebook over the slots of a batch: with n slots (the longest episode's steps
plus one) and dn = K // n, J(t) = {dn t, ..., dn (t + 1) - 1}, plus the code dn n + t for t < K mod n; when K < n,
J(t) = {int(t K / n)}. The coverage loss pulls those codes towards the encodings of that time step.

One update (``lookup_batch``, what LAGMA's ``learner.train`` does beside the TD loss), on the sampled batch:

1. the schedule, counted as LAGMA counts it (the 0-based index of the newest episode, and env steps): the VQ-VAE
   trains when ``vqvae_interval`` episodes passed since its last training, and the codes' values are written when
   ``codebook_interval`` passed since their last write; both at every update while env steps <= ``start_steps``;
2. the code of every real slot, with the current encoder;
3. a write (once env steps reached ``start_steps``; LAGMA's flag_buffer_update): R_t at k(s_t) for every real slot,
   0 at the slot after the last step, in LAGMA's order (by time step, then episode);
4. once writes have started, the sequences and the incentive, episode by episode: at t = 0, i, 2i, ... (i =
   ``sequence_interval``) the codes of slots t..L join the top-k of k(s_t) with R_t, and a reference sequence is drawn
   uniformly from that top-k; a step t - 1 with t not a multiple of i is on the sequence when k(s_t) is in the reference
   and differs from k(s_{t-1});
5. one Adam step of the VQ-VAE when the schedule says so (the codes above come from the parameters before it).

The incentive itself (``intrinsic_reward``) reads V(t+1) of the learner's target networks, so it is formed in phase 2
from the lookup's flags and C(k(s_{t+1})).

As LAGMA ran it (lagma_sc2.yaml): state reconstruction (recon_type 1), the squared L2 norms (flag_loss_type 1), time
step code sets from the batch's length (timestep_emb True, ref_max_time 1), the VQ-VAE trained on the learner's sampled
batch (vqvae_update_type 1), values from returns-to-go (buffer_update_ref 2, incentive_type 1), uniform draws of the
reference (sampling_type 1), the codebook initialised U[0, 1), LAGMA's straight-through estimator (the decoder reads
the code, its gradient goes to z) and its codebook gradient (a code's gradient averaged over the entries of one time
step that chose it, NearestEmbedFunc.backward), Adam at the learner's lr, and no gradient clip (LAGMA calls
clip_grad_norm_ before backward, on gradients just zeroed, so its clip never acts).

Left out (set otherwise, or marked "not used", in lagma_sc2.yaml): value or state-and-value reconstruction (recon_type
2, 3, with return_type and recon_coef), ref_max_time 2, separate VQ-VAE training (vqvae_update_type 2,
vqvae_training_batch, vqvae_training_mini_batch), vqvae_training_stop (1e8 env steps, never reached), a code for zero
states (flag_zero_state_management), per-step VQ-VAE losses (flag_batch_wise_vqvae_loss), flag_loss_type 0 and 2, the
optimistic incentive (incentive_type 2), values from episode returns (buffer_update_ref 1: Buffer_R0, Cq0 and its
lambda_exp, read by nothing else), softmax draws (sampling_type 2), timestep_emb False, flag_desirability (the won flag
stored with each sequence is read only by it), flag_UCB_incentive with UCB_param_t (and the visit counts Ncall only they
read), save_vae_info (files; the checkpoint holds the same), and the goal-conditioned agent lagma_gc (lagma_sc2.yaml's
agent "lagma" is the plain recurrent agent).

Where this differs from LAGMA's code, on purpose:
- real slots only: LAGMA encodes, trains on, writes values for and builds sequences from every slot of the padded
  batch, the zero states of padding included; here the slots s_0..s_L of each episode, and the VQ-VAE's loss is the
  mean over them (LAGMA's is the mean over every slot, padding included);
- the incentive is 0 at a real end (LAGMA pays it there too, against V of the state after the end), as EMU's here;
- the reference sequences are drawn with the memory's own generator (LAGMA: torch's global stream), and a stored
  sequence is kept as the set of its codes (only membership is ever read);
- the schedule's counters (episodes, env steps) are the memory's own, kept from ``on_store``: under PyMARL's runtime
  they are the numbers LAGMA's learner receives;
- LAGMA's released learner holds unresolved merge markers around J(t); here the side marked "corrected" (int(t K / n)
  when K < n; the other side gives every such step code 0).

Diagnostics (``metrics``): ``lagma_codes_used`` and ``lagma_perplexity`` (exp of the entropy of the codes of the states
stored since the last row), ``memory_hit_rate`` (the share of the updates' looked-up steps, real steps without a real
end, on the reference sequence: where the incentive can act), ``lagma_reward_extrinsic`` (the mean extrinsic reward per
real step of the same batches, beside the learner's ``reward_incentive``), the VQ-VAE's losses, and SEM's two rates
(semzoo.episodic.hash_table.TableUsage) with a code as the entry: ``memory_merge_rate``, the share of stored steps whose
code an earlier episode had visited, and ``memory_cross_hit_rate``, the share of looked-up steps on the sequence whose
code more than one stored episode has visited. Visits are counted when an episode is stored, with the encoder of then.
"""

from __future__ import annotations

import bisect
import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from semzoo.episodic.hash_table import TableUsage
from semzoo.episodic.memory import BUILTIN_DESCRIPTIONS, Memory, MemoryDoesNotFitEnv, register_memory
from semzoo.episodic.plans import lagma_bytes, vqvae_parameter_count
from semzoo.episodic.returns import discounted_returns
from semzoo.episodic.settings import LAGMASettings

if TYPE_CHECKING:
    from semzoo.episodic.setup import MemorySetup
    from semzoo.types import CleanBatch, EpisodeBatch

VQVAE_SEED_OFFSET = 0x1A6A
"""The VQ-VAE's initial weights come from torch seeded with config.seed + this (the run's RNG stream is untouched)."""
SAMPLER_STREAM = 0x1A6B
"""Spawn key, under the run seed, of the torch generator that draws the reference sequences."""
CODE_CHUNK = 1024
"""States per distance computation when codes are assigned ([chunk, D, K] floats at a time)."""
LOSS_NAMES = ("total", "recon", "vq", "commit", "coverage")
"""The VQ-VAE's loss and its parts, logged as lagma_loss and lagma_loss_<part>."""
LATENT_KEY = "lagma.lagma_latent_dim"
"""The config key of the latent size (``fit_env`` caps its default by the state size)."""


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name}={value!r}: expected a positive int; set it in the lagma settings")
    return int(value)


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < math.inf:
        raise ValueError(f"{name}={value!r}: expected a finite number >= 0; set it in the lagma settings")
    return float(value)


def nearest_codes(z_ND: torch.Tensor, codebook_DK: torch.Tensor) -> torch.Tensor:
    """argmin_j ||z_n - e_j||_2 of every row [N, D] against the codebook's columns [D, K]: int64 [N] (first on ties)."""
    out = [torch.linalg.vector_norm(z_ND[i:i + CODE_CHUNK, :, None] - codebook_DK[None], dim=1).argmin(dim=1)
           for i in range(0, z_ND.shape[0], CODE_CHUNK)]
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64, device=z_ND.device)


def time_step_codes(n_slots: int, n_codes: int) -> np.ndarray:
    """bool [n_slots, K]: the codes J(t) of each time step t that the coverage loss pulls (module docstring)."""
    member = np.zeros((n_slots, n_codes), bool)
    t = np.arange(n_slots)
    per_step, extra = divmod(n_codes, n_slots)
    if per_step >= 1:
        member[t[:, None], per_step * t[:, None] + np.arange(per_step)] = True
        member[np.arange(extra), per_step * n_slots + np.arange(extra)] = True
    else:
        member[t, (t * (n_codes / n_slots)).astype(np.int64)] = True  # LAGMA's int(t * dn_r), float product included
    return member


class VQVAE(nn.Module):
    """LAGMA's VQ-VAE over states (modules/vae/vqvae.py with recon_type 1).

    encoder s (S) -> h -> h -> z (D); codebook e [D, K] ~ U[0, 1); decoder e_k(s) (D) -> h -> h -> s_hat (S); ReLU
    after each hidden layer.
    """

    def __init__(self, state_dim: int, latent_dim: int, hidden_dim: int, n_codes: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(state_dim, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, latent_dim))
        self.codebook_DK = nn.Parameter(torch.rand(latent_dim, n_codes))
        self.decoder = nn.Sequential(nn.Linear(latent_dim, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                     nn.Linear(hidden_dim, state_dim))

    @torch.no_grad()
    def codes(self, state_NS: torch.Tensor) -> torch.Tensor:
        """k(s) of states [N, S]: int64 [N]."""
        return nearest_codes(self.encoder(state_NS), self.codebook_DK)

    def losses(self, state_NS: torch.Tensor, slot_N: torch.Tensor, members_TK: torch.Tensor) -> dict[str, torch.Tensor]:
        """The per-state parts of the loss [N] of states at time steps ``slot_N`` (``members_TK``: ``time_step_codes``).

        recon ||s - s_hat||^2 / S, vq ||e_k - sg(z)||^2, commit ||sg(e_k) - z||^2, coverage mean_{J(t)} ||sg(z) - e_j||^2.
        """
        z = self.encoder(state_NS)
        codes = nearest_codes(z.detach(), self.codebook_DK.detach())
        e = self.codebook_DK.t()[codes]  # [N, D], with gradient to the codebook
        # LAGMA's NearestEmbedFunc averages a code's gradient over the entries of one time step that chose it
        _, pair, count = torch.unique(slot_N * self.codebook_DK.shape[1] + codes, return_inverse=True,
                                      return_counts=True)
        e_averaged = e.detach() + (e - e.detach()) / count[pair, None].to(e.dtype)  # forward: e exactly
        z_q = e.detach() + (z - z.detach())  # straight through: the decoder reads the code, its gradient goes to z
        recon = ((self.decoder(z_q) - state_NS) ** 2).mean(dim=1)
        vq = ((e_averaged - z.detach()) ** 2).sum(dim=1)
        commit = ((e.detach() - z) ** 2).sum(dim=1)
        member_NK = members_TK[slot_N].to(z.dtype)
        distance_NK = ((z.detach()[:, :, None] - self.codebook_DK[None]) ** 2).sum(dim=1)
        coverage = (distance_NK * member_NK).sum(dim=1) / member_NK.sum(dim=1)
        return {"recon": recon, "vq": vq, "commit": commit, "coverage": coverage}


@dataclass(frozen=True)
class LAGMALookup:
    """What the memory answers for a sampled batch: [B,T] tensors (false / 0 where the incentive does not apply)."""

    on_sequence_BT: torch.Tensor
    """k(s_{t+1}) lies on the step's reference goal-reaching sequence and differs from k(s_t) (bool)."""
    code_value_BT: torch.Tensor
    """C(k(s_{t+1})), the code's moving average of returns-to-go, where on the sequence; 0 elsewhere (float)."""


@register_memory("lagma", settings=LAGMASettings)
class LAGMAMemory(Memory):
    """LAGMA's memory: a VQ-VAE codebook, the codes' values and sequences, the incentive (the module docstring)."""

    description = BUILTIN_DESCRIPTIONS["lagma"]
    size_setting = ("lagma.lagma_n_codes", "--lagma-n-codes")

    def __init__(self, *, state_dim: int, n_codes: int = 64, latent_dim: int = 8, hidden_dim: int = 64,
                 lr: float = 5e-4, vq_coef: float = 1.0, commit_coef: float = 0.5, coverage_coef: float = 0.5,
                 vqvae_interval: int = 10, codebook_interval: int = 40, start_steps: int = 50_000,
                 sequence_interval: int = 5, value_window: int = 100, top_k: int = 30, incentive: bool = True,
                 gamma: float = 0.99, seed: int = 0, device: torch.device | str = "cpu") -> None:
        self.state_dim = _positive_int("state_dim", state_dim)
        self.n_codes = _positive_int("lagma_n_codes", n_codes)
        self.latent_dim = _positive_int("lagma_latent_dim", latent_dim)
        if self.latent_dim > self.state_dim:
            raise MemoryDoesNotFitEnv(latent_message(self.latent_dim, self.state_dim, "this env"))
        self.hidden_dim = _positive_int("lagma_hidden_dim", hidden_dim)
        self.vqvae_interval = _positive_int("lagma_vqvae_interval", vqvae_interval)
        self.codebook_interval = _positive_int("lagma_codebook_interval", codebook_interval)
        self.sequence_interval = _positive_int("lagma_sequence_interval", sequence_interval)
        self.value_window = _positive_int("lagma_value_window", value_window)
        self.top_k = _positive_int("lagma_top_k", top_k)
        self.start_steps = int(_non_negative("lagma_start_steps", start_steps))
        self.coefs = {"vq": _non_negative("lagma_vq_coef", vq_coef),
                      "commit": _non_negative("lagma_commit_coef", commit_coef),
                      "coverage": _non_negative("lagma_coverage_coef", coverage_coef)}
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r}: expected a discount in [0, 1]; set learner.gamma")
        self.gamma, self.seed, self.lr, self.incentive = float(gamma), int(seed), float(lr), bool(incentive)
        self.device = torch.device(device)
        self.mask_bytes = (self.n_codes + 7) // 8
        """Bytes of a stored sequence's set of codes in a checkpoint (one bit per code)."""

        with torch.random.fork_rng(devices=[]):  # the VQ-VAE's own seed; the run's torch stream is untouched
            torch.manual_seed(self.seed + VQVAE_SEED_OFFSET)
            self.vqvae = VQVAE(self.state_dim, self.latent_dim, self.hidden_dim, self.n_codes)
        self.vqvae.to(self.device)
        self.optimizer = torch.optim.Adam(self.vqvae.parameters(), lr=self.lr)
        stream = np.random.SeedSequence([self.seed, SAMPLER_STREAM]).generate_state(1, np.uint64)[0] >> np.uint64(1)
        self.sampler = torch.Generator().manual_seed(int(stream))

        k, w = self.n_codes, self.value_window
        self.returns_KW = np.zeros((k, w), np.float32)
        """Each code's latest returns-to-go, a ring: write number n sits at column n mod W."""
        self.writes_K = np.ones(k, np.int64)
        """Writes per code, the 0 LAGMA's window starts with counted as the first."""
        self.value_K = np.zeros(k, np.float32)
        """C(k): the mean of the code's window."""
        self.top_values: list[list[float]] = [[] for _ in range(k)]
        """Per code, the returns-to-go of its top-k sequences, ascending (LAGMA's TopKHeap, a sorted list)."""
        self.top_codes: list[list[int]] = [[] for _ in range(k)]
        """Per code, the sets of codes of its top-k sequences (bit j set: code j is on the sequence), in that order."""
        self.visits_K = np.zeros(k, np.int64)
        """Stored episodes whose steps visited each code (diagnostics)."""

        self.env_steps = 0
        self.episodes = 0
        self.last_batch = 0
        """Episodes stored so far, env steps of them, and the size of the latest stored batch (the schedule's counters)."""
        self.last_vqvae_episode = 0
        self.last_codebook_episode = 0
        self.started = False
        """Whether the codes' values have started (LAGMA's flag_buffer_update): sequences and the incentive follow."""
        self.trainings = 0
        self.value_updates = 0
        self.usage = TableUsage()
        self._window_zero()

    def _window_zero(self) -> None:
        """The figures gathered since the last metric row (part of a checkpoint, so a resumed run logs the same rows)."""
        self.window_codes_K = np.zeros(self.n_codes, np.int64)
        self.window_lookups = 0
        self.window_hits = 0
        self.window_reward = 0.0
        self.window_steps = 0
        self.window_losses = np.zeros(len(LOSS_NAMES))
        self.window_trainings = 0

    # ----- building ------------------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, setup: MemorySetup) -> LAGMAMemory:
        """LAGMA of a run: its settings ``lagma``, gamma and seed of the run, its device."""
        from semzoo.run.device import resolve_device

        cls.check_env(setup)
        c = setup.settings("lagma")
        return cls(state_dim=setup.state_dim, n_codes=c.lagma_n_codes, latent_dim=c.lagma_latent_dim,
                   hidden_dim=c.lagma_hidden_dim, lr=c.lagma_lr, vq_coef=c.lagma_vq_coef,
                   commit_coef=c.lagma_commit_coef, coverage_coef=c.lagma_coverage_coef,
                   vqvae_interval=c.lagma_vqvae_interval, codebook_interval=c.lagma_codebook_interval,
                   start_steps=c.lagma_start_steps, sequence_interval=c.lagma_sequence_interval,
                   value_window=c.lagma_value_window, top_k=c.lagma_top_k, incentive=c.lagma_incentive,
                   gamma=setup.gamma, seed=setup.seed, device=resolve_device(setup.device))

    @classmethod
    def fit_env(cls, setup: MemorySetup) -> tuple[MemorySetup, str | None]:
        """The default latent size (LAGMA's 8) capped by a smaller state size (the matrix games' 2-4): a code no larger
        than what it encodes. A latent size given on the command line or in the config is kept (``check_env``)."""
        latent, state_dim = setup.settings("lagma").lagma_latent_dim, setup.state_dim
        if latent <= state_dim or latent != LAGMASettings.lagma_latent_dim or LATENT_KEY in setup.given:
            return setup, None
        fitted = setup.with_settings("lagma", lagma_latent_dim=state_dim)
        return fitted, (f"lagma_latent_dim={latent} (LAGMA's) is above the state size {state_dim} of {setup.env}: "
                        f"the run takes lagma_latent_dim={state_dim} (its config.json says so); give "
                        "--lagma-latent-dim to choose another")

    @classmethod
    def check_env(cls, setup: MemorySetup) -> None:
        """A latent size above the env's state size is refused: a code would be larger than what it encodes."""
        latent = setup.settings("lagma").lagma_latent_dim
        if latent > setup.state_dim:
            raise MemoryDoesNotFitEnv(latent_message(latent, setup.state_dim, setup.env))

    @classmethod
    def planned_nbytes(cls, setup: MemorySetup) -> int:
        """The codes' windows, values and counts, the top-k sequences of every code, the VQ-VAE with Adam's moments."""
        return lagma_bytes(setup)

    # ----- writing: visits of stored episodes (diagnostics) ------------------------------------------------------
    def on_store(self, batch: EpisodeBatch, slot_state_keys: np.ndarray | None) -> None:
        """Count the batch's episodes and env steps (the schedule) and the codes its steps visit (the diagnostics)."""
        filled = batch.filled.detach().cpu().numpy().astype(bool)
        n_episodes = int(filled.shape[0])
        self.episodes += n_episodes
        self.last_batch = n_episodes
        self.env_steps += int(filled.sum())
        episode_N, step_N = np.nonzero(filled)
        if episode_N.size == 0:
            return
        where = batch.state.device
        state = batch.state.detach()[torch.as_tensor(episode_N, device=where), torch.as_tensor(step_N, device=where)]
        codes_N = self.vqvae.codes(state.to(device=self.device, dtype=torch.float32)).cpu().numpy()
        self.window_codes_K += np.bincount(codes_N, minlength=self.n_codes)
        # a step merges when an earlier episode visited its code (SEM's sense: another visit met the entry)
        pairs, pair_N = np.unique(codes_N * n_episodes + episode_N, return_inverse=True)
        pair_code = pairs // n_episodes
        rank = np.arange(pairs.shape[0]) - np.searchsorted(pair_code, pair_code)  # earlier episodes of this batch
        earlier = self.visits_K[pair_code] + rank
        self.usage.wrote(codes_N.shape[0], int((earlier[pair_N] > 0).sum()))
        np.add.at(self.visits_K, pair_code, 1)

    # ----- the schedule --------------------------------------------------------------------------------------
    def schedule(self) -> tuple[bool, bool]:
        """(train the VQ-VAE, write the codes' values) at this update, as LAGMA's learner decides at train()."""
        episode = self.episodes - self.last_batch  # LAGMA's episode_num: the newest episode's 0-based index
        early = self.env_steps <= self.start_steps
        train = episode - self.last_vqvae_episode >= self.vqvae_interval
        if train:
            self.last_vqvae_episode = episode
        write = episode - self.last_codebook_episode >= self.codebook_interval
        if write:
            self.last_codebook_episode = episode
        return train or early, write or early

    # ----- the update: phase 1 -------------------------------------------------------------------------------
    @torch.no_grad()
    def lookup_batch(self, clean: CleanBatch, state_keys_BSD: torch.Tensor | None) -> LAGMALookup:
        """Phase 1 (the module docstring's steps 1-5): codes of the real slots, values, sequences, the VQ-VAE's step."""
        like = clean.reward
        mask_BT = clean.mask.cpu().numpy() > 0
        n_episodes, n_steps = mask_BT.shape
        length_B = mask_BT.sum(axis=1)
        train, write = self.schedule()
        # every real slot s_0..s_L, in LAGMA's order: by time step, then episode
        slot_N, episode_N = np.nonzero(np.arange(n_steps + 1)[:, None] <= length_B[None, :])
        state_NS = clean.state[torch.as_tensor(episode_N, device=clean.state.device),
                               torch.as_tensor(slot_N, device=clean.state.device)].to(self.device, torch.float32)
        codes_N = self.vqvae.codes(state_NS).cpu().numpy()
        codes_BS = np.zeros((n_episodes, n_steps + 1), np.int64)
        codes_BS[episode_N, slot_N] = codes_N
        returns_BS = np.zeros((n_episodes, n_steps + 1), np.float32)  # R_t of each slot, 0 after the last step
        returns_BS[:, :n_steps] = discounted_returns(clean.reward.cpu().numpy(), mask_BT, self.gamma)
        if write:
            self.started = self.started or self.env_steps >= self.start_steps
            if self.started:
                self.write_values(codes_N, returns_BS[episode_N, slot_N])
        terminated_BT = clean.terminated.cpu().numpy() > 0
        on_sequence_BT = np.zeros((n_episodes, n_steps), bool)
        if self.started and self.incentive:
            on_sequence_BT = self.follow_sequences(codes_BS, returns_BS, length_B) & ~terminated_BT
            looked_up_BT = mask_BT & ~terminated_BT
            next_codes = codes_BS[:, 1:][looked_up_BT]
            hit_K = on_sequence_BT[looked_up_BT]
            self.usage.looked_up(hit_K, self.visits_K[next_codes] > 1)
            self.window_lookups += int(hit_K.shape[0])
            self.window_hits += int(hit_K.sum())
        value_BT = np.where(on_sequence_BT, self.value_K[codes_BS[:, 1:]], 0.0).astype(np.float32)
        self.window_reward += float(clean.reward.cpu().numpy()[mask_BT].sum())
        self.window_steps += int(mask_BT.sum())
        if train:
            self.train_step(state_NS, slot_N, int(length_B.max(initial=0)) + 1)
        return LAGMALookup(on_sequence_BT=torch.from_numpy(on_sequence_BT).to(like.device),
                           code_value_BT=torch.from_numpy(value_BT).to(device=like.device, dtype=like.dtype))

    def write_values(self, codes_N: np.ndarray, returns_N: np.ndarray) -> None:
        """Write returns-to-go [N] at codes [N], in this order, into each code's window of the latest W; refresh C."""
        w = self.value_window
        order = np.argsort(codes_N, kind="stable")  # by code, each code's writes in the given order
        code, value = codes_N[order], returns_N[order]
        rank = np.arange(code.shape[0]) - np.searchsorted(code, code)
        count_K = np.bincount(codes_N, minlength=self.n_codes)
        lands = rank >= count_K[code] - w  # of more than W writes to a code, the latest W stay
        column = (self.writes_K[code] + rank) % w
        self.returns_KW[code[lands], column[lands]] = value[lands]
        self.writes_K += count_K
        touched = np.flatnonzero(count_K)
        held = np.minimum(self.writes_K[touched], w)
        in_window = np.arange(w)[None, :] < held[:, None]  # a window not yet full holds columns 0..held-1
        self.value_K[touched] = (np.where(in_window, self.returns_KW[touched], 0.0).sum(axis=1) / held).astype(np.float32)
        self.value_updates += 1

    def push(self, code: int, value: float, codes: int) -> None:
        """A sequence (its set of codes, a bit per code) with return-to-go ``value`` into the top-k of ``code``.

        LAGMA's TopKHeap: a list sorted ascending; while it holds fewer than k, the new entry goes after its equals; when
        full, one at least the smallest replaces the smallest and goes before its equals; a smaller one is dropped.
        """
        values, sets = self.top_values[code], self.top_codes[code]
        if len(values) < self.top_k:
            at = bisect.bisect_right(values, value)
        elif value >= values[0]:
            del values[0], sets[0]
            at = bisect.bisect_left(values, value)
        else:
            return
        values.insert(at, value)
        sets.insert(at, codes)

    def follow_sequences(self, codes_BS: np.ndarray, returns_BS: np.ndarray, length_B: np.ndarray) -> np.ndarray:
        """Push each episode's sequences and mark its steps on the reference sequence (step 4): bool [B,T].

        Episode by episode, as LAGMA (each push can change what a later draw sees); Python ints as sets of codes.
        """
        interval = self.sequence_interval
        n_draws = int((length_B // interval + 1).sum())
        draws = torch.rand(n_draws, generator=self.sampler, dtype=torch.float64).tolist()
        on_sequence = np.zeros((codes_BS.shape[0], codes_BS.shape[1] - 1), bool)
        drawn = 0
        for b, (codes, returns) in enumerate(zip(codes_BS.tolist(), returns_BS.tolist())):
            last = int(length_B[b])
            suffix = [0] * (last + 1)  # the set of codes of slots t..last
            later = 0
            for t in range(last, -1, -1):
                later |= 1 << codes[t]
                suffix[t] = later
            reference = 0
            for t in range(last + 1):
                if t % interval == 0:
                    self.push(codes[t], returns[t], suffix[t])
                    top = self.top_codes[codes[t]]
                    reference = top[int(draws[drawn] * len(top))]  # uniform over the top-k (sampling_type 1)
                    drawn += 1
                elif (reference >> codes[t]) & 1 and codes[t] != codes[t - 1]:
                    on_sequence[b, t - 1] = True
        return on_sequence

    def train_step(self, state_NS: torch.Tensor, slot_N: np.ndarray, n_slots: int) -> None:
        """One Adam step of the VQ-VAE on the loss of these states at time steps ``slot_N`` of ``n_slots``."""
        members = torch.from_numpy(time_step_codes(n_slots, self.n_codes)).to(self.device)
        with torch.enable_grad():
            parts = self.vqvae.losses(state_NS, torch.as_tensor(slot_N, device=self.device), members)
            total = (parts["recon"] + self.coefs["vq"] * parts["vq"] + self.coefs["commit"] * parts["commit"]
                     + self.coefs["coverage"] * parts["coverage"]).mean()
            self.optimizer.zero_grad(set_to_none=True)
            total.backward()
            self.optimizer.step()  # no clip: LAGMA's clip_grad_norm_ runs before backward, on zeroed gradients
        self.trainings += 1
        self.window_trainings += 1
        self.window_losses += np.array([float(total.detach())]
                                       + [float(parts[name].detach().mean()) for name in LOSS_NAMES[1:]])

    # ----- the update: phase 2 (tensor ops only) ---------------------------------------------------------------
    def intrinsic_reward(self, lookup: LAGMALookup, clean: CleanBatch,
                         next_value_BT: torch.Tensor) -> torch.Tensor | None:
        """gamma max(C(k(s_{t+1})) - V(t+1), 0) on the sequence, 0 elsewhere: [B,T]; None with the incentive off."""
        return self.incentive_reward(lookup, next_value_BT) if self.incentive else None

    def incentive_reward(self, lookup: LAGMALookup, next_value_BT: torch.Tensor) -> torch.Tensor:
        """gamma eta, eta = max(C - V(t+1), 0) where the step is on the sequence (LAGMA's eta[i][t-1]): [B,T]."""
        eta = torch.clamp(lookup.code_value_BT - next_value_BT, min=0.0)
        return torch.where(lookup.on_sequence_BT, self.gamma * eta, 0.0)

    def reward_parts(self, lookup: LAGMALookup, clean: CleanBatch,
                     next_value_BT: torch.Tensor) -> dict[str, torch.Tensor]:
        """The incentive, logged as ``reward_incentive`` (the whole of LAGMA's intrinsic reward)."""
        return {"incentive": self.incentive_reward(lookup, next_value_BT)} if self.incentive else {}

    # ----- state -----------------------------------------------------------------------------------------------
    def _settings(self) -> dict[str, int]:
        return {"state_dim": self.state_dim, "n_codes": self.n_codes, "latent_dim": self.latent_dim,
                "hidden_dim": self.hidden_dim, "value_window": self.value_window, "top_k": self.top_k}

    def state_dict(self) -> dict[str, Any]:
        sizes = np.array([len(values) for values in self.top_values], np.int64)
        values = np.array([v for row in self.top_values for v in row], np.float64)
        sets = np.array([list(s.to_bytes(self.mask_bytes, "little")) for row in self.top_codes for s in row],
                        np.uint8).reshape(-1, self.mask_bytes)
        return {
            **self._settings(),
            "vqvae": {name: value.detach().cpu().clone() for name, value in self.vqvae.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),  # its tensors would change with the next step
            "sampler": self.sampler.get_state(),
            "returns": self.returns_KW.copy(), "writes": self.writes_K.copy(), "values": self.value_K.copy(),
            "top_sizes": sizes, "top_values": values, "top_codes": sets, "visits": self.visits_K.copy(),
            "env_steps": self.env_steps, "episodes": self.episodes, "last_batch": self.last_batch,
            "last_vqvae_episode": self.last_vqvae_episode, "last_codebook_episode": self.last_codebook_episode,
            "started": self.started, "trainings": self.trainings, "value_updates": self.value_updates,
            **self.usage.state_dict(),
            "window_codes": self.window_codes_K.copy(), "window_lookups": self.window_lookups,
            "window_hits": self.window_hits, "window_reward": self.window_reward, "window_steps": self.window_steps,
            "window_losses": self.window_losses.copy(), "window_trainings": self.window_trainings,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, mine in self._settings().items():
            given = int(np.asarray(state[name]).item())
            if given != mine:
                raise ValueError(f"checkpoint has LAGMA {name}={given}, this memory {mine}; resume with the run's config")
        self.vqvae.load_state_dict(state["vqvae"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.set_state(state["sampler"])
        self.returns_KW = np.asarray(state["returns"], np.float32).copy()
        self.writes_K = np.asarray(state["writes"], np.int64).copy()
        self.value_K = np.asarray(state["values"], np.float32).copy()
        ends = np.cumsum(np.asarray(state["top_sizes"], np.int64))
        values = np.asarray(state["top_values"], np.float64).tolist()
        sets = [int.from_bytes(bytes(row), "little") for row in np.asarray(state["top_codes"], np.uint8)]
        starts = np.r_[0, ends[:-1]]
        self.top_values = [values[a:b] for a, b in zip(starts, ends)]
        self.top_codes = [sets[a:b] for a, b in zip(starts, ends)]
        self.visits_K = np.asarray(state["visits"], np.int64).copy()
        for name in ("env_steps", "episodes", "last_batch", "last_vqvae_episode", "last_codebook_episode",
                     "trainings", "value_updates", "window_lookups", "window_hits", "window_steps",
                     "window_trainings"):
            setattr(self, name, int(np.asarray(state[name]).item()))
        self.started = bool(np.asarray(state["started"]).item())
        self.window_reward = float(np.asarray(state["window_reward"]).item())
        self.usage = TableUsage.from_state(state)
        self.window_codes_K = np.asarray(state["window_codes"], np.int64).copy()
        self.window_losses = np.asarray(state["window_losses"], np.float64).copy()

    @property
    def n_sequences(self) -> int:
        """Sequences held, over every code's top-k."""
        return sum(len(values) for values in self.top_values)

    @property
    def nbytes(self) -> int:
        """The arrays, the sequences (a return and a set of codes each, as a checkpoint holds them), the VQ-VAE, Adam."""
        arrays = (self.returns_KW, self.writes_K, self.value_K, self.visits_K, self.window_codes_K)
        networks = sum(p.numel() * p.element_size() for p in self.vqvae.parameters())
        adam = sum(t.numel() * t.element_size() for s in self.optimizer.state.values() for t in s.values()
                   if isinstance(t, torch.Tensor) and t.dim() > 0)
        return sum(a.nbytes for a in arrays) + self.n_sequences * (8 + self.mask_bytes) + networks + adam

    def metrics(self) -> dict[str, float]:
        """Codebook use and the incentive's reach since the last row, SEM's two rates, the VQ-VAE's losses, sizes."""
        out = {"memory_bytes": float(self.nbytes), "lagma_sequences": float(self.n_sequences),
               "lagma_valued_codes": float((self.writes_K > 1).sum()), "lagma_trainings": float(self.trainings),
               "lagma_value_updates": float(self.value_updates)}
        counts = self.window_codes_K
        if counts.sum():
            p = counts[counts > 0] / counts.sum()
            out["lagma_codes_used"] = float(p.shape[0])
            out["lagma_perplexity"] = float(np.exp(-(p * np.log(p)).sum()))
        if self.window_lookups:
            out["memory_hit_rate"] = self.window_hits / self.window_lookups
        out.update(self.usage.metrics())
        if self.window_steps:
            out["lagma_reward_extrinsic"] = self.window_reward / self.window_steps
        if self.window_trainings:
            for name, total in zip(LOSS_NAMES, self.window_losses):
                out["lagma_loss" if name == "total" else f"lagma_loss_{name}"] = float(total) / self.window_trainings
        self._window_zero()
        return out


def latent_message(latent: int, state_dim: int, env: str) -> str:
    """The one line refusing a latent size above the state size."""
    return (f"lagma_latent_dim={latent}: expected an integer in [1, {state_dim}], the state size of {env} (LAGMA uses 8); "
            "lower --lagma-latent-dim")


__all__ = ["VQVAE", "LAGMALookup", "LAGMAMemory", "nearest_codes", "time_step_codes", "vqvae_parameter_count"]
