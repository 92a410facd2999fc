"""The built-in memories' own settings: EMC's curiosity (shared with EMU), EMC's, EMU's and LAGMA's.

Each is a frozen dataclass whose fields are CLI flags and ``<section>.<field>`` keys, as a plugin memory's settings
are (``semzoo.register_memory(name, settings=...)``); ``MEMORY_SETTINGS`` names the section of each and the
memories that train with it. They live apart from the memories' modules so that the config, `train --help` and
`semzoo algos` know them without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from semzoo.settings import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Range, check_fields, ranged


@dataclass(frozen=True, kw_only=True)
class CuriositySettings:
    """EMC's curiosity (Zheng et al., NeurIPS 2021, sec. 4.1; also used by EMU, Na et al., ICLR 2024).

    Used by the emc- and emu- algorithms; switched off alone with --no-curiosity, so a study can tell the
    memory's share from the curiosity's. Defaults: EMC's config/algs/EMC_sc2.yaml.
    """

    curiosity: bool = True
    """Add the curiosity reward (intrinsic, scale x prediction error) to the TD target of emc-/emu- algorithms."""
    curiosity_scale: float = ranged(0.001, NON_NEGATIVE, "EMC uses 0.001")
    """The intrinsic reward's scale at the start of a run (EMC's curiosity_scale)."""
    curiosity_decay_rate: float = ranged(0.9, Range(low=0, high=1), "EMC uses 0.9")
    """The scale is multiplied by this every curiosity_decay_steps env steps (EMC's curiosity_decay_rate)."""
    curiosity_decay_steps: int = ranged(100_000, AT_LEAST_ONE, "EMC uses 100000")
    """Env steps between two decays of the scale (EMC's curiosity_decay_cycle)."""
    curiosity_floor: float = ranged(0.0, NON_NEGATIVE, "EMC uses 0")
    """The scale never decays below this (EMC's curiosity_decay_stop)."""
    curiosity_tau: float = ranged(0.005, Range(low=0, high=1, low_open=True), "EMC uses 0.005")
    """Soft-update rate of the curiosity's target copy of its extrinsic-reward Q-network (EMC's soft_update_tau)."""
    curiosity_lr: float = ranged(5e-4, POSITIVE, "EMC uses 5e-4")
    """Adam learning rate of the curiosity's predictor."""
    curiosity_target_scale: float = ranged(10.0, POSITIVE, "EMC uses 10")
    """The predictor regresses this many times the target copy's Q-values (EMC's prediction target)."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class EMCSettings:
    """EMC's episodic memory (Zheng et al., NeurIPS 2021, sec. 4.2): key z = M s, M a fixed Gaussian (D = --proj-dim),
    capacity --memory-capacity, least recently used evicted. Defaults: EMC's config/algs/EMC_sc2.yaml."""

    emc_loss_weight: float = ranged(0.1, NON_NEGATIVE, "EMC uses 0.1")
    """Weight of the episodic loss sum_t hit_t (r_t + gamma H(s_{t+1}) - Q_tot)^2 / sum_t m_t, added to the TD loss."""
    emc_atol: float = ranged(1e-8, NON_NEGATIVE, "EMC uses 1e-8")
    """Absolute tolerance of a key match (numpy allclose's atol in EMC's lookup)."""
    emc_rtol: float = ranged(1e-5, NON_NEGATIVE, "EMC uses numpy's default 1e-5")
    """Relative tolerance of a key match (numpy allclose's rtol in EMC's lookup)."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class EMUSettings:
    """EMU's memory (Na et al., ICLR 2024): a learned state embedding (D = --proj-dim), a box lookup, desirability
    and the episodic incentive. Defaults: EMU's config/algs/EMU_sc2.yaml."""

    emu_delta: float = ranged(1.3e-5, POSITIVE, "EMU uses 1.3e-5, and 1.3e-3 on super-hard maps")
    """Half-width of the lookup box on z-normalised keys: a hit when every dimension is within it."""
    emu_hidden_dim: int = ranged(64, AT_LEAST_ONE, "EMU uses 64")
    """Width of the embedder's two hidden layers (encoder and decoder)."""
    emu_lr: float = ranged(5e-4, POSITIVE, "EMU uses 5e-4")
    """Adam learning rate of the embedder."""
    emu_grad_clip: float = ranged(10.0, POSITIVE, "EMU uses 10")
    """Gradient-norm clip of the embedder's updates."""
    emu_state_loss_weight: float = ranged(0.1, NON_NEGATIVE, "EMU uses 0.1")
    """Weight of the state reconstruction in the embedder's loss (H - H_hat)^2 + w ||s - s_hat||^2."""
    emu_train_interval: int = ranged(10_000, AT_LEAST_ONE, "EMU uses 10000")
    """Env steps between two trainings of the embedder (each followed by re-embedding every stored key)."""
    emu_train_samples: int = ranged(102_400, AT_LEAST_ONE, "EMU uses 102400")
    """Memory entries sampled for one training of the embedder."""
    emu_train_batch: int = ranged(1024, AT_LEAST_ONE, "EMU uses 1024")
    """Mini-batch size of the embedder's training (samples / batch gradient steps)."""
    emu_norm_interval: int = ranged(200, AT_LEAST_ONE, "EMU uses 200")
    """Env steps between two refreshes of the keys' per-dimension mean and std (the z-normalisation of the box)."""
    emu_incentive: bool = True
    """Add EMU's episodic incentive to the TD target (off: curiosity and the memory's writes only, for ablations)."""
    emu_flag_init_desirability: bool = False
    """A new entry written by a desirable state starts with N_d = 1 (EMU's flag_init_desirability; EMU_sc2.yaml: off,
    so a new entry starts at N_d = 0 and its incentive needs a second desirable visit)."""
    emu_desirable_return: float | None = ranged(None, Range(), "EMU's code marks won episodes instead")
    """Return (undiscounted) from which an episode is desirable where the env reports no wins (matrix games, MPE);
    unset: an episode whose return reaches the best return seen so far. A won episode is always desirable (EMU)."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class LAGMASettings:
    """LAGMA's latent goal-guided memory (Na and Moon, ICML 2024; semzoo.episodic.lagma): a VQ-VAE quantises states into
    a codebook, each code keeps a moving average of the returns-to-go seen at it and the top-k code sequences that start
    there; a step whose next state's code lies on a sampled sequence earns an incentive. Defaults: LAGMA's dense-reward
    SMAC config (aailabkaist/LAGMA, LAGMA_v0_release/src/config/algs/lagma_sc2.yaml); its sparse-reward configs
    (lagma_sc2_sparse_*.yaml) differ where a field's note says so."""

    lagma_n_codes: int = ranged(64, AT_LEAST_ONE, "LAGMA uses 64 (lagma_sc2.yaml), 256 on sparse rewards")
    """Codes in the codebook (LAGMA's n_codes)."""
    lagma_latent_dim: int = ranged(8, AT_LEAST_ONE, "LAGMA uses 8; at most the env's state size")
    """Size of a code and of the encoder's output (latent_dim); at most the env's state size."""
    lagma_hidden_dim: int = ranged(64, AT_LEAST_ONE, "LAGMA uses 64")
    """Width of the two hidden layers of the encoder and of the decoder (vae_hidden_dim)."""
    lagma_lr: float = ranged(5e-4, POSITIVE, "LAGMA uses 5e-4")
    """Adam learning rate of the VQ-VAE (LAGMA's VQ-VAE optimiser takes the learner's lr, 0.0005)."""
    lagma_vq_coef: float = ranged(1.0, NON_NEGATIVE, "LAGMA uses 1.0 (lagma_sc2.yaml), 2.0 on sparse rewards")
    """Weight of the codebook loss ||e(z) - sg(z)||^2 in the VQ-VAE's loss (vq_coef)."""
    lagma_commit_coef: float = ranged(0.5, NON_NEGATIVE, "LAGMA uses 0.5 (lagma_sc2.yaml), 1.0 on sparse rewards")
    """Weight of the commitment loss ||sg(e(z)) - z||^2 (commit_coef)."""
    lagma_coverage_coef: float = ranged(0.5, NON_NEGATIVE, "LAGMA uses 0.5 (lagma_sc2.yaml), 1.0 on sparse rewards")
    """Weight of the coverage loss: the mean ||sg(z_t) - e_j||^2 over the codes j assigned to time step t (coverage_coef)."""
    lagma_vqvae_interval: int = ranged(10, AT_LEAST_ONE, "LAGMA uses 10 (lagma_sc2.yaml), 40 on sparse 3m and 2s3z")
    """Episodes between two training steps of the VQ-VAE once lagma_start_steps have passed; before, every update
    trains it (vqvae_update_interval)."""
    lagma_codebook_interval: int = ranged(40, AT_LEAST_ONE, "LAGMA uses 40 (lagma_sc2.yaml), 10 on sparse 3m and 2s3z")
    """Episodes between two writes of the sampled batch's returns-to-go into the codes' moving averages once
    lagma_start_steps have passed (codebook_update_interval)."""
    lagma_start_steps: int = ranged(50_000, NON_NEGATIVE, "LAGMA uses 50000")
    """Env steps before the codes' values, the goal-reaching sequences and the incentive start; until then the VQ-VAE
    trains at every update (buffer_update_time)."""
    lagma_sequence_interval: int = ranged(5, AT_LEAST_ONE, "LAGMA uses 5")
    """Every this many time steps of a sampled episode, its code sequence from there on joins the top-k of its first
    code and a new reference sequence is drawn (trj_update_freq)."""
    lagma_value_window: int = ranged(100, AT_LEAST_ONE, "LAGMA uses 100")
    """Returns-to-go a code's moving average is taken over, the latest ones (n_max_code)."""
    lagma_top_k: int = ranged(30, AT_LEAST_ONE, "LAGMA uses 30")
    """Code sequences each code keeps: those of the highest returns-to-go from it (k_top_seq)."""
    lagma_incentive: bool = True
    """Add LAGMA's incentive gamma max(C(code(s')) - V(s'), 0) to the TD target where s' lies on a goal-reaching
    sequence (goal_reward); off: the VQ-VAE and the codes' values only, for ablations."""

    def __post_init__(self) -> None:
        check_fields(self)


MEMORY_SETTINGS: dict[str, tuple[type, tuple[str, ...]]] = {
    "curiosity": (CuriositySettings, ("emc", "emu")),
    "emc": (EMCSettings, ("emc",)),
    "emu": (EMUSettings, ("emu",)),
    "lagma": (LAGMASettings, ("lagma",)),
}
"""Section name -> (its settings, the memories that train with it): every config of an id on one of those memories
holds the section, filled with its defaults; the config registers them when it is imported."""
